"""Backend comparison of one run: each compile config's median latency and its speedup over eager.

As the TorchInductor performance dashboard (https://hud.pytorch.org/benchmark/compilers) and burn's
``backend-comparison/`` (https://github.com/tracel-ai/burn) show it: for each model, task and device, one
row per compile config with its median latency and ``speedup = eager median / config median`` (above 1:
faster than eager).
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail.compare.compiler_summary import execution_config, model_name
from benchtrail.errors import UserError
from benchtrail.markup import MPL_LABEL_CHARS, mpl_text
from benchtrail.results.schema import BenchmarkRecord, ResultsFile

#: Compile configs in the order of the table and of the bars; others follow alphabetically.
CONFIG_ORDER = ("eager", "inductor", "inductor-max-autotune", "export", "aot-inductor")


@dataclass(frozen=True, order=True)
class RunInfo:
    """Which run a set of results files belongs to."""

    commit: str
    run_id: str
    attempt: str


@dataclass(frozen=True)
class BackendRow:
    """One compile config of one (model, task, device): ``task`` is the record's, or its execution config
    (``inference-bs8``) when one task has several; ``median_us``, ``iqr_us`` in µs per iteration (None
    without samples); ``speedup`` eager median / this median (None when either case is missing, not ok or
    has a median not above 0; ``note`` says why for an ok case)."""

    model: str
    task: str
    device_name: str
    compile_config: str
    status: str
    reason: str | None
    median_us: float | None
    iqr_us: float | None
    n: int
    speedup: float | None
    name: str
    note: str | None = None


def _no_speedup(median: float | None, eager: BenchmarkRecord | None) -> str | None:
    """Why an ``ok`` case of ``median`` has no speedup over ``eager`` (None: it has one)."""
    if median is not None and median <= 0:
        return f"median is {'0' if median == 0 else 'negative'}: no speedup"
    if eager is None or eager.status != "ok" or eager.median is None:
        return "no ok eager case"
    if eager.median <= 0:
        return f"eager median is {'0' if eager.median == 0 else 'negative'}: no speedup"
    return None


def check_one_run(sources: Sequence[tuple[str, Sequence[ResultsFile]]], flag: str = "--results") -> RunInfo:
    """The one run (commit, run id, attempt) of all results files; ``sources``: (argument, its files) pairs.
    Raises UserError, starting with ``flag`` and naming each argument's runs, for no files or files of
    several runs or commits."""
    seen: dict[RunInfo, dict[str, None]] = defaultdict(dict)
    for where, files in sources:
        for f in files:
            run = RunInfo(f.commit, str(f.run.get("run_id", "?")), str(f.run.get("attempt", "?")))
            seen[run][where] = None
    if not seen:
        raise UserError(f"{flag}: no results files found; give a run directory or results/*.json files")
    if len(seen) > 1:
        listed = "; ".join(
            f"run {run.run_id}/{run.attempt} at commit {run.commit[:12]} from {', '.join(wheres)}"
            for run, wheres in sorted(seen.items())
        )
        raise UserError(
            f"{flag}: results of more than one run: {listed}. Give the results of one run "
            f"(one run directory, or files with the same run id, attempt and commit)"
        )
    (run,) = seen
    return run


def load_one_run(paths: Sequence[Path], flag: str = "--results") -> tuple[list[ResultsFile], RunInfo]:
    """Load run directories or results files ``paths`` and the one run they hold. Raises UserError,
    starting with ``flag``, for a path without valid results or files of several runs or commits."""
    from benchtrail.results.io import load_results_paths

    sources = [(str(p), load_results_paths([Path(p)])) for p in paths]
    return [f for _, files in sources for f in files], check_one_run(sources, flag)


def _config_key(config: str) -> tuple[int, str]:
    return (CONFIG_ORDER.index(config) if config in CONFIG_ORDER else len(CONFIG_ORDER), config)


def compare_backends(results: Sequence[ResultsFile]) -> list[BackendRow]:
    """One row per execution record, sorted by model, task, device and compile config (``CONFIG_ORDER``
    first); a (model, task, device) whose compile config has several records splits by execution config.
    Raises UserError when there are no execution records or a case is there twice."""
    records = [b for f in results for b in f.benchmarks if b.kind == "execution"]
    if not records:
        raise UserError(
            "--results: no execution records (kind 'execution') in these results files; "
            "compare-backends needs a run's execution results (results/<device>-<shard>.json)"
        )
    keyed: dict[tuple[str, str, str], list[BenchmarkRecord]] = defaultdict(list)
    for b in records:
        model = model_name(b)
        keyed[model, b.task or execution_config(b, model) or "-", b.device_name].append(b)
    groups: dict[tuple[str, str, str], dict[str, BenchmarkRecord]] = defaultdict(dict)
    for (model, task, device), members in keyed.items():
        configs = [b.compile_config for b in members]
        split = len(set(configs)) != len(configs)
        for b in members:
            label = (execution_config(b, model) or task) if split else task
            group = groups[model, label, device]
            if b.compile_config in group:
                raise UserError(
                    f"--results: {b.name!r} ({b.compile_config}) is there twice (ids "
                    f"{group[b.compile_config].id} and {b.id}); give each case's results once"
                )
            group[b.compile_config] = b
    rows = []
    for (model, task, device), by_config in sorted(groups.items()):
        eager = by_config.get("eager")
        for config in sorted(by_config, key=_config_key):
            b = by_config[config]
            note = _no_speedup(b.median, eager) if b.status == "ok" else None
            speedup = eager.median / b.median if b.status == "ok" and b.median and note is None else None
            rows.append(
                BackendRow(
                    model,
                    task,
                    device,
                    config,
                    b.status,
                    b.reason,
                    b.median,
                    b.iqr,
                    b.n,
                    speedup,
                    b.name,
                    note,
                )
            )
    return rows


def render_table(rows: Sequence[BackendRow], run: RunInfo) -> str:
    """The rows as a text table (rich, no colour), with a title naming the run and commit."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from benchtrail.compare.tables import format_value

    devices = {r.device_name for r in rows}
    table = Table()
    for header in ("model", "task", "device", "compile config", "median", "IQR", "n", "speedup", "status"):
        table.add_column(
            header, justify="right" if header in ("median", "IQR", "n", "speedup") else "left", no_wrap=True
        )
    previous = None
    for r in rows:
        group = (r.model, r.task, r.device_name)
        if previous is not None and group != previous:
            table.add_section()
        previous = group
        status = r.status
        if r.reason is not None:  # its first line, cut to 100 characters (a traceback stays readable)
            line = (r.reason.strip().splitlines() or [""])[0]
            status += ": " + (line if len(line) <= 100 else line[:99] + "…")
        if r.note:
            status += f" ({r.note})"
        cells = (
            r.model,
            r.task,
            r.device_name,
            r.compile_config,
            format_value(r.median_us, "us"),
            format_value(r.iqr_us, "us"),
            str(r.n),
            "-" if r.speedup is None else f"{r.speedup:.2f}×",
            status,
        )
        table.add_row(*map(Text, cells))  # Text: a reason's "[...]" is not rich markup
    if len(devices) > 1:
        table.caption = Text(f"{len(devices)} devices: {', '.join(sorted(devices))}")  # names are not markup
    out = io.StringIO()
    Console(file=out, width=240, color_system=None, highlight=False, emoji=False).print(table)
    title = (
        f"Backends of run {run.run_id}/{run.attempt} at commit {run.commit[:12]} "
        f"(speedup = eager median / config median; above 1 is faster than eager)"
    )
    return "\n".join([title, *(line.rstrip() for line in out.getvalue().splitlines())]) + "\n"


def speedups_figure(rows: Sequence[BackendRow], run: RunInfo) -> Any:
    """A grouped bar plot (matplotlib ``Figure``): a group per model·task (·device when several), a bar per
    compile config of its speedup over eager (none without a speedup: the case's status instead)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    several_devices = len({r.device_name for r in rows}) > 1
    groups = list(dict.fromkeys((r.model, r.task, r.device_name) for r in rows))
    configs = sorted({r.compile_config for r in rows}, key=_config_key)
    by_key = {(r.model, r.task, r.device_name, r.compile_config): r for r in rows}
    width = 0.8 / max(1, len(configs))
    fig = Figure(
        figsize=(min(30.0, max(7.0, 1.5 + 0.35 * len(groups) * len(configs))), 4.5),
        dpi=100,
        layout="constrained",
    )
    ax = fig.add_subplot()
    top = max([r.speedup for r in rows if r.speedup is not None] + [1.0])
    for i, config in enumerate(configs):
        xs, heights, missing = [], [], []
        for g, group in enumerate(groups):
            x = g - 0.4 + width * (i + 0.5)
            r = by_key.get((*group, config))
            if r is None:
                continue
            if r.speedup is None:
                missing.append((x, r.status if r.status != "ok" else (r.note or "no eager").split(":")[0]))
            else:
                xs.append(x)
                heights.append(r.speedup)
        bars = ax.bar(xs, heights, width, color=f"C{i % 10}")
        ax.bar_label(bars, labels=[f"{h:.2f}×" for h in heights], fontsize=7, padding=1)
        for x, text in missing:
            ax.text(
                x,
                0.02 * top,
                mpl_text(text),
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7,
                color="dimgray",
            )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlim(-0.5, len(groups) - 0.5)
    parts = [
        [mpl_text(p, MPL_LABEL_CHARS) for p in (m, t, *([d] if several_devices else []))]
        for m, t, d in groups
    ]
    widest = max((len(p) for group in parts for p in group), default=0)
    fits = widest * 0.07 < (fig.get_figwidth() - 2.5) / max(1, len(groups))  # 0.07 in: a character at 8 pt
    if not fits:  # room for the 45° labels below the axes: 0.07 in a character × sin 45°
        fig.set_figheight(4.5 + 0.05 * max(len("·".join(p)) for p in parts))
    ax.set_xticks(
        range(len(groups)),
        ["\n".join(p) if fits else "·".join(p) for p in parts],
        fontsize=8,
        rotation=0 if fits else 45,
        ha="center" if fits else "right",
        rotation_mode="anchor",
    )
    ax.set_ylabel("speedup over eager (×, higher is faster)")
    ax.set_ylim(0, top * 1.15)
    device = "" if several_devices else f" · {mpl_text(rows[0].device_name)}" if rows else ""
    ax.set_title(
        f"Speedup over eager = eager median latency / config median latency\n"
        f"run {mpl_text(run.run_id)}/{run.attempt} · commit {run.commit[:12]}{device}",
        fontsize=9,
    )
    # Proxy handles: a config without any bar (all its cases failed) still gets its own colour.
    ax.legend(
        handles=[
            Patch(color=f"C{i % 10}", label=mpl_text(config, MPL_LABEL_CHARS))
            for i, config in enumerate(configs)
        ],
        title="compile config",
        fontsize=8,
        title_fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    return fig
