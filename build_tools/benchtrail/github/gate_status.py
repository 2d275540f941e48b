"""The required gate: the commit status ``benchtrail/gate`` on a PR's head, set by the poster workflow.

The newest run's decision counts; each status ends with its run, ``(failure, run 123/1)``, so the head's
status history is the record. Notes in front name runs in progress and runs that measured nothing; a
completed run with neither record lost its result and fails the head. Every write is followed by a
read, so racing posters converge. comparison.json is untrusted (the PR's run) and must name the head.
Rules and states: docs/workflows.md, "The gate".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail.compare import gate
from benchtrail.errors import UserError
from benchtrail.github.configure import SELECTION_ERROR_VERDICT
from benchtrail.github.selection import (
    SAFE_LABEL,
    Names,
    SelectionError,
    accept_items,
    pr_requests,
)

CONTEXT = "benchtrail/gate"
#: GitHub keeps at most this many characters of a status description.
MAX_DESCRIPTION = 140
NO_SELECTION = "no benchmarks selected"
WAITING = f"waiting for a maintainer to add the {SAFE_LABEL} label (a fork's PR)"
LOST = "no result recorded; re-run its poster"
#: Room (characters) for the notes in front of a description; the newest running runs are named first.
NOTES_ROOM = 64
INVALID_SELECTION = "no comparison: the benchmark selection is invalid; see the PR comment"
#: Conclusions of a run without a comparison that decide nothing (it selected nothing); a fork's run
#: waiting for approval (``action_required``) is in progress instead.
NOTHING_FAILED = ("success", "skipped", "neutral")
#: How often a poster reads and writes before it leaves the status to the poster it raced with.
MAX_ROUNDS = 4

_TAG = re.compile(r" \((?P<state>success|failure), run (?P<run>\d+)/(?P<attempt>\d+)\)$")
#: Notes in front of a status: ``run 12/1 running; ``, ``run 11/1 measured nothing; ``.
_NOTE = re.compile(r"run (?P<run>\d+)/(?P<attempt>\d+) (?P<what>running|measured nothing); ")
LAST = "last result: "

Run = tuple[int, int]  # (run id, attempt)
Order = Callable[[Run], Any]  # a run's sort key: later runs sort higher
Status = tuple[str, str]  # (state, description) of a commit status


@dataclass(frozen=True)
class Decision:
    """What one benchmark run of the head decided: ``state`` success or failure, ``text`` why."""

    state: str
    text: str
    run: Run

    def description(self, prefix: str = "") -> str:
        """``<prefix><text> (<state>, run <id>/<attempt>)``, cut to GitHub's 140 characters."""
        tag = f" ({self.state}, run {self.run[0]}/{self.run[1]})"
        # One line of printable characters: series names come from the PR's untrusted comparison.json.
        text = "".join(c if c.isprintable() else "?" for c in " ".join(self.text.split()))
        room = MAX_DESCRIPTION - len(tag) - len(prefix)
        return prefix + (text if len(text) <= room else text[: room - 1] + "…") + tag


def parse_status(description: str) -> tuple[list[tuple[str, Run]], Decision | None]:
    """The notes ``[(what, run)]`` and the decision (or None) a status of ours names."""
    notes, pos = [], 0
    while m := _NOTE.match(description or "", pos):
        notes.append((m["what"], (int(m["run"]), int(m["attempt"]))))
        pos = m.end()
    body = (description or "")[pos:].removeprefix(LAST)
    m = _TAG.search(body)
    decision = Decision(m["state"], body[: m.start()], (int(m["run"]), int(m["attempt"]))) if m else None
    return notes, decision


def report_decision(report: Path, head_sha: str, accept: Sequence[str], run: Run) -> Decision:
    """Gate the untrusted ``report/comparison.json`` with ``accept``; a failure saying why when it is
    invalid, unreadable or not of ``head_sha``."""
    from benchtrail.compare.document import load_comparison

    try:
        comparison = load_comparison(report / "comparison.json")
        commit = comparison.head.get("commit") or ""
        if commit.lower() != head_sha.lower():
            raise UserError(
                f"{report / 'comparison.json'}: head.commit is {commit[:12]!r}, not the "
                f"run's head {head_sha[:12]}"
            )
        result = gate.check(comparison.rows, accept)
    except Exception as exc:
        return Decision("failure", f"no comparison: {exc}", run)
    n = len(result.failing)
    if n:
        names = ", ".join(dict.fromkeys(row.name for row in result.failing))
        return Decision("failure", f"{n} confirmed regression{'s' if n != 1 else ''}: {names}", run)
    notes = [f"{result.accepted} accepted"] if result.accepted else []
    notes += [f"{result.unconfirmed} unconfirmed, not gated"] if result.unconfirmed else []
    return Decision("success", "; ".join(["no confirmed regression", *notes]), run)


def run_decision(
    report: Path | None, head_sha: str, conclusion: str, run: Run, accept: Sequence[str], decided_before: bool
) -> Decision | None:
    """The decision of a completed run from its ``comment`` artifact folder ``report`` (may be None).

    A selection-error comment fails only a head without an earlier decision; a run that failed without
    a comparison fails; one that selected nothing decides nothing.
    """
    if report is not None and (report / "comparison.json").is_file():
        return report_decision(report, head_sha, accept, run)
    if report is not None and (report / "comment.json").is_file():
        from benchtrail.github.post import load_comment

        try:
            if load_comment(report / "comment.json").get("verdict") == SELECTION_ERROR_VERDICT:
                return None if decided_before else Decision("failure", INVALID_SELECTION, run)
        except UserError:
            pass  # an unreadable comment.json is no selection error
    if conclusion not in NOTHING_FAILED:
        return Decision(
            "failure", f"no comparison: the benchmark run ended {conclusion!r} before comparing", run
        )
    return None


def _newest(decisions: Sequence[Decision], order: Order) -> Decision | None:
    """The decision of the newest run (ties: the first in ``decisions``), or None."""
    return max(decisions, key=lambda d: order(d.run), default=None)


def desired_status(
    decisions: Sequence[Decision],
    running: Sequence[Run],
    selects: bool,
    waiting: bool,
    nothing: Run | None = None,
    order: Order = lambda run: run,
    announced: frozenset[Run] = frozenset(),
) -> Status:
    """``(state, description)`` of the head: the newest run's decision; ``pending`` while a newer run is
    in progress (the PR selects, the head has a result, or ``announced``) or a fork waits for its label;
    else ``success``. ``nothing``: a run whose poster found no decision, noted so none takes it for lost.
    """
    best = _newest(decisions, order)
    newer = sorted(
        (r for r in running if best is None or order(r) > order(best.run)), key=order, reverse=True
    )
    notes = f"run {nothing[0]}/{nothing[1]} measured nothing; " if nothing else ""
    if waiting and best is None:
        return "pending", notes + WAITING
    if newer and (selects or best is not None or set(newer) & announced):
        for run in newer:
            note = f"run {run[0]}/{run[1]} running; "
            if len(notes) + len(note) <= NOTES_ROOM or not notes:
                notes += note
        return "pending", notes + "no result yet" if best is None else best.description(notes + LAST)
    if best is not None:
        return best.state, best.description(notes + LAST if notes else "")
    return "success", notes + NO_SELECTION


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
    head_label: str = ""  # <head repository owner>:<head branch>, to find a fork's PR


def head_from_event(payload: dict[str, Any]) -> Head:
    """:class:`Head` of a ``workflow_run`` payload; UserError for any other payload."""
    try:
        wr, repo = payload["workflow_run"], payload["repository"]["full_name"]
        pulls = wr.get("pull_requests") or []
        head_repo = (wr.get("head_repository") or {}).get("full_name", repo)
        return Head(
            repo,
            wr["head_sha"],
            (int(wr["id"]), int(wr.get("run_attempt") or 1)),
            wr["path"],
            head_repo != repo,
            int(pulls[0]["number"]) if pulls else None,
            wr.get("html_url"),
            f"{head_repo.split('/')[0]}:{wr.get('head_branch') or ''}",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a workflow_run event payload ({type(exc).__name__}: {exc})") from exc


@dataclass(frozen=True)
class PullState:
    """What the PR asks for now: presets selected, ``benchmarks-accept`` globs, the fork's label."""

    selects: bool
    accept: Names
    labelled: bool
    comment_url: str | None


def read_pull(repo: Any, head: Head, author: str) -> PullState:
    """What the PR of ``head`` asks for: the event's PR, else the open PR from ``head.head_label`` (a
    fork's). A fork's head without one selects benchmarks and waits for its label."""
    from benchtrail.github.post import find_ours

    if head.pr_number is not None:
        pull = repo.get_pull(head.pr_number)
    else:
        pull = next(
            (
                p
                for p in repo.get_pulls(state="open", head=head.head_label)
                if p.head.sha.lower() == head.sha.lower()
            ),
            None,
        )
        if pull is None:
            return PullState(head.fork, (), False, None)
    labels = [label.name for label in pull.labels]
    try:
        accept = accept_items(pull.title, pull.body)
    except SelectionError:
        accept = ()
    return PullState(
        bool(pr_requests(pull.title, pull.body, labels)[0]),
        accept,
        SAFE_LABEL in labels,
        next((c.html_url for c, _ in find_ours(pull.get_issue_comments(), author)), None),
    )


@dataclass
class _History:
    """The head's statuses of ours, parsed; ``latest``: the newest of the context by anyone."""

    decisions: list[Decision]
    announced: set[Run]  # runs a pending status named
    settled: set[Run]  # runs with a decision or a ``measured nothing`` note
    latest: Status | None

    @classmethod
    def read(cls, commit: Any, author: str) -> _History:
        every = [s for s in commit.get_statuses() if s.context == CONTEXT]
        parsed = [parse_status(s.description) for s in every if s.creator.login == author]
        notes = {note for found, _ in parsed for note in found}
        nothing = {run for what, run in notes if what == "measured nothing"}
        decisions = [d for _, d in parsed if d is not None]
        # A run's own poster outranks a later poster that took its result for lost.
        return cls(
            _without_lost(decisions, nothing),
            {run for what, run in notes if what == "running"},
            nothing | {d.run for d in decisions},
            (every[0].state, every[0].description) if every else None,
        )


def _without_lost(decisions: list[Decision], runs: set[Run | None]) -> list[Decision]:
    """``decisions`` less those that took the result of one of ``runs`` for lost."""
    return [d for d in decisions if not (d.text.startswith(LOST[:18]) and d.run in runs)]


def _runs(repo: Any, head: Head) -> dict[Run, Any]:
    """The PR runs of the head's benchmark workflow (each run's latest attempt), by (id, attempt)."""
    return {
        (r.id, r.run_attempt): r
        for r in repo.get_workflow_runs(head_sha=head.sha, event="pull_request")
        if r.path == head.workflow_path
    }


def _order(runs: dict[Run, Any]) -> Order:
    """Runs in the order they started (a re-run is newest); an unlisted attempt from its run's creation,
    an unlisted run from the epoch."""

    def seconds(when: Any) -> float:
        return when.timestamp() if when is not None else 0.0

    started = {run: seconds(r.run_started_at or r.created_at) for run, r in runs.items()}
    created = {run[0]: seconds(r.created_at) for run, r in runs.items()}
    return lambda run: (started.get(run, created.get(run[0], 0.0)), run)


def _in_progress(run: Any) -> bool:
    """Not completed, or waiting for a maintainer to approve a fork's run."""
    return run.status != "completed" or run.conclusion == "action_required"


def regate_run(repo: Any, head: Head, author: str) -> Run | None:
    """The run whose comparison failed the head, when the PR now accepts regressions, to gate again."""
    best = _newest(_History.read(repo.get_commit(head.sha), author).decisions, _order(_runs(repo, head)))
    failed = best is not None and best.state == "failure" and not best.text.startswith("no ")
    return best.run if failed and read_pull(repo, head, author).accept else None


def update_status(
    repo: Any,
    head: Head,
    *,
    completed: str | None,
    report: Path | None,
    regate: tuple[Path, Run] | None,
    author: str,
) -> Status:
    """Set ``benchtrail/gate`` on the head and return it.

    ``completed``: the run's conclusion (None for ``requested``); ``report``: its ``comment`` artifact;
    ``regate``: :func:`regate_run`'s run and its artifact. A lost result (see the module) fails the head.
    """
    pull = read_pull(repo, head, author)
    commit = repo.get_commit(head.sha)
    target = pull.comment_url or head.html_url
    regated = report_decision(regate[0], head.sha, pull.accept, regate[1]) if regate is not None else None
    want: Status = ("", "")
    for _ in range(MAX_ROUNDS):
        history, runs = _History.read(commit, author), _runs(repo, head)
        order = _order(runs)
        mine = (
            None
            if completed is None
            else run_decision(report, head.sha, completed, head.run, pull.accept, bool(history.decisions))
        )
        own = [d for d in (regated, mine) if d is not None]
        running = [run for run, r in runs.items() if _in_progress(r) and run != head.run]
        if completed is None and (head.run not in runs or _in_progress(runs[head.run])):
            running.append(head.run)
        # Recorded where a later poster would otherwise take this run's result for lost (see ``lost``).
        nothing = (
            head.run
            if completed is not None
            and mine is None
            and (head.run in history.announced or completed not in NOTHING_FAILED)
            else None
        )
        earlier = _without_lost(history.decisions, {nothing})
        best = _newest([*own, *earlier], order)
        lost = [
            Decision("failure", LOST, run)
            for run, r in runs.items()
            if not _in_progress(r)
            and run != head.run
            and run not in history.settled
            and (run in history.announced or r.conclusion not in NOTHING_FAILED)
            and (best is None or order(run) > order(best.run))
        ]
        want = desired_status(
            [*own, *lost, *earlier],
            running,
            pull.selects,
            head.fork and not pull.labelled and pull.selects,
            nothing,
            order,
            frozenset(history.announced),
        )
        if history.latest == want:
            return want
        commit.create_status(
            state=want[0], description=want[1], context=CONTEXT, **({"target_url": target} if target else {})
        )
    return want
