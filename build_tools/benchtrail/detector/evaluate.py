"""``benchtrail evaluate-detector``: measure the regression detector's false-positive and detection rates.

The real harness times ``torch.mm`` (about 1 ms a call) in two workers; head gets a busy-spin of δ × the
per-call time. A/A comparisons give the false-positive rate, A/B the detection rate (Clopper–Pearson
intervals), for benchtrail and for IREE's, github-action-benchmark's and asv's rules, in the modes
stored-baseline, paired and duet. Method: docs/detector.md.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import numpy as np

from benchtrail.detector.alert_rules import (
    ALERTS,
    ROUND_SAMPLES,
    RULES,
    SERIES_NAME,
    clopper_pearson,
    judge,
    threshold_of,
)
from benchtrail.detector.arms import Worker, arm_workers
from benchtrail.detector.background_load import Load, described, machine, running_load
from benchtrail.detector.sampling import Sampling, collect, plan_of
from benchtrail.errors import UserError
from benchtrail.stats.inference import noise as relative_iqr

#: Version history of the evaluate-detector output file:
#:   1 — first version.
#:   2 — duet mode; paired and duet sequential (setup ``modes``, ``max_samples_per_side``,
#:       ``duet_cpus``; comparisons ``sequential``, ``round_wall_s``, ``benchtrail_rounds``, ``mde_pct``;
#:       rows ``mean_seconds_per_comparison``, ``mean_mde_pct``). Version 1 files stay readable.
SCHEMA_VERSION = 2
#: 384 x 384 fp32 ``torch.mm`` on one thread: about 1.1 ms per call on the 2-core development VM.
DEFAULT_MATRIX_SIZE = 384
#: The modes (cli/detector.py holds a copy; tests/test_cli_startup.py checks that the two agree).
MODES = ("stored-baseline", "paired", "duet")
#: Modes whose samples come in pairs and whose rounds are drawn sequentially.
SEQUENTIAL_MODES = ("paired", "duet")


def _last_two_cpus() -> tuple[int, int] | None:
    cpus = sorted(os.sched_getaffinity(0))
    return tuple(cpus[-2:]) if len(cpus) >= 2 else None


def default_modes() -> tuple[str, ...]:
    """Every mode this process can run: duet only where it may use two CPUs."""
    return MODES if _last_two_cpus() else tuple(m for m in MODES if m != "duet")


# -- the evaluation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalConfig:
    """What to run: ``aa`` and ``ab`` comparisons per mode; ``deltas_pct`` percent of extra work (> 0).

    ``sample_time_ms`` fixes the iterations per sample once; samples shorten (to 2 iterations) so the
    estimate fits ``budget_s``. These, ``warmup_s`` and ``calibration_samples`` are for tests.
    """

    aa: int = 300
    ab: int = 100
    deltas_pct: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)
    samples: int = 30
    seed: int = 0
    matrix_size: int = DEFAULT_MATRIX_SIZE
    sample_time_ms: float = 5.0
    warmup_s: float = 1.0
    calibration_samples: int = 250
    budget_s: float = 15 * 60
    threshold_pct: float | None = None
    #: A background load beside the measurement (``--noise``), or None.
    noise: Load | None = None
    #: CPU both workers are pinned to (None: not pinned). Default: the last CPU this process may use.
    cpu: int | None = field(default_factory=lambda: max(os.sched_getaffinity(0)))
    #: Modes to run, in this order (a subset of ``MODES``). Default: :func:`default_modes`.
    modes: tuple[str, ...] = field(default_factory=default_modes)
    #: Most samples per side of a sequential mode (paired, duet): a multiple of ROUND_SAMPLES, >= samples.
    max_samples: int = 120
    #: The duet's two CPUs, one per worker, swapped every round. Default: the last two this process may use.
    duet_cpus: tuple[int, int] | None = field(default_factory=_last_two_cpus)

    def __post_init__(self) -> None:
        """Checks what the command's options do not."""
        if self.matrix_size < 1 or self.calibration_samples < 2:
            raise ValueError(f"matrix_size must be >= 1 and calibration_samples >= 2: {self}")
        if not (self.sample_time_ms > 0 and self.warmup_s >= 0 and self.budget_s > 0):
            raise ValueError(f"sample_time_ms and budget_s must be > 0 and warmup_s >= 0: {self}")
        if "duet" in self.modes and len(set(self.duet_cpus or ())) != 2:
            raise UserError(
                "duet mode needs two CPUs, one per worker; this process may use "
                f"{len(os.sched_getaffinity(0))} (leave duet out of the modes)"
            )


def _calibrate(
    workers: Sequence[Worker], config: EvalConfig, report: Callable[[str], None], started: float
) -> dict[str, Any]:
    """Warm up, take the per-call median (µs), fix the iterations per sample and estimate the duration (s,
    with the setup since ``started``, a ``time.perf_counter()`` value)."""
    for w in workers:
        w.request("warmup", config.warmup_s)
    calls = [w.samples(config.calibration_samples, 1, 0.0) for w in workers]
    us_per_call = float(np.median(calls))  # all one-call samples of both workers
    iterations = max(2, round(config.sample_time_ms * 1e3 / us_per_call))
    n_comp = config.aa + config.ab * len(config.deltas_pct)
    spin_us = config.ab * sum(config.deltas_pct) / 100 * us_per_call  # extra µs per call, summed over A/B
    probe = 20

    def estimate(iterations: int) -> tuple[dict[str, float], dict[str, float]]:
        """(wall seconds per sample, of collecting), by mode."""
        t = time.perf_counter()
        workers[0].samples(probe, iterations, 0.0)
        one = (time.perf_counter() - t) / probe
        t = time.perf_counter()
        for _ in range(probe):
            workers[1].samples(1, iterations, 0.0, warm_calls=1)
        # duet: two samples at once take one sample's time (and the barrier)
        wall = {"stored-baseline": one, "paired": (time.perf_counter() - t) / probe, "duet": one}
        # Sequential modes draw at least `samples` per side, more while undecided (at most max_samples).
        return wall, {
            mode: (1 if mode == "duet" else 2) * config.samples * n_comp * wall[mode]
            + config.samples * iterations * spin_us / 1e6
            for mode in config.modes
        }

    wall, collect_s = estimate(iterations)
    # Analysis: time every rule on one synthetic comparison at the threshold (the detector then uses
    # all its rounds, the slow case).
    noise = np.random.default_rng(0).normal(0.0, 0.02, (2, config.samples))
    t = time.perf_counter()
    judge((us_per_call * np.exp(noise[0])).tolist(), (1.05 * us_per_call * np.exp(noise[1])).tolist(), 5.0)
    analysis_s = 2 * n_comp * (time.perf_counter() - t)
    setup_s = time.perf_counter() - started
    total = setup_s + sum(collect_s.values()) + analysis_s
    if total > config.budget_s and iterations > 2:
        # Overhead per sample stays; the block shrinks. Solve for the iterations that fit.
        overhead = max(sum(wall.values()) / 2 - iterations * us_per_call / 1e6, 0.0)
        per_sample_s = (config.budget_s - setup_s - analysis_s) / (4 * config.samples * n_comp) - overhead
        fitted = max(2, min(iterations - 1, math.floor(per_sample_s / (us_per_call / 1e6))))
        report(
            f"{iterations} iterations per sample would take about {total / 60:.1f} min; "
            f"shortening the sample to {fitted} iterations to fit {config.budget_s / 60:.1f} min"
        )
        iterations = fitted
        wall, collect_s = estimate(iterations)
        total = setup_s + sum(collect_s.values()) + analysis_s
    if total > config.budget_s:
        report(
            f"warning: even at {iterations} iterations per sample this takes about {total / 60:.1f} min, "
            f"over the {config.budget_s / 60:.1f} min budget; pass fewer comparisons (--aa, --ab)"
        )
    return {
        "us_per_call": us_per_call,
        "us_per_call_by_worker": [float(np.median(c)) for c in calls],
        "noise_by_worker": [float(n) for n in relative_iqr(calls)],  # IQR/median of one-call samples
        "iterations_per_sample": iterations,
        "sample_ms": iterations * us_per_call / 1e3,
        "estimate_s": total,
        "estimate_collect_s": collect_s,
        "estimate_analysis_s": analysis_s,
        "wall_per_sample_s": wall,
    }


def _seconds(record: dict[str, Any]) -> float | None:
    """Wall seconds of the rounds benchtrail's comparison used (sequential modes), else None."""
    walls, used = record.get("round_wall_s"), record.get("benchtrail_rounds")
    return float(sum(walls[:used])) if walls and used else None


def _document(setup: dict[str, Any], comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """The output document of ``comparisons`` (``base_us``, ``head_us``: µs per call) judged at ``setup``'s
    threshold: each record gets every rule's verdict and samples used, benchtrail's outcome, and when
    sequential its rounds and MDE; the peers see the first ``samples_per_side``.
    """
    peer_samples = setup["samples_per_side"]
    planned_rounds = setup.get("max_samples_per_side", peer_samples) // ROUND_SAMPLES
    records = []
    for r in comparisons:
        sequential = bool(r.get("sequential"))
        verdicts, ours = judge(
            r["base_us"],
            r["head_us"],
            setup["threshold_pct"],
            peer_samples,
            paired=r["mode"] != "stored-baseline",
            sequential=sequential,
            planned_rounds=planned_rounds,
        )
        extra = (
            {
                "benchtrail_rounds": ours.samples_per_side // ROUND_SAMPLES,
                "mde_pct": ours.mde_pct if math.isfinite(ours.mde_pct) else None,
            }
            if sequential
            else {}
        )
        records.append(
            {
                **r,
                **extra,
                "verdicts": verdicts,
                "outcome": ours.outcome,
                "samples_per_side": {
                    **dict.fromkeys(RULES, min(len(r["base_us"]), peer_samples)),
                    "benchtrail": ours.samples_per_side,
                },
            }
        )
    rows = []
    modes = [m for m in MODES if any(r["mode"] == m for r in records)]
    for delta, rule, mode in product((0.0, *setup["deltas_pct"]), RULES, modes):
        group = [r for r in records if r["mode"] == mode and r["delta_pct"] == delta]
        k = sum(r["verdicts"][rule] in (ALERTS if delta == 0 else ("regressed",)) for r in group)
        low, high = clopper_pearson(k, len(group))
        ours = rule == "benchtrail"  # the figures only benchtrail's comparison has
        rows.append(
            {
                "rule": rule,
                "mode": mode,
                "delta_pct": delta,
                "alerts": k,
                "n": len(group),
                "counts": "either direction" if delta == 0 else "regressed",
                "rate_pct": 100 * k / len(group),
                "ci_low_pct": 100 * low,
                "ci_high_pct": 100 * high,
                "mean_samples_per_side": float(np.mean([r["samples_per_side"][rule] for r in group])),
                "mean_seconds_per_comparison": _mean([_seconds(r) for r in group]) if ours else None,
                "mean_mde_pct": _mean([r.get("mde_pct") for r in group]) if ours else None,
                "noisy": sum(r["verdicts"][rule] == "noisy" for r in group),
                "unknown": sum(r["outcome"] == "UNKNOWN" for r in group) if ours else None,
            }
        )
    return {"schema_version": SCHEMA_VERSION, "setup": setup, "rows": rows, "comparisons": records}


def _mean(values: list[float | None]) -> float | None:
    """Mean of the finite values, or None."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def evaluate(config: EvalConfig, report: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run the whole evaluation, reporting progress lines.

    Returns:
        ``{"schema_version", "setup", "rows", "comparisons"}``: ``rows`` one per (δ, rule, mode) with
        ``alerts`` of ``n``, ``rate_pct`` and the 95% Clopper–Pearson ``ci_low_pct``/``ci_high_pct``;
        ``comparisons`` every comparison's samples (µs per call) and verdicts.

    Raises:
        UserError: the shipped thresholds table cannot be loaded or has no rule for the series.
        RuntimeError: a worker process failed (its traceback is in the message).
    """
    start = time.perf_counter()
    threshold, match = threshold_of("latency", config.threshold_pct)
    rng = np.random.default_rng(config.seed)
    plans = {mode: plan_of(config.aa, config.ab, config.deltas_pct, rng) for mode in MODES}
    with (
        arm_workers(config.matrix_size, config.seed, config.cpu) as (workers, info),
        running_load(config.noise),
    ):
        cal = _calibrate(workers, config, report, start)
        report(
            f"workload: torch.mm of two {config.matrix_size}x{config.matrix_size} fp32 matrices, "
            f"1 thread, {cal['us_per_call']:.1f} µs per call (workers: "
            + ", ".join(f"{x:.1f}" for x in cal["us_per_call_by_worker"])
            + f"); {cal['iterations_per_sample']} iterations per sample ({cal['sample_ms']:.2f} ms)"
        )
        sequential = sum(cal["estimate_collect_s"].get(m, 0.0) for m in SEQUENTIAL_MODES)
        most = cal["estimate_s"] + sequential * (config.max_samples / config.samples - 1)
        report(
            f"benchtrail threshold {threshold:g}% (rule {match!r}); expected duration "
            f"about {cal['estimate_s'] / 60:.1f} min"
            + (
                f", up to {most / 60:.1f} min where the sequential modes need all {config.max_samples} "
                "samples per side"
                if sequential
                else ""
            )
            + f" ({(time.perf_counter() - start):.0f} s of setup done)"
        )
        sampling = Sampling(
            config.samples,
            config.max_samples,
            config.cpu,
            config.duet_cpus,
            cal["iterations_per_sample"],
            cal["us_per_call"],
            threshold,
        )
        for mode in config.modes:
            collect(mode, workers, plans[mode], sampling, rng)
    records = []
    for mode in config.modes:
        plan = plans[mode]
        records += [
            {
                "mode": mode,
                "delta_pct": float(plan.deltas[i]),
                "base_worker": int(plan.base_worker[i]),
                "collected_at": plan.order.tolist().index(i),
                "slots": plan.slots[i],
                "sequential": mode in SEQUENTIAL_MODES,
                "round_wall_s": plan.walls[i],
                "base_us": plan.base[i],
                "head_us": plan.head[i],
            }
            for i in range(plan.deltas.size)
        ]
    setup = {
        "matrix_size": config.matrix_size,
        "dtype": "float32",
        "torch_threads": info["threads"],
        "worker_cpus": info["cpus"],
        **cal,
        "threshold_pct": threshold,
        "threshold_match": match,
        "series": SERIES_NAME,
        "round_samples": ROUND_SAMPLES,
        "samples_per_side": config.samples,
        "aa": config.aa,
        "ab": config.ab,
        "modes": list(config.modes),
        "max_samples_per_side": config.max_samples,
        "duet_cpus": list(config.duet_cpus) if "duet" in config.modes else None,
        "deltas_pct": list(config.deltas_pct),
        "seed": config.seed,
        "torch": info["torch"],
        "start_method": info["start_method"],
        **machine(config.noise),
        "cpus_usable": len(os.sched_getaffinity(0)),
    }
    doc = _document(setup, records)
    setup["elapsed_s"] = time.perf_counter() - start  # judging included
    return doc


def rejudge(doc: dict[str, Any], threshold_pct: float) -> dict[str, Any]:
    """An :func:`evaluate` document judged again from its samples at ``threshold_pct``; a sequential
    comparison that would now want more rounds than were collected stops at the last one."""
    setup = {**doc["setup"], "threshold_pct": threshold_pct, "threshold_match": "--threshold-pct"}
    return {**doc, **_document(setup, doc["comparisons"])}


def format_table(doc: dict[str, Any]) -> str:
    """The document's rows as a markdown table, after one line of setup."""
    s = doc["setup"]
    noise_pct = ", ".join(f"{100 * n:.1f}%" for n in s.get("noise_by_worker", ()))
    lines = [
        f"Measured on {s.get('cpu_model') or 'an unrecorded CPU'} ({s['cpu_count']} CPUs), "
        f"{s.get('date') or 'date not recorded'}; calibration noise (IQR/median of one-call samples, "
        f"per worker): {noise_pct or 'not recorded'}{described(s.get('background_load'))}",
        "",
        f"torch.mm {s['matrix_size']}x{s['matrix_size']} fp32, 1 thread, {s['us_per_call']:.1f} µs "
        f"per call, {s['iterations_per_sample']} iterations per sample ({s['sample_ms']:.2f} ms), "
        f"{s['samples_per_side']} samples per side, seed {s['seed']}, torch {s['torch']}, "
        f"{s['cpu_count']} CPUs, {s['elapsed_s'] / 60:.1f} min. A/A rows count alerts in either "
        "direction; A/B rows count 'regressed'; inconclusive or UNKNOWN is no alert."
        + (
            f" Paired and duet are sequential, at most {s['max_samples_per_side']} samples per side "
            f"(the peers see the first {s['samples_per_side']}); seconds per comparison are benchtrail's "
            "rounds' wall time."
            if "max_samples_per_side" in s
            else ""
        ),
        "",
        "| rule | mode | δ (%) | alerts / n | rate (%) | 95% CP interval (%) | mean samples per side "
        "| mean s per comparison | mean MDE (%) |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in doc["rows"]:
        delta = "0 (A/A)" if r["delta_pct"] == 0 else f"{r['delta_pct']:g}"
        means = " | ".join(
            "—" if v is None else f"{v:.2f}"
            for v in (r.get("mean_seconds_per_comparison"), r.get("mean_mde_pct"))
        )
        lines.append(
            f"| {RULES[r['rule']].format(threshold=s['threshold_pct'])} | {r['mode']} | {delta} | "
            f"{r['alerts']} / {r['n']} | {r['rate_pct']:.1f} | "
            f"{r['ci_low_pct']:.2f} – {r['ci_high_pct']:.2f} | "
            f"{r['mean_samples_per_side']:.1f} | {means} |"
        )
    return "\n".join(lines) + "\n"
