"""The required gate: the commit status ``benchtrail/gate`` on a PR's head, set by the poster workflow.

A status, unlike a job, cannot be skipped into passing: an event that measures nothing (a title
edit, a label) leaves it as it is. Its value is a function of three things the poster reads:

* **decisions**: each benchmark run of the head that compared (``success``/``failure`` from
  :func:`benchtrail.compare.gate.check`) or that selected benchmarks and ended without a comparison
  (``failure``). Each status we write names its decision's run (``(failure, run 123/1)``), so the
  status history of the head is the record; the decision of the newest run counts.
* **runs in progress** of the benchmark workflow for the head, newer than that decision: while the
  PR selects benchmarks they make it ``pending`` (the pending status carries the decision before
  them, so nothing is lost when they end without measuring);
* **the PR**: its ``benchmarks:`` selection, its ``benchmarks-accept:`` items (a comparison is gated
  with the current ones) and, for a fork, the ``safe-to-benchmark`` label.

Without any decision a head is ``success`` ("no benchmarks selected"), ``pending`` while it waits
for a maintainer's label, or ``failure`` when its only run had an invalid selection. Every write is
followed by a read: posters of one head that race converge on the same status. comparison.json
comes from the PR's run, so it is read as untrusted data (``load_comparison`` validates every row)
and must name the head it gates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail.compare import gate
from benchtrail.errors import UserError
from benchtrail.github.configure import SAFE_LABEL, SELECTION_ERROR_VERDICT, SelectionError, accept_items, pr_requests

CONTEXT = "benchtrail/gate"
#: GitHub keeps at most this many characters of a status description.
MAX_DESCRIPTION = 140
NO_SELECTION = "no benchmarks selected"
WAITING = f"waiting for a maintainer to add the {SAFE_LABEL} label (a fork's PR)"
INVALID_SELECTION = "no comparison: the benchmark selection is invalid; see the PR comment"
#: Run conclusions that leave a run without a comparison undecided: it selected nothing (every job
#: skipped is ``skipped``).
NOTHING_FAILED = ("success", "skipped", "neutral")
#: How often a poster reads and writes before it leaves the status to the poster it raced with.
MAX_ROUNDS = 4

_TAG = re.compile(r" \((?P<state>success|failure), run (?P<run>\d+)/(?P<attempt>\d+)\)$")
_CARRIED = re.compile(r"^run \d+/\d+ running; before it: ")

Run = tuple[int, int]  # (run id, attempt)


@dataclass(frozen=True)
class Decision:
    """What one benchmark run of the head decided: ``state`` success or failure, ``text`` why."""

    state: str
    text: str
    run: Run

    def description(self, prefix: str = "") -> str:
        """``<prefix><text> (<state>, run <id>/<attempt>)``, the text cut to fit GitHub's 140 characters."""
        tag = f" ({self.state}, run {self.run[0]}/{self.run[1]})"
        room = MAX_DESCRIPTION - len(tag) - len(prefix)
        text = self.text if len(self.text) <= room else self.text[:room - 1] + "…"
        return prefix + text + tag

    @classmethod
    def parse(cls, description: str) -> Decision | None:
        """The decision a status of ours names (its own, or the one a pending status carries), or None."""
        m = _TAG.search(description or "")
        if m is None:
            return None
        text = _CARRIED.sub("", description[:m.start()])
        return cls(m["state"], text, (int(m["run"]), int(m["attempt"])))


def comparison_decision(comparison: Any, accept: Sequence[str], run: Run) -> Decision:
    """Gate a comparison (``load_comparison``'s) with the ``accept`` globs."""
    result = gate.check(comparison, accept)
    n = len(result.failing)
    if n:
        names = ", ".join(dict.fromkeys(row.name for row in result.failing))
        return Decision("failure", f"{n} confirmed regression{'s' if n != 1 else ''}: {names}", run)
    notes = [f"{result.accepted} accepted"] if result.accepted else []
    notes += [f"{result.unconfirmed} unconfirmed, not gated"] if result.unconfirmed else []
    return Decision("success", "; ".join(["no confirmed regression", *notes]), run)


def report_decision(report: Path, head_sha: str, accept: Sequence[str], run: Run) -> Decision:
    """Gate ``report/comparison.json``: untrusted, so validated (``load_comparison``) and of the commit
    ``head_sha``, else a failure that says why."""
    from benchtrail.compare.document import load_comparison

    try:
        comparison = load_comparison(report / "comparison.json")
    except UserError as exc:
        return Decision("failure", f"no comparison: {exc}", run)
    commit = comparison.head.get("commit") or ""
    if commit.lower() != head_sha.lower():
        return Decision("failure", f"no comparison: {report / 'comparison.json'}: head.commit is {commit[:12]!r}, "
                                   f"not the run's head {head_sha[:12]}", run)
    return comparison_decision(comparison, accept, run)


def run_decision(report: Path | None, head_sha: str, conclusion: str, run: Run, accept: Sequence[str],
                 decided_before: bool) -> Decision | None:
    """The decision of a completed run from its ``comment`` artifact (``report``: comparison.json,
    comment.json; None or missing files when it uploaded none) and its ``conclusion``.

    A comparison is gated (an invalid one, or one of another commit, fails); a selection-error comment
    fails only a head without an earlier decision; a run that failed (or was cancelled) without a
    comparison fails; one that did not (it selected nothing) decides nothing.
    """
    if report is not None and (report / "comparison.json").is_file():
        return report_decision(report, head_sha, accept, run)
    if report is not None and (report / "comment.json").is_file():
        from benchtrail.github.post import load_comment

        try:
            verdict = load_comment(report / "comment.json").get("verdict")
        except UserError:
            verdict = None
        if verdict == SELECTION_ERROR_VERDICT:
            return None if decided_before else Decision("failure", INVALID_SELECTION, run)
    if conclusion not in NOTHING_FAILED:
        return Decision("failure", f"no comparison: the benchmark run ended {conclusion!r} before comparing", run)
    return None


def desired_status(decisions: Sequence[Decision], running: Sequence[Run], selects: bool,
                   waiting: bool) -> tuple[str, str]:
    """``(state, description)`` of the head: the newest run's decision (ties: the first in
    ``decisions``), ``pending`` while a newer run of a PR that selects benchmarks is in progress or a
    fork waits for its label, else ``success``: nothing selected."""
    best = max(decisions, key=lambda d: d.run, default=None)
    newer = [r for r in running if best is None or r > best.run]
    if waiting and best is None:
        return "pending", WAITING
    if newer and selects:
        prefix = "run {}/{} running".format(*max(newer))
        return "pending", prefix if best is None else best.description(prefix + "; before it: ")
    if best is not None:
        return best.state, best.description()
    return "success", NO_SELECTION


# -- GitHub ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Head:
    """A benchmark run's head as the ``workflow_run`` event names it (set by GitHub, not by the PR)."""

    repo: str
    sha: str
    run: Run
    workflow_path: str
    fork: bool
    pr_number: int | None
    html_url: str | None


def head_from_event(payload: dict[str, Any]) -> Head:
    """:class:`Head` of a ``workflow_run`` event payload.

    Raises:
        UserError: not a ``workflow_run`` event of a pull request's run.
    """
    try:
        wr, repo = payload["workflow_run"], payload["repository"]["full_name"]
        pulls = wr.get("pull_requests") or []
        return Head(repo, wr["head_sha"], (int(wr["id"]), int(wr.get("run_attempt") or 1)), wr["path"],
                    (wr.get("head_repository") or {}).get("full_name", repo) != repo,
                    int(pulls[0]["number"]) if pulls else None, wr.get("html_url"))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a workflow_run event payload ({type(exc).__name__}: {exc})") from exc


@dataclass(frozen=True)
class PullState:
    """What the PR asks for now: presets selected, ``benchmarks-accept`` globs, the fork's label."""

    selects: bool
    accept: tuple[str, ...]
    labelled: bool
    comment_url: str | None


def read_pull(repo: Any, head: Head, author: str) -> PullState | None:
    """The PR of ``head`` (the event's, else an open PR whose head is the commit), or None when none is."""
    from benchtrail.compare.comment import MARKER_PREFIX

    if head.pr_number is not None:
        pull = repo.get_pull(head.pr_number)
    else:
        pull = next((p for p in repo.get_commit(head.sha).get_pulls()
                     if p.state == "open" and p.head.sha.lower() == head.sha.lower()), None)
        if pull is None:
            return None
    labels = [label.name for label in pull.labels]
    try:
        accept = accept_items(pull.title, pull.body)
    except SelectionError:
        accept = ()
    url = next((c.html_url for c in pull.get_issue_comments()
                if c.user.login == author and MARKER_PREFIX in (c.body or "")), None)
    return PullState(bool(pr_requests(pull.title, pull.body, labels)[0]), accept, SAFE_LABEL in labels, url)


def _ours(commit: Any, author: str) -> list[Any]:
    """Our statuses of the commit, newest first."""
    return [s for s in commit.get_statuses() if s.context == CONTEXT and s.creator.login == author]


def regate_run(repo: Any, head: Head, author: str) -> Run | None:
    """The run whose comparison the head's status was decided from, when it failed and the PR now
    accepts regressions: the poster downloads its artifact to re-gate it (``update_status``'s ``regate``)."""
    pull = read_pull(repo, head, author)
    decisions = [d for d in map(Decision.parse, (s.description for s in _ours(repo.get_commit(head.sha), author)))
                 if d is not None]
    best = max(decisions, key=lambda d: d.run, default=None)
    if pull is None or not pull.accept or best is None or best.state != "failure" \
            or best.text.startswith("no comparison"):
        return None
    return best.run


def update_status(repo: Any, head: Head, *, completed: str | None, report: Path | None,
                  regate: tuple[Path, Run] | None, author: str) -> tuple[str, str]:
    """Set ``benchtrail/gate`` on the head and return what it is.

    ``completed``: the run's conclusion (a ``completed`` event; None for ``requested``); ``report``:
    its ``comment`` artifact; ``regate``: the ``comment`` artifact of :func:`regate_run`'s run, and that run.
    """
    pull = read_pull(repo, head, author)
    if pull is None:
        pull = PullState(False, (), False, None)
    commit = repo.get_commit(head.sha)
    target = pull.comment_url or head.html_url
    want: tuple[str, str] = ("", "")
    for _ in range(MAX_ROUNDS):
        statuses = _ours(commit, author)
        decided = [d for d in map(Decision.parse, (s.description for s in statuses)) if d is not None]
        own = []
        if regate is not None:
            own.append(report_decision(regate[0], head.sha, pull.accept, regate[1]))
        if completed is not None:
            mine = run_decision(report, head.sha, completed, head.run, pull.accept, bool(decided))
            own += [mine] if mine is not None else []
        running = [(r.id, r.run_attempt) for r in repo.get_workflow_runs(head_sha=head.sha)
                   if r.path == head.workflow_path and r.status != "completed"
                   and (r.id, r.run_attempt) != head.run]
        if completed is None:
            running.append(head.run)
        want = desired_status([*sorted(own, key=lambda d: d.run, reverse=True), *decided], running,
                              pull.selects, head.fork and not pull.labelled and pull.selects)
        if statuses and (statuses[0].state, statuses[0].description) == want:
            return want
        commit.create_status(state=want[0], description=want[1], context=CONTEXT,
                             **({"target_url": target} if target else {}))
    return want
