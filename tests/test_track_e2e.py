"""Post-merge tracking end to end: 9 real pipeline runs of an adopting repository's `smoke` preset
over a git history in which one commit adds a calibrated slowdown; `benchtrail track` names that
commit and opens, then updates, one GitHub issue through the local REST server."""

import json
import re
import shutil
from pathlib import Path

import pytest

from benchtrail.cli import main
from tests.helpers.git import git

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting-classes"
SLOW_AT = 5  # the 6th commit makes the model's work 10x (REPEAT 20 -> 200)
COMMITS = 9  # track needs 8 ok points (MIN_POINTS); 5 before the step and 4 after it
SERIES = "chain.eager.inference-quick.laptop"


@pytest.fixture(scope="module")
def tracked_repo(tmp_path_factory):
    """The docs' adoption example as a git repository with ``COMMITS`` commits, each run by `benchtrail pipeline`."""
    import os

    repo = tmp_path_factory.mktemp("tracked") / "my-project"
    shutil.copytree(EXAMPLE, repo)
    git(repo, "init", "-q", "-b", "main", isolated=True)
    suite = repo / "my_benchmarks" / "suite.py"
    commits = []
    old = Path.cwd()
    os.chdir(repo)
    try:
        for i in range(COMMITS):
            if i == SLOW_AT:
                suite.write_text(suite.read_text().replace("REPEAT = 20\n", "REPEAT = 200\n"))
            (repo / "CHANGELOG").write_text(f"change {i}\n")
            git(repo, "add", "-A", isolated=True)
            git(repo, "commit", "-q", "-m", f"change {i}", isolated=True)
            commits.append(git(repo, "rev-parse", "HEAD", isolated=True))
            assert main(["pipeline", "--no-recheck"]) == 0
    finally:
        os.chdir(old)
    return repo, commits


@pytest.mark.e2e
def test_track_names_the_slowdown_commit_and_keeps_one_issue(tracked_repo, tmp_path, github_server,
                                                             monkeypatch,
                                                             capsys):
    repo, commits = tracked_repo
    github_server.add_repo("octo/my-project")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")  # the server's bot token
    monkeypatch.chdir(repo)
    args = ["track", "--store", ".benchtrail/store", "--post", "--repo-name", "octo/my-project",
            "--api-url", github_server.url]
    assert main([*args, "--report", str(tmp_path / "first.json")]) == 0
    report = json.loads((tmp_path / "first.json").read_text())
    # Run-to-run noise on a shared machine may show as other change points; only the slowdown files an issue.
    issued = [c for c in report["change_points"] if c["issue"]]
    assert len(issued) == 1, json.dumps(report, indent=1)[:6000]
    (change,) = issued
    assert change["series_name"] == SERIES and change["direction"] == "regression"
    found = (commits.index(change["base_commit"]), commits.index(change["head_commit"]))
    # A 10x step: the CI machine's load made whole runs 2-3x slower (runs of 4 s to 11 s), and with
    # twice the work (the step this test used before) PELT put the change point a commit early or
    # late. Samples last a fixed time, so 10x the work costs no run time; no load reaches ln(10).
    assert found == (SLOW_AT - 1, SLOW_AT), report
    base_i, head_i = found
    # Ten times the matrix products, less the fixed per-call overhead: several hundred percent.
    assert change["magnitude_pct"] > 200
    assert change["confidence"] > 0.95
    (issue,) = github_server.repo_issues("octo/my-project")
    assert "benchtrail:track series=" in issue["body"] and commits[head_i] in issue["body"]
    assert [label["name"] for label in issue["labels"]] == ["benchtrail-regression"]

    # A second run over the same store updates that issue (or leaves it as it is): never a second one.
    assert main([*args, "--report", str(tmp_path / "second.json")]) == 0
    assert len(github_server.repo_issues("octo/my-project")) == 1
    second = json.loads((tmp_path / "second.json").read_text())
    actions = [a["action"] for a in second["issues"]]
    assert actions and set(actions) <= {"updated", "unchanged"}, second["issues"]
    assert re.search(rf"benchtrail bisect-range {commits[base_i][:7]}\w* {commits[head_i][:7]}",
                     issue["body"])
