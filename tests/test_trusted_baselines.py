"""A PR holding the store's write identity cannot make its own run the baseline of later PRs or of ``track``.

The store is gcp-storage-emulator; GitHub is the local REST server (``tests/helpers/github_server.py``),
which holds the record of each workflow run attempt the way GitHub does. A push run of main stores
the real baseline. A PR run then writes, with nothing but object-create rights (``if_generation_match=0``,
as ``roles/storage.objectCreator`` allows), three forged pointers for main's commit, each with the
newest ``created`` and plausible content: one naming its own run, one naming an attempt of the push
run that does not exist, and one naming an attempt that exists only because it was re-run after the
pointer was planted. The next PR's comparison and ``track`` ignore all three and say why.
"""

from __future__ import annotations

import datetime
import json

import pytest
from google.cloud import storage

from benchtrail.cli import main
from benchtrail.results.io import write_results
from tests.helpers.git import commit, git
from tests.helpers.records import record, results

REPOSITORY = "octo/project"
WORKFLOW = ".github/workflows/benchmark.yml"


def _now(offset_s: float = 0.0) -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=offset_s)


def _run_dir(tmp_path, name, sha, median):
    run_dir = tmp_path / name
    write_results(run_dir / "results" / "c2-standard-16-0.json",
                  results(record("rc1", [median + i * 0.01 for i in range(10)]), commit=sha))
    return run_dir


def _ci_env(monkeypatch, github_server, ref: str) -> None:
    for name, value in {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPOSITORY,
                        "GITHUB_API_URL": github_server.url,
                        "GITHUB_TOKEN": "ghs_test",
                        "GITHUB_WORKFLOW_REF": f"{REPOSITORY}/{WORKFLOW}@{ref}"}.items():
        monkeypatch.setenv(name, value)


def _forge(bucket: str, main_sha: str, genuine: dict, run_id: str, attempt: int) -> None:
    """Create ``commits/<main>/<run_id>-<attempt>.json`` directly, as the PR's credentials can."""
    forged = {**genuine, "run_id": run_id, "attempt": attempt, "created": "2099-01-01T00:00:00+00:00"}
    forged.pop("stored_at", None)
    blob = storage.Client(project="test").bucket(bucket).blob(f"ci/commits/{main_sha}/{run_id}-{attempt}.json")
    blob.upload_from_string(json.dumps(forged), content_type="application/json", if_generation_match=0)


@pytest.fixture
def forged_store(repo, tmp_path, monkeypatch, github_server, gcs_bucket):
    """The store after the push run and the forging PR run; returns what the tests need."""
    store = f"gs://{gcs_bucket}/ci"
    github_server.add_repo(REPOSITORY, default_branch="main")
    main_sha = git(repo, "rev-parse", "main", isolated=True)
    github_server.add_workflow_run(REPOSITORY, 501, 1, event="push", head_branch="main", head_sha=main_sha,
                                   path=WORKFLOW, status="in_progress", conclusion=None,
                                   run_started_at=_now(-60))
    assert main(["upload", "--run-dir", str(_run_dir(tmp_path, "base", main_sha, 100.0)), "--store", store,
                 "--run-id", "501", "--attempt", "1", "--write-pointer"]) == 0
    github_server.update_workflow_run(REPOSITORY, 501, 1, status="completed", conclusion="success",
                                      updated_at=_now())
    github_server.add_job(REPOSITORY, 501, 1, "benchmark / process (compare, re-check, comment)", "success",
                          _now(-60), _now())

    git(repo, "checkout", "-q", "-b", "evil", isolated=True)
    evil_sha = commit(repo, "pr 1: slows everything down by half")
    github_server.add_workflow_run(REPOSITORY, 502, 1, event="pull_request", head_branch="evil",
                                   head_sha=evil_sha,
                                   path=WORKFLOW, status="in_progress", conclusion=None,
                                   run_started_at=_now(-1))
    # A PR opened from a branch at main's commit: a pull_request run of main's sha.
    github_server.add_workflow_run(REPOSITORY, 503, 1, event="pull_request", head_branch="copy",
                                   head_sha=main_sha,
                                   path=WORKFLOW, run_started_at=_now(-1), updated_at=_now(600))
    # The PR's own run directories (a create-only upload can make any that do not exist yet), holding
    # results that claim main's commit and PR 1's slower figures.
    for run_id, attempt in (("502", 1), ("501", 2), ("501", 3), ("503", 1)):
        assert main(["upload", "--run-dir",
                     str(_run_dir(tmp_path, f"forged-{run_id}-{attempt}", main_sha, 150.0)),
                     "--store", store, "--run-id", run_id, "--attempt", str(attempt)]) == 0
    (genuine,) = [json.loads(b.download_as_bytes()) for b in storage.Client(project="test").list_blobs(
        gcs_bucket, prefix=f"ci/commits/{main_sha}/")]
    for run_id, attempt in (("502", 1), ("501", 2), ("501", 3), ("503", 1)):
        _forge(gcs_bucket, main_sha, genuine, run_id, attempt)
    github_server.update_workflow_run(REPOSITORY, 502, 1, status="completed", conclusion="success",
                                      updated_at=_now())
    # Someone re-runs the push run later: attempt 3 exists now, but started after its pointer was planted.
    github_server.add_workflow_run(REPOSITORY, 501, 3, event="push", head_branch="main", head_sha=main_sha,
                                   path=WORKFLOW, run_started_at=_now(120), updated_at=_now(300))

    git(repo, "checkout", "-q", "-b", "honest", "main", isolated=True)
    honest_sha = commit(repo, "pr 2: also slower by half")
    monkeypatch.chdir(repo)
    return {"store": store, "main": main_sha, "head": _run_dir(tmp_path, "head", honest_sha, 150.0)}


def test_the_next_pr_compares_with_the_push_run_and_says_which_pointers_it_ignored(
        forged_store, tmp_path, monkeypatch, github_server, capsys):
    _ci_env(monkeypatch, github_server, "refs/pull/2/merge")
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(forged_store["head"]), "--store", forged_store["store"],
                 "--base-branch", "main", "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["attempt"], baseline["commit"]) == ("501", 1, forged_store["main"])
    main_sha = forged_store["main"]
    reasons = {(i["run_id"], i["attempt"]): i["reason"] for i in baseline["ignored"]}
    assert set(reasons) == {("502", 1), ("501", 2), ("501", 3), ("503", 1)}
    assert reasons[("503", 1)] == "run 503/1 was made by a pull_request event, not a push or manual run"
    not_listed = (f"GitHub lists no such run attempt of commit {main_sha[:12]} in octo/project (a pointer may only "
                  "name a run of its own commit)")
    assert reasons[("502", 1)] == f"run 502/1: {not_listed}"  # a run of the PR's commit, not of main's
    # a 404
    assert reasons[("501", 2)] == "run 501/2: GitHub has no such workflow run attempt in octo/project"
    assert reasons[("501", 3)].startswith("run 501/3: its pointer was stored at ")
    assert "outside the time that attempt ran" in reasons[("501", 3)]
    assert all(i["commit"] == main_sha for i in baseline["ignored"])
    assert baseline["trust"].startswith(f"runs of {WORKFLOW} made by a push or manual run")
    (row,) = comparison["rows"]
    assert (row["verdict"], row["base_median"]) == ("regressed", pytest.approx(100.045))
    err = capsys.readouterr().err
    assert "ignored run 502/1" in err and "baseline: " + main_sha[:12] in err

    assert main(["comment", "--comparison", str(out), "--output-dir", str(tmp_path / "comment")]) == 0
    text = (tmp_path / "comment" / "comment.md").read_text()
    assert "⚠ Ignored 4 stored runs that are not a trusted baseline: " in text
    assert "run 503/1 was made by a pull\\_request event" in text and "manual run. and 1 more." not in text
    assert text.count("⚠ Ignored 4 stored runs") == 1 and " and 1 more." in text


def test_without_the_trust_the_forged_pointer_would_have_been_the_baseline(forged_store, tmp_path):
    """What the check prevents: the newest pointer of main's commit is a forged one."""
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(forged_store["head"]), "--store", forged_store["store"],
                 "--trust", "all", "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    assert (comparison["baseline"]["run_id"], comparison["baseline"]["attempt"]) != ("501", 1)
    assert comparison["rows"][0]["verdict"] == "similar"


def test_track_ignores_the_forged_pointers_and_says_why(forged_store, tmp_path, monkeypatch, github_server,
                                                        capsys):
    _ci_env(monkeypatch, github_server, "refs/heads/main")
    monkeypatch.setenv("BENCHTRAIL_TRUSTED_WORKFLOW", WORKFLOW)
    monkeypatch.setenv("GITHUB_WORKFLOW_REF",
                       f"{REPOSITORY}/.github/workflows/track_regressions.yml@refs/heads/main")
    report = tmp_path / "track.json"
    assert main(["track", "--store", forged_store["store"], "--ref", "main", "--report", str(report)]) == 0
    err = capsys.readouterr().err
    short = forged_store["main"][:7]
    assert f"run not used: {short}: not a trusted run: run 502/1: GitHub lists no such run attempt of commit" in err
    assert f"run not used: {short}: not a trusted run: run 501/2: GitHub has no such workflow run attempt" in err
    assert f"run not used: {short}: not a trusted run: run 503/1 was made by a pull_request event" in err
    assert f"run not used: {short}: not a trusted run: run 501/3: its pointer was stored at " in err
    history_runs = json.loads(report.read_text())
    assert json.dumps(history_runs).count('"502"') == 0


def test_history_and_compare_builds_read_the_same_trusted_runs(forged_store, tmp_path, monkeypatch,
                                                               github_server,
                                                                capsys):
    """One lookup (``benchtrail.compare.stored_runs.StoredRuns``) for every command that picks a stored run by commit."""
    _ci_env(monkeypatch, github_server, "refs/heads/main")
    out = tmp_path / "history.json"
    assert main(["history", "--store", forged_store["store"], "--ref", "main", "--output", str(out)]) == 0
    (point,) = [p for s in json.loads(out.read_text())["series"].values() for p in s["points"]]
    assert (point["run_id"], point["attempt"]) == ("501", 1)
    assert f"run not used: {forged_store['main'][:7]}: not a trusted run: run 502/1" in capsys.readouterr().err
    assert main(["compare-builds", "main", str(forged_store["head"]), "--store", forged_store["store"],
                 "--output-dir", str(tmp_path / "builds")]) == 0
    table = capsys.readouterr().out
    assert "│ 100.0 µs │ 150.0 µs │" in table  # A is the push run (100 µs), not a forged one (150 µs)


def _gpu_results(path, gpu: str, commit_sha: str, median: float, method_version: int | None = None):
    env = {"torch_version": "2.13.0", "cuda_available": True, "gpu_name": gpu}
    if method_version is not None:
        env["method_version"] = method_version
    base = results(record("rc1", [median + i * 0.01 for i in range(10)]), commit=commit_sha)
    import dataclasses

    write_results(path, dataclasses.replace(base, environment=env))
    return path


@pytest.mark.parametrize("base_gpu, method, why", [
    ("NVIDIA A100-SXM4-80GB", None,
     "GPU NVIDIA A100-SXM4-80GB (baseline) vs NVIDIA H100 80GB HBM3 (this run)"),
    ("NVIDIA H100 80GB HBM3", 2, "method version 2 (baseline) vs 1 (this run)"),
])
def test_results_measured_under_another_baseline_key_are_not_compared(tmp_path, capsys, base_gpu, method,
                                                                      why):
    """Constructed results files: an A100 run given as the baseline of an H100 run (and an H100 run
    measured with another method version) yields not-comparable rows that say what differs."""
    base = _gpu_results(tmp_path / "base.json", base_gpu, "b" * 40, 100.0, method)
    head = _gpu_results(tmp_path / "head.json", "NVIDIA H100 80GB HBM3", "c" * 40, 150.0)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(base), "--head", str(head), "--output", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["verdict"], row["base_median"], row["change"]) == ("not-comparable", None, None)
    assert row["reason"] == f"not compared: the baseline of c2-standard-16 was measured differently ({why})"
    assert main(["comment", "--comparison", str(out), "--output-dir", str(tmp_path / "comment")]) == 0
    assert (f"⚠ the baseline of c2-standard-16 was measured differently ({why}): its series are not compared."
            in (tmp_path / "comment" / "comment.md").read_text())
    # The same head against an H100 baseline of the same method is compared.
    same = _gpu_results(tmp_path / "same.json", "NVIDIA H100 80GB HBM3", "b" * 40, 100.0)
    assert main(["compare", "--base", str(same), "--head", str(head), "--output",
                 str(tmp_path / "ok.json")]) == 0
    assert json.loads((tmp_path / "ok.json").read_text())["rows"][0]["verdict"] == "regressed"


def test_a_comp_stats_run_does_not_call_the_baselines_x86_64_series_removed(tmp_path):
    import dataclasses

    def compile_time(ms):
        return dataclasses.replace(record("m1-compile_time_ms", [ms], kind="compilation",
                                          metric="compile_time_ms",
                                          unit="ms"), presets=())

    base = dataclasses.replace(results(record("rc1"), compile_time(900.0), commit="b" * 40),
                               run={"run_id": "1", "attempt": 1, "presets": ["x86_64", "comp-stats"]})
    head = dataclasses.replace(results(compile_time(950.0), commit="c" * 40),
                               run={"run_id": "2", "attempt": 1, "presets": ["comp-stats"]})
    write_results(tmp_path / "base.json", base)
    write_results(tmp_path / "head.json", head)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(tmp_path / "base.json"), "--head", str(tmp_path / "head.json"),
                 "--output", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["id"], r["verdict"]) for r in rows] == [("m1-compile_time_ms", "similar")]


def test_a_run_github_cannot_vouch_for_is_not_trusted_and_the_comparison_still_ends(
        forged_store, tmp_path, monkeypatch, github_server):
    """GitHub answers 403 for the push run's record (a token without ``actions: read``): no stored run is
    trusted, the comparison is written without a baseline (every row new) and says why, exit 0."""
    _ci_env(monkeypatch, github_server, "refs/pull/2/merge")
    github_server.fail("GET", f"/repos/{REPOSITORY}/actions/runs/501/attempts/1", "read-only", times=5)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--head", str(forged_store["head"]), "--store", forged_store["store"],
                 "--base-branch", "main", "--output", str(out)]) == 0
    comparison = json.loads(out.read_text())
    assert comparison["base"] is None and [r["verdict"] for r in comparison["rows"]] == ["new"]
    reasons = {(i["run_id"], i["attempt"]): i["reason"] for i in comparison["baseline"]["ignored"]}
    assert reasons[("501", 1)].startswith("run 501/1 could not be verified with the GitHub API (403: ")
    assert comparison["baseline"]["reason"] == "no trusted baseline run: 5 stored run(s) ignored"
    assert main(["comment", "--comparison", str(out), "--output-dir", str(tmp_path / "comment")]) == 0
    assert " · no trusted baseline: every series is new" in (tmp_path / "comment" / "comment.md").read_text()


def test_a_series_the_head_has_is_compared_even_when_its_preset_was_renamed(tmp_path):
    """Only series the head lacks are left out for its presets: renaming x86_64 to cpu hides nothing."""
    import dataclasses

    base = results(record("rc1", [100.0 + i * 0.01 for i in range(10)]), commit="b" * 40)
    slower = dataclasses.replace(record("rc1", [150.0 + i * 0.01 for i in range(10)]), presets=("cpu",))
    head = dataclasses.replace(results(slower, commit="c" * 40),
                               run={"run_id": "2", "attempt": 1, "presets": ["cpu"]})
    write_results(tmp_path / "base.json", base)
    write_results(tmp_path / "head.json", head)
    out = tmp_path / "comparison.json"
    assert main(["compare", "--base", str(tmp_path / "base.json"), "--head", str(tmp_path / "head.json"),
                 "--output", str(out)]) == 0
    assert [(r["id"], r["verdict"]) for r in json.loads(out.read_text())["rows"]] == [("rc1", "regressed")]


@pytest.mark.parametrize("url, checked", [("gs://bucket/prefix", True), ("git:origin#benchtrail-data", True),
                                          ("git:/srv/repo.git", True), ("/tmp/store", False),
                                          ("file:///tmp/store", False)])
def test_auto_trust_checks_githubs_record_for_every_remote_store_in_actions(monkeypatch, url, checked):
    """`--trust auto` asks the store interface whether a store is remote, so a git: store's readers keep
    the run check in Actions (docs/store.md, "Trusted baselines")."""
    from benchtrail.compare.stored_runs import TrustAll
    from benchtrail.github.trust import GitHubRunTrust, trust_from_options

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/my-project")
    workflow = ".github/workflows/benchmarks.yml"
    monkeypatch.setenv("GITHUB_WORKFLOW_REF", f"octo/my-project/{workflow}@refs/heads/main")
    trust = trust_from_options("auto", url)
    assert isinstance(trust, GitHubRunTrust if checked else TrustAll), (url, trust)
    if checked:
        assert (trust.repo_name, trust.workflow_path) == ("octo/my-project", workflow)
    monkeypatch.setenv("GITHUB_ACTIONS", "false")
    assert isinstance(trust_from_options("auto", url), TrustAll)
