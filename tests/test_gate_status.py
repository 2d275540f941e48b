"""The ``benchtrail/gate`` commit status: what a head's decisions, runs in progress and PR make it, and
posters that race, against the GitHub REST stand-in (the workflows' stories are in test_workflow_harness.py)."""

from __future__ import annotations

import threading

from benchtrail import jsonio
from benchtrail.github.gate_status import (CONTEXT, MAX_DESCRIPTION, NO_SELECTION, WAITING, Decision, Head,
                                           desired_status, run_decision, update_status)
from benchtrail.github.post import make_client
from tests.github_server import GitHubServer
from tests.test_gate import _comparison

HEAD = "c" * 40  # the head commit of test_gate's comparisons
REPO = "octo/proj"
BODY = "Faster.\n\nbenchmarks: smoke\n"


def test_a_decision_survives_its_description_also_when_a_pending_status_carries_it():
    failed = Decision("failure", "2 confirmed regressions: " + ", ".join(f"series_{i}" for i in range(40)), (123, 2))
    text = failed.description()
    assert len(text) == MAX_DESCRIPTION and text.endswith("… (failure, run 123/2)")
    assert Decision.parse(text) == Decision("failure", text.removesuffix(" (failure, run 123/2)"), (123, 2))
    carried = failed.description("run 130/1 running; before it: ")
    assert len(carried) == MAX_DESCRIPTION and Decision.parse(carried).run == (123, 2)
    assert Decision.parse("run 130/1 running") is None and Decision.parse(NO_SELECTION) is None


def test_the_newest_runs_decision_counts_and_newer_runs_in_progress_make_it_pending():
    old_fail, new_pass = Decision("failure", "1 confirmed regression: a", (10, 1)), Decision("success", "ok", (11, 1))
    assert desired_status([old_fail, new_pass], [], True, False) == ("success", "ok (success, run 11/1)")
    assert desired_status([new_pass, old_fail], [(11, 2)], True, False) == (  # a re-run of run 11
        "pending", "run 11/2 running; before it: ok (success, run 11/1)")
    assert desired_status([old_fail], [(12, 1)], True, False) == (
        "pending", "run 12/1 running; before it: 1 confirmed regression: a (failure, run 10/1)")
    # A run of a PR that selects nothing (a title edit) does not hide the result; nor does one older than it.
    assert desired_status([old_fail], [(12, 1)], False, False) == ("failure", old_fail.description())
    assert desired_status([old_fail], [(9, 1)], True, False) == ("failure", old_fail.description())
    assert desired_status([], [], False, False) == ("success", NO_SELECTION)
    assert desired_status([], [(12, 1)], True, True) == ("pending", WAITING)


def test_a_run_without_a_valid_comparison_of_its_head_never_passes(tmp_path):
    assert run_decision(None, HEAD, "skipped", (5, 1), (), False) is None  # nothing selected (a label)
    assert run_decision(None, HEAD, "cancelled", (5, 1), (), True) == Decision(
        "failure", "no comparison: the benchmark run ended 'cancelled' before comparing", (5, 1))
    jsonio.write_json(tmp_path / "comparison.json", {**_comparison({"slow": None}), "rows": "forged"})
    assert run_decision(tmp_path, HEAD, "success", (5, 1), (), False).text.startswith(
        "no comparison: comparison ")  # load_comparison's message, naming the file and the field
    (tmp_path / "comparison.json").unlink()
    jsonio.write_json(tmp_path / "comparison.json", _comparison({"slow": None}))
    assert run_decision(tmp_path, "d" * 40, "success", (5, 1), (), False).text == (
        f"no comparison: {tmp_path / 'comparison.json'}: head.commit is 'cccccccccccc', not the run's head "
        "dddddddddddd")
    assert run_decision(tmp_path, HEAD, "success", (5, 1), (), False) == Decision(
        "success", "no confirmed regression; 1 unconfirmed, not gated", (5, 1))


def _head(run: tuple[int, int]) -> Head:
    return Head(REPO, HEAD, run, ".github/workflows/benchmarks.yml", False, 1, None)


def test_racing_posters_end_on_the_newest_runs_decision(tmp_path):
    """Run 10's poster reads first but writes last (its write held at the server): it then reads again,
    sees run 11's decision and writes that back."""
    gh = GitHubServer().start()
    try:
        gh.add_pull(REPO, 1, HEAD, body=BODY)
        for run_id in (10, 11):
            (tmp_path / str(run_id)).mkdir()
            jsonio.write_json(tmp_path / str(run_id) / "comparison.json",
                              _comparison({"slow": "confirmed" if run_id == 10 else None}))
        repo = make_client("ghs_test", gh.url).get_repo(REPO)
        held = gh.hold("POST", f"/repos/{REPO}/statuses/{HEAD}")
        older = threading.Thread(target=update_status, args=(repo, _head((10, 1))),
                                 kwargs={"completed": "success", "report": tmp_path / "10", "regate": None,
                                         "author": "github-actions[bot]"})
        older.start()
        held.wait_arrived()
        assert update_status(repo, _head((11, 1)), completed="success", report=tmp_path / "11", regate=None,
                             author="github-actions[bot]")[0] == "success"
        held.release()
        older.join(60)
        history = [(s["state"], s["description"][-19:]) for s in gh.statuses[(REPO, HEAD)]]
        assert history == [("success", "(success, run 11/1)"), ("failure", "(failure, run 10/1)"),
                           ("success", "(success, run 11/1)")]
        assert gh.status(REPO, HEAD, CONTEXT)[0] == "success"
    finally:
        gh.stop()
