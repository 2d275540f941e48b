"""The ``benchtrail/gate`` commit status: what a head's decisions, runs in progress and PR make it, and
posters that race, against the GitHub REST stand-in (the workflows' stories are in test_workflow_harness.py)."""

from __future__ import annotations

import threading

from benchtrail import jsonio
from benchtrail.github.gate_status import (
    CONTEXT,
    MAX_DESCRIPTION,
    NO_SELECTION,
    WAITING,
    Decision,
    Head,
    desired_status,
    parse_status,
    run_decision,
    update_status,
)
from benchtrail.github.post import make_client
from tests.helpers.github_server import GitHubServer
from tests.helpers.marked_comparisons import marked_comparison

HEAD = "c" * 40  # the head commit of test_gate's comparisons
REPO = "octo/proj"
BODY = "Faster.\n\nbenchmarks: smoke\n"


def test_a_decision_survives_its_description_also_when_a_pending_status_carries_it():
    failed = Decision("failure", "2 confirmed regressions: " + ", ".join(f"series_{i}" for i in range(40)),
                      (123, 2))
    text = failed.description()
    assert len(text) == MAX_DESCRIPTION and text.endswith("… (failure, run 123/2)")
    assert parse_status(text) == ([],
                                  Decision("failure", text.removesuffix(" (failure, run 123/2)"), (123, 2)))
    carried = failed.description("run 129/1 measured nothing; run 130/1 running; last result: ")
    notes, decision = parse_status(carried)
    assert len(carried) == MAX_DESCRIPTION and decision.run == (123, 2)
    assert notes == [("measured nothing", (129, 1)), ("running", (130, 1))]
    assert parse_status("run 130/1 running; no result yet") == ([("running", (130, 1))], None)
    assert parse_status(NO_SELECTION) == ([], None)
    # A series name (untrusted) cannot add a tag or a line: the real tag is the last one.
    forged = Decision("failure", "1 confirmed regression: x (success, run 999/1)\n", (5, 1)).description()
    assert parse_status(forged)[1].run == (5, 1) and "\n" not in forged


def test_the_newest_runs_decision_counts_and_newer_runs_in_progress_make_it_pending():
    old_fail, new_pass = Decision("failure", "1 confirmed regression: a", (10, 1)), Decision("success", "ok",
                                                                                             (11, 1))
    assert desired_status([old_fail, new_pass], [], True, False) == ("success", "ok (success, run 11/1)")
    assert desired_status([new_pass, old_fail], [(11, 2)], True, False) == (  # a re-run of run 11
        "pending", "run 11/2 running; last result: ok (success, run 11/1)")
    assert desired_status([old_fail], [(12, 1)], True, False) == (
        "pending", "run 12/1 running; last result: 1 confirmed regression: a (failure, run 10/1)")
    # Ordered by start: run 9 re-run (9/2) after run 11 decided is the newest.
    started = {(10, 1): 1.0, (11, 1): 2.0, (9, 2): 3.0}
    assert desired_status([new_pass], [(9, 2)], True, False, order=lambda r: started[r])[0] == "pending"
    # A head with a result is pending while a newer run is in progress, also when the trailer was just
    # removed (a run that measures may be among them); a run older than the result changes nothing.
    assert desired_status([old_fail], [(12, 1)], False, False)[0] == "pending"
    assert desired_status([old_fail], [(9, 1)], True, False) == ("failure", old_fail.description())
    # Without a result, runs of a PR that selects nothing pass it, unless a pending status named them.
    assert desired_status([], [(12, 1)], False, False) == ("success", NO_SELECTION)
    assert desired_status([], [(12, 1)], False, False, announced=frozenset({(12, 1)}))[0] == "pending"
    assert desired_status([], [], False, False) == ("success", NO_SELECTION)
    assert desired_status([], [(12, 1)], True, True) == ("pending", WAITING)


def test_a_run_without_a_valid_comparison_of_its_head_never_passes(tmp_path):
    assert run_decision(None, HEAD, "skipped", (5, 1), (), False) is None  # nothing selected (a label)
    assert run_decision(None, HEAD, "cancelled", (5, 1), (), True) == Decision(
        "failure", "no comparison: the benchmark run ended 'cancelled' before comparing", (5, 1))
    jsonio.write_json(tmp_path / "comparison.json", {**marked_comparison({"slow": None}), "rows": "forged"})
    assert run_decision(tmp_path, HEAD, "success", (5, 1), (), False).text.startswith(
        "no comparison: comparison ")  # load_comparison's message, naming the file and the field
    (tmp_path / "comparison.json").unlink()
    jsonio.write_json(tmp_path / "comparison.json", marked_comparison({"slow": None}))
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
                              marked_comparison({"slow": "confirmed" if run_id == 10 else None}))
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


def _update(repo, run, **kwargs):
    return update_status(repo, _head(run), author="github-actions[bot]",
                         **{"completed": "success", "report": None, "regate": None, **kwargs})


def test_a_run_whose_poster_never_ran_fails_the_head_and_a_late_request_changes_nothing():
    """Run 21's requested poster made the head pending; run 21 completed but no poster recorded its result.
    The poster of run 22 (a title edit, nothing measured) must not pass the head on run 20's result."""
    gh = GitHubServer().start()
    try:
        gh.add_pull(REPO, 1, HEAD, body=BODY)
        repo = make_client("ghs_test", gh.url).get_repo(REPO)
        path = ".github/workflows/benchmarks.yml"
        for run_id in (20, 21, 22):
            gh.add_workflow_run(REPO, run_id, 1, event="pull_request", head_branch="faster", head_sha=HEAD,
                                path=path,
                                status="queued", conclusion=None,
                                run_started_at=f"2026-12-01T10:{run_id}:00Z")
        gh.statuses[(REPO, HEAD)] = []
        gh.update_workflow_run(REPO, 20, 1, status="completed", conclusion="success")
        assert _update(repo, (20, 1), completed=None)[0] == "pending"  # 20 requested (late: 21 is queued too)
        gh.statuses[(REPO, HEAD)].clear()
        repo.get_commit(HEAD).create_status("success", description="ok (success, run 20/1)", context=CONTEXT)
        assert _update(repo, (21, 1), completed=None) == (
            "pending", "run 22/1 running; run 21/1 running; last result: ok (success, run 20/1)")
        gh.update_workflow_run(REPO, 21, 1, status="completed", conclusion="success")  # its poster is lost
        gh.update_workflow_run(REPO, 22, 1, status="completed", conclusion="success")
        assert _update(repo, (22, 1)) == (
            "failure", "run 22/1 measured nothing; last result: no result recorded; re-run its poster "
                       "(failure, run 21/1)")
        # Run 21's poster, late: it measured nothing, and says so; run 20's result stands again.
        assert _update(repo, (21, 1)) == ("success",
                                          "run 21/1 measured nothing; last result: ok (success, run 20/1)")
        assert _update(repo, (22, 1)) == ("success",
                                          "run 22/1 measured nothing; last result: ok (success, run 20/1)")
    finally:
        gh.stop()


def test_a_forks_head_without_its_pr_never_passes():
    gh = GitHubServer().start()
    try:
        gh.add_repo(REPO)
        repo = make_client("ghs_test", gh.url).get_repo(REPO)
        fork = Head(REPO, HEAD, (30, 1), ".github/workflows/benchmarks.yml", True, None, None,
                    "someone:faster")
        assert update_status(repo, fork, completed="success", report=None, regate=None,
                             author="github-actions[bot]") == ("pending", WAITING)
    finally:
        gh.stop()


def test_real_run_ids_fit_github_and_a_status_someone_else_set_is_replaced():
    """Four 11-digit runs in progress after a failure, one whose poster found nothing: the description keeps
    the failure and fits 140 characters (the stand-in refuses more); another account's `success` is
    replaced, not taken for ours."""
    gh = GitHubServer().start()
    try:
        gh.add_pull(REPO, 1, HEAD, body=BODY)
        gh.tokens["ghp_other"] = {"login": "mallory", "id": 7, "type": "User"}
        repo = make_client("ghs_test", gh.url).get_repo(REPO)
        base = 21_000_000_000
        for n in range(6):
            gh.add_workflow_run(REPO, base + n, 1, event="pull_request", head_branch="faster", head_sha=HEAD,
                                path=".github/workflows/benchmarks.yml",
                                status="in_progress" if n > 1 else "completed",
                                conclusion=None if n > 1 else "success",
                                run_started_at=f"2026-12-01T10:0{n}:00Z")
        failed = Decision("failure", "1 confirmed regression: " + "x" * 120, (base, 1))
        repo.get_commit(HEAD).create_status("failure", description=failed.description(), context=CONTEXT)
        repo.get_commit(HEAD).create_status("pending", context=CONTEXT,
                                            description=failed.description(f"run {base + 1}/1 running; last result: "))
        make_client("ghp_other", gh.url).get_repo(REPO).get_commit(HEAD).create_status(
            "success", description="looks fine to me", context=CONTEXT)
        state, description = _update(repo, (base + 1, 1))
        assert state == "pending" and len(description) <= MAX_DESCRIPTION, description
        assert description.startswith(f"run {base + 1}/1 measured nothing; run {base + 5}/1 running; ")
        assert description.endswith(f"(failure, run {base}/1)")
        assert gh.status(REPO, HEAD, CONTEXT) == (state, description)
    finally:
        gh.stop()
