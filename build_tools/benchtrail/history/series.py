"""The history's data: ``History`` (the first-parent commits walked, each with its run or a gap)
holds one ``Series`` per benchmark series, each a tuple of ``Point`` (one per commit with a run, oldest
first); and what every reader of a history shares: validation, page groups, plot helpers.
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
    """One run's median of a series at a commit. ``noisy``: IQR/median above the noise limit; ``mark``: its
    comparison row's mark when ``regressed`` (``unconfirmed``, ``confirmed``…), else None."""

    run_id: str
    attempt: int
    median: float | None
    noisy: bool = False
    mark: str | None = None


@dataclass(frozen=True)
class Point:
    """One series at one commit: the fields of its newest run, and ``runs``, every run holding the series
    (this point's first; empty in schema 1 files).

    Values are in the series' unit (``us`` = µs per iteration, ``ms``, ``count``, ``bytes``), None
    without samples (``status`` not ``ok``); ``p25``/``p75`` are numpy's linear percentiles of the samples.
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
    """One series (execution ``<run config id>``, compilation ``<module id>-<metric>``) over commits,
    oldest first; its key and descriptive fields come from the newest point's record."""

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
    """Series over the first-parent commits of ``ref`` (``head`` its sha), every commit walked oldest
    first; ``skipped``: why each unused stored run was not used."""

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
    """Raise UserError, naming ``where``, for a ``preset`` that breaks ``PRESET_NAME_RULE`` or is one of
    ``RESERVED_PAGES``: it could not name ``<preset>.png`` and ``<preset>.html``."""
    if unsafe_preset_name(preset):
        raise UserError(
            f"{where}: preset {preset!r} cannot name a dashboard page (<preset>.png, "
            f"<preset>.html); allowed: {PRESET_NAME_RULE}"
        )
    if preset.lower() in RESERVED_PAGES:
        raise UserError(
            f"{where}: preset {preset!r} has the name of a page the dashboard writes itself "
            f"({preset.lower()}.html); reserved: {', '.join(RESERVED_PAGES)}; rename the "
            "preset"
        )


def check_history(history: History, where: str) -> None:
    """Check the values of a history as ``collect_history`` makes them: commits listed once, each point at
    its commit's run, one per commit, in order, finite numbers or null, its own run first.

    Raises UserError naming ``where``, the series and point, the field, the value and what is allowed.
    """
    if not history.commits:
        raise UserError(
            f"{where}: field 'commits' is empty; allowed: the first-parent commits walked (at "
            "least one), as `benchtrail history` writes them"
        )
    order: dict[str, int] = {}
    for i, c in enumerate(history.commits):
        at = f"{where}: commits[{i}]"
        if c.commit in order:
            raise UserError(
                f"{at}: commit {c.commit!r} is listed twice (also commits[{order[c.commit]}]); "
                "allowed: each commit once"
            )
        order[c.commit] = i
        if (c.run_id is None) != (c.attempt is None) or (
            c.attempt is not None and (isinstance(c.attempt, bool) or c.attempt < 1)
        ):
            raise UserError(
                f"{at}: run_id {c.run_id!r} with attempt {c.attempt!r}; allowed: a run id with "
                "an attempt number from 1, or both null (no run)"
            )
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
                raise UserError(
                    f"{pat}: commit {p.commit!r} is not in 'commits'; allowed: a commit listed there"
                )
            listed = history.commits[order[p.commit]]
            if (listed.run_id, listed.attempt) != (p.run_id, p.attempt):
                used = "no run" if listed.run_id is None else f"run {listed.run_id}/{listed.attempt}"
                raise UserError(
                    f"{pat}: run {p.run_id}/{p.attempt} at commit {p.commit}, but 'commits' "
                    f"gives {used} for it; allowed: the run 'commits' lists"
                )
            if p.commit in seen:
                raise UserError(f"{pat}: a second point at commit {p.commit}; allowed: one point per commit")
            seen.add(p.commit)
            if order[p.commit] < last:
                raise UserError(
                    f"{pat}: commit {p.commit} comes before the previous point's in 'commits'; "
                    "allowed: points in the order of 'commits' (first parent, oldest first)"
                )
            last = order[p.commit]
            if p.status not in STATUSES:
                raise UserError(f"{pat}: field 'status' is {p.status!r}; allowed: {', '.join(STATUSES)}")
            if isinstance(p.n, bool) or p.n < 0:
                raise UserError(f"{pat}: field 'n' is {p.n!r}; allowed: a whole number from 0")
            if p.runs and (p.runs[0].run_id, p.runs[0].attempt) != (p.run_id, p.attempt):
                raise UserError(
                    f"{pat}: runs[0] is run {p.runs[0].run_id}/{p.runs[0].attempt}; allowed: "
                    f"the point's own run {p.run_id}/{p.attempt} first"
                )
            values = [(name, getattr(p, name)) for name in ("median", "iqr", "min", "max", "p25", "p75")]
            for name, value in values + [(f"runs[{k}].median", r.median) for k, r in enumerate(p.runs)]:
                if value is not None and not math.isfinite(value):
                    raise UserError(f"{pat}: field {name!r} is {value!r}; allowed: a finite number or null")


def page_groups(history: History) -> dict[str, list[Series]]:
    """``{page: [series, ...]}``: a page per preset (sorted) of its execution series, then
    ``NO_PRESET_PAGE``, then ``COMPILATION_PAGE``; empty pages left out. Page names become file names.

    Raises UserError for two presets that differ only in case (one file on some file systems).
    """
    execution = [s for s in history.series if s.kind != "compilation"]
    by_lower: dict[str, str] = {}
    for s in execution:  # presets that can name a page: checked when collected or loaded
        for preset in s.presets:
            if by_lower.setdefault(preset.lower(), preset) != preset:
                raise UserError(
                    f"series {s.id!r} ({s.name}): presets {by_lower[preset.lower()]!r} and "
                    f"{preset!r} differ only in case; their pages would be one file on a "
                    "case-insensitive file system; allowed: preset names that differ in more "
                    "than case"
                )
    pages = {preset: [s for s in execution if preset in s.presets] for preset in sorted(by_lower.values())}
    pages[NO_PRESET_PAGE] = [s for s in execution if not s.presets]
    pages[COMPILATION_PAGE] = [s for s in history.series if s.kind == "compilation"]
    return {page: series for page, series in pages.items() if series}


def aligned(series: Series, commits: Iterable[str]) -> list[Point | None]:
    """The series' points on ``commits``, None where it has none."""
    by_commit = {p.commit: p for p in series.points}
    return [by_commit.get(c) for c in commits]


def band(point: Point | None) -> tuple[float | None, float | None]:
    """``(low, high)``: the quartiles of several runs' medians, else p25..p75, else median ± IQR/2."""
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
