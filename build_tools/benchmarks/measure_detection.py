#!/usr/bin/env python3
"""Measure end-to-end detection: ``benchtrail pipeline`` against pytest-benchmark on a small project.

Makes a git project of three functions (``mix``, ``scan``, ``steady``: 0.3–3 ms each, torch on one thread),
benchmarked through benchtrail's function API and as pytest-benchmark tests. From its base commit three
branches change real code: ``aa`` touches no benchmarked code (A/A), ``slow10`` makes ``mix`` about 10%
slower and ``slow3`` makes ``scan`` about 3% slower, by more loop rounds, calibrated with
``torch.utils.benchmark.Timer`` before the trials (printed). Each trial runs, for both tools in turn on the
same checkout, the base commit, then each head (in a rotating order), comparing the head with that trial's
base: benchtrail's default ``pipeline`` (its stored-baseline comparison and paired re-check), and
pytest-benchmark's default run, its rule ``--benchmark-compare-fail=median:5%`` applied to the two runs'
JSON. With ``--noise`` conditions the trials run beside ``evaluate-detector``'s bounded background load.

Prints per tool, condition and change: caught, false alarms (rows and runs), ``inconclusive`` rows and
seconds per run, with Clopper–Pearson 95% intervals; ``--out`` keeps every trial's rows as JSON lines.

Needs pytest-benchmark (``pip install -c constraints.txt -e '.[measure]'``).
Usage: python build_tools/benchmarks/measure_detection.py [--trials 20] [--conditions quiet,noise]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = "import sys; from benchtrail.cli import main; sys.exit(main())"
#: Function -> (base loop rounds, the change its branch makes, target ratio, tolerance).
FUNCTIONS = {"mix": (120, "slow10", 1.10, 0.01), "scan": (200, "slow3", 1.03, 0.005),
             "steady": (60, None, 1.0, 0)}
CONDITIONS = ("quiet", "noise")
#: pytest-benchmark's rule: a head median more than 5% above the base median fails.
PYTEST_BENCHMARK_FAIL = 0.05

LIBRARY = '''"""Three functions whose loop rounds the detection branches change."""
import torch

MIX_ROUNDS = {mix}
SCAN_ROUNDS = {scan}
STEADY_ROUNDS = {steady}


def mix(x, w):
    for _ in range(MIX_ROUNDS):
        x = torch.tanh(x @ w)
    return x


def scan(x):
    for _ in range(SCAN_ROUNDS):
        x = torch.sin(torch.cumsum(x, 0))
    return x


def steady(x):
    for _ in range(STEADY_ROUNDS):
        x = torch.softmax(x, 0) + x
    return x
'''
INPUTS = '''import torch


def square():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(32, 32, generator=generator), torch.randn(32, 32, generator=generator) * 0.1


def vector():
    return torch.randn(4096, generator=torch.Generator().manual_seed(1))
'''
BENCHTRAIL = '''from benchtrail import benchmark

import detlib
from inputs import square, vector


@benchmark(inputs=square)
def mix(x, w):
    return detlib.mix(x, w)


@benchmark(inputs=vector)
def scan(x):
    return detlib.scan(x)


@benchmark(inputs=vector)
def steady(x):
    return detlib.steady(x)
'''
PYTEST = '''import torch

import detlib
from inputs import square, vector

torch.set_num_threads(1)  # as benchtrail's cpu device


def test_mix(benchmark):
    benchmark(detlib.mix, *square())


def test_scan(benchmark):
    benchmark(detlib.scan, vector())


def test_steady(benchmark):
    benchmark(detlib.steady, vector())
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=m", "-c", "user.email=m@example.com", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


def calibrate(repo: Path) -> dict[str, int]:
    """The slowed rounds of each changed function: the first whose Timer ratio lies within the tolerance."""
    import importlib

    import torch
    from torch.utils.benchmark import Timer

    torch.set_num_threads(1)
    sys.path.insert(0, str(repo))
    detlib, inputs = importlib.import_module("detlib"), importlib.import_module("inputs")
    args = {"mix": inputs.square(), "scan": (inputs.vector(),), "steady": (inputs.vector(),)}
    slowed = {}
    print("calibration (torch.utils.benchmark.Timer, one thread, µs per call):")

    def median(name: str, r: int) -> float:
        setattr(detlib, f"{name.upper()}_ROUNDS", r)
        timer = Timer("f(*a)", globals={"f": getattr(detlib, name), "a": args[name]}, num_threads=1)
        return timer.blocked_autorange(min_run_time=2).median * 1e6

    for name, (rounds, branch, target, tolerance) in FUNCTIONS.items():
        base = median(name, rounds)
        if branch is None:
            print(f"  {name:<7} {rounds} rounds: {base:8.1f} (untouched)")
            continue
        more = round(rounds * (target - 1))
        for _ in range(6):
            ratio = median(name, rounds + more) / median(name, rounds)
            if abs(ratio - target) <= tolerance:
                break
            more += 1 if ratio < target else -1
        else:
            sys.exit(f"calibration: {name} +{more} rounds gives {ratio:.4f}, not {target}±{tolerance}")
        setattr(detlib, f"{name.upper()}_ROUNDS", rounds)
        slowed[name] = rounds + more
        print(f"  {name:<7} {rounds} -> {rounds + more} rounds: {base:8.1f} -> x{ratio:.4f} ({branch})")
    return slowed


def make_project(repo: Path) -> None:
    """The project at its base commit (branch main); the heads are made after calibration."""
    repo.mkdir(parents=True)
    rounds = {name: spec[0] for name, spec in FUNCTIONS.items()}
    files = {"detlib.py": LIBRARY.format(**rounds), "inputs.py": INPUTS, "bench_detect.py": BENCHTRAIL,
             "test_detect.py": PYTEST, ".gitignore": "__pycache__/\n.pytest_cache/\n.benchmarks/\n",
             "pyproject.toml": '[tool.benchtrail]\nbenchmarks = ["bench_detect"]\npresets = "default"\n',
             "README.md": "A project measured by measure_detection.py.\n"}
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")


def make_heads(repo: Path, slowed: dict[str, int]) -> dict[str, str]:
    """Branch -> the function it slows ('' for aa)."""
    heads = {"aa": ""}
    _git(repo, "checkout", "-qb", "aa", "main")
    (repo / "README.md").write_text("A project measured by measure_detection.py (an A/A change).\n")
    _git(repo, "commit", "-qam", "aa: no benchmarked code")
    for name, (rounds, branch, _, _) in FUNCTIONS.items():
        if branch:
            _git(repo, "checkout", "-qb", branch, "main")
            lib = repo / "detlib.py"
            lib.write_text(lib.read_text().replace(f"{name.upper()}_ROUNDS = {rounds}",
                                                   f"{name.upper()}_ROUNDS = {slowed[name]}"))
            _git(repo, "commit", "-qam", f"{branch}: {name} does more rounds")
            heads[branch] = name
    _git(repo, "checkout", "-q", "main")
    return heads


def benchtrail_run(repo: Path, store: Path) -> tuple[float, dict[str, dict]]:
    """One default ``benchtrail pipeline``; (seconds, function -> its execution row)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BENCHTRAIL_"))}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CLI, "pipeline", "--store", str(store)], cwd=repo, env=env,
                          capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 2):
        sys.exit("benchtrail pipeline failed "
                 f"({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    comparison = json.loads((repo / proc.stdout.strip().splitlines()[-1]).parents[1].joinpath(
        "comparison.json").read_text())
    rows = {r["name"].split(".")[1]: r for r in comparison["rows"] if r["kind"] == "execution"}
    return seconds, rows


def pytest_run(repo: Path, out: Path) -> tuple[float, dict[str, float]]:
    """One default pytest-benchmark run; (seconds, function -> median s)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--benchmark-only", f"--benchmark-json={out}", "test_detect.py"], cwd=repo,
                          capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"pytest-benchmark failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    data = json.loads(out.read_text())
    return seconds, {b["name"].removeprefix("test_"): b["stats"]["median"] for b in data["benchmarks"]}


def trial(repo: Path, store: Path, heads: dict[str, str], index: int) -> list[dict]:
    """Base, then every head in a rotated order, each with both tools; one record per (tool, head, function)."""
    _git(repo, "checkout", "-q", "main")
    bt_base_s, base_rows = benchtrail_run(repo, store)
    pb_base_s, pb_base = pytest_run(repo, store.parent / "base.json")
    order = list(heads)[index % len(heads):] + list(heads)[:index % len(heads)]
    records = [{"tool": "benchtrail", "head": "base", "function": name, "slowed": False,
                "verdict": row["verdict"],
                "mark": row.get("mark"), "change": row.get("change"), "seconds": bt_base_s,
                "base_seconds": None}
               for name, row in base_rows.items() if index > 0]  # A/A against the previous trial's base run
    for head in order:
        _git(repo, "checkout", "-q", head)
        bt_s, rows = benchtrail_run(repo, store)
        pb_s, pb = pytest_run(repo, store.parent / "head.json")
        for name in FUNCTIONS:
            row = rows[name]
            records.append({"tool": "benchtrail", "head": head, "function": name,
                            "slowed": heads[head] == name,
                            "verdict": row["verdict"], "mark": row.get("mark"), "change": row.get("change"),
                            "seconds": bt_s, "base_seconds": bt_base_s})
            change = (pb[name] / pb_base[name] - 1) * 100
            records.append({"tool": "pytest-benchmark", "head": head, "function": name,
                            "slowed": heads[head] == name, "verdict": "regressed"
                            if change > PYTEST_BENCHMARK_FAIL * 100 else "similar", "mark": "confirmed",
                            "change": change, "seconds": pb_s, "base_seconds": pb_base_s})
    return records


def interval(k: int, n: int) -> str:
    from scipy.stats import binomtest

    if n == 0:
        return "0/0"
    ci = binomtest(k, n).proportion_ci(method="exact")
    return f"{k}/{n} [{ci.low * 100:.0f}–{ci.high * 100:.0f}%]"


def report(records: list[dict], condition: str) -> None:
    """The table of one condition."""
    print(f"\n{condition}: caught = confirmed regressed; false alarms = untouched rows confirmed regressed "
          "or improved")
    print(f"{'tool':<17} {'caught 10%':>17} {'3%: caught|inconcl.':>20} {'false rows':>17} "
          f"{'false runs':>16} "
          f"{'A/A similar':>12} {'A/A inconcl.':>12} {'s/run':>6}")
    for tool in ("benchtrail", "pytest-benchmark"):
        mine = [r for r in records if r["tool"] == tool and r["head"] != "base"]
        alarm = [r["verdict"] in ("regressed", "improved") and r["mark"] == "confirmed" for r in mine]
        caught = [a and r["verdict"] == "regressed" for r, a in zip(mine, alarm)]
        caught10 = [c for r, c in zip(mine, caught) if r["slowed"] and r["head"] == "slow10"]
        seen3 = [c or r["verdict"] == "inconclusive" for r,
                 c in zip(mine, caught) if r["slowed"] and r["head"] == "slow3"]
        untouched = [(r, a) for r, a in zip(mine, alarm) if not r["slowed"]]
        runs: dict[tuple, bool] = {}
        for r, a in untouched:
            runs[(r["trial"], r["head"])] = runs.get((r["trial"], r["head"]), False) or a
        aa = [r for r in mine if r["head"] == "aa"]
        seconds = statistics.median([r["seconds"] for r in mine]) if mine else 0.0
        print(f"{tool:<17} {interval(sum(caught10), len(caught10)):>17} "
              f"{interval(sum(seen3), len(seen3)):>20} "
              f"{interval(sum(a for _, a in untouched), len(untouched)):>17} "
              f"{interval(sum(runs.values()), len(runs)):>16} "
              f"{sum(r['verdict'] == 'similar' for r in aa) / max(len(aa), 1) * 100:>11.0f}% "
              f"{sum(r['verdict'] == 'inconclusive' for r in aa) / max(len(aa), 1) * 100:>11.0f}% "
              f"{seconds:>6.1f}")
    rerun = [r for r in records if r["head"] == "base"]
    if not rerun:
        return
    false = sum(r["verdict"] in ("regressed", "improved") and r["mark"] == "confirmed" for r in rerun)
    print("benchtrail's base runs against the previous trial's (A/A, not in the table): "
          f"{interval(false, len(rerun))} "
          f"false confirmed; {sum(r['verdict'] == 'similar' for r in rerun)} similar, "
          f"{sum(r['verdict'] == 'inconclusive' for r in rerun)} inconclusive")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per condition (default 20)")
    parser.add_argument("--conditions", default="quiet,noise",
                        help="quiet, noise or both (default quiet,noise)")
    parser.add_argument("--out", type=Path, help="write every trial's rows to this JSON-lines file")
    args = parser.parse_args()
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if args.trials < 1:
        parser.error(f"--trials {args.trials}: allowed: a whole number from 1")
    if not conditions or any(c not in CONDITIONS for c in conditions):
        parser.error(f"--conditions {args.conditions!r}: allowed: {', '.join(CONDITIONS)}, comma-separated")
    try:
        import pytest_benchmark  # noqa: F401
    except ImportError:
        parser.error("pytest-benchmark is not installed: pip install -c constraints.txt -e '.[measure]'")
    from benchtrail.detector.background_load import Load, running_load

    with tempfile.TemporaryDirectory(prefix="benchtrail-detection-") as tmp:
        work = Path(tmp)
        repo = work / "repo"
        make_project(repo)
        heads = make_heads(repo, calibrate(repo))
        everything = []
        for condition in conditions:
            load = Load() if condition == "noise" else None
            records: list[dict] = []
            start = time.monotonic()
            with running_load(load) if load else contextlib.nullcontext():
                for index in range(args.trials):
                    for r in trial(repo, work / f"store-{condition}", heads, index):
                        records.append({**r, "trial": index, "condition": condition})
                    print(f"  {condition} trial {index + 1}/{args.trials}: {time.monotonic() - start:.0f} s",
                          file=sys.stderr)
            report(records, condition)
            print(f"({condition}: {args.trials} trials in {(time.monotonic() - start) / 60:.1f} min)")
            everything += records
        if args.out:
            args.out.write_text("".join(json.dumps(r) + "\n" for r in everything))
    return 0


if __name__ == "__main__":
    sys.exit(main())
