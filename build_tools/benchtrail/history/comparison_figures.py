"""Figures of one comparison of two sides, with matplotlib (no pyplot): ``compare-builds``' ratio of
medians B/A per benchmark, and strip plots of each benchmark's base and head samples (the distribution
stage). Value axes, units and the panel grid are the history plots'.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator, StrMethodFormatter

from benchtrail.history.plots import (
    MAX_PANELS,
    AxisUnit,
    axis_unit,
    metric_quantity,
    panel_grid,
    set_value_axis,
)
from benchtrail.markup import MPL_LABEL_CHARS, MPL_TITLE_CHARS, mpl_label, mpl_text, shared_module


def ratios_figure(names: Sequence[str], ratios: Sequence[float], title: str, *, log: bool = True) -> Figure:
    """A horizontal bar per benchmark of its ratio B/A, a line at 1.0; ``log`` needs positive ratios."""
    fig = Figure(figsize=(9, 1.2 + 0.3 * max(len(names), 1)), layout="constrained")
    ax = fig.subplots()
    if names:
        y = list(range(len(names)))
        base = 1.0 if log else 0.0
        ax.barh(
            y,
            [r - base for r in ratios],
            left=base,
            alpha=0.8,
            color=["tab:red" if r > 1 else "tab:green" if r < 1 else "tab:gray" for r in ratios],
        )
        common = shared_module(names)
        ax.set_yticks(y, [mpl_label(n, common, MPL_LABEL_CHARS) for n in names], fontsize=7)
        ax.invert_yaxis()
        if log:
            ax.set_xscale("log")
            # Symmetric about 1.0 in log space, so a halving and a doubling look alike.
            reach = max(max(abs(math.log(r)) for r in ratios) * 1.25, 0.01)
            ax.set_xlim(math.exp(-reach), math.exp(reach))
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:.3g}"))
            ax.xaxis.set_minor_formatter(StrMethodFormatter(""))
            ax.xaxis.set_major_locator(
                LogLocator(base=10, subs=(1.0, 2.0, 5.0)) if reach > 1 else MaxNLocator(7)
            )
        for i, r in enumerate(ratios):
            ax.annotate(
                f"{r:.3f}",
                (r, i),
                fontsize=6,
                va="center",
                xytext=(3 if r >= 1 else -3, 0),
                textcoords="offset points",
                ha="left" if r >= 1 else "right",
            )
    else:
        ax.text(
            0.5,
            0.5,
            "no benchmark has a median on both sides",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_yticks([])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("ratio of medians B/A (above 1: B is larger)" + (", log scale" if log else ""), fontsize=8)
    ax.set_title(mpl_text(title, MPL_TITLE_CHARS), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return fig


@dataclass(frozen=True)
class Samples:
    """One benchmark's samples on each side (in ``unit``; empty when a side has none)."""

    name: str
    unit: str
    metric: str
    base: tuple[float, ...]
    head: tuple[float, ...]


def samples_of(base: Sequence[Any], head: Sequence[Any], ids: Collection[str] | None = None) -> list[Samples]:
    """:class:`Samples` of the series (of ``ids``, or all) both sides' results files hold with samples,
    in head order."""
    by_id = {r.id: r for f in base for r in f.benchmarks}
    return [
        Samples(h.name, h.unit, h.metric, tuple(b.samples), tuple(h.samples))
        for f in head
        for h in f.benchmarks
        if (b := by_id.get(h.id)) is not None and b.samples and h.samples and (ids is None or h.id in ids)
    ]


def sample_units(sets: Sequence[Samples]) -> dict[str, AxisUnit]:
    """``{series unit: AxisUnit}`` for all ``sets`` of each unit."""
    return {
        u: axis_unit(u, [v for s in sets if s.unit == u for v in (*s.base, *s.head)])
        for u in {s.unit for s in sets}
    }


def distribution_figures(
    sets: Sequence[Samples], title: str = "base vs head samples", units: Mapping[str, AxisUnit] | None = None
) -> list[Figure]:
    """Strip plots of base and head samples, a panel per benchmark (``MAX_PANELS`` a figure), each
    median a black bar; ``units`` default to one per unit per figure."""
    figures = []
    rng = np.random.default_rng(0)
    common = shared_module([s.name for s in sets])
    for start in range(0, len(sets), MAX_PANELS):
        part = sets[start : start + MAX_PANELS]
        fig, axes = panel_grid(len(part), title, panel_width=4.5)
        shared = units or sample_units(part)
        for ax, s in zip(axes, part):
            au = shared[s.unit]
            for x, (side, values, color) in enumerate(
                (("base", s.base, "tab:gray"), ("head", s.head, "tab:blue"))
            ):
                scaled = np.asarray(values, dtype=float) / au.scale
                ax.scatter(
                    x + rng.uniform(-0.15, 0.15, len(scaled)), scaled, s=8, alpha=0.6, color=color, label=side
                )
                if len(scaled):
                    ax.hlines(float(np.median(scaled)), x - 0.25, x + 0.25, color="black", linewidth=2)
            ax.set_xticks([0, 1], [f"base (n={len(s.base)})", f"head (n={len(s.head)})"], fontsize=7)
            ax.set_xlim(-0.6, 1.6)
            ax.set_title(mpl_label(s.name, common, MPL_TITLE_CHARS), fontsize=8)
            set_value_axis(ax.yaxis, s.unit, au, metric_quantity(s.metric))
            ax.grid(axis="y", alpha=0.3)
        figures.append(fig)
    return figures
