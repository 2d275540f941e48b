"""PNG plots with matplotlib (Agg, through ``matplotlib.figure.Figure``: no pyplot, no global backend).

``plot_history_png`` draws one PNG per page of ``history.page_groups`` (a preset's execution series,
or the compilation series): one subplot per series, x = short commits in first-parent order, y = the
median with its IQR band. ``plot_ratios_png`` draws the per-benchmark ratios of ``compare-builds``.
Names and titles are data: ``$`` is escaped (``markup.mpl_text``), so no label becomes mathtext.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.history.model import History, Series, aligned, band, page_groups, short
from benchtrail.markup import mpl_text

#: Axis labels of the result units.
UNIT_LABELS = {"us": "µs per iteration", "ms": "ms", "count": "count", "bytes": "bytes"}
DPI = 100
COLUMNS = 3


def _save(fig: Figure, path: Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return jsonio.write_bytes_atomic(path, buffer.getvalue(), exclusive=True)


def _draw_series(ax, series: Series, commits: list[str]) -> None:
    points = aligned(series, commits)
    x = list(range(len(commits)))
    nan = math.nan
    median = [p.median if p and p.median is not None else nan for p in points]
    bands = [band(p) if p else (None, None) for p in points]
    low = [lo if lo is not None else nan for lo, _ in bands]
    high = [hi if hi is not None else nan for _, hi in bands]
    ax.fill_between(x, low, high, alpha=0.3, color="tab:blue", linewidth=0, label="IQR")
    ax.vlines(x, low, high, color="tab:blue", alpha=0.5, linewidth=1)  # the IQR of a point between gaps too
    ax.plot(x, median, marker="o", markersize=3, color="tab:blue", label="median")
    failed = [i for i, p in enumerate(points) if p and p.status != "ok"]
    for i in failed:
        ax.axvline(i, color="tab:red", alpha=0.4, linestyle=":")
    ax.set_title(mpl_text(series.name), fontsize=8)
    ax.set_ylabel(UNIT_LABELS.get(series.unit, series.unit), fontsize=7)
    step = max(1, math.ceil(len(commits) / 12))
    ax.set_xticks(x[::step], [short(c) for c in commits[::step]], rotation=45, ha="right", fontsize=6,
                  family="monospace")
    ax.tick_params(axis="y", labelsize=6)
    ax.set_xlim(-0.5, max(len(commits) - 0.5, 0.5))
    ax.grid(alpha=0.3)


def plot_page_png(series: Sequence[Series], commits: list[str], title: str, path: Path) -> Path:
    """Draw ``series`` (one subplot each, ``COLUMNS`` per row) over ``commits`` into a new PNG ``path``.

    Raises:
        UserError: ``path`` exists or cannot be written; ``series`` is empty.
    """
    if not series:
        raise UserError(f"{path}: no series to plot")
    cols = min(COLUMNS, len(series))
    rows = math.ceil(len(series) / cols)
    fig = Figure(figsize=(5 * cols, 2.8 * rows + 0.6), layout="constrained")
    fig.suptitle(mpl_text(title), fontsize=10)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, s in zip(axes.flat, series):
        _draw_series(ax, s, commits)
    for ax in list(axes.flat)[len(series):]:
        ax.set_visible(False)
    return _save(fig, path)


def plot_history_png(history: History, out_dir: Path) -> list[Path]:
    """Write ``<page>.png`` into ``out_dir`` for every page of ``page_groups(history)``.

    Returns the PNG paths (empty when the history has no series).

    Raises:
        UserError: one of the PNGs exists already (checked before any is written) or cannot be written.
    """
    pages = page_groups(history)
    paths = {page: Path(out_dir) / f"{page}.png" for page in pages}
    jsonio.check_new(*paths.values())
    commits = history.run_commits()
    head = f"{history.ref} ({short(history.head)})"
    return [plot_page_png(series, commits, f"{page} · median and IQR by commit (first parent) · {head}", paths[page])
            for page, series in pages.items()]


def plot_ratios_png(names: Sequence[str], ratios: Sequence[float], title: str, path: Path, *,
                    log: bool = True) -> Path:
    """A horizontal bar per benchmark of its ratio (B/A), a line at 1.0, into a new PNG ``path``.

    ``ratios`` must be positive with ``log`` (the default scale). An empty ``names`` draws a note.

    Raises:
        UserError: ``path`` exists or cannot be written.
    """
    fig = Figure(figsize=(9, 1.2 + 0.3 * max(len(names), 1)), layout="constrained")
    ax = fig.subplots()
    if names:
        y = list(range(len(names)))
        colors = ["tab:red" if r > 1 else "tab:green" if r < 1 else "tab:gray" for r in ratios]
        base = 1.0 if log else 0.0
        ax.barh(y, [r - base for r in ratios], left=base, color=colors, alpha=0.8)
        ax.set_yticks(y, [mpl_text(n) for n in names], fontsize=7)
        ax.invert_yaxis()
        if log:
            ax.set_xscale("log")
            # Symmetric about 1.0 in log space, so a halving and a doubling look alike.
            reach = max(max(abs(math.log(r)) for r in ratios) * 1.25, 0.01)
            ax.set_xlim(math.exp(-reach), math.exp(reach))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)) if reach > 1
                                       else MaxNLocator(7))
        for i, r in enumerate(ratios):
            ax.annotate(f"{r:.3f}", (r, i), fontsize=6, va="center", xytext=(3 if r >= 1 else -3, 0),
                        textcoords="offset points", ha="left" if r >= 1 else "right")
    else:
        ax.text(0.5, 0.5, "no benchmark has a median on both sides", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_yticks([])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("ratio of medians B/A (above 1: B is larger)" + (", log scale" if log else ""), fontsize=8)
    ax.set_title(mpl_text(title), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)
