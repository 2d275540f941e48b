"""Build-over-build history: every series of every stored run along a branch's first-parent commits.

``collect_history`` walks ``git rev-list --first-parent REF`` (oldest first), takes each commit's
newest stored run (its commit pointers, as ``benchtrail.baseline`` reads them) and turns the run's
``results/*.json`` into one point per series. A commit with no stored run is a gap. ``write_history``
and ``load_history`` move a ``History`` to and from ``history.json`` (``docs/history.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail import jsonio
from benchtrail.environment import git
from benchtrail.errors import UserError
from benchtrail.results.io import load_results_paths
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.store import Store
from benchtrail.suite.serialization import from_plain

#: Version history of history.json:
#:   1 — first version.
HISTORY_SCHEMA_VERSION = 1

#: Page (and PNG) of the compilation series; every other page is a preset's execution series.
COMPILATION_PAGE = "compilation"


@dataclass(frozen=True)
class Point:
    """One series at one commit, from that commit's newest stored run.

    Values are in the series' unit (``us`` = µs per iteration, ``ms``, ``count``, ``bytes``);
    ``median``, ``iqr``, ``min``, ``max``, ``p25`` and ``p75`` are None when the case produced no
    sample (``status`` not ``ok``). ``p25``/``p75`` are numpy's linear-interpolation percentiles of
    the raw samples, the bounds of the IQR band in plots.
    """

    commit: str
    run_id: str
    attempt: int
    median: float | None
    iqr: float | None
    min: float | None
    max: float | None
    n: int
    status: str
    p25: float | None = None
    p75: float | None = None
    torch_version: str | None = None


@dataclass(frozen=True)
class Series:
    """One series (execution ``<run config id>``, compilation ``<module id>-<metric>``) over commits.

    ``presets`` are the presets of the runs that measured it (``docs/history.md``); ``points`` are
    in first-parent order, oldest first, one per commit that has a stored run holding the series.
    Names and other descriptive fields come from the newest point's record.
    """

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    device_name: str
    presets: tuple[str, ...]
    compile_config: str
    task: str | None
    points: tuple[Point, ...]


@dataclass(frozen=True)
class CommitRun:
    """A first-parent commit and the stored run used for it (``run_id`` None: no usable run, a gap)."""

    commit: str
    run_id: str | None = None
    attempt: int | None = None


@dataclass(frozen=True)
class History:
    """Series over the first-parent commits of ``ref`` (``head`` its sha) in the store ``store``.

    ``commits`` lists every commit walked, oldest first; ``skipped`` says why a stored run was not
    used (unreadable results), one line each.
    """

    ref: str
    head: str
    store: str
    commits: tuple[CommitRun, ...]
    series: tuple[Series, ...]
    skipped: tuple[str, ...] = ()

    def run_commits(self) -> list[str]:
        """The commits that have a run, oldest first: the x axis of every plot."""
        return [c.commit for c in self.commits if c.run_id is not None]


def short(commit: str) -> str:
    """A commit's 7-character short form, as git and the PR comment show it."""
    return commit[:7]


def first_parent_commits(repo: Path, ref: str, max_commits: int) -> tuple[str, list[str]]:
    """``(sha of ref, [sha, ...])``: up to ``max_commits`` first-parent commits ending at ``ref``, oldest first.

    Raises:
        UserError: ``repo`` is not a git repository, or ``ref`` does not name a commit in it.
    """
    if git(repo, "rev-parse", "--git-dir") is None:
        raise UserError(f"--repo {str(repo)!r} is not a git repository (or git is not installed)")
    head = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if head is None:
        raise UserError(f"--ref {ref!r}: git cannot resolve it to a commit in {repo}; "
                        "give a branch, tag, sha or an expression like HEAD~3")
    listed = git(repo, "rev-list", "--first-parent", f"--max-count={max_commits}", head) or head
    return head, list(reversed(listed.split()))


def usable_runs(store: Store, commit: str, devices: set[str] | None = None,
               torch_version: str | None = None) -> list[dict[str, Any]]:
    """The commit pointers of ``commit`` that qualify, newest first (pointers are written last, so
    each names a complete run). ``devices``/``torch_version``, when given, keep only runs that hold
    one of those devices / were measured with that torch version (``benchtrail.baseline``'s rule).
    """
    found = []
    for p in reversed(store.pointers(commit)):
        if not isinstance(p.get("run_id"), str) or not isinstance(p.get("attempt"), int):
            continue
        if devices is not None and not devices & set(p.get("devices", [])):
            continue
        if torch_version is not None and p.get("torch_version") != torch_version:
            continue
        found.append(p)
    return found


def fetch_results(store: Store, run_id: str, attempt: int) -> list[ResultsFile]:
    """Fetch a stored run's ``results/*.json`` (a local store reads them in place) and load them.

    Raises:
        UserError: the run or its results files are missing or invalid.
    """
    run_dir = store.fetch_run(run_id, attempt, patterns=("results/*.json",))
    return load_results_paths([run_dir])


def _percentiles(samples: tuple[float, ...]) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    p25, p75 = np.percentile(np.asarray(samples, dtype=np.float64), [25, 75])
    return float(p25), float(p75)


def _presets(record: BenchmarkRecord, results: ResultsFile) -> set[str]:
    """The presets that measured ``record`` in this run: its own presets that the run selected.

    Compilation records carry no presets; they take the run's.
    """
    run_presets = set(results.run.get("presets") or ())
    own = set(record.presets)
    return (own & run_presets) or own or run_presets


def point_of(commit: str, run_id: str, attempt: int, record: BenchmarkRecord, results: ResultsFile) -> Point:
    """The point of ``record`` (measured in run ``run_id``/``attempt`` of ``commit``)."""
    p25, p75 = _percentiles(tuple(record.samples))
    torch = results.environment.get("torch_version")
    return Point(commit, run_id, attempt, record.median, record.iqr, record.min, record.max, record.n,
                 record.status, p25, p75, torch if isinstance(torch, str) else None)


def _series(records: list[tuple[BenchmarkRecord, set[str]]], points: list[Point]) -> Series:
    newest = records[-1][0]
    presets = tuple(sorted(set().union(*(p for _, p in records))))
    return Series(newest.id, newest.name, newest.kind, newest.metric, newest.unit, newest.device_name, presets,
                  newest.compile_config, newest.task, tuple(points))


def collect_history(store: Store, repo: Path, ref: str = "HEAD", max_commits: int = 100, *,
                    devices: set[str] | None = None, torch_version: str | None = None,
                    pending: tuple[str, int, list[ResultsFile]] | None = None) -> History:
    """Collect every series over the first-parent commits of ``ref`` (at most ``max_commits``), oldest first.

    Per commit the newest qualifying run is used (see :func:`usable_runs`); when its results cannot be
    fetched or loaded, the next older one is tried and the reason lands in ``History.skipped``.
    ``pending`` is ``(run_id, attempt, results)`` of a run of ``ref``'s commit that has no pointer
    yet (the pipeline draws its dashboard before it stores the run); it is that commit's run.

    Raises:
        UserError: an unknown ``ref`` or a ``repo`` that is not a git repository; no commit walked has
            a usable stored run (an empty store, or the wrong one); the store cannot be read.
    """
    head, commits = first_parent_commits(repo, ref, max_commits)
    walked: list[CommitRun] = []
    records: dict[str, list[tuple[BenchmarkRecord, set[str]]]] = {}
    points: dict[str, list[Point]] = {}
    skipped: list[str] = []
    for commit in commits:
        used = CommitRun(commit)
        stored = [(p["run_id"], p["attempt"]) for p in usable_runs(store, commit, devices, torch_version)]
        for run_id, attempt in ([pending[:2]] if pending and commit == head else stored):
            try:
                files = pending[2] if pending and commit == head else fetch_results(store, run_id, attempt)
            except UserError as exc:
                skipped.append(f"{short(commit)} run {run_id}/{attempt}: {exc}")
                continue
            used = CommitRun(commit, run_id, attempt)
            for results in files:
                for record in results.benchmarks:
                    if any(p.commit == commit for p in points.get(record.id, ())):
                        continue  # the same series twice in one run: keep the first file's
                    records.setdefault(record.id, []).append((record, _presets(record, results)))
                    points.setdefault(record.id, []).append(point_of(commit, run_id, attempt, record, results))
            break
        walked.append(used)
    if not any(c.run_id for c in walked):
        raise UserError(f"--store {store.url}: no usable run of any of the {len(commits)} first-parent commit(s) "
                        f"of {ref} ({short(commits[0])}..{short(head)}); run `benchtrail pipeline` at one of "
                        "them, or pass the store and --repo that hold their runs")
    kind_order = {"execution": 0, "compilation": 1}
    series = sorted((_series(records[i], points[i]) for i in records),
                    key=lambda s: (kind_order.get(s.kind, 2), s.name, s.id))
    return History(ref, head, store.url, tuple(walked), tuple(series), tuple(skipped))


def history_to_dict(history: History) -> dict[str, Any]:
    """The JSON object of ``history.json``: series keyed by id, with ``schema_version``."""
    series = {}
    for s in history.series:
        body = dataclasses.asdict(s)
        body.pop("id")
        series[s.id] = body
    return {"schema_version": HISTORY_SCHEMA_VERSION, "ref": history.ref, "head": history.head,
            "store": history.store, "commits": [dataclasses.asdict(c) for c in history.commits],
            "series": series, "skipped": list(history.skipped)}


def write_history(path: Path, history: History) -> Path:
    """Write ``history.json`` atomically; refuses to overwrite an existing file.

    Raises:
        UserError: ``path`` exists or cannot be written.
    """
    return jsonio.write_json(path, history_to_dict(history), exclusive=True)


def load_history(path: Path) -> History:
    """Load and validate a ``history.json``.

    Raises:
        UserError: the file is missing or not JSON; its ``schema_version`` is missing, not an integer or
            newer than ``HISTORY_SCHEMA_VERSION``; a field is unknown, missing or of the wrong type
            (the message names the file and the field).
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
            raise UserError(f"{where}: series {sid!r} must be an object without an 'id' field (the key is the id)")
        series.append(from_plain({**body, "id": sid}, Series, where=f"{where}: series {sid!r}"))
    plain = {**obj, "series": []}
    history = from_plain(plain, History, where=where)
    return dataclasses.replace(history, series=tuple(series))


def page_groups(history: History) -> dict[str, list[Series]]:
    """``{page: [series, ...]}``: one page per preset with its execution series (presets sorted), then
    ``COMPILATION_PAGE`` with every compilation series (when there are any). Pages without series are left out.
    """
    pages: dict[str, list[Series]] = {}
    for preset in sorted({p for s in history.series if s.kind != "compilation" for p in s.presets}):
        pages[preset] = [s for s in history.series if s.kind != "compilation" and preset in s.presets]
    compilation = [s for s in history.series if s.kind == "compilation"]
    if compilation:
        pages[COMPILATION_PAGE] = compilation
    return pages


def aligned(series: Series, commits: Iterable[str]) -> list[Point | None]:
    """The series' points on ``commits`` (usually ``History.run_commits()``): None where it has none."""
    by_commit = {p.commit: p for p in series.points}
    return [by_commit.get(c) for c in commits]


def band(point: Point) -> tuple[float | None, float | None]:
    """The IQR band ``(low, high)`` of a point: p25..p75, else median ± IQR/2, else (None, None)."""
    if point.p25 is not None and point.p75 is not None:
        return point.p25, point.p75
    if point.median is not None and point.iqr is not None:
        return point.median - point.iqr / 2, point.median + point.iqr / 2
    return None, None
