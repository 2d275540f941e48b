"""Plots with matplotlib (Agg, through ``matplotlib.figure.Figure``: no pyplot, no global backend).

Drawing functions return ``Figure`` objects; :func:`save_figures` writes them as PNGs. History figures
have a panel per model and unit: medians by commit with their band, each run a dot (noisy hollow
orange, unconfirmed regressions red crosses), the baseline dashed, change points shaded; one commit is
drawn as bars. Value axes use a unit chosen from the data (µs, ms, s; B … GiB); names are data, ``$``
escaped. The figures of one comparison of two sides: comparison_figures.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator, StrMethodFormatter

from benchtrail import jsonio
from benchtrail.errors import UserError, missing_extra
from benchtrail.git import short_sha
from benchtrail.history.series import History, Point, Series, aligned, band, page_groups
from benchtrail.markup import MPL_LABEL_CHARS, MPL_TITLE_CHARS, mpl_text
from benchtrail.results.schema import METRICS, UNITS
from benchtrail.stats.inference import NOISE_LIMIT

#: Axis labels of the result units (the plotly pages' y axes).
UNIT_LABELS = {"us": "µs per iteration", "ms": "ms", "count": "count", "bytes": "bytes"}
DPI = 100
COLUMNS = 3
#: Most panels in one figure (one PNG); a page with more gets several PNGs.
MAX_PANELS = 12
#: What each metric's axis says before its unit.
QUANTITIES = {
    "latency": "time per iteration",
    "compile_time_cold_ms": "cold compile time",
    "compile_time_warm_ms": "warm compile time",
    "compile_time_ms": "compile time",
    "artifact_bytes": "generated artifacts",
    "peak_rss_bytes": "peak RSS",
}
_PALETTE = [
    f"tab:{c}" for c in ("blue", "orange", "green", "purple", "brown", "pink", "gray", "olive", "cyan")
]
#: How a run's median is drawn by style (:func:`_draw_runs`), flagged ones with their legend entry.
RUN_STYLES = {
    "noisy": {
        "marker": "o",
        "s": 18,
        "facecolors": "none",
        "edgecolors": "tab:orange",
        "label": f"noisy run (IQR/median > {NOISE_LIMIT:.0%})",
    },
    "unconfirmed": {"marker": "x", "s": 24, "color": "tab:red", "label": "unconfirmed regression"},
}


@dataclass(frozen=True)
class AxisUnit:
    """An axis unit: ``label`` (``ms``, ``MiB``, ``count``) and ``scale``, its size in the data's unit
    (values are divided by it: 1000 for ``ms`` of data in µs)."""

    label: str
    scale: float


_TIME_IN_US = (("s", 1e6), ("ms", 1e3), ("µs", 1.0))
_BYTES = (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0))


def axis_unit(unit: str, values: Iterable[float | None]) -> AxisUnit:
    """The largest time unit (µs, ms, s) or binary byte unit (B … GiB) the largest |value| of ``values``
    (in ``unit``) reaches; counts and other units as they are."""
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if unit in ("us", "ms", "bytes"):
        steps, per = (_BYTES, 1.0) if unit == "bytes" else (_TIME_IN_US, 1e3 if unit == "ms" else 1.0)
        label, size = next((step for step in steps if top * per >= step[1]), steps[-1])  # per: µs in one ms
        return AxisUnit(label, size / per)
    return AxisUnit({"per_s": "per s", "ratio": "×"}.get(unit, unit), 1.0)


def _tick(value: float, _pos: Any = None) -> str:
    text = f"{value:.4g}"
    return f"{value:,.0f}" if "e" in text else text


def set_value_axis(axis: Any, unit: str, au: AxisUnit, quantity: str) -> None:
    """Label ``axis`` ``"<quantity> (<unit>)"`` and set its ticks: integers for counts, SI prefixes for
    rates, else plain numbers in ``au`` (the data already divided by ``au.scale``)."""
    axis.set_label_text(
        mpl_text(quantity) if quantity == au.label else f"{mpl_text(quantity)} ({au.label})", fontsize=7
    )
    axis.set_tick_params(labelsize=6)
    if unit == "count":
        axis.set_major_locator(MaxNLocator(integer=True))
        axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    elif unit == "per_s":
        axis.set_major_formatter(EngFormatter())
    else:
        axis.set_major_formatter(FuncFormatter(_tick))


def metric_quantity(metric: str) -> str:
    return QUANTITIES.get(metric, metric.replace("_", " "))


def _rank(order: Sequence[str], name: str) -> tuple[int, str]:
    """Sort key: ``name``'s place in ``order`` (names not in it last), then the name."""
    return (order.index(name) if name in order else len(order), name)


#: A panel's (title, axis quantity) when it holds several metrics of one unit.
GROUPS = {
    "ms": ("compile times", "time"),
    "count": ("counts", "count"),
    "bytes": ("sizes", "size"),
    "us": ("times", "time"),
}


@dataclass(frozen=True)
class Panel:
    """One model's series of one unit (times, counts, bytes…): one subplot."""

    model: str
    unit: str
    series: tuple[Series, ...]

    @property
    def metrics(self) -> tuple[str, ...]:
        """The panel's metrics, in the order of its series."""
        return tuple(dict.fromkeys(s.metric for s in self.series))

    @property
    def title(self) -> str:
        (one, *more) = self.metrics
        return f"{self.model} · {GROUPS.get(self.unit, [self.unit])[0] if more else one}"

    @property
    def quantity(self) -> str:
        """What the value axis says before its unit."""
        (one, *more) = self.metrics
        return GROUPS.get(self.unit, [self.unit])[-1] if more else metric_quantity(one)

    def label(self, series: Series) -> str:
        """A line's or bar's label: what tells the series apart within the panel."""
        variant = variant_of(series, self.model)
        return f"{series.metric} · {variant}" if len(self.metrics) > 1 else variant


def model_of(series: Series) -> str:
    """The name up to ``.<compile config>.`` (``mlp.eager.inference-bs1.dev`` → ``mlp``), else its first
    dotted part."""
    cut = series.name.find(f".{series.compile_config}.") if series.compile_config else -1
    return series.name[:cut] if cut > 0 else series.name.split(".", 1)[0]


def variant_of(series: Series, model: str) -> str:
    """What tells a model's series apart: the name less ``<model>.`` and, for compilation, ``.<metric>``."""
    name = series.name.removeprefix(model + ".")
    return name.removesuffix(f".{series.metric}") or name or series.name


def panels(series: Sequence[Series]) -> list[Panel]:
    """``series`` grouped by (model, unit): models sorted, units in ``UNITS`` order; within a panel by
    metric (``METRICS`` order), then name."""
    ordered = sorted(
        series, key=lambda s: (model_of(s), *_rank(UNITS, s.unit), *_rank(list(METRICS), s.metric), s.name)
    )
    return [Panel(*k, tuple(g)) for k, g in itertools.groupby(ordered, key=lambda s: (model_of(s), s.unit))]


def _levels(points: Sequence[Point | None], scale: Any) -> Any:
    """Arrays ``(value, low, high)`` of ``points`` divided by ``scale`` (one, or per point); NaN where
    missing."""
    return np.array([(p and p.value, *band(p)) for p in points], dtype=float).reshape(-1, 3).T / scale


def _draw_runs(
    ax: Any, xs: Sequence[int], points: Sequence[Point | None], scales: Sequence[float], color: str
) -> bool:
    """A dot per run's median in ``color``, noisy runs and unconfirmed regressions in ``RUN_STYLES``
    (legend entry once per axes); whether any was flagged."""
    dots: dict[str, list[tuple[int, float]]] = {}
    for x, p, scale in zip(xs, points, scales):
        for r in p.runs if p else ():
            if r.median is not None:
                style = "unconfirmed" if r.mark == "unconfirmed" else "noisy" if r.noisy else ""
                dots.setdefault(style, []).append((x, r.median / scale))
    shown = ax.get_legend_handles_labels()[1]
    for style, xy in dots.items():
        look = RUN_STYLES.get(style, {"s": 9, "color": color, "alpha": 0.5, "linewidths": 0, "label": "_"})
        ax.scatter(*zip(*xy), zorder=3, **{**look, "label": "_" if look["label"] in shown else look["label"]})
    return bool(dots.keys() - {""})


def _draw_lines(
    ax: Any,
    panel: Panel,
    commits: list[str],
    scales: Sequence[float],
    baseline: str | None,
    change_points: Mapping[str, Sequence[Any]],
    regressions: Collection[str],
) -> None:
    x = list(range(len(commits)))
    where = {c: i for i, c in enumerate(commits)}
    runs, flagged = [1] * len(commits), False
    for i, s in enumerate(panel.series):
        color = _PALETTE[i % len(_PALETTE)]
        points = aligned(s, commits)
        runs = [max(n, len(p.runs) if p else 0) for n, p in zip(runs, points)]
        median, low, high = _levels(points, scales[i])
        ax.fill_between(x, low, high, alpha=0.2, color=color, linewidth=0)
        ax.vlines(x, low, high, color=color, alpha=0.5, linewidth=1)  # the IQR of a point between gaps too
        ax.plot(
            x, median, marker="o", markersize=3, color=color, label=mpl_text(panel.label(s), MPL_LABEL_CHARS)
        )
        flagged |= _draw_runs(ax, x, points, [scales[i]] * len(x), color)
        for k, p in enumerate(points):
            if p and p.status != "ok":
                ax.axvline(k, color="tab:red", alpha=0.4, linestyle=":")
        for cp in change_points.get(s.id, ()):
            if cp.base_commit in where and cp.head_commit in where:
                shade = "tab:red" if cp.direction == "regression" else "tab:green"
                ax.axvspan(where[cp.base_commit], where[cp.head_commit], color=shade, alpha=0.15, linewidth=0)
                ax.axvline(where[cp.head_commit], color=shade, linestyle="--", linewidth=1)
        last = np.flatnonzero(~np.isnan(median))[-1:]  # the newest point with a median, if any
        if s.id in regressions and last.size:
            ax.plot(
                last,
                median[last],
                marker="o",
                markersize=10,
                markerfacecolor="none",
                markeredgecolor="tab:red",
                markeredgewidth=2,
                linestyle="none",
                label="regression",
            )
    if baseline in where:
        ax.axvline(
            where[baseline],
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"baseline {short_sha(baseline)}",
        )
    step = max(1, math.ceil(len(commits) / 12))
    ax.set_xticks(
        x[::step],
        [short_sha(c) + (f" ×{n}" if n > 1 else "") for c, n in zip(commits, runs)][::step],
        rotation=45,
        ha="right",
        fontsize=6,
        family="monospace",
    )
    ax.set_xlim(-0.5, max(len(commits) - 0.5, 0.5))
    ax.set_xlabel("commit (first parent, oldest first; ×n: n runs)", fontsize=7)
    if (
        len(panel.series) > 1
        or flagged
        or baseline in where
        or any(s.id in regressions for s in panel.series)
    ):
        ax.legend(fontsize=6)


def _draw_bars(ax: Any, panel: Panel, commit: str, scales: Sequence[float]) -> None:
    """One commit: a bar per series (the median of its runs), whiskers (:func:`band`), a dot per run."""
    points = [aligned(s, [commit])[0] for s in panel.series]
    median, low, high = _levels(points, np.asarray(scales))
    x = list(range(len(points)))
    ax.bar(
        x,
        np.nan_to_num(median),
        yerr=np.nan_to_num([median - low, high - median]),
        color=[_PALETTE[i % len(_PALETTE)] for i in x],
        alpha=0.8,
        capsize=3,
    )
    flagged = _draw_runs(ax, x, points, scales, "black")
    for i, p in enumerate(points):
        if p is None or p.median is None:
            ax.annotate(
                "no sample" if p is None else p.status,
                (i, 0),
                ha="center",
                va="bottom",
                fontsize=6,
                color="tab:red",
            )
    ax.set_xticks(
        x,
        [mpl_text(panel.label(s), MPL_LABEL_CHARS) for s in panel.series],
        rotation=30,
        ha="right",
        fontsize=6,
    )
    pad = max(0.0, (3 - len(points)) / 2)  # one or two bars keep a bar's width, not the panel's
    ax.set_xlim(-0.5 - pad, len(points) - 0.5 + pad)
    ax.set_xlabel(f"the one commit, {short_sha(commit)} (dots: its runs)", fontsize=7)
    if flagged:
        ax.legend(fontsize=6)


def default_change_points(history: History) -> dict[str, list[Any]]:
    """``track``'s change points by series id (shipped thresholds); {} where tracking cannot run."""
    from benchtrail.history.track import MIN_POINTS, track

    if not any(len(s.points) >= MIN_POINTS for s in history.series):
        return {}
    from benchtrail.compare.rules import load_thresholds

    try:
        report = track(history, load_thresholds())
    except UserError:
        return {}
    except ModuleNotFoundError as exc:
        missing_extra(exc)  # re-raises unless an extra's package (ruptures: the track extra) is missing
        return {}
    found: dict[str, list[Any]] = {}
    for cp in report.change_points:
        found.setdefault(cp.series_id, []).append(cp)
    return found


def history_figures(
    history: History,
    *,
    baseline: str | None = None,
    change_points: Mapping[str, Sequence[Any]] | None = None,
    regressions: Collection[str] = (),
    y_axis: str = "auto",
) -> dict[str, Figure]:
    """``{png file name: Figure}`` per page: ``<page>.png``, then ``<page>~2.png``… past ``MAX_PANELS``
    panels (``~`` is in no preset name). ``change_points``: series id → track's change points (None:
    computed); ``regressions``: series ids ringed in red; ``y_axis``: auto, zero (from 0) or ratio (to the
    baseline, else the oldest point). UserError for two presets differing only in case.
    """
    commits = history.run_commits()
    cps = default_change_points(history) if change_points is None else change_points
    # the ref is the head's sha, not a branch named "cafe"
    head = (
        short_sha(history.head)
        if len(history.ref) >= 7 and history.head.startswith(history.ref)
        else (f"{history.ref} ({short_sha(history.head)})")
    )
    what = "median and IQR by commit (first parent)" if len(commits) != 1 else "median and IQR of the one run"
    base = f"baseline {short_sha(baseline)}" if baseline in commits else "the oldest point"
    ratio = ("ratio", f"ratio to {base}") if y_axis == "ratio" else None  # the value axis' unit and quantity
    out: dict[str, Figure] = {}
    for page, series in page_groups(history).items():
        groups = panels(series)
        parts = [groups[i : i + MAX_PANELS] for i in range(0, len(groups), MAX_PANELS)]
        for k, part in enumerate(parts, 1):
            of = f" · part {k} of {len(parts)}" if len(parts) > 1 else ""
            fig, axes = panel_grid(len(part), f"{page} · {what} · {head}{of}", panel_width=5.0)
            out[f"{page}.png" if k == 1 else f"{page}~{k}.png"] = fig
            for ax, panel in zip(axes, part):
                unit, quantity = ratio or (panel.unit, panel.quantity)
                au = axis_unit(
                    unit, [v for s in panel.series for p in s.points for v in (p.value, band(p)[1])]
                )
                scales = [_ratio_base(s, baseline) if ratio else au.scale for s in panel.series]
                if len(commits) == 1:
                    _draw_bars(ax, panel, commits[0], scales)
                else:
                    _draw_lines(ax, panel, commits, scales, baseline, cps, regressions)
                set_value_axis(ax.yaxis, unit, au, quantity)
                if ratio:
                    ax.axhline(1.0, color="black", linewidth=0.8)
                ax.set_ylim(bottom=0 if y_axis == "zero" else None, auto=None)
                ax.set_title(mpl_text(panel.title, MPL_TITLE_CHARS), fontsize=8)
                ax.grid(alpha=0.3)
    return out


def _ratio_base(series: Series, baseline: str | None) -> float:
    """What ``y_axis="ratio"`` divides ``series`` by: its value at ``baseline``, else at its oldest point."""
    return next((p.value for p in sorted(series.points, key=lambda p: p.commit != baseline) if p.value), 1.0)


def panel_grid(panels: int, title: str, panel_width: float) -> tuple[Figure, list[Any]]:
    """``(figure, its first panels axes)``: ``COLUMNS`` to a row, each ``panel_width`` × 3.2 inches."""
    cols = min(COLUMNS, panels)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(panel_width * cols, 3.2 * rows + 0.6), layout="constrained")
    fig.suptitle(mpl_text(title, MPL_TITLE_CHARS), fontsize=10)
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def save_figures(figures: Mapping[str, Figure], out_dir: Path) -> list[Path]:
    """Write each figure as a new PNG ``out_dir/<name>``; the paths, in order.

    Raises UserError, before writing any, when one exists; or when one cannot be written.
    """
    paths = [Path(out_dir) / name for name in figures]
    jsonio.check_new(*paths)
    for path, fig in zip(paths, figures.values()):
        jsonio.write_png(path, fig, dpi=DPI)
    return paths


def plot_history_png(history: History, out_dir: Path, **marks: Any) -> list[Path]:
    """Write the PNGs of :func:`history_figures` (its keyword arguments ``marks``) into ``out_dir``."""
    return save_figures(history_figures(history, **marks), out_dir)
