"""``compare-builds``: the ratio of medians B/A of every series between two builds, with ``compare``'s
verdict and 99% interval (shipped thresholds, A as the base), so any two commits are judged as a PR is.

A build is a run directory, or a commit or ref whose newest stored run is fetched from the store. A run
is never compared with itself unless asked: every row would say "similar" and prove nothing.
"""

from __future__ import annotations

import functools
import io
from dataclasses import astuple, dataclass
from pathlib import Path

from benchtrail.compare.document import Row
from benchtrail.compare.stored_runs import Trust
from benchtrail.compare.tables import format_change, format_ci, format_value
from benchtrail.errors import UserError
from benchtrail.git import resolve_commit, short_sha
from benchtrail.history.collect import fetch_results, usable_runs
from benchtrail.interop.backends import load_one_run
from benchtrail.markup import rich_text
from benchtrail.results.schema import BenchmarkRecord, ResultsFile, SeriesKey
from benchtrail.store import Store


@dataclass(frozen=True)
class Build:
    """One side: what the user gave (``label``), the commit of its results and where they came from."""

    label: str
    commit: str
    source: str
    files: tuple[ResultsFile, ...] = ()

    @functools.cached_property
    def records(self) -> dict[str, BenchmarkRecord]:
        """Each series' record by id (the first file's, where two hold it)."""
        return {r.id: r for f in reversed(self.files) for r in reversed(f.benchmarks)}

    @property
    def run(self) -> tuple[str, str]:
        """(run id, attempt) that the first results file records; ``"?"`` where it records none."""
        run = self.files[0].run if self.files else {}
        return str(run.get("run_id", "?")), str(run.get("attempt", "?"))


@dataclass(frozen=True)
class BuildRow(SeriesKey):
    """One series: both medians (in ``unit``), their ratio B/A, why a ratio is missing (``note``), and
    ``compare``'s verdict of B against A (None for a series of one side only), ``change`` (%, or in
    ``change_unit`` for an absolute rule), its 99% interval ``ci_low``…``ci_high`` (%) and ``reason``."""

    a_median: float | None
    b_median: float | None
    ratio: float | None
    note: str
    verdict: str | None = None
    change: float | None = None
    change_unit: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class BuildComparison:
    """The two builds and one row per series of either, execution first, then by name."""

    a: Build
    b: Build
    rows: tuple[BuildRow, ...]


def resolve_build(
    value: str, which: str, store: Store | None, repo: Path, trust: Trust | None = None
) -> Build:
    """Load build ``value`` (side ``which``, "A" or "B"): a run directory, else the newest trusted run
    (``trust`` None: any) in ``store`` of a commit or ref in ``repo``.

    Raises UserError when ``value`` is neither a folder nor a commit, a folder holds no results or
    several runs', there is no ``store``, or the store holds no usable run of the commit.
    """
    if Path(value).is_dir():
        files, run = load_one_run([Path(value)], f"{which} {value!r}")
        return Build(value, run.commit, str(Path(value)), tuple(files))
    sha = resolve_commit(repo, value)
    if sha is None:
        raise UserError(
            f"{which} {value!r} is neither a run directory nor a commit or ref that git can "
            f"resolve in --repo {str(repo)!r}; give a run directory, a sha, a branch or a tag"
        )
    if store is None:
        raise UserError(
            f"{which} {value!r} is a commit: pass --store URL to find its run (or give a run directory)"
        )
    problems: list[str] = []
    pointers = usable_runs(store, sha, problems, trust)
    if not pointers:
        raise UserError(
            f"{which} {value!r} (commit {sha[:12]}): the store {store.url} holds no "
            f"{'trusted ' if problems else ''}run of it; allowed: a commit with a stored run "
            "(see `benchtrail history`) or a run directory"
            + (f"; not used: {'; '.join(problems)}" if problems else "")
        )
    run = pointers[0]["run_id"], pointers[0]["attempt"]
    return Build(value, sha, store.run_url(*run), tuple(fetch_results(store, *run)))


def _row(a: BenchmarkRecord | None, b: BenchmarkRecord | None, judged: Row | None) -> BuildRow:
    am, bm = a and a.median, b and b.median  # None for a missing side
    ratio, note, sides = None, "", (("A", a), ("B", b))
    if a is None:
        note = "only in B (A lacks this series)"
    elif b is None:
        note = "only in A (B lacks this series)"
    elif am is None or bm is None:
        note = "; ".join(f"{side} {r.status}" for side, r in sides if r.median is None)
    elif am == 0:
        note = "both medians are 0" if bm == 0 else "A median is 0"
    else:
        ratio = bm / am
        note = "; ".join(f"{side} {r.status}" for side, r in sides if r.status != "ok")
    figures = ()
    if judged and a and b:
        figures = (
            judged.verdict,
            judged.change,
            judged.change_unit,
            judged.ci_low,
            judged.ci_high,
            judged.reason,
        )
    return BuildRow(*astuple((b or a).key), am, bm, ratio, note, *figures)


def same_run(a: Build, b: Build) -> bool:
    """Whether both builds are one stored run (the same commit, run id and attempt)."""
    return (a.commit, a.run) == (b.commit, b.run) and "?" not in a.run


def compare_builds(
    a: str,
    b: str,
    store: Store | None,
    repo: Path = Path("."),
    *,
    allow_same_run: bool = False,
    trust: Trust | None = None,
) -> BuildComparison:
    """One row per series of either build, execution first: medians in the series' unit (``us`` = µs per
    iteration, ``ms``, ``count``, ``bytes``), ``ratio`` B/A (None, with a ``note``, when a side lacks
    it or A's median is 0).

    Raises UserError as :func:`resolve_build`, for the same run twice without ``allow_same_run``, or
    for a series no threshold rule matches.
    """
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.verdicts import compare

    build_a = resolve_build(a, "A", store, repo, trust)
    build_b = resolve_build(b, "B", store, repo, trust)
    if same_run(build_a, build_b) and not allow_same_run:
        raise UserError(
            f"A {a!r} and B {b!r} are the same run ({build_a.run[0]}/{build_a.run[1]} at "
            f"commit {build_a.commit[:12]}): every row would be 'similar' and prove nothing; "
            "give two different runs, or pass --allow-same-run to compare a run with itself (a "
            "check of the statistics)"
        )
    # benchtrail compare's rows of B (head) against A (base), by series id: the shipped thresholds
    judged = {r.id: r for r in compare(list(build_a.files), list(build_b.files), load_thresholds())}
    rows = (
        _row(build_a.records.get(i), build_b.records.get(i), judged.get(i))
        for i in build_a.records.keys() | build_b.records
    )
    return BuildComparison(
        build_a, build_b, tuple(sorted(rows, key=lambda r: (r.kind != "execution", r.name, r.id)))
    )


def format_table(comparison: BuildComparison) -> str:
    """The comparison as a rich table, rendered to plain text (no colour codes)."""
    from rich.console import Console
    from rich.table import Table

    a, b = comparison.a, comparison.b
    table = Table(
        title=f"B/A: B = {b.label} ({short_sha(b.commit)}) · A = {a.label} ({short_sha(a.commit)})",
        title_justify="left",
    )
    left = ("benchmark", "device", "verdict", "note")
    for header in (*left[:2], "A median", "B median", "B/A", "change", "99% CI", *left[2:]):
        table.add_column(header, justify="left" if header in left else "right", overflow="fold")
    for r in comparison.rows:
        table.add_row(
            rich_text(r.name),
            rich_text(r.device_name),
            format_value(r.a_median, r.unit),
            format_value(r.b_median, r.unit),
            f"{r.ratio:.4f}" if r.ratio is not None else "—",
            format_change(r, r.unit),
            format_ci(r),
            rich_text(r.verdict or "—"),
            rich_text("; ".join(filter(None, (r.note, r.reason)))),
        )
    console = Console(file=io.StringIO(), width=200, color_system=None, highlight=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in console.file.getvalue().rstrip("\n").splitlines())


def plot_comparison(comparison: BuildComparison, path: Path) -> Path:
    """A PNG bar plot of the ratios (log scale unless one is 0); UserError when ``path`` exists."""
    from benchtrail.history.comparison_figures import ratios_figure
    from benchtrail.history.plots import save_figures

    rows = [r for r in comparison.rows if r.ratio is not None]
    title = (
        f"B = {comparison.b.label} ({short_sha(comparison.b.commit)}) vs A = {comparison.a.label} "
        f"({short_sha(comparison.a.commit)})"
    )
    figure = ratios_figure(
        [r.name for r in rows], [r.ratio for r in rows], title, log=all(r.ratio > 0 for r in rows)
    )
    return save_figures({path.name: figure}, path.parent)[0]
