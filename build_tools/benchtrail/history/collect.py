"""Build-over-build history: every series of every stored run along a branch's first-parent commits.

One point per series of a commit's newest run, holding every run's median; a commit without a stored
run is a gap. ``history.json`` is described in docs/history.md.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail import jsonio
from benchtrail.compare.document import load_comparison
from benchtrail.compare.stored_runs import StoredRuns
from benchtrail.errors import UserError
from benchtrail.git import first_parents, is_repository, resolve_commit, short_sha
from benchtrail.history.series import (
    CommitRun,
    History,
    Point,
    RunValue,
    Series,
    check_history,
    check_preset_page,
)
from benchtrail.results.io import load_results_paths
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.stats.inference import NOISE_LIMIT
from benchtrail.store import Store
from benchtrail.suite.serialization import from_plain

#: Version history of history.json:
#:   1 — first version.
#:   2 — points gain runs: every run of the commit that holds the series (median, noisy, mark).
HISTORY_SCHEMA_VERSION = 2
#: A series at one commit: the record of the commit's run, the presets that measured it, its point.
_Measured = tuple[BenchmarkRecord, set[str], Point]


def first_parent_commits(repo: Path, ref: str, max_commits: int) -> tuple[str, list[str]]:
    """``(sha of ref, [sha, ...])``: up to ``max_commits`` first-parent commits ending at ``ref``, oldest
    first; UserError when ``repo`` is no git repository or ``ref`` names no commit in it."""
    if not is_repository(repo):
        raise UserError(f"--repo {str(repo)!r} is not a git repository (or git is not installed)")
    head = resolve_commit(repo, ref)
    if head is None:
        raise UserError(
            f"--ref {ref!r}: git cannot resolve it to a commit in {repo}; "
            "give a branch, tag, sha or an expression like HEAD~3"
        )
    return head, list(reversed(first_parents(repo, head, max_commits) or [head]))


def usable_runs(store: Store, commit: str, problems: list[str], trust: Any = None) -> list[dict[str, Any]]:
    """The commit pointers of ``commit`` that ``trust`` (None: any) trusts, newest first; pointers are
    written last, so each names a complete run. ``problems`` gets a message per pointer that cannot be
    read, names no run, or is not trusted."""

    def wanted(p: dict[str, Any]) -> bool:
        if isinstance(p.get("run_id"), str) and isinstance(p.get("attempt"), int):
            return True
        problems.append(
            f"commit pointer of {commit} names no run (run_id {p.get('run_id')!r}, "
            f"attempt {p.get('attempt')!r}); allowed: a run id string and an attempt number"
        )
        return False

    stored = StoredRuns(store, commit, trust, wanted=wanted)
    problems.extend(stored.unreadable)
    found = []
    for p, why in stored:
        if why:
            problems.append(f"not a trusted run: {why}")
        else:
            found.append(p)
    return found


def fetch_results(
    store: Store, run_id: str, attempt: int, listed: list[str] | None = None, also: tuple[str, ...] = ()
) -> list[ResultsFile]:
    """Fetch and load a stored run's results files (``listed`` by its pointer, else ``results/*.json``),
    fetching the patterns ``also`` too; UserError when missing, invalid, or a listed name is unsafe."""
    from benchtrail.store.base import check_relative_name

    for name in listed or ():
        check_relative_name(name, f"commit pointer of run {run_id}/{attempt}: results")
    run_dir = store.fetch_run(run_id, attempt, patterns=(*(listed or ("results/*.json",)), *also))
    return load_results_paths([run_dir / name for name in listed] if listed else [run_dir])


def run_marks(run_dir: Path) -> dict[str, str]:
    """``{series id: mark}`` of the regressed rows of ``run_dir/comparison.json``; {} without one."""
    try:
        rows = load_comparison(run_dir / "comparison.json").rows
    except UserError:
        return {}
    return {r.id: r.mark for r in rows if r.verdict == "regressed" and r.mark}


def point_of(
    commit: str,
    run_id: str,
    attempt: int,
    record: BenchmarkRecord,
    results: ResultsFile,
    marks: dict[str, str],
) -> Point:
    """The point of ``record`` at ``commit``, with its one run in ``runs``."""
    p25 = p75 = None
    if record.samples:
        p25, p75 = map(float, np.percentile(record.samples, [25, 75]))
    torch = results.environment.get("torch_version")
    noisy = bool(record.median and record.iqr and record.iqr / record.median > NOISE_LIMIT)
    run = RunValue(run_id, attempt, record.median, noisy, marks.get(record.id))
    return Point(
        commit,
        run_id,
        attempt,
        record.median,
        record.iqr,
        record.min,
        record.max,
        record.n,
        record.status,
        p25,
        p75,
        torch if isinstance(torch, str) else None,
        (run,),
    )


def _series(measured: list[_Measured]) -> Series:
    """A series from its (record, presets, point) at each commit, oldest first."""
    newest = measured[-1][0]
    presets = tuple(sorted(set().union(*(p for _, p, _ in measured))))
    return Series(
        **dataclasses.asdict(newest.key),
        presets=presets,
        compile_config=newest.compile_config,
        task=newest.task,
        points=tuple(point for _, _, point in measured),
    )


def collect_history(
    store: Store,
    repo: Path,
    ref: str = "HEAD",
    max_commits: int = 100,
    *,
    pending: tuple[str, int, list[ResultsFile]] | None = None,
    trust: Any = None,
) -> History:
    """Every series over the first-parent commits of ``ref`` (at most ``max_commits``), oldest first.

    Each series of a commit's newest run gets a point with the median of every run that holds it. Runs
    that are untrusted (``trust`` None: any), unreadable, or carry a preset that cannot name a dashboard
    page land in ``History.skipped`` with the reason. ``pending``: ``(run_id, attempt, results)`` of a
    not yet stored run of ``ref``'s commit, its newest.
    Raises UserError for an unknown ``ref``, no git ``repo``, an unreadable store, or no usable run.
    """
    head, commits = first_parent_commits(repo, ref, max_commits)
    walked: list[CommitRun] = []
    measured: dict[str, list[_Measured]] = {}
    skipped: list[str] = []
    for commit in commits:
        used = CommitRun(commit)
        problems: list[str] = []
        mine = {pending[:2]: pending[2]} if pending and commit == head else {}
        listed = {
            (p["run_id"], p["attempt"]): p["results"] if isinstance(p.get("results"), list) else None
            for p in usable_runs(store, commit, problems, trust)
        }
        skipped.extend(f"{short_sha(commit)}: {problem}" for problem in problems)
        runs: list[dict[str, _Measured]] = []  # per run read, newest first
        for run in {**mine, **listed}:  # (run id, attempt)
            found: dict[str, _Measured] = {}
            try:
                files = (
                    mine[run]
                    if run in mine
                    else fetch_results(store, *run, listed[run], ("comparison.json",))
                )
                marks = run_marks(store.run_dir(*run))
                for results in files:
                    run_presets = set(results.run.get("presets") or ())
                    # the same series twice in one run: keep the first file's
                    for record in results.benchmarks:
                        # its own presets that the run selected (compilation records take the run's)
                        own = set(record.presets)
                        presets = (own & run_presets) or own or run_presets
                        for preset in sorted(presets):  # every one, or the run is not used
                            check_preset_page(
                                preset,
                                f"run {run[0]}/{run[1]} ({store.run_url(*run)}): series {record.name!r}",
                            )
                        found.setdefault(
                            record.id, (record, presets, point_of(commit, *run, record, results, marks))
                        )
            except UserError as exc:
                skipped.append(f"{short_sha(commit)} run {run[0]}/{run[1]}: {exc}")
                continue
            used = used if used.run_id else CommitRun(commit, *run)
            runs.append(found)
        walked.append(used)
        # the newest run's series
        for sid, (record, presets, point) in (runs[0] if runs else {}).items():
            values = tuple(read[sid][2].runs[0] for read in runs if sid in read)
            measured.setdefault(sid, []).append((record, presets, dataclasses.replace(point, runs=values)))
    if not any(c.run_id for c in walked):
        not_used = f". Runs not used: {'; '.join(skipped)}" if skipped else ""
        raise UserError(
            f"--store {store.url}: no usable run of any of the {len(commits)} first-parent "
            f"commit(s) of {ref} ({short_sha(commits[0])}..{short_sha(head)}); run `benchtrail pipeline` "
            f"at one of them, or pass the store and --repo that hold their runs{not_used}"
        )
    series = sorted(map(_series, measured.values()), key=lambda s: (s.kind != "execution", s.name, s.id))
    return History(ref, head, store.url, tuple(walked), tuple(series), tuple(skipped))


def history_to_dict(history: History) -> dict[str, Any]:
    """The JSON object of ``history.json``: series keyed by id, with ``schema_version``."""
    plain = dataclasses.asdict(history)
    return {
        "schema_version": HISTORY_SCHEMA_VERSION,
        **plain,
        "series": {body.pop("id"): body for body in plain["series"]},
    }


def write_history(path: Path, history: History) -> Path:
    """Write ``history.json`` atomically; UserError when ``path`` exists or cannot be written."""
    return jsonio.write_json(path, history_to_dict(history), exclusive=True)


def load_history(path: Path) -> History:
    """Load and validate a ``history.json``.

    Raises UserError, naming the file and the field, when it is missing or not JSON, its version is
    absent or newer, or a field is unknown, missing, mistyped or not allowed (:func:`check_history`).
    """
    obj = jsonio.read_json(path, kind="history file", supported=HISTORY_SCHEMA_VERSION)
    obj.pop("schema_version")
    where = f"history file {path}"
    series_obj = obj.get("series")
    if not isinstance(series_obj, dict):
        raise UserError(f"{where}: field 'series' must be an object keyed by series id, got {series_obj!r}")
    series = []
    for sid, body in series_obj.items():
        if not isinstance(body, dict) or "id" in body:
            raise UserError(
                f"{where}: series {sid!r} must be an object without an 'id' field (the key is the id)"
            )
        series.append(from_plain({**body, "id": sid}, Series, where=f"{where}: series {sid!r}"))
    history = dataclasses.replace(
        from_plain({**obj, "series": []}, History, where=where), series=tuple(series)
    )
    check_history(history, where)
    return history
