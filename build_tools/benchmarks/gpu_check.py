#!/usr/bin/env python3
"""Check benchtrail's GPU path on a CUDA machine, with one command, in well under 5 minutes.

Run it as ``bash build_tools/benchmarks/gpu_check.sh [options]`` (or ``python3 THIS_FILE``) from a
repository checkout: it installs nothing and needs only torch with CUDA, numpy, scipy, pyyaml and
rich; PyGithub, google-cloud-storage and jq are never imported. In order:

1. imports everything the check and its worker processes need (a missing module fails at once),
   prints the device; on a machine without a CUDA device it exits 2;
2. calibrates ``torch.cuda._sleep(cycles)`` (the GPU spins for ``cycles`` clock cycles) against
   the host clock over a ~200 ms sleep, then times a ~2 ms sleep with CUDA events; more than 10%
   off the calibrated time is exit 3;
3. runs the ``cuda-smoke`` preset through benchtrail's export and run stages (1 worker process per
   case unless ``--full-sampling``) and prints each case's median, IQR, timing plan, both recorded
   times and peak device memory; a case that is not ok is exit 4;
4. runs the detector on a GPU workload: paired, interleaved, CUDA-event-timed samples of
   ``torch.cuda._sleep`` (A/A, and the head 2% longer), each trial judged by
   ``benchtrail.stats.paired.compare_paired`` at a 1% threshold; an A/A alert rate above 20% is
   exit 5 (a few A/A alerts are expected by chance and only reported);
5. prints a summary and the elapsed time.

Every step runs even when an earlier one failed (a GPU machine is scarce; one run should tell all
it can); the exit code is that of the first failed step. Exit codes: 0 all well, 1 a module is
missing or bad usage, 2 not a GPU, 3 CUDA-event time off by more than 10%, 4 a cuda-smoke case is
not ok, 5 detector A/A alert rate above 20%, 6 the cuda-smoke stage ran past its time budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Run from the checkout (benchtrail need not be installed): ``build_tools`` and the repository root
# on the path of this process; main() puts them on PYTHONPATH for the workers too.
_PATHS = [str(REPO / "build_tools"), str(REPO)]
sys.path[:0] = [p for p in _PATHS if p not in sys.path]

# Everything the check needs, and what each case's worker process imports, before anything runs.
try:
    import numpy as np
    import torch

    from benchmark_suites import devices as suite_devices
    from benchmark_suites import suite as suite_module
    from benchtrail import jsonio
    from benchtrail.detector.alert_rules import ALERTS, clopper_pearson
    from benchtrail.errors import UserError
    from benchtrail.pipeline.measure_stages import run_stage, write_export
    from benchtrail.results.io import load_results
    from benchtrail.runner import environment
    from benchtrail.stats.paired import compare_paired

    importlib.import_module("benchtrail.worker.main")  # what every case's worker process imports
except ImportError as _exc:
    sys.stderr.write(f"gpu_check: cannot import {_exc.name or _exc}: {_exc}\n"
                     "gpu_check installs nothing: run it with a Python that has torch (with CUDA), numpy, "
                     "scipy, pyyaml and rich, e.g. PYTHON=/path/to/python3 bash "
                     "build_tools/benchmarks/gpu_check.sh\n")
    raise SystemExit(1) from None

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_NOT_GPU = 2
EXIT_CALIBRATION = 3
EXIT_SMOKE = 4
EXIT_DETECTOR = 5
EXIT_BUDGET = 6

PRESET = "cuda-smoke"
DEVICE_NAME = suite_devices.A2_HIGHGPU_1G.name

#: Calibration: cycles per second from synchronised host time over this long a sleep (s), the
#: median of ``CALIBRATION_REPEATS``; then CUDA events time a sleep of ``CHECK_MS`` worth of cycles,
#: the median of ``CHECK_REPEATS``; more than ``CALIBRATION_TOLERANCE`` off fails.
CALIBRATION_SECONDS = 0.2
CALIBRATION_REPEATS = 3
CHECK_MS = 2.0
CHECK_REPEATS = 11
CALIBRATION_TOLERANCE = 0.10

#: Detector check: one iteration is ``torch.cuda._sleep`` of ``DETECTOR_ITERATION_US`` worth of
#: cycles; a sample is one CUDA event pair around ``DETECTOR_LAUNCHES`` launches (µs per
#: iteration); ``DETECTOR_PAIRS`` pairs per trial; judged at ``DETECTOR_THRESHOLD_PCT``.
DETECTOR_ITERATION_US = 20.0
DETECTOR_LAUNCHES = 5
DETECTOR_PAIRS = 30
DETECTOR_THRESHOLD_PCT = 1.0
DETECTOR_DELTA_PCT = 2.0
DETECTOR_TRIALS = 100
#: An A/A alert rate above this means the paired detector is broken on this machine (exit 5). At
#: a 1% threshold a handful of A/A alerts in 100 trials can happen by chance and only gets reported.
AA_RATE_LIMIT = 0.20

#: The cuda-smoke stage: worker processes per case unless --full-sampling, the most a case's
#: worker may take (s), and the time kept back from the budget for the detector check (s).
SMOKE_PROCESSES = 1
SMOKE_CASE_TIMEOUT_S = 120.0
DETECTOR_RESERVE_S = 45.0
BUDGET_S = 280.0


# -- pure parts: calibration arithmetic, detector tallies, tables ----------------------------------


def cycles_per_second(cycles: int, seconds: float) -> float:
    """Clock cycles per second of a ``torch.cuda._sleep(cycles)`` that took ``seconds`` of host time.

    Raises:
        ValueError: ``cycles`` or ``seconds`` is not positive and finite.
    """
    if not (cycles > 0 and 0 < seconds < float("inf")):
        raise ValueError(f"need positive cycles and seconds, got {cycles!r} cycles in {seconds!r} s")
    return cycles / seconds


def expected_ms(cycles: int, rate: float) -> float:
    """The time in ms that ``cycles`` clock cycles take at ``rate`` cycles per second.

    Raises:
        ValueError: ``rate`` is not positive and finite, or ``cycles`` is negative.
    """
    if not (0 < rate < float("inf")) or cycles < 0:
        raise ValueError(f"need cycles >= 0 and a positive rate, got {cycles!r} cycles at {rate!r} cycles/s")
    return cycles / rate * 1e3


def relative_error(measured: float, expected: float) -> float:
    """``(measured - expected) / expected``: +0.05 is 5% longer than expected.

    Raises:
        ValueError: ``expected`` is not positive.
    """
    if not expected > 0:
        raise ValueError(f"expected time must be positive, got {expected!r}")
    return (measured - expected) / expected


def within_tolerance(measured: float, expected: float, tolerance: float = CALIBRATION_TOLERANCE) -> bool:
    """Whether ``measured`` is within ``tolerance`` (relative, 0.10 = 10%) of ``expected``."""
    return abs(relative_error(measured, expected)) <= tolerance


@dataclasses.dataclass(frozen=True)
class Calibration:
    """``torch.cuda._sleep`` calibrated on the host clock and checked with CUDA events.

    Attributes:
        rate: clock cycles per second (host time over ``long_cycles``, median of the repeats).
        long_cycles: cycles of each calibration sleep; long_seconds: their host times (s).
        check_cycles: cycles of the checked sleep; check_ms: its CUDA-event times (ms).
    """

    rate: float
    long_cycles: int
    long_seconds: tuple[float, ...]
    check_cycles: int
    check_ms: tuple[float, ...]

    @property
    def expected_ms(self) -> float:
        return expected_ms(self.check_cycles, self.rate)

    @property
    def measured_ms(self) -> float:
        return float(np.median(self.check_ms))

    @property
    def error(self) -> float:
        return relative_error(self.measured_ms, self.expected_ms)

    @property
    def ok(self) -> bool:
        return within_tolerance(self.measured_ms, self.expected_ms)


def format_calibration(cal: Calibration) -> str:
    """The calibration's lines: the clock rate, the expected and the CUDA-event time, the verdict."""
    return "\n".join([
        f"torch.cuda._sleep: {cal.rate:.4g} cycles/s ({cal.rate / 1e9:.3f} GHz) from {cal.long_cycles} "
        "cycles in "
        + ", ".join(f"{s * 1e3:.1f}" for s in cal.long_seconds) + " ms (host clock, synchronised)",
        f"  {cal.check_cycles} cycles: expected {cal.expected_ms:.4f} ms, CUDA events {cal.measured_ms:.4f} "
        "ms "
        f"(median of {len(cal.check_ms)}, {min(cal.check_ms):.4f}-{max(cal.check_ms):.4f}), "
        f"off by {cal.error:+.2%} (limit ±{CALIBRATION_TOLERANCE:.0%}): {'ok' if cal.ok else 'FAILED'}",
    ])


def judge_trial(base: np.ndarray, head: np.ndarray, threshold_pct: float = DETECTOR_THRESHOLD_PCT,
                seed: int = 0) -> tuple[str, float]:
    """(verdict, median pair ratio head/base) of one paired trial, from ``compare_paired`` (lower is
    better); samples in µs, ``base[j]`` paired with ``head[j]``."""
    inference = compare_paired([np.asarray(base, float)], [np.asarray(head, float)],
                               threshold_pct=threshold_pct,
                               lower_is_better=True, seed=seed)
    return str(inference.verdict[0]), float(inference.ratio[0])


def detector_rows(trials: list[tuple[float, str, float]]) -> list[dict[str, Any]]:
    """One row per δ from trials ``(δ %, verdict, ratio)``: A/A (δ = 0) counts ``regressed`` or
    ``improved`` as an alert, δ > 0 counts ``regressed`` (a detection). Each row: ``delta_pct``,
    ``trials``, ``alerts``, ``rate``, the 95% Clopper–Pearson ``ci_low``/``ci_high`` (fractions),
    ``median_ratio`` over trials and ``verdicts`` (counts)."""
    rows = []
    for delta in sorted({t[0] for t in trials}):
        group = [t for t in trials if t[0] == delta]
        alerting = ALERTS if delta == 0 else ("regressed",)
        alerts = sum(verdict in alerting for _, verdict, _ in group)
        low, high = clopper_pearson(alerts, len(group))
        verdicts: dict[str, int] = {}
        for _, verdict, _ in group:
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        rows.append({"delta_pct": delta, "trials": len(group), "alerts": alerts, "rate": alerts / len(group),
                     "ci_low": low, "ci_high": high,
                     "median_ratio": float(np.median([r for _, _, r in group])),
                     "verdicts": dict(sorted(verdicts.items()))})
    return rows


def aa_broken(rows: list[dict[str, Any]], limit: float = AA_RATE_LIMIT) -> bool:
    """Whether the A/A row's alert rate is above ``limit``."""
    return any(r["delta_pct"] == 0 and r["rate"] > limit for r in rows)


def format_detector(rows: list[dict[str, Any]], threshold_pct: float = DETECTOR_THRESHOLD_PCT) -> str:
    """The detector table: trials, alerts, rate and its 95% Clopper–Pearson interval per δ."""
    lines = [f"{'check':<12} {'trials':>6} {'alerts':>6} {'rate':>7}  {'95% CP interval':<17} "
             f"{'median ratio':>12}  "
             f"verdicts (threshold {threshold_pct:g}%)"]
    for r in rows:
        check = "A/A" if r["delta_pct"] == 0 else f"δ = {r['delta_pct']:g}%"
        verdicts = ", ".join(f"{k} {v}" for k, v in r["verdicts"].items())
        lines.append(f"{check:<12} {r['trials']:>6} {r['alerts']:>6} {r['rate']:>7.1%}  "
                     f"{r['ci_low']:>6.1%} - {r['ci_high']:<7.1%}  {r['median_ratio']:>12.4f}  {verdicts}")
    return "\n".join(lines)


def format_summary(cal: Calibration, smoke: list[dict[str, Any]] | None,
                   detector: list[dict[str, Any]]) -> str:
    """One line: the calibration's verdict, the cuda-smoke cases ok, the detector's alerts."""
    parts = [f"calibration {'ok' if cal.ok else 'FAILED'} ({cal.error:+.2%})"]
    if smoke is None:
        parts.append("cuda-smoke not run to the end")
    else:
        parts.append(f"cuda-smoke {sum(r['status'] == 'ok' for r in smoke)} of {len(smoke)} ok")
    for r in detector:
        check = "A/A" if r["delta_pct"] == 0 else f"δ = {r['delta_pct']:g}%"
        parts.append(f"{check} {r['alerts']}/{r['trials']} alerts")
    return "; ".join(parts)


def _num(value: Any, fmt: str, scale: float | None = None) -> str:
    """``value`` (divided by ``scale``) in ``fmt``; ``-`` when it is not a number (a missing field)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return format(value / scale if scale else value, fmt)


def _median(values: Any) -> float | None:
    return float(np.median(values)) if isinstance(values, list) and values else None


def smoke_rows(records: Any) -> list[dict[str, Any]]:
    """Per case: name, status, reason, median, IQR (µs per iteration), n and the GPU timing fields of
    ``details`` (read defensively: a field a record lacks is None)."""
    rows = []
    for rec in records:
        details = rec.details if isinstance(rec.details, dict) else {}
        timing = details.get("timing") if isinstance(details.get("timing"), dict) else {}
        memory = details.get("memory") if isinstance(details.get("memory"), dict) else {}
        rows.append({"name": rec.name, "status": rec.status, "reason": rec.reason, "median_us": rec.median,
                     "iqr_us": rec.iqr, "n": rec.n, "method": timing.get("method"),
                     "launches": timing.get("launches"), "reported": timing.get("reported"),
                     "gpu_median_us": _median(details.get("gpu_samples_us")),
                     "wall_median_us": _median(details.get("wall_samples_us")),
                     "max_memory_allocated_bytes": memory.get("max_memory_allocated_bytes"),
                     "max_memory_reserved_bytes": memory.get("max_memory_reserved_bytes")})
    return rows


def format_smoke(rows: list[dict[str, Any]]) -> str:
    """The cuda-smoke table; a case that is not ok gets its reason on the next line."""
    w = max([len(r["name"]) for r in rows] + [4])
    lines = [f"{'name':<{w}} {'status':<8} {'median µs':>10} {'IQR µs':>8} {'n':>3}  {'method':<12} {'k':>4} "
             f"{'reported':<8} {'gpu µs':>9} {'wall µs':>9} {'alloc MiB':>9} {'resv MiB':>9}"]
    for r in rows:
        lines.append(f"{r['name']:<{w}} {r['status']:<8} {_num(r['median_us'], '.2f'):>10} "
                     f"{_num(r['iqr_us'], '.2f'):>8} {_num(r['n'], 'd'):>3}  {r['method'] or '-':<12} "
                     f"{_num(r['launches'], 'd'):>4} {r['reported'] or '-':<8} "
                     f"{_num(r['gpu_median_us'], '.2f'):>9} "
                     f"{_num(r['wall_median_us'], '.2f'):>9} "
                     f"{_num(r['max_memory_allocated_bytes'], '.1f', 2**20):>9} "
                     f"{_num(r['max_memory_reserved_bytes'], '.1f', 2**20):>9}")
        if r["status"] != "ok":
            reason = (r["reason"] or "no reason recorded").strip().splitlines() or [""]
            lines.append(f"    reason: {reason[0][:300]}")
    return "\n".join(lines)


# -- the device --------------------------------------------------------------------------------------


def device_lines() -> list[str]:
    """Python, torch, CUDA and cuDNN versions, and the device (name, capability, memory)."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    lines = [f"python {sys.version.split()[0]} · torch {torch.__version__} · CUDA "
             f"{torch.version.cuda or 'none'} "
             f"· cuDNN {cudnn or 'none'} · numpy {np.__version__}"]
    if not torch.cuda.is_available():
        lines.append("device: no CUDA device")
        return lines
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    major, minor = torch.cuda.get_device_capability(index)
    lines.append(f"device {index} of {torch.cuda.device_count()}: {torch.cuda.get_device_name(index)} · "
                 "compute "
                 f"capability {major}.{minor} · {props.total_memory / 2**30:.1f} GiB · "
                 f"{props.multi_processor_count} SMs")
    try:  # driver and clocks from nvidia-smi, where benchtrail's environment module can read them
        info = environment.gpu_info(index)
        extra = {k: v for k, v in info.items() if k.startswith(("gpu_driver", "gpu_clocks"))}
        if extra:
            lines.append("nvidia-smi: " + ", ".join(f"{k.removeprefix('gpu_')} {v}" for k,
                                                    v in sorted(extra.items())))
    except Exception as exc:  # informational only
        lines.append(f"nvidia-smi: not read ({type(exc).__name__}: {exc})")
    return lines


def not_a_gpu_reason() -> str:
    """Why ``torch.cuda.is_available()`` is False, as far as torch can tell."""
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a build without CUDA; run this with the GPU machine's Python "
                "(PYTHON=...) and a CUDA build of torch")
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: no GPU, no driver, "
            "or "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!s} hides it")


# -- step 2: calibrate torch.cuda._sleep ---------------------------------------------------------------


def _host_seconds(cycles: int) -> float:  # pragma: no cover - GPU
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _event_ms(cycles: int) -> float:  # pragma: no cover - GPU
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)  # ms


def calibrate_sleep() -> Calibration:  # pragma: no cover - GPU
    """Cycles per second of ``torch.cuda._sleep`` on the host clock, then a CUDA-event check."""
    pilot = 10_000_000
    for _ in range(3):  # wake the GPU's clocks up; the last pilot sizes the calibration sleep
        pilot_s = _host_seconds(pilot)
    long_cycles = max(pilot, int(cycles_per_second(pilot, pilot_s) * CALIBRATION_SECONDS))
    long_seconds = tuple(_host_seconds(long_cycles) for _ in range(CALIBRATION_REPEATS))
    rate = float(np.median([cycles_per_second(long_cycles, s) for s in long_seconds]))
    check_cycles = int(rate * CHECK_MS / 1e3)
    _event_ms(check_cycles)  # one untimed
    check_ms = tuple(_event_ms(check_cycles) for _ in range(CHECK_REPEATS))
    return Calibration(rate, long_cycles, long_seconds, check_cycles, check_ms)


# -- step 3: the cuda-smoke preset through benchtrail's stages ---------------------------------------


class BudgetExceeded(Exception):
    """The cuda-smoke stage ran past its share of the time budget (raised by a timer signal)."""


def smoke_suite(full_sampling: bool, case_timeout_s: float = SMOKE_CASE_TIMEOUT_S) -> Any:
    """The suite with the cuda-smoke run configs' execution configs reduced to ``SMOKE_PROCESSES``
    worker processes and at most ``case_timeout_s`` per worker (the suite as it is with ``full_sampling``)."""
    suite = suite_module.generate()
    if full_sampling:
        return suite

    def reduce(rc: Any) -> Any:
        if PRESET not in rc.presets:
            return rc
        ex = rc.execution_config
        return dataclasses.replace(rc, execution_config=dataclasses.replace(
            ex, processes=min(ex.processes, SMOKE_PROCESSES), timeout_s=min(ex.timeout_s, case_timeout_s)))

    return dataclasses.replace(suite, run_configs=tuple(reduce(rc) for rc in suite.run_configs))


def run_smoke(folder: Path, full_sampling: bool = False) -> tuple[list[dict[str, Any]], Path]:
    """Export the cuda-smoke preset into ``folder/execution.json``, run it on ``DEVICE_NAME`` into
    ``folder/results/DEVICE_NAME.json`` with benchtrail's run stage; return (``smoke_rows``, results path).

    Raises:
        UserError: the preset selects no run config, or a file exists already.
    """
    suite = smoke_suite(full_sampling)
    if not suite.select_run_configs((PRESET,)):
        raise UserError(f"preset {PRESET!r} selects no run config in benchmark_suites/suite.py")
    export = write_export(suite, "execution", (PRESET,), folder / "execution.json")
    run_info = {"run_id": f"gpu-check-{folder.name}", "attempt": 1, "presets": [PRESET]}
    (folder / "results").mkdir(exist_ok=True)
    path, _ = run_stage(export, DEVICE_NAME, None, folder / "results" / f"{DEVICE_NAME}.json", run_info,
                        repo=REPO)
    return smoke_rows(load_results(path).benchmarks), path


def _on_alarm(signum: int, frame: Any) -> None:
    raise BudgetExceeded()


def run_smoke_within(folder: Path, full_sampling: bool, seconds: float) -> tuple[list[dict[str, Any]] | None,
                                                                                 str]:
    """:func:`run_smoke` under a timer of ``seconds`` (the running worker is killed when it fires);
    returns (rows or None, message)."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1.0))
    try:
        rows, path = run_smoke(folder, full_sampling)
        return rows, str(path)
    except BudgetExceeded:
        return None, f"the cuda-smoke stage did not finish within its {seconds:.0f} s budget"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- step 4: the detector on a GPU workload --------------------------------------------------------


def sample_paired(base_cycles: int, head_cycles: int, lead_cycles: int, rng: np.random.Generator,
                  pairs: int = DETECTOR_PAIRS, launches: int = DETECTOR_LAUNCHES
                  ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - GPU
    """``pairs`` paired samples (µs per iteration) of ``torch.cuda._sleep(base_cycles)`` and of
    ``_sleep(head_cycles)``, in one process on one stream: pair j is a base and a head sample back to
    back, in a random order per pair; each sample is one CUDA event pair around ``launches`` launches.
    Everything is queued behind a ``lead_cycles`` sleep and synchronised once, so no event waits
    for the host."""
    sleep = torch.cuda._sleep
    base_first = rng.random(pairs) < 0.5
    events = []
    torch.cuda.synchronize()
    sleep(lead_cycles)
    for j in range(pairs):
        for arm in ((0, 1) if base_first[j] else (1, 0)):
            cycles = base_cycles if arm == 0 else head_cycles
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(launches):
                sleep(cycles)
            end.record()
            events.append((j, arm, start, end))
    torch.cuda.synchronize()
    out = np.empty((2, pairs))
    for j, arm, start, end in events:
        out[arm, j] = start.elapsed_time(end) * 1e3 / launches  # elapsed_time is in ms
    return out[0], out[1]


def detector_check(rate: float, trials: int,  # pragma: no cover - GPU
                   seed: int) -> list[tuple[float, str, float]]:
    """``trials`` A/A and ``trials`` δ = ``DETECTOR_DELTA_PCT`` trials in a random order, each
    judged by :func:`judge_trial`; returns ``(δ %, verdict, ratio)`` per trial."""
    rng = np.random.default_rng(seed)
    cycles = int(rate * DETECTOR_ITERATION_US / 1e6)
    lead = int(rate * 2e-3)
    for _ in range(3):  # warm-up
        sample_paired(cycles, cycles, lead, rng)
    deltas = rng.permutation([0.0] * trials + [DETECTOR_DELTA_PCT] * trials)
    out = []
    for i, delta in enumerate(deltas):
        base, head = sample_paired(cycles, round(cycles * (1 + delta / 100)), lead, rng)
        verdict, ratio = judge_trial(base, head, seed=i)
        out.append((float(delta), verdict, ratio))
    return out


# -- main ------------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Bad usage is exit 1 (argparse's 2 is this script's "not a GPU")."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options; bad usage exits 1."""
    parser = _Parser(prog="gpu_check.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="keep the export, the results and gpu-check.json in a new folder under DIR "
                             "(default: a temporary folder, removed)")
    parser.add_argument("--full-sampling", action="store_true",
                        help="run cuda-smoke with the preset's own sampling (3 worker processes per case) "
                             "instead of 1; may not fit in 5 minutes")
    parser.add_argument("--trials", type=int, default=DETECTOR_TRIALS,
                        help=f"A/A trials and δ = {DETECTOR_DELTA_PCT:g}%% trials each (default "
                        f"{DETECTOR_TRIALS})")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the pair orders and trial order (default 0)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S,
                        help=f"time budget of the whole check in seconds (default {BUDGET_S:g})")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, got {args.trials}")
    if args.budget_s < DETECTOR_RESERVE_S + 30:
        parser.error(f"--budget-s must be at least {DETECTOR_RESERVE_S + 30:g}, got {args.budget_s:g}")
    return args


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _export_pythonpath() -> None:
    """Put the checkout's ``build_tools`` and root first on PYTHONPATH, which each case's worker
    (``python -m benchtrail.worker``) inherits."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in _PATHS]
    os.environ["PYTHONPATH"] = os.pathsep.join(_PATHS + rest)


def _calibration_step(failures: list[tuple[int, str]]) -> Calibration:  # pragma: no cover - GPU
    _step("2. calibrating torch.cuda._sleep against the host clock, checking CUDA events")
    cal = calibrate_sleep()
    print(format_calibration(cal))
    if not cal.ok:
        message = (f"CUDA-event time of a calibrated torch.cuda._sleep is off by {cal.error:+.2%} "
                   f"(limit ±{CALIBRATION_TOLERANCE:.0%}): {cal.measured_ms:.4f} ms measured, "
                   f"{cal.expected_ms:.4f} ms expected")
        print(f"gpu_check: {message}", file=sys.stderr)
        failures.append((EXIT_CALIBRATION, message))
    return cal


def _smoke_step(folder: Path, full_sampling: bool, budget_s: float,
                failures: list[tuple[int, str]]) -> dict[str, Any]:  # pragma: no cover - GPU
    _step(f"3. preset {PRESET} through benchtrail's export and run stages")
    print("sampling: the preset's own (--full-sampling)" if full_sampling else
          f"sampling reduced to stay well under 5 minutes: {SMOKE_PROCESSES} worker process per case (the "
          "preset "
          f"asks 3), at most {SMOKE_CASE_TIMEOUT_S:g} s per worker; --full-sampling for the preset's own")
    try:
        rows, where = run_smoke_within(folder, full_sampling, budget_s)
        stopped = EXIT_BUDGET
    except UserError as exc:
        rows, where, stopped = None, str(exc), EXIT_SMOKE
    if rows is None:
        print(f"gpu_check: {where}", file=sys.stderr)
        failures.append((stopped, where))
    else:
        print(format_smoke(rows))
        print(f"results: {where}")
        bad = [r["name"] for r in rows if r["status"] != "ok"]
        if bad:
            failures.append((EXIT_SMOKE,
                             f"{len(bad)} of {len(rows)} cuda-smoke cases not ok: {', '.join(bad)}"))
    return {"rows": rows, "results": where, "full_sampling": full_sampling}


def _detector_step(rate: float, trials: int, seed: int,
                   failures: list[tuple[int, str]]) -> dict[str, Any]:  # pragma: no cover - GPU
    _step(f"4. detector on a GPU workload: paired torch.cuda._sleep, A/A and δ = {DETECTOR_DELTA_PCT:g}%")
    print(f"one iteration: torch.cuda._sleep of {DETECTOR_ITERATION_US:g} µs; sample: {DETECTOR_LAUNCHES} "
          "launches "
          f"per CUDA event pair; {DETECTOR_PAIRS} interleaved pairs per trial (random order per pair); "
          f"compare_paired at {DETECTOR_THRESHOLD_PCT:g}%")
    judged = detector_check(rate, trials, seed)
    rows = detector_rows(judged)
    print(format_detector(rows))
    if aa_broken(rows):
        message = (f"detector A/A alert rate above {AA_RATE_LIMIT:.0%}: "
                   "paired GPU samples of one workload do not agree with themselves")
        print(f"gpu_check: {message}", file=sys.stderr)
        failures.append((EXIT_DETECTOR, message))
    return {"rows": rows, "trials": [list(t) for t in judged], "threshold_pct": DETECTOR_THRESHOLD_PCT,
            "pairs": DETECTOR_PAIRS, "launches": DETECTOR_LAUNCHES, "iteration_us": DETECTOR_ITERATION_US}


def main(argv: list[str] | None = None) -> int:
    """Run the check (module docstring); return the exit code."""
    args = parse_args(argv)
    _export_pythonpath()
    start = time.perf_counter()
    _step("1. device")
    device = device_lines()
    print("\n".join(device))
    if not torch.cuda.is_available():
        print(f"gpu_check: not a GPU: {not_a_gpu_reason()}", file=sys.stderr)
        return EXIT_NOT_GPU
    failures: list[tuple[int, str]] = []  # (exit code, message), in step order
    cal = _calibration_step(failures)
    report: dict[str, Any] = {"schema_version": 1, "device": device, "calibration": {
        **dataclasses.asdict(cal), "expected_ms": cal.expected_ms, "measured_ms": cal.measured_ms,
        "error": cal.error, "ok": cal.ok}}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        folder = (args.output_dir / f"gpu-check-{stamp}") if args.output_dir else Path(tmp) / stamp
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            print(f"gpu_check: cannot create {folder}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        smoke_budget = args.budget_s - DETECTOR_RESERVE_S - (time.perf_counter() - start)
        report["smoke"] = _smoke_step(folder, args.full_sampling, smoke_budget, failures)
        report["detector"] = _detector_step(cal.rate, args.trials, args.seed, failures)

        elapsed = time.perf_counter() - start
        code = failures[0][0] if failures else EXIT_OK
        _step("5. summary")
        print(format_summary(cal, report["smoke"]["rows"], report["detector"]["rows"]))
        for _, message in failures:
            print(f"FAILED: {message}")
        print(f"elapsed {elapsed:.1f} s; exit {code}")
        report.update(elapsed_s=elapsed, exit_code=code, failures=[m for _, m in failures])
        if args.output_dir:
            print(jsonio.write_json(folder / "gpu-check.json", report, exclusive=True))
        return code


if __name__ == "__main__":
    sys.exit(main())
