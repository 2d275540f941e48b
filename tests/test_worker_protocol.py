"""The worker protocol (benchtrail.worker.protocol): typed requests and responses, versioned, and
readable across versions: a paired A/B run sends this tree's requests to the base commit's own worker."""

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark_suites import devices
from benchtrail.compare.rules import Rules
from benchtrail.runner.ab import Policy
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Task,
)
from benchtrail.worker.protocol import (
    CompileRequest,
    ProtocolError,
    Response,
    RunRequest,
    compile_request,
    read_request,
    read_response,
    run_request,
)
from tests.helpers.git import git

#: The last commit before the protocol was typed: its worker knows no ``version`` field.
OLD = "686ed93"
MODEL = ("import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
         "def model():\n    return M()\n")
EXEC = ExecutionConfig("exec-proto", "inference-bs1", Task.INFERENCE, processes=1, min_samples=5,
                       min_sample_time_ms=1.0, warmup_time_ms=1, timeout_s=60)


def _rc(module: str = "protomod", device=devices.C2_STANDARD_16) -> RunConfig:
    model = Model(f"model-{module}", module, ("test",), f"{module}:model", ("4xf32",))
    gen = ModuleGenerationConfig.build(model, CompileConfig("compile-eager", "eager", CompileMode.EAGER),
                                       device.architecture)
    return RunConfig.build(gen, EXEC, device, presets=("test",))


def test_requests_round_trip_and_keep_the_version_1_field_names():
    rc = _rc()
    run = run_request(rc, Path("/tmp/m"))
    assert run.to_json() == {"version": 1, "kind": "run", "config": run.config,
                             "threads": rc.target_device.threads,
                             "module_dir": "/tmp/m"}
    comp = compile_request(rc.module_generation_config, None, explain=False)
    assert comp.to_json() == {"version": 1, "kind": "compile", "config": comp.config, "module_dir": None,
                              "explain": False}
    for request in (run, comp):
        assert read_request(json.loads(json.dumps(request.to_json()))) == request


def test_a_request_without_version_reads_as_version_1_and_unknown_keys_are_ignored():
    config = run_request(_rc()).config
    run = read_request({"kind": "run", "config": config, "threads": 2, "module_dir": None, "later": "x"})
    assert run == RunRequest(config, 2, None, version=1)
    comp = read_request({"kind": "compile", "config": config, "module_dir": "/m"})
    assert comp == CompileRequest(config, "/m", explain=True, version=1)


def test_responses_round_trip_and_drop_fields_the_job_did_not_produce():
    ok = Response(status="ok", samples=[1.0, 2.5], iterations_per_sample=3, warmup_iterations=1,
                  timing={"clock": "host"},
                  memory={}, threads=2, correctness=None, jacobian_mode=None, phase_times_ms={"prep": 1.0})
    wire = json.loads(json.dumps(ok.to_json()))
    assert wire["version"] == 1 and wire["samples"] == [1.0, 2.5]
    assert wire["correctness"] is None and wire["jacobian_mode"] is None  # a run's payload always holds them
    assert "compile_time_ms" not in wire and "traceback" not in wire
    assert read_response(wire) == ok
    failed = Response(status="timeout", reason="worker did not finish within 60 s")
    assert failed.to_json() == {"version": 1, "status": "timeout",
                                "reason": "worker did not finish within 60 s"}


def test_a_response_without_version_reads_as_version_1():
    old = {"status": "ok", "reason": None, "compile_time_ms": 12.5, "peak_rss_bytes": 10, "kernel_count": 2,
           "fxgraph_cache_hit": 0, "fxgraph_cache_miss": 1, "recompiles": 0,
           "artifacts": {"inductor_cache": 5},
           "graph_count": 1, "graph_breaks": 0, "break_reasons": [], "something_older": 1}
    response = read_response(old)
    assert response.version == 1 and response.ok and response.kernel_count == 2
    assert response.to_json() == {"version": 1, **{k: v for k, v in old.items() if k != "something_older"}}


@pytest.mark.parametrize("data, message", [
    ({"version": 2, "kind": "run", "config": {}, "threads": 1},
     "protocol version 2; this benchtrail serves version 1"),
    ({"version": "1", "kind": "run", "config": {}, "threads": 1}, "protocol version '1'"),
    ({"kind": "bench", "config": {}}, "kind 'bench' is not one this worker serves"),
    ({"kind": "run", "config": {}, "threads": "2"}, "field 'threads' is str"),
    ({"kind": "run", "config": {}}, "needs 'threads'"),
    ([], "is a JSON list, not an object"),
])
def test_an_unreadable_request_is_refused_by_name(data, message):
    with pytest.raises(ProtocolError, match=message.replace("(", r"\(")):
        read_request(data)


def test_a_response_of_a_future_version_is_refused_by_name():
    with pytest.raises(ProtocolError,
                       match="response has protocol version 3; this benchtrail serves version 1"):
        read_response({"version": 3, "status": "ok"})
    with pytest.raises(ProtocolError, match="field 'samples' is str"):
        read_response({"status": "ok", "samples": "1,2"})


def test_the_worker_answers_failed_to_a_future_version_instead_of_crashing(tmp_path):
    from benchtrail.worker.main import answer as answer_files
    from benchtrail.worker.main import handle

    response = handle({"version": 2, "kind": "run", "config": run_request(_rc()).config, "threads": 1})
    assert (response.status, response.version) == ("failed", 1)
    assert "protocol version 2; this benchtrail serves version 1" in response.reason
    request, answer = tmp_path / "request.json", tmp_path / "response.json"
    request.write_text(json.dumps({"version": 7, "kind": "compile", "config": {}}))
    answer_files(str(request), str(answer))
    written = json.loads(answer.read_text())
    assert written["status"] == "failed" and "protocol version 7" in written["reason"]


def test_the_protocol_module_imports_no_torch():
    code = ("import sys, benchtrail.worker.protocol, benchtrail.runner.launch, benchtrail.suite.content_hash, "
            "benchtrail.suite.entry_points; print('torch' in sys.modules)")
    out = subprocess.run([__import__("sys").executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def _repo_with_base_benchtrail(tmp_path, monkeypatch, commit: str) -> Path:
    """A repository whose HEAD~1 holds benchtrail as of ``commit`` (so the base arm's workers import that
    worker, first on their PYTHONPATH) and whose HEAD holds none (the head arm imports this tree)."""
    here = Path(__file__).resolve().parent.parent
    # git, run directly here and below: this exit status is the answer, and the archive is bytes
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=here,
                      capture_output=True).returncode:
        pytest.skip(f"commit {commit} is not in this clone (shallow?)")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    archive = subprocess.run(["git", "archive", commit, "build_tools/benchtrail"], cwd=here, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "protomod.py").write_text(MODEL)
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base with the old benchtrail")
    git(root, "rm", "-rq", "build_tools")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "head without it")
    (tmp_path / "thresholds.yaml").write_text(
        "schema_version: 1\nthresholds:\n  - {match: '*', unit: percent, threshold: 1000, direction: lower-is-better}\n")
    monkeypatch.syspath_prepend(str(root))
    return root


@pytest.fixture
def old_base_repo(tmp_path, monkeypatch):
    """:func:`_repo_with_base_benchtrail` of ``OLD``: the flat, version-less worker."""
    root = _repo_with_base_benchtrail(tmp_path, monkeypatch, OLD)
    assert git(root, "show", "HEAD~1:build_tools/benchtrail/worker.py")  # the flat, version-less worker
    return root


#: The last commit before issue 38 (its worker and server measure with glibc's adaptive malloc thresholds).
BEFORE_38 = "4f888d2f05b970d72bd9e6f1ede94438ee9facd0"
#: The last commit before issue 40 (its worker answers no floor_us nor threads_set).
BEFORE_40 = "9f44ab0235b16ee35ffe48005f146b5502b4a28b"


@pytest.mark.parametrize("base", [BEFORE_38, BEFORE_40])
def test_a_budgeted_paired_run_against_a_base_from_before_issue_38_and_40(tmp_path, monkeypatch, base):
    """The default policy since issue 38 (no round cap: rounds until the interval decides, within the case's
    time budget) against a base arm whose worker server is an older commit's: both arms fork, every round
    answers; the head's records carry the floor and the thread count it set, the base's do not."""
    from benchtrail.pipeline.measure_stages import ab_stage

    repo = _repo_with_base_benchtrail(tmp_path, monkeypatch, base)
    out = tmp_path / "ab"
    ab_stage(repo, "HEAD~1", (_rc(),), out, Rules.load(tmp_path / "thresholds.yaml"),
             Policy(min_rounds=2, budget_s=30, seed=1))
    (row,) = json.loads((out / "comparison.json").read_text())["rows"]
    assert row["verdict"] == "similar", row["reason"]  # x * 2 in both arms, within the 1000% rule: SAME
    for side in ("base", "head"):
        (record,) = json.loads((out / "results" / f"{side}.json").read_text())["benchmarks"]
        ab = record["details"]["ab"]
        assert (record["status"], ab["start_method"], ab["stop"], ab["rounds"]) == ("ok", "fork", "decided",
                                                                                    2)
        details = record["details"]
        assert ("floor_us" in details, details.get("threads_set")) == (
            (True, details["threads"]) if side == "head" else (False, None))


def test_a_paired_run_whose_base_worker_predates_the_versioned_protocol(old_base_repo, tmp_path, monkeypatch):
    from benchtrail.pipeline.measure_stages import ab_stage
    from benchtrail.runner import launch

    raw: list[dict] = []

    def recording(data):
        raw.append(data)
        return read_response(data)

    monkeypatch.setattr(launch, "read_response", recording)
    out = tmp_path / "ab"
    # Duet asked for, for a 1-thread case that this 2-CPU machine could run so: the old base's worker cannot.
    ab_stage(old_base_repo, "HEAD~1", (_rc(device=replace(devices.C2_STANDARD_16, threads=1)),), out,
             Rules.load(tmp_path / "thresholds.yaml"), Policy(min_rounds=2, max_rounds=2, seed=1, duet="on"))
    (row,) = json.loads((out / "comparison.json").read_text())["rows"]
    assert row["verdict"] not in ("failed", "not-comparable"), row["reason"]
    assert row["base_n"] == row["head_n"] == 10  # 2 rounds × 5 samples per arm
    # Two answers came from the old worker (no version field), two from this tree's.
    assert sorted("version" in r for r in raw) == [False, False, True, True]
    # The old base cannot fork its workers, so both arms spawned theirs
    # (benchtrail.runner.ab.start_method_of).
    for side in ("base", "head"):
        (record,) = json.loads((out / "results" / f"{side}.json").read_text())["benchmarks"]
        assert record["details"]["ab"]["start_method"] == "spawn"
        assert record["details"]["ab"]["mode"] == "paired" and "cpus" not in record["details"]["ab"]
