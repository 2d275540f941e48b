#!/usr/bin/env python3
"""Measure the between-process variance of forked vs spawned worker processes.

For each case (a run config of the suite) this runs ``--processes`` K worker processes per start
method, ``fork`` (a child of the pre-imported worker server, :mod:`benchtrail.worker.server`) and
``spawn`` (a fresh ``python -m benchtrail.worker``), and with ``--methods fork,spawn,fork-new`` also
``fork-new`` (a child of a server started for that one process: see :data:`METHODS`), interleaved
A B A B ... so that a drift of the machine (other work starting or stopping, heating) hits every
method alike; ``--seed`` picks the order of the cases and which method starts each case. Every
process runs the case once through ``benchtrail.runner.launch.run_in_worker`` and answers
``samples`` in µs per iteration; ``--save`` keeps them (JSON) for another analysis.

Forked children share the server's address-space layout (ASLR is drawn once, at the server's
``exec``), its Python hash seed (``PYTHONHASHSEED``, drawn at interpreter start) and its imported,
frozen heap; spawned ones each draw their own. Per-process differences of that kind are why
pyperf runs many processes and pools them ("Runs, values, warmups, outer and inner loops",
https://pyperf.readthedocs.io/en/latest/run_benchmark.html; V. Stinner in psf/pyperf#136: "each
process has different performance depending on ... address space layout ..., Python random hash
seed"). Forking could therefore *hide* between-process variance that a suite relies on averaging
out; this script measures whether it does.

Per case and method it prints (Markdown):

* ``K``: processes that answered ``ok``;
* ``median µs``: median over processes of the process median (µs per iteration);
* ``between CV``: sample std (ddof 1) of the process medians / their mean;
* ``within CV``: mean over processes of std (ddof 1) / mean of that process's samples;
* ``var ratio``: between-process variance component / within-process variance of the one-way
  random-effects model y_ij = mu + a_i + e_ij, fitted by the ANOVA (method of moments) estimator
  on ln(samples) (timings are right-skewed; on the log scale both components are squared relative
  spreads): MSB = sum_i n_i (ybar_i - ybar)^2 / (k - 1), MSW = sum_ij (y_ij - ybar_i)^2 / (N - k),
  n0 = (N - sum_i n_i^2 / N) / (k - 1), sigma_a^2 = max(0, (MSB - MSW) / n0), sigma_e^2 = MSW
  (Searle, Casella & McCulloch, *Variance Components*, Wiley 1992, ch. 3, one-way classification;
  Montgomery, *Design and Analysis of Experiments*, random-effects model). 0 means the process
  means differ no more than the samples within a process would make them;
* ``wall s``: mean wall seconds per worker process (time around ``run_in_worker``; a fork includes
  the fork and the case's imports, a spawn the ``import torch`` too).

Then per method a pooled row: geometric means over cases of the CVs, the arithmetic mean of the
variance ratios (a ratio may be 0) and the mean wall seconds. Then per case a test of whether the
process medians' variance differs between each method and the first (fork), on ln(process median)
so that a difference of level between the methods does not pass for one of spread: Levene's test
with the median as centre (Brown–Forsythe; ``scipy.stats.levene``) and the two-sided F test of the
variance ratio (which assumes normal ln medians; Levene does not). With K = 6 per method either
test has little power: a p-value above 0.05 says only that no large difference showed.

The server's start (import torch once) is timed separately, from a discarded warm-up job of fork
and of spawn before the measured ones.

Usage: python build_tools/benchmarks/measure_process_variance.py [--cases A,B] [--processes 10] [--seed 0]
       [--methods fork,spawn[,fork-new]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

from benchtrail.runner import launch
from benchtrail.runner.launch import run_in_worker
from benchtrail.runner.server_pool import close_servers
from benchtrail.worker.protocol import run_request

DEFAULT_CASES = ("vrelu3.eager.inference-bs1", "mlp.eager.inference-bs1", "layer-norm.eager.inference-bs1",
                 "matmul-1024.eager.inference-bs1")
#: ``fork-new``: forked from a server started for that one process (its own working directory, so
#: its own server; closed afterwards, the ``fork`` method's server stays up), so each
#: process draws its own layout and hash seed as a spawned one does but runs in a forked child: the
#: spread between servers, which a run of the fork default carries between runs and between the arms
#: of a paired A/B run (each arm has its own server). Its wall seconds include the server's start.
METHODS = ("fork", "spawn", "fork-new")


def find_cases(names: list[str]) -> list:
    """The run configs of the suite named ``names`` (a name may leave off its device suffix).

    Raises:
        SystemExit: a name that matches no run config, or more than one.
    """
    from benchmark_suites.suite import generate

    configs = generate().run_configs
    chosen = []
    for name in names:
        hits = [rc for rc in configs if rc.name == name] or [rc for rc in configs
                                                             if rc.name.startswith(name + ".")
                                                            and "c2-standard" in rc.name]
        if len(hits) != 1:
            sys.exit(f"--cases: {name!r} matches {len(hits)} CPU run configs "
                     f"({', '.join(rc.name for rc in hits[:5]) or 'none'})")
        chosen.append(hits[0])
    return chosen


def run_once(rc, method: str) -> tuple[tuple[float, ...], float]:
    """One worker process of ``method`` running ``rc``: (samples in µs per iteration, wall seconds).

    Raises:
        SystemExit: the worker did not answer ``ok``.
    """
    with tempfile.TemporaryDirectory(prefix="measure-fork-new-") as tmp:
        # fork-new: a PYTHONPATH of its own, with a relative entry (the server's own folder, `tmp`), is never
        # shared (benchtrail.runner.server_pool): it gets a server of its own, stopped after
        env = ({"PYTHONPATH": os.pathsep.join(filter(None, (launch.worker_pythonpath(), ".")))}
               if method == "fork-new" else None)
        start = time.monotonic()
        response = run_in_worker(run_request(rc), rc.execution_config.timeout_s, rc.target_device.threads,
                                 env=env, cwd=Path(tmp) if env else None,
                                 method="spawn" if method == "spawn" else "fork")
        wall = time.monotonic() - start
        if env is not None:
            close_servers(env["PYTHONPATH"])
    if not response.ok or not response.samples:
        sys.exit(f"{rc.name} ({method}): {response.status}: {response.reason}")
    return tuple(response.samples), wall


def variance_components(groups: list[tuple[float, ...]]) -> tuple[float, float]:
    """(between-group variance component, within-group variance) of the one-way random-effects
    model, ANOVA estimator for unbalanced groups (see the module docstring); on the values given."""
    k = len(groups)
    n = np.array([len(g) for g in groups], dtype=float)
    total = n.sum()
    means = np.array([np.mean(g) for g in groups])
    grand = float(np.sum(n * means) / total)
    msb = float(np.sum(n * (means - grand) ** 2) / (k - 1))
    msw = float(sum(np.sum((np.asarray(g) - m) ** 2) for g, m in zip(groups, means)) / (total - k))
    n0 = (total - float(np.sum(n ** 2)) / total) / (k - 1)
    return max(0.0, (msb - msw) / n0), msw


def summarize(runs: list[tuple[tuple[float, ...], float]]) -> dict:
    """The row of one case and method from its processes' (samples, wall seconds)."""
    medians = [statistics.median(s) for s, _ in runs]
    between, within = variance_components([tuple(math.log(x) for x in s) for s, _ in runs])
    return {
        "k": len(runs),
        "medians": medians,
        "median": statistics.median(medians),
        "between_cv": statistics.stdev(medians) / statistics.fmean(medians),
        "within_cv": statistics.fmean(statistics.stdev(s) / statistics.fmean(s) for s, _ in runs),
        "ratio": between / within if within > 0 else float("nan"),
        "wall": statistics.fmean(w for _, w in runs),
    }


def f_test(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the F test that ``a`` and ``b`` have equal variance (normal samples)."""
    f = statistics.variance(a) / statistics.variance(b)
    dfa, dfb = len(a) - 1, len(b) - 1
    one_sided = stats.f.sf(f, dfa, dfb) if f > 1 else stats.f.cdf(f, dfa, dfb)
    return min(1.0, 2 * float(one_sided))


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if all(v > 0 for v in values) else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help="comma list of run config names (the device suffix may be left off)")
    parser.add_argument("--processes", type=int, default=10,
                        help="worker processes per case and method (>= 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case order and which method starts")
    parser.add_argument("--save", type=Path,
                        help="also write every process's samples and wall seconds (JSON)")
    parser.add_argument("--methods", default="fork,spawn",
                        help=f"comma list of {', '.join(METHODS)}; the others are tested against the first")
    args = parser.parse_args()
    if args.processes < 3:
        parser.error("--processes must be at least 3")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if len(methods) < 2 or len(set(methods)) != len(methods) or not set(methods) <= set(METHODS):
        parser.error(f"--methods: two or more distinct ones of {', '.join(METHODS)}")
    cases = find_cases([c.strip() for c in args.cases.split(",") if c.strip()])
    rng = random.Random(args.seed)
    rng.shuffle(cases)

    print(f"# {len(cases)} cases x {args.processes} processes x {len(methods)} methods; seed {args.seed}; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at start", file=sys.stderr)
    warm = {}
    for method in ("fork", "spawn"):  # start the server, warm the page cache; not counted
        _, warm[method] = run_once(cases[0], method)
    runs: dict[tuple[str, str], list] = {(rc.name, m): [] for rc in cases for m in methods}
    started = time.monotonic()
    for rc in cases:
        if len(methods) == 2:
            order = list(methods) if rng.random() < 0.5 else list(reversed(methods))
        else:
            order = rng.sample(methods, len(methods))
        for i in range(args.processes):
            for method in order:
                runs[rc.name, method].append(run_once(rc, method))
            print(f"# {rc.name}: {i + 1}/{args.processes} rounds", file=sys.stderr)
    elapsed = time.monotonic() - started
    if args.save:
        args.save.write_text(json.dumps([{"case": c, "method": m, "samples_us": list(s), "wall_s": w}
                                         for (c, m), value in runs.items() for s, w in value]))

    rows = {key: summarize(value) for key, value in runs.items()}
    print("| case | method | K | median µs | between CV | within CV | var ratio | wall s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for rc in cases:
        for method in methods:
            r = rows[rc.name, method]
            print(f"| {rc.name} | {method} | {r['k']} | {r['median']:.1f} | {r['between_cv']:.2%} | "
                  f"{r['within_cv']:.2%} | {r['ratio']:.3f} | {r['wall']:.2f} |")
    for method in methods:
        mine = [rows[rc.name, method] for rc in cases]
        print(f"| **pooled** ({len(cases)} cases) | {method} | {sum(r['k'] for r in mine)} | - | "
              f"{geomean([r['between_cv'] for r in mine]):.2%} | "
              f"{geomean([r['within_cv'] for r in mine]):.2%} | "
              f"{statistics.fmean(r['ratio'] for r in mine):.3f} | "
              f"{statistics.fmean(w for rc in cases for _, w in runs[rc.name, method]):.2f} |")
    print()
    first = methods[0]
    print(f"| case | method | var(ln medians) / var({first} ln medians) | Levene (median) p | F test p |")
    print("|---|---|---:|---:|---:|")
    for rc in cases:
        base = [math.log(m) for m in rows[rc.name, first]["medians"]]
        for method in methods[1:]:
            other = [math.log(m) for m in rows[rc.name, method]["medians"]]
            levene = stats.levene(other, base, center="median").pvalue
            print(f"| {rc.name} | {method} | {statistics.variance(other) / statistics.variance(base):.2f} | "
                  f"{levene:.3f} | {f_test(other, base):.3f} |")
    print()
    print(f"Warm-up (discarded): first fork {warm['fork']:.1f} s (includes the server's start), "
          f"first spawn {warm['spawn']:.1f} s; measured processes took {elapsed:.0f} s; "
          f"load average {os.getloadavg()[0]:.2f} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
