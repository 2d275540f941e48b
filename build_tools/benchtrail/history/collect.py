"""Build-over-build history: every series of every stored run along a branch's first-parent commits.

``collect_history`` walks ``git rev-list --first-parent REF`` (oldest first), takes each commit's
newest stored run (its commit pointers, as ``benchtrail.compare.baseline`` reads them) and turns the run's
``results/*.json`` into one point per series. A commit with no stored run is a gap. ``write_history``
and ``load_history`` move a ``History`` to and from ``history.json`` (``docs/history.md``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail import jsonio
from benchtrail.git import first_parents, is_repository, resolve_commit
from benchtrail.errors import UserError
from benchtrail.results.io import PRESET_NAME_RULE, load_results_paths, unsafe_preset_name
from benchtrail.results.schema import KINDS, STATUSES, BenchmarkRecord, ResultsFile
from benchtrail.store import Store
from benchtrail.suite.serialization import from_plain

#: Version history of history.json:
#:   1 — first version.
HISTORY_SCHEMA_VERSION = 1

#: Page (and PNG) of the compilation series; every other page is a preset's execution series.
COMPILATION_PAGE = "compilation"
#: Page of the execution series that no preset selected (``presets: []``).
NO_PRESET_PAGE = "no-preset"
#: Names the dashboard uses itself: a preset of one of these names (in any case) is refused.
RESERVED_PAGES = (COMPILATION_PAGE, "index", NO_PRESET_PAGE)


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


def check_preset_page(preset: str, where: str) -> str:
    """Return ``preset`` when it can name a dashboard page (``<preset>.png``, ``<preset>.html``).

    Raises:
        UserError: naming ``where`` (the file or series it came from) and the preset: a name that is
            not ``PRESET_NAME_RULE`` (a path such as ``../x``, spaces, markup), or one of ``RESERVED_PAGES``.
    """
    if unsafe_preset_name(preset):
        raise UserError(f"{where}: preset {preset!r} cannot name a dashboard page (<preset>.png, <preset>.html); "
                        f"allowed: {PRESET_NAME_RULE}")
    if preset.lower() in RESERVED_PAGES:
        raise UserError(f"{where}: preset {preset!r} has the name of a page the dashboard writes itself "
                        f"({preset.lower()}.html); reserved: {', '.join(RESERVED_PAGES)}; rename the preset")
    return preset


def short(commit: str) -> str:
    """A commit's 7-character short form, as git and the PR comment show it."""
    return commit[:7]


def first_parent_commits(repo: Path, ref: str, max_commits: int) -> tuple[str, list[str]]:
    """``(sha of ref, [sha, ...])``: up to ``max_commits`` first-parent commits ending at ``ref``, oldest first.

    Raises:
        UserError: ``repo`` is not a git repository, or ``ref`` does not name a commit in it.
    """
    if not is_repository(repo):
        raise UserError(f"--repo {str(repo)!r} is not a git repository (or git is not installed)")
    head = resolve_commit(repo, ref)
    if head is None:
        raise UserError(f"--ref {ref!r}: git cannot resolve it to a commit in {repo}; "
                        "give a branch, tag, sha or an expression like HEAD~3")
    listed = " ".join(first_parents(repo, head, max_commits)) or head
    return head, list(reversed(listed.split()))


def usable_runs(store: Store, commit: str, devices: set[str] | None = None,
               torch_version: str | None = None, problems: list[str] | None = None,
               trust: Any = None) -> list[dict[str, Any]]:
    """The commit pointers of ``commit`` that qualify, newest first (pointers are written last, so
    each names a complete run). ``devices``/``torch_version``, when given, keep only runs that hold
    one of those devices / were measured with that torch version; ``trust`` (``benchtrail.github.trust.Trust``,
    default: every run) keeps only the runs it trusts.

    ``problems``, when given, receives one message per pointer that cannot be read (corrupt, newer
    schema; ``store.pointers`` skips those and tells in its list's ``unreadable``), names no run, or
    is not trusted (with the trust's reason).
    """
    found = []
    pointers = store.pointers(commit)
    if problems is not None:
        problems.extend(getattr(pointers, "unreadable", ()))
    for p in reversed(pointers):
        if not isinstance(p.get("run_id"), str) or not isinstance(p.get("attempt"), int):
            if problems is not None:
                problems.append(f"commit pointer of {commit} names no run (run_id {p.get('run_id')!r}, "
                                f"attempt {p.get('attempt')!r}); allowed: a run id string and an attempt number")
            continue
        if devices is not None and not devices & set(p.get("devices", [])):
            continue
        if torch_version is not None and p.get("torch_version") != torch_version:
            continue
        why = trust.check(p) if trust is not None else None
        if why:
            if problems is not None:
                problems.append(f"not a trusted run: {why}")
            continue
        found.append(p)
    return found


def fetch_results(store: Store, run_id: str, attempt: int, listed: list[str] | None = None) -> list[ResultsFile]:
    """Fetch a stored run's results files (``listed``, the names its pointer lists, else
    ``results/*.json``; a local store reads them in place) and load them.

    Raises:
        UserError: the run or its results files are missing or invalid, or a listed name is unsafe.
    """
    from benchtrail.store.base import check_relative_name

    if listed:
        for name in listed:
            check_relative_name(name, f"commit pointer of run {run_id}/{attempt}: results")
        run_dir = store.fetch_run(run_id, attempt, patterns=tuple(listed))
        return load_results_paths([run_dir / name for name in listed])
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


def _check_presets(files: list[ResultsFile], where: str) -> None:
    """Every preset a record of ``files`` would be drawn under can name a dashboard page.

    Raises:
        UserError: as :func:`check_preset_page`, naming ``where`` and the series.
    """
    for results in files:
        for record in results.benchmarks:
            for preset in sorted(_presets(record, results)):
                check_preset_page(preset, f"{where}: series {record.name!r}")


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
                    pending: tuple[str, int, list[ResultsFile]] | None = None, trust: Any = None) -> History:
    """Collect every series over the first-parent commits of ``ref`` (at most ``max_commits``), oldest first.

    Per commit the newest qualifying run is used (see :func:`usable_runs`); when its results cannot be
    fetched or loaded, the next older one is tried and the reason lands in ``History.skipped``.
    ``pending`` is ``(run_id, attempt, results)`` of a run of ``ref``'s commit that has no pointer
    yet (the pipeline draws its dashboard before it stores the run); it is that commit's run.
    ``trust`` (``benchtrail.github.trust.Trust``; default: every run) decides which stored runs count; each
    run it refuses lands in ``History.skipped`` with the reason.

    A run whose records carry a preset that cannot name a dashboard page (:func:`check_preset_page`;
    the results loader already refuses names that are not safe as file names) is not used either, and
    a commit pointer that cannot be read lands in ``skipped`` too.

    Raises:
        UserError: an unknown ``ref`` or a ``repo`` that is not a git repository; no commit walked has
            a usable stored run (an empty store, or the wrong one; the message lists the runs not
            used and why); the store cannot be read.
    """
    head, commits = first_parent_commits(repo, ref, max_commits)
    walked: list[CommitRun] = []
    records: dict[str, list[tuple[BenchmarkRecord, set[str]]]] = {}
    points: dict[str, list[Point]] = {}
    skipped: list[str] = []
    for commit in commits:
        used = CommitRun(commit)
        problems: list[str] = []
        stored = [(p["run_id"], p["attempt"], p.get("results") if isinstance(p.get("results"), list) else None)
                  for p in usable_runs(store, commit, devices, torch_version, problems, trust)]
        skipped.extend(f"{short(commit)}: {problem}" for problem in problems)
        for run_id, attempt, listed in ([(*pending[:2], None)] if pending and commit == head else stored):
            try:
                files = pending[2] if pending and commit == head else fetch_results(store, run_id, attempt, listed)
                _check_presets(files, f"run {run_id}/{attempt} ({store.run_url(run_id, attempt)})")
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
        not_used = f". Runs not used: {'; '.join(skipped)}" if skipped else ""
        raise UserError(f"--store {store.url}: no usable run of any of the {len(commits)} first-parent commit(s) "
                        f"of {ref} ({short(commits[0])}..{short(head)}); run `benchtrail pipeline` at one of "
                        f"them, or pass the store and --repo that hold their runs{not_used}")
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
            newer than ``HISTORY_SCHEMA_VERSION``; a field is unknown, missing or of the wrong type; a
            value is not allowed (see :func:`check_history`). The message names the file and the field.
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
    history = dataclasses.replace(from_plain(plain, History, where=where), series=tuple(series))
    check_history(history, where)
    return history


def check_history(history: History, where: str = "history") -> None:
    """Check the values of a history, as ``collect_history`` makes them.

    ``commits`` is not empty and lists each commit once (a run id with an attempt ≥ 1, or neither);
    each series has a known ``kind`` and presets that can name a page (:func:`check_preset_page`);
    each point is at a commit of ``commits`` with that commit's run, at most one per commit, in the
    order of ``commits`` (first parent, oldest first), with a known ``status``, ``n`` ≥ 0 and finite
    numbers (or null) for ``median``, ``iqr``, ``min``, ``max``, ``p25`` and ``p75``.

    Raises:
        UserError: naming ``where``, the series and point, the field, the value and what is allowed.
    """
    if not history.commits:
        raise UserError(f"{where}: field 'commits' is empty; allowed: the first-parent commits walked (at least "
                        "one), as `benchtrail history` writes them")
    order: dict[str, int] = {}
    for i, c in enumerate(history.commits):
        at = f"{where}: commits[{i}]"
        if c.commit in order:
            raise UserError(f"{at}: commit {c.commit!r} is listed twice (also commits[{order[c.commit]}]); "
                            "allowed: each commit once")
        order[c.commit] = i
        if (c.run_id is None) != (c.attempt is None) or (
                c.attempt is not None and (isinstance(c.attempt, bool) or c.attempt < 1)):
            raise UserError(f"{at}: run_id {c.run_id!r} with attempt {c.attempt!r}; allowed: a run id with an "
                            "attempt number from 1, or both null (no run)")
    runs = {c.commit: (c.run_id, c.attempt) for c in history.commits}
    for s in history.series:
        at = f"{where}: series {s.id!r} ({s.name})"
        if s.kind not in KINDS:
            raise UserError(f"{at}: field 'kind' is {s.kind!r}; allowed: {', '.join(KINDS)}")
        for preset in s.presets:
            check_preset_page(preset, at)
        last, seen = -1, set()
        for j, p in enumerate(s.points):
            pat = f"{at}: points[{j}]"
            if p.commit not in order:
                raise UserError(f"{pat}: commit {p.commit!r} is not in 'commits'; allowed: a commit listed there")
            if runs[p.commit] != (p.run_id, p.attempt):
                used = "no run" if runs[p.commit][0] is None else "run {}/{}".format(*runs[p.commit])
                raise UserError(f"{pat}: run {p.run_id}/{p.attempt} at commit {p.commit}, but 'commits' gives "
                                f"{used} for it; allowed: the run 'commits' lists")
            if p.commit in seen:
                raise UserError(f"{pat}: a second point at commit {p.commit}; allowed: one point per commit")
            seen.add(p.commit)
            if order[p.commit] < last:
                raise UserError(f"{pat}: commit {p.commit} comes before the previous point's in 'commits'; allowed: "
                                "points in the order of 'commits' (first parent, oldest first)")
            last = order[p.commit]
            if p.status not in STATUSES:
                raise UserError(f"{pat}: field 'status' is {p.status!r}; allowed: {', '.join(STATUSES)}")
            if isinstance(p.n, bool) or p.n < 0:
                raise UserError(f"{pat}: field 'n' is {p.n!r}; allowed: a whole number from 0")
            for name in ("median", "iqr", "min", "max", "p25", "p75"):
                value = getattr(p, name)
                if value is not None and not math.isfinite(value):
                    raise UserError(f"{pat}: field {name!r} is {value!r}; allowed: a finite number or null")


def page_groups(history: History) -> dict[str, list[Series]]:
    """``{page: [series, ...]}``: one page per preset with its execution series (presets sorted), then
    ``NO_PRESET_PAGE`` with the execution series of no preset, then ``COMPILATION_PAGE`` with every
    compilation series. Pages without series are left out. Page names become file names.

    Raises:
        UserError: a preset that cannot name a page (:func:`check_preset_page`), or two presets that
            differ only in case (one file on a case-insensitive file system).
    """
    execution = [s for s in history.series if s.kind != "compilation"]
    by_lower: dict[str, str] = {}
    for s in execution:
        for preset in s.presets:
            check_preset_page(preset, f"series {s.id!r} ({s.name})")
            if by_lower.setdefault(preset.lower(), preset) != preset:
                raise UserError(f"series {s.id!r} ({s.name}): presets {by_lower[preset.lower()]!r} and {preset!r} "
                                "differ only in case; their pages would be one file on a case-insensitive file "
                                "system; allowed: preset names that differ in more than case")
    pages: dict[str, list[Series]] = {}
    for preset in sorted({p for s in execution for p in s.presets}):
        pages[preset] = [s for s in execution if preset in s.presets]
    untagged = [s for s in execution if not s.presets]
    if untagged:
        pages[NO_PRESET_PAGE] = untagged
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
