#!/usr/bin/env python3
"""Measure issue 44's instruction gate end to end: a commit adding 2 x threshold of work to one function
benchmark, run through ``benchtrail pipeline --metrics latency,instructions`` as a user runs it.

Makes a git project of three function benchmarks (``steady``, ``grows``, ``other``: a Python loop then one
small tensor op, about 0.8M instructions a call, as tests/test_instructions.py's project); ``grows`` loops
``LOOPS`` times, a module constant outside the content hash. The base commit (branch ``main``) is run once
into a store; branch ``grow`` raises ``LOOPS`` by 2 x the shipped instruction threshold of the loop (plus
10%: the loop is not the whole call). Each trial copies the base's store (so no earlier trial of the head
can be its baseline) and runs the default ``pipeline`` (its re-check included) on ``grow`` with
``--base-commit`` the base; with ``--noise`` (the default) everything runs beside ``evaluate-detector
--noise``'s background load (``benchtrail.detector.background_load``).

Prints a Markdown table, a row per trial: the grown instruction row's verdict · mark and change, the other
instruction rows' verdicts, whether comment.md has the per-function diff ("Why it got slower (callgrind)"
naming the grown series alone), the grown case's latency verdict, the other latency rows confirmed regressed
or improved, and the trial's seconds; then "caught k of N; false alarms m; diff shown j of N".

Usage: python build_tools/benchmarks/measure_instruction_gate.py [--trials 10] [--no-noise] [--keep DIR]
[--device cpu|cpu-counted]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure_detection import CLI, _git, interval

BASE_LOOPS = 2000
FUNCTIONS = ("steady", "grows", "other")
GROWN = "grows"
PROJECT = '''import torch

from benchtrail import benchmark

LOOPS = {loops}

_FEW = dict(inputs=lambda: torch.ones(4), processes=1, min_samples=6, warmup_time_ms=0, devices=["{device}"])


def _work(x, loops):
    total = 0
    for i in range(loops):
        total += i
    return x + total


@benchmark(**_FEW)
def steady(x):
    return _work(x, 2000)


@benchmark(**_FEW)
def grows(x):
    return _work(x, LOOPS)


@benchmark(**_FEW)
def other(x):
    return _work(x, 1900)
'''
WHY = "Why it got slower (callgrind)"


def threshold_pct() -> float:
    """The shipped threshold of the grown instruction row, in percent."""
    from benchtrail.compare.rules import find_threshold, load_thresholds

    return find_threshold(load_thresholds(), "execution", "instructions", "gate_bench.grows.instructions",
                          "lower-is-better").threshold


def make_project(repo: Path, head_loops: int, device: str) -> str:
    """The project: its base on ``main``, the head on ``grow`` (checked out); the base's sha."""
    repo.mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.benchtrail]\nbenchmarks = ["gate_bench"]\n'
                                         'presets = "default"\n')
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "gate_bench.py").write_text(PROJECT.format(loops=BASE_LOOPS, device=device))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-qb", "grow")
    (repo / "gate_bench.py").write_text(PROJECT.format(loops=head_loops, device=device))
    _git(repo, "commit", "-qam", f"grows loops {head_loops} times")
    return base


def pipeline(repo: Path, store: Path, *extra: str) -> tuple[float, Path]:
    """One default ``benchtrail pipeline --metrics latency,instructions``; (seconds, its run directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BENCHTRAIL_"))}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CLI, "pipeline", "--store", str(store), "--metrics",
                           "latency,instructions", *extra], cwd=repo, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 2):
        sys.exit(f"benchtrail pipeline failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                 f"{proc.stderr[-3000:]}")
    return seconds, (repo / proc.stdout.strip().splitlines()[-1]).parents[1]


def why_block(comment: str) -> str:
    """The comment's folded callgrind "why" block ("" without one)."""
    start = comment.find(WHY)
    return "" if start < 0 else comment[start:comment.find("</details>", start)]


def summarize(run_dir: Path, seconds: float) -> dict:
    """What the table shows of one head run (its comparison.json and comment/comment.md under ``run_dir``)."""
    from benchtrail.compare.document import load_comparison
    from benchtrail.compare.gate import check
    from benchtrail.compare.tables import display_name

    rows = load_comparison(run_dir / "comparison.json").rows
    counted = {r.name.split(".")[1]: r for r in rows if r.metric == "instructions"}
    timed = {r.name.split(".")[1]: r for r in rows if r.metric == "latency"}
    if sorted(counted) != sorted(FUNCTIONS):
        sys.exit(f"{run_dir}: instruction rows {sorted(counted)}, expected {sorted(FUNCTIONS)}")
    block = why_block((run_dir / "comment" / "comment.md").read_text(encoding="utf-8"))
    grown = counted[GROWN]
    diff = "1 series" in block and f"`{display_name(grown, True)}`" in block and "**Why** (callgrind" in block
    return {"grown": grown, "others": {n: counted[n] for n in FUNCTIONS if n != GROWN}, "diff": diff,
            "latency": timed.get(GROWN), "timed": {n: r for n, r in timed.items() if n != GROWN},
            "seconds": seconds,
            "alone": [r.id for r in check(rows, [], rule="confirmed").failing] == [grown.id]}


def trial(repo: Path, base_store: Path, store: Path, base: str, keep: Path | None) -> dict:
    """One head pipeline against a fresh copy of the base's store (:func:`summarize`); ``keep``: a folder to
    copy its comparison.json and comment/ into."""
    shutil.copytree(base_store, store)
    seconds, run_dir = pipeline(repo, store, "--base-commit", base)
    summary = summarize(run_dir, seconds)
    if keep:
        keep.mkdir(parents=True)
        shutil.copy(run_dir / "comparison.json", keep)
        shutil.copytree(run_dir / "comment", keep / "comment")
    shutil.rmtree(store)
    return summary


def verdict(row) -> str:
    """``verdict[ · mark][ · noisy]``, as the comment labels a row."""
    return " · ".join([row.verdict, *([row.mark] if row.mark else []), *(["noisy"] if row.noisy else [])])


def alarm(row) -> bool:
    return row.verdict in ("regressed", "improved") and row.mark == "confirmed"


def report(trials: list[dict]) -> None:
    print("| trial | grown row | change % | other instruction rows | diff in comment | latency of grown case "
          "| other latency rows confirmed | s |")
    print("|---|---|---|---|---|---|---|---|")
    for i, t in enumerate(trials, 1):
        g, lat = t["grown"], t["latency"]
        others = ", ".join(f"{n} {verdict(r)}" for n, r in t["others"].items())
        latency = f"{verdict(lat)} ({lat.change:+.1f}%)" if lat and lat.change is not None else (
            verdict(lat) if lat else "-")
        diff = "yes" if t["diff"] else "no"
        timed = ", ".join(f"{n} {verdict(r)} ({r.change:+.1f}%)" for n, r in t["timed"].items()
                          if alarm(r)) or "none"
        print(f"| {i} | {verdict(g)} | {g.change:+.3f} | {others} | {diff} | {latency} | {timed} "
              f"| {t['seconds']:.0f} |")
    n = len(trials)
    caught = sum(t["grown"].verdict == "regressed" and t["grown"].mark == "confirmed" for t in trials)
    false = sum(r.verdict in ("regressed", "improved") for t in trials for r in t["others"].values())
    shown = sum(t["diff"] for t in trials)
    alone = sum(t["alone"] for t in trials)
    timed = sum(alarm(r) for t in trials for r in t["timed"].values())
    print(f"\ncaught {caught} of {n}; false alarms {false}; diff shown {shown} of {n}; the grown row the "
          "only "
          f"one gating (benchtrail gate) {alone} of {n}")
    print(f"(wall time: untouched latency rows regressed or improved · confirmed: {timed} of {2 * n})")
    print(f"(caught {interval(caught, n)}, Clopper–Pearson 95%; false alarms over {2 * n} untouched rows)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="head pipelines (default 10)")
    parser.add_argument("--noise", action=argparse.BooleanOptionalAction, default=True,
                        help="run beside evaluate-detector --noise's background load (default on)")
    parser.add_argument("--keep", type=Path, help="copy each trial's comparison.json and comment/ to "
                        "KEEP/trial-<n>/")
    parser.add_argument("--device", choices=("cpu", "cpu-counted"), default="cpu",
                        help="the benchmarks' device: cpu (wall time gates too) or cpu-counted (gates on "
                        "counts, "
                             "wall time reported; default cpu)")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials {args.trials}: allowed: a whole number from 1")
    if shutil.which("valgrind") is None or shutil.which("vgdb") is None:
        parser.error("valgrind and vgdb are not on PATH (apt-get install valgrind)")
    from benchtrail.detector.background_load import Load, running_load

    threshold = threshold_pct()
    head_loops = BASE_LOOPS + math.ceil(BASE_LOOPS * 2 * threshold / 100 * 1.1)
    print(f"threshold {threshold}%; grows: {BASE_LOOPS} -> {head_loops} loops; "
          f"{'with' if args.noise else 'without'} the background load; device {args.device}")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="benchtrail-instruction-gate-") as tmp, \
            running_load(Load() if args.noise else None):
        work = Path(tmp)
        repo = work / "repo"
        base = make_project(repo, head_loops, args.device)
        _git(repo, "checkout", "-q", "main")
        seconds, _ = pipeline(repo, work / "store-base")
        print(f"  baseline run: {seconds:.0f} s", file=sys.stderr)
        _git(repo, "checkout", "-q", "grow")
        trials = []
        for index in range(args.trials):
            trials.append(trial(repo, work / "store-base", work / f"store-{index}", base,
                                args.keep / f"trial-{index + 1}" if args.keep else None))
            print(f"  trial {index + 1}/{args.trials}: {time.monotonic() - start:.0f} s", file=sys.stderr)
    report(trials)
    print(f"({args.trials} trials in {(time.monotonic() - start) / 60:.1f} min, baseline run included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
