"""The history's data model: ``History`` (the first-parent commits walked, each with its run or a gap) holds
one ``Series`` per benchmark series, each a tuple of ``Point`` (one per commit with a run, oldest first).

Also what every reader of a history shares: :func:`check_history` (the values a valid history holds),
:func:`page_groups` (the dashboard's pages), :func:`aligned` and :func:`band` (plot helpers) and
:func:`short`. :mod:`benchtrail.history.collect` builds a ``History`` from a store and reads and writes
``history.json``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from benchtrail.errors import UserError
from benchtrail.results.io import PRESET_NAME_RULE, unsafe_preset_name
from benchtrail.results.schema import KINDS, STATUSES, SeriesKey

#: Page (and PNG) of the compilation series; every other page is a preset's execution series.
COMPILATION_PAGE = "compilation"
#: Page of the execution series that no preset selected (``presets: []``).
NO_PRESET_PAGE = "no-preset"
#: Names the dashboard uses itself: a preset of one of these names (in any case) is refused.
RESERVED_PAGES = (COMPILATION_PAGE, "index", NO_PRESET_PAGE)


@dataclass(frozen=True)
class RunValue:
    """One run's median of a series at a commit (:attr:`Point.runs`). ``noisy``: its IQR/median is above
    ``benchtrail.stats.inference.NOISE_LIMIT``; ``mark``: the mark of its comparison row when that row is
    ``regressed`` (``unconfirmed``, ``confirmed``…), else None."""

    run_id: str
    attempt: int
    median: float | None
    noisy: bool = False
    mark: str | None = None


@dataclass(frozen=True)
class Point:
    """One series at one commit: the fields of that commit's newest stored run, and ``runs``, every run of
    the commit that holds the series (newest first, this point's run first; empty in history files of
    schema 1, which kept one run per commit). :attr:`value` is the commit's value.

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
    runs: tuple[RunValue, ...] = ()

    @property
    def value(self) -> float | None:
        """The median of the runs' medians (``median`` without ``runs``); None when none has one."""
        medians = [r.median for r in self.runs or (self,) if r.median is not None]
        return statistics.median(medians) if medians else None


@dataclass(frozen=True)
class Series(SeriesKey):
    """One series (execution ``<run config id>``, compilation ``<module id>-<metric>``) over commits.

    ``presets`` are the presets of the runs that measured it (``docs/history.md``); ``points`` are
    in first-parent order, oldest first, one per commit whose newest run holds the series.
    Its key (``id`` … ``device_name``, :class:`benchtrail.results.schema.SeriesKey`) and the other
    descriptive fields come from the newest point's record.
    """

    presets: tuple[str, ...]
    compile_config: str
    task: str | None
    points: tuple[Point, ...]


@dataclass(frozen=True)
class CommitRun:
    """A first-parent commit and its newest usable stored run (``run_id`` None: no usable run, a gap)."""

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


def check_preset_page(preset: str, where: str) -> None:
    """Refuse a ``preset`` that cannot name a dashboard page (``<preset>.png``, ``<preset>.html``).

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


def short(commit: str) -> str:
    """A commit's 7-character short form, as git and the PR comment show it."""
    return commit[:7]


def check_history(history: History, where: str) -> None:
    """Check the values of a history, as ``collect_history`` makes them.

    ``commits`` is not empty and lists each commit once (a run id with an attempt ≥ 1, or neither);
    each series has a known ``kind`` and presets that can name a page (:func:`check_preset_page`);
    each point is at a commit of ``commits`` with that commit's run, at most one per commit, in the
    order of ``commits`` (first parent, oldest first), with a known ``status``, ``n`` ≥ 0 and finite
    numbers (or null) for ``median``, ``iqr``, ``min``, ``max``, ``p25``, ``p75`` and each run's median, its
    own run first in ``runs``.

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
            listed = history.commits[order[p.commit]]
            if (listed.run_id, listed.attempt) != (p.run_id, p.attempt):
                used = "no run" if listed.run_id is None else f"run {listed.run_id}/{listed.attempt}"
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
            if p.runs and (p.runs[0].run_id, p.runs[0].attempt) != (p.run_id, p.attempt):
                raise UserError(f"{pat}: runs[0] is run {p.runs[0].run_id}/{p.runs[0].attempt}; allowed: the "
                                f"point's own run {p.run_id}/{p.attempt} first")
            values = [(name, getattr(p, name)) for name in ("median", "iqr", "min", "max", "p25", "p75")]
            for name, value in values + [(f"runs[{k}].median", r.median) for k, r in enumerate(p.runs)]:
                if value is not None and not math.isfinite(value):
                    raise UserError(f"{pat}: field {name!r} is {value!r}; allowed: a finite number or null")


def page_groups(history: History) -> dict[str, list[Series]]:
    """``{page: [series, ...]}``: one page per preset with its execution series (presets sorted), then
    ``NO_PRESET_PAGE`` with the execution series of no preset, then ``COMPILATION_PAGE`` with every
    compilation series. Pages without series are left out. Page names become file names.

    Raises:
        UserError: two presets that differ only in case (one file on a case-insensitive file system).
    """
    execution = [s for s in history.series if s.kind != "compilation"]
    by_lower: dict[str, str] = {}
    for s in execution:  # presets that can name a page: collect_history and check_history checked them
        for preset in s.presets:
            if by_lower.setdefault(preset.lower(), preset) != preset:
                raise UserError(f"series {s.id!r} ({s.name}): presets {by_lower[preset.lower()]!r} and {preset!r} "
                                "differ only in case; their pages would be one file on a case-insensitive file "
                                "system; allowed: preset names that differ in more than case")
    pages = {preset: [s for s in execution if preset in s.presets] for preset in sorted(by_lower.values())}
    pages[NO_PRESET_PAGE] = [s for s in execution if not s.presets]
    pages[COMPILATION_PAGE] = [s for s in history.series if s.kind == "compilation"]
    return {page: series for page, series in pages.items() if series}


def aligned(series: Series, commits: Iterable[str]) -> list[Point | None]:
    """The series' points on ``commits`` (usually ``History.run_commits()``): None where it has none."""
    by_commit = {p.commit: p for p in series.points}
    return [by_commit.get(c) for c in commits]


def band(point: Point | None) -> tuple[float | None, float | None]:
    """The band ``(low, high)`` of a point: of several runs, the quartiles of their medians; else the IQR
    band p25..p75, else median ± IQR/2, else (None, None)."""
    if point is None:
        return None, None
    medians = [r.median for r in point.runs if r.median is not None]
    if len(medians) > 1:
        return tuple(statistics.quantiles(medians, n=4, method="inclusive")[::2])
    if point.p25 is not None and point.p75 is not None:
        return point.p25, point.p75
    if point.median is not None and point.iqr is not None:
        return point.median - point.iqr / 2, point.median + point.iqr / 2
    return None, None
