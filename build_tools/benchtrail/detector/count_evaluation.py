"""``benchtrail evaluate-detector --metric instructions``: the detector's figures for instruction counts.

Head δ adds a loop calibrated to δ% of the base call's instructions; a pool of callgrind processes counts
every variant, and a comparison takes base repeats from one process and head repeats from another.
Method: docs/detector.md, "Instruction counts".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail.detector.alert_rules import SERIES_NAME, clopper_pearson, threshold_of
from benchtrail.detector.background_load import Load, described, machine, running_load
from benchtrail.runner.count_cases import REPEATS, VALGRIND_ARGS, counting_env, cpu_vendor, valgrind_version
from benchtrail.runner.server_pool import kill_group, tail
from benchtrail.stats.counts import judge_counts

#: Version history of the ``--metric instructions`` output file: 1 — first version.
SCHEMA_VERSION = 1
VERDICTS = ("regressed", "improved", "similar", "inconclusive")


@dataclass(frozen=True)
class CountConfig:
    """``aa`` A/A comparisons and ``ab`` per δ (2 × and ½ × the threshold, plus ``deltas_pct``);
    ``processes`` counting ``repeats`` blocks per variant, ``parallel`` at a time; ``samples`` per side."""

    aa: int = 150
    ab: int = 50
    deltas_pct: tuple[float, ...] = ()
    seed: int = 0
    processes: int = 6
    repeats: int = 8
    samples: int = REPEATS
    parallel: int = 2
    matrix_size: int = 384
    threshold_pct: float | None = None
    noise: Load | None = None

    def __post_init__(self) -> None:
        if self.processes < 2 or self.parallel < 1 or not 3 <= self.samples <= self.repeats:
            raise ValueError(f"need processes >= 2, parallel >= 1 and 3 <= samples <= repeats: {self}")


def deltas_of(threshold_pct: float, given: Sequence[float] = ()) -> tuple[float, ...]:
    """2 × and ½ × ``threshold_pct``, and ``given``; ascending."""
    return tuple(sorted({2 * threshold_pct, threshold_pct / 2, *given}))


# -- the pool -----------------------------------------------------------------------------------


def count_pool(
    config: CountConfig, deltas_pct: Sequence[float], report: Callable[[str], None] = lambda line: None
) -> list[dict[str, Any]]:
    """Every counting process's result, in start order.

    Raises:
        UserError: no valgrind.
        RuntimeError: a counting process failed (the tail of its output in the message).
    """
    valgrind_version("or evaluate wall time: --metric latency")
    env = counting_env({})
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="benchtrail-detector-count-") as tmp:
        folder = Path(tmp)
        spec = folder / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "seed": config.seed,
                    "matrix_size": config.matrix_size,
                    "deltas_pct": list(deltas_pct),
                    "repeats": config.repeats,
                    "callgrind_dir": tmp,
                }
            ),
            encoding="utf-8",
        )
        running: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        todo = list(range(config.processes))
        try:
            while todo or running:
                while todo and len(running) < config.parallel:
                    i = todo.pop(0)
                    with (folder / f"log.{i}").open("wb") as log:
                        running[i] = (
                            subprocess.Popen(
                                [
                                    "valgrind",
                                    *VALGRIND_ARGS,
                                    f"--callgrind-out-file={tmp}/callgrind.out.%p",
                                    sys.executable,
                                    "-m",
                                    "benchtrail.detector.count_worker",
                                    str(spec),
                                    str(folder / f"out.{i}.json"),
                                ],
                                stdout=log,
                                stderr=subprocess.STDOUT,
                                env=env,
                                start_new_session=True,
                            ),
                            time.perf_counter(),
                        )
                for i, (proc, started) in list(running.items()):
                    if (code := proc.poll()) is None:
                        continue
                    del running[i]
                    if code:
                        raise RuntimeError(
                            f"counting process {i} exited with code {code}: "
                            + tail((folder / f"log.{i}").read_text(errors="replace"))
                        )
                    results[i] = {
                        **json.loads((folder / f"out.{i}.json").read_text(encoding="utf-8")),
                        "wall_s": time.perf_counter() - started,
                    }
                    report(
                        f"counting process {i + 1} of {config.processes} done in {results[i]['wall_s']:.0f} s"
                    )
                time.sleep(0.2)
        finally:  # an error or Ctrl-C: never leave valgrind behind
            for proc, _ in running.values():
                kill_group(proc.pid)
                proc.wait()
    return [results[i] for i in sorted(results)]


# -- comparisons and verdicts ----------------------------------------------------------------------


def draw_comparisons(
    counts: Sequence[Sequence[Sequence[float]]],
    deltas_pct: Sequence[float],
    aa: int,
    ab: int,
    samples: int,
    rng: np.random.Generator,
) -> list[dict[str, Any]]:
    """Comparisons from ``counts[process][variant][repeat]`` (variant v > 0: ``deltas_pct[v - 1]``): base
    ``samples`` repeats of variant 0 in process i, head of the δ's variant in process j ≠ i, drawn from
    ``rng`` without replacement."""
    out = []
    for variant, delta, n in [(0, 0.0, aa), *((v + 1, float(d), ab) for v, d in enumerate(deltas_pct))]:
        for _ in range(n):
            i, j = (int(p) for p in rng.choice(len(counts), 2, replace=False))
            picks = [
                sorted(int(r) for r in rng.choice(len(counts[p][v]), samples, replace=False))
                for p, v in ((i, 0), (j, variant))
            ]
            out.append(
                {
                    "delta_pct": delta,
                    "base_process": i,
                    "head_process": j,
                    "base_repeats": picks[0],
                    "head_repeats": picks[1],
                    "base": [float(counts[i][0][r]) for r in picks[0]],
                    "head": [float(counts[j][variant][r]) for r in picks[1]],
                }
            )
    return out


def judged(comparisons: Sequence[dict[str, Any]], threshold_pct: float) -> list[dict[str, Any]]:
    """``comparisons`` with the counted series' judgement at ``threshold_pct``."""
    return [
        {**c, **asdict(judge_counts(c["base"], c["head"], threshold_pct, lower_is_better=True))}
        for c in comparisons
    ]


def rows_of(comparisons: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per δ (A/A first): verdict counts, ``alerts`` (A/A: regressed or improved; A/B: regressed)
    with its 95% Clopper–Pearson interval (%), the largest spread and the mean change (%)."""
    rows = []
    for delta in sorted({c["delta_pct"] for c in comparisons}):
        group = [c for c in comparisons if c["delta_pct"] == delta]
        tally = {v: sum(c["verdict"] == v for c in group) for v in VERDICTS}
        alerts = tally["regressed"] + (tally["improved"] if delta == 0 else 0)
        low, high = clopper_pearson(alerts, len(group))
        rows.append(
            {
                "delta_pct": delta,
                "n": len(group),
                **tally,
                "alerts": alerts,
                "ci_low_pct": 100 * low,
                "ci_high_pct": 100 * high,
                "noisy": sum(c["noisy"] for c in group),
                "mean_change_pct": float(np.mean([c["change_pct"] for c in group])),
                "max_spread_pct": float(max(c["spread_pct"] for c in group)),
                "process_pairs": len({(c["base_process"], c["head_process"]) for c in group}),
            }
        )
    return rows


def _document(setup: dict[str, Any], comparisons: Sequence[dict[str, Any]]) -> dict[str, Any]:
    records = judged(comparisons, setup["threshold_pct"])
    return {
        "schema_version": SCHEMA_VERSION,
        "setup": setup,
        "rows": rows_of(records),
        "comparisons": records,
    }


def rejudge(doc: dict[str, Any], threshold_pct: float) -> dict[str, Any]:
    """An :func:`evaluate_counts` document judged again from its counts at ``threshold_pct``."""
    setup = {**doc["setup"], "threshold_pct": threshold_pct, "threshold_match": "--threshold-pct"}
    keep = ("delta_pct", "base_process", "head_process", "base_repeats", "head_repeats", "base", "head")
    return _document(setup, [{k: c[k] for k in keep} for c in doc["comparisons"]])


def evaluate_counts(config: CountConfig, report: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Count, draw and judge: ``{"schema_version", "setup", "rows", "comparisons"}``, ``setup.processes``
    each process's calibration and counts.

    Raises:
        UserError: no valgrind; the thresholds table cannot be loaded or its rule is not a percent rule.
        RuntimeError: a counting process failed.
    """
    start = time.perf_counter()
    threshold, match = threshold_of("instructions", config.threshold_pct)
    deltas = deltas_of(threshold, config.deltas_pct)
    report(
        f"threshold {threshold:g}% (rule {match!r}); δ = {', '.join(f'{d:g}' for d in deltas)}%; "
        f"{config.processes} callgrind processes, {config.parallel} at a time, each counting "
        f"{config.repeats} blocks of the base and of each δ"
        + ("; background load on" if config.noise else "")
    )
    with running_load(config.noise):
        pool = count_pool(config, deltas, report)
    collect_s = time.perf_counter() - start
    comparisons = draw_comparisons(
        [p["counts"] for p in pool],
        deltas,
        config.aa,
        config.ab,
        config.samples,
        np.random.default_rng(config.seed),
    )
    setup = {
        "metric": "instructions",
        "counter": "callgrind",
        "valgrind": valgrind_version(),
        "cpu": f"{cpu_vendor()} {pool[0]['cpu_capability']}",
        "matrix_size": config.matrix_size,
        "dtype": "float32",
        "torch_threads": 1,
        "torch": pool[0]["torch"],
        "threshold_pct": threshold,
        "threshold_match": match,
        "series": SERIES_NAME,
        "deltas_pct": list(deltas),
        "aa": config.aa,
        "ab": config.ab,
        "samples_per_side": config.samples,
        "repeats_per_process": config.repeats,
        "parallel": config.parallel,
        "seed": config.seed,
        "collect_s": collect_s,
        "processes": pool,
        **machine(config.noise),
    }
    doc = _document(setup, comparisons)
    setup["elapsed_s"] = time.perf_counter() - start
    return doc


def format_counts_table(doc: dict[str, Any]) -> str:
    """The document's rows as a markdown table, after two lines of setup."""
    s = doc["setup"]
    procs = s["processes"]
    base = [float(np.median(p["counts"][0])) for p in procs]  # each process's median base count
    per_iteration = [p["loop_instructions_per_iteration"] for p in procs]
    walls = [p["wall_s"] for p in procs]
    lines = [
        f"Instructions (callgrind, valgrind {s['valgrind']}, {s['cpu']}) on "
        f"{s.get('cpu_model') or 'an unrecorded CPU'} ({s['cpu_count']} CPUs), {s['date']}"
        f"{described(s.get('background_load'))}",
        "",
        f"torch.mm {s['matrix_size']}x{s['matrix_size']} fp32, 1 thread, {np.median(base):,.0f} "
        f"instructions per call (medians of the processes: {min(base):,.0f} – {max(base):,.0f}); "
        f"injected loop {np.median(per_iteration):.1f} instructions per iteration. {len(procs)} "
        f"processes ({s['parallel']} at a time), {s['repeats_per_process']} repeats per variant each; "
        f"a comparison takes {s['samples_per_side']} repeats of one process against "
        f"{s['samples_per_side']} of another. Threshold {s['threshold_pct']:g}% "
        f"({s['threshold_match']}), seed {s['seed']}, torch {s['torch']}; "
        f"collection {s['collect_s'] / 60:.1f} min (processes "
        f"{min(walls):.0f} – {max(walls):.0f} s each). A/A rows count alerts in either direction, A/B "
        "rows 'regressed'.",
        "",
        "| δ (%) | alerts / n | 95% CP interval (%) | similar | inconclusive | improved | noisy "
        "| mean change (%) | max spread (%) | process pairs |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["rows"]:
        delta = "0 (A/A)" if r["delta_pct"] == 0 else f"{r['delta_pct']:g}"
        lines.append(
            f"| {delta} | {r['alerts']} / {r['n']} | {r['ci_low_pct']:.2f} – "
            f"{r['ci_high_pct']:.2f} | {r['similar']} | {r['inconclusive']} | {r['improved']} | "
            f"{r['noisy']} | {r['mean_change_pct']:.4f} | {r['max_spread_pct']:.4f} | "
            f"{r['process_pairs']} |"
        )
    return "\n".join(lines) + "\n"
