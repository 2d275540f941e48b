"""Why a benchmark got slower: the re-check profiles both arms of a confirmed regression (issue 20, item 3).

One real paired re-check in a repository of two commits: the base commit's model multiplies ``x @ w``
once, the head's three times, so ``aten::mm`` is 3× slower in eager mode and nothing else changes. The
rest are pure functions over literal profiles and the protocol's request objects.
"""

import json
from dataclasses import asdict, replace

import jsonschema
import pytest

from benchmark_suites import devices
from benchtrail.compare.document import Row, count_rows, load_comparison
from benchtrail.compare.profile_diff import HEAD_ONLY, diff_profiles, profile_lines, render_profile
from benchtrail.compare.rules import Rules
from benchtrail.pipeline.measure_stages import recheck_stage
from benchtrail.runner.ab import Policy, Profiling
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Suite,
    Task,
)
from benchtrail.suite.names import slug
from benchtrail.worker.protocol import ProtocolError, RunRequest, profile_spec, read_request, read_response
from tests.helpers.git import git, two_commit_repo
from tests.helpers.profiles import worker_profile
from tests.helpers.schemas import assert_valid, registry

#: No sleep in the model: a sleeping thread wakes late on a loaded machine, by a varying amount, which made
#: the paired run noisy under the full test suite; the matmul alone is the work (3x in the head).
BASE = ("import torch\n\n\nclass M(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.randn(512, 512) / 20, requires_grad=False)\n\n"
        "    def forward(self, x):\n        y = x @ self.w\n        return torch.relu(y)\n\n\n"
        "def model():\n    return M()\n")
HEAD = BASE.replace("        y = x @ self.w\n", "        for _ in range(3):\n            y = x @ self.w\n")
#: 16 pairs a round, and the first look after 2 rounds (``min_rounds=2``, below): with one round of 8 pairs
#: the pair ratios' IQR/median passed 25% (``noisy``, which ends the re-check) in a fresh-clone run of the
#: suite on a slow 2-vCPU VM; the IQR of 32 pairs from two worker processes moves far less with a few slow
#: samples.
EXEC = ExecutionConfig("exec-why", "inference-bs1", Task.INFERENCE, processes=1, min_samples=16,
                       min_sample_time_ms=20.0, warmup_time_ms=5, timeout_s=60)
#: One thread: two threads on a busy 2-core machine wait for each other (a 0.6 ms matmul took 24 ms).
DEVICE = replace(devices.C2_STANDARD_16, threads=1)
RULE = ("schema_version: 1\nthresholds:\n  - {match: '*', unit: percent, threshold: 10, direction: "
        "lower-is-better}\n")


def _rc() -> RunConfig:
    model = Model("model-opmod", "opmod", ("test",), "opmod:model", ("256x512xf32",))
    gen = ModuleGenerationConfig.build(model, CompileConfig("compile-eager", "eager", CompileMode.EAGER),
                                       DEVICE.architecture)
    return RunConfig.build(gen, EXEC, DEVICE, presets=("test",))


def _suspect(rc: RunConfig, base_commit: str) -> dict:
    row = Row(id=rc.id, name=rc.name, kind="execution", metric="latency", unit="us",
              device_name="c2-standard-16",
              module_name="opmod", compile_config="eager", verdict="regressed", reason=None,
              base_median=1000.0,
              head_median=3000.0, base_iqr=1000.0, head_iqr=3000.0, base_n=30, head_n=30, change=200.0,
              change_unit="%",
              p_value=1e-6, threshold=None, head_details={}, base_details={}, ci_low=190.0, ci_high=210.0,
              q_value=1e-6, mde=1.0, outcome="DIFFERENT", mark="unconfirmed")
    # The stored medians are made up, not measured here: their noise (IQR 100%) lets the re-check's guard
    # (benchtrail.runner.recheck.guard, 1 + 3 x noise) accept arms this machine measures up to 4x off them;
    # with an IQR of 1 µs a slow spell (one matmul at 1.55 ms, 2026-12-05) made the guard refuse the pair, and
    # at 50% a loaded suite once did (head arm 8.1 ms, 2.7x the stored 3 ms).
    return {"schema_version": 7, "head": {"commit": "h" * 40}, "base": {"commit": base_commit},
            "baseline": None,
            "thresholds_source": "x", "counts": count_rows([row]), "rows": [asdict(row)]}


def test_a_recheck_names_the_slowed_operator_first_with_both_times_and_keeps_both_traces(tmp_path,
                                                                                         monkeypatch):
    root = two_commit_repo(tmp_path / "repo", "opmod.py", BASE, HEAD)  # one matmul, then three
    (tmp_path / "thresholds.yaml").write_text(RULE)
    monkeypatch.syspath_prepend(str(root))
    rc = _rc()
    (tmp_path / "comparison.json").write_text(json.dumps(_suspect(rc, git(root, "rev-parse", "HEAD~1"))))
    # The paired run's noise guard may say `noisy` (IQR/median of the pair ratios above 25%) when the rest of
    # the test suite loads both cores, as it did in 2 of 3 fresh-clone runs on a slow 2-vCPU VM; a user's
    # answer is to re-run the re-check, and so does this test, at most 6 times. Any verdict but `noisy` ends
    # it, unless the guard refused the pair (an arm far off the stored run, below). (Three tries were all
    # noisy once, 2026-12-03, while the other test process compiled AOTInductor modules: the base arm's
    # samples of 1.8 ms rose to 2.3-4.2 ms for a third of a round while the head's stayed within 10%; each try
    # takes about 10 s, so six span a minute of the other process's load.)
    for attempt in range(6):
        out = tmp_path / f"checked-{attempt}"
        recheck_stage(tmp_path / "comparison.json", out, root,
                      Suite((rc,), (rc.module_generation_config,), ("test",), ()),
                      Rules.load(tmp_path / "thresholds.yaml"),
                      Policy(min_rounds=2, max_rounds=4, profiling=Profiling(iterations=20)))
        (row,) = json.loads((out / "comparison.json").read_text())["rows"]
        # a user would re-run those too
        if row["verdict"] != "noisy" and "guard" not in (row.get("ab") or {}):
            break
    assert (row["verdict"], row["mark"]) == ("regressed", "confirmed"), row["reason"]
    profile = row["profile"]
    first = profile["operators"][0]
    assert first["name"] == "aten::mm", profile
    # 3x the work; the bound is generous because base and head are profiled at different moments of a machine
    # the rest of the suite loads (2.44x was seen once). The call counts below are exact.
    assert first["head_us"] >= 1.5 * first["base_us"] > 0, first
    assert first["change_us"] == pytest.approx(first["head_us"] - first["base_us"], abs=0.01)
    assert profile["note"] is None and profile["iterations"]["base"] >= 1 and profile["iterations"]["head"] >= 1
    folder = f"profiles/{slug(rc.name)}"
    assert profile["traces"] == {"base": f"{folder}/base.trace.json", "head": f"{folder}/head.trace.json"}
    mm_calls = {}
    for arm in ("base", "head"):
        trace = json.loads((out / profile["traces"][arm]).read_text())
        mm_calls[arm] = sum(e.get("name") == "aten::mm" and e.get("ph") == "X" for e in trace["traceEvents"])
        assert_valid("profile-trace.schema.json", out / profile["traces"][arm])
    # The trace holds every profiled call: one matmul per iteration in the base, three in the head.
    its = profile["iterations"]
    assert mm_calls == {"base": its["base"], "head": 3 * its["head"]}, (mm_calls, its)
    row_schema = jsonschema.Draft202012Validator({"$ref": "comparison.schema.json#/$defs/row"},
                                                 registry=registry())
    assert not list(row_schema.iter_errors(row))
    # the comment stage reads it back
    assert load_comparison(out / "comparison.json").rows[0].profile == profile
    why = render_profile(row["profile"]).splitlines()
    assert why[1].startswith("- `aten::mm` self time ") and " → " in why[1] and "(+" in why[1]
    assert why[-1].startswith("Traces (Chrome trace JSON") and f"`{folder}/head.trace.json`" in why[-1]
    # The comment's folded "why" section names the slowed operator first, with both times.
    comment = (out / "comment" / "comment.md").read_text()
    section = comment.split("<summary>Why it got slower (torch.profiler): 1 series</summary>", 1)[1]
    first_operator = next(line for line in section.splitlines() if line.startswith("- `"))
    assert first_operator.startswith("- `aten::mm` self time ") and " → " in first_operator, section[:600]


def test_profile_diff_is_per_iteration_largest_change_first():
    base = worker_profile(10, {"aten::mm": 12000.0, "aten::relu": 900.0, "aten::add": 50.0})
    head = worker_profile(20, {"aten::mm": 73000.0, "aten::relu": 1800.0, "aten::cat": 4000.0})
    diff = diff_profiles(base, head,
                         {"base": "profiles/x/base.trace.json", "head": "profiles/x/head.trace.json"},
                         top=3)
    assert diff == {"operators": [
        {"name": "aten::mm", "base_us": 1200.0, "head_us": 3650.0, "change_us": 2450.0},
        {"name": "aten::cat", "base_us": 0.0, "head_us": 200.0, "change_us": 200.0},
        {"name": "aten::add", "base_us": 5.0, "head_us": 0.0, "change_us": -5.0}],
        "iterations": {"base": 10, "head": 20},
        "traces": {"base": "profiles/x/base.trace.json", "head": "profiles/x/head.trace.json"}, "note": None,
        "clock": "cpu"}
    lines = profile_lines(diff)
    assert lines[0] == "aten::mm self time 1.20 ms → 3.65 ms (+2.45 ms) per iteration"
    assert lines[2] == "aten::add self time 5.00 µs → 0 µs (−5.00 µs) per iteration"
    assert render_profile(diff, link=lambda p: "https://x/" + p).endswith(
        "[base](https://x/profiles/x/base.trace.json), [head](https://x/profiles/x/head.trace.json)\n")


def test_a_gpu_profile_ranks_by_device_time():
    base = worker_profile(1, {"aten::mm": 50.0, "sgemm_kernel": 2.0})
    head = worker_profile(1, {"aten::mm": 52.0, "sgemm_kernel": 3.0})
    for side, device in ((base, {"aten::mm": 0.0, "sgemm_kernel": 100.0}),
                         (head, {"aten::mm": 0.0, "sgemm_kernel": 400.0})):
        for op in side["operators"]:
            op["self_device_us"] = device[op["name"]]
    diff = diff_profiles(base, head, {"base": "b", "head": "h"})
    assert diff["clock"] == "device"
    assert diff["operators"][0] == {"name": "sgemm_kernel", "base_us": 100.0, "head_us": 400.0,
                                    "change_us": 300.0}
    assert render_profile(diff).startswith("**Why** (torch.profiler, self CUDA time per iteration")


def test_a_base_worker_without_profiling_gives_a_head_only_profile_with_the_note():
    head = worker_profile(4, {"aten::mm": 400.0, "aten::relu": 40.0})
    diff = diff_profiles(None, head, {"base": None, "head": "profiles/x/head.trace.json"})
    assert diff["note"] == HEAD_ONLY == "head-only profile: the base commit's worker predates profiling"
    assert diff["operators"][0] == {"name": "aten::mm", "base_us": None, "head_us": 100.0, "change_us": None}
    text = render_profile(diff)
    assert "`aten::mm` 100 µs per iteration (head)" in text and HEAD_ONLY in text and "base `" not in text
    failed = diff_profiles({"error": "RuntimeError: boom"}, head, {"base": None, "head": "h"})
    assert failed["note"] == "head-only profile: profiling the base failed (RuntimeError: boom)"
    assert diff_profiles(head, {"error": "x"}, {}) is None and render_profile(None) == ""


def test_a_run_request_carries_profile_only_when_asked_and_a_bad_one_is_refused_by_name():
    plain = RunRequest({"c": 1}, 2)
    assert "profile" not in plain.to_json()  # what an older worker sees is unchanged
    spec = profile_spec("rel/base.trace.json", 10, 500.0)
    assert spec["trace"].endswith("/rel/base.trace.json") and spec["trace"].startswith("/")
    asked = RunRequest({"c": 1}, 2, profile=spec)
    assert read_request(asked.to_json()) == asked
    with pytest.raises(ProtocolError, match=r"field 'profile' is .*iterations: <integer >= 1>"):
        read_request({**asked.to_json(), "profile": {"iterations": 0, "trace": "/t"}})
    with pytest.raises(ProtocolError, match=r"'profile.trace' is int"):
        read_request({**asked.to_json(), "profile": {"iterations": 3, "trace": 5}})
    # An older worker's response has no profile; a newer one's reads back whole.
    assert read_response({"status": "ok"}).profile is None
    answer = {"status": "ok", "profile": worker_profile(3, {"aten::mm": 3.0})}
    assert read_response(answer).profile == answer["profile"]
