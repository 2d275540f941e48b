#!/usr/bin/env python3
"""Cost of the main job: where a ``benchtrail pipeline`` run spends its time (issue 18, item 6).

Runs ``benchtrail pipeline --benchmark-presets <presets> --store <store>`` in a fresh temporary
store, with an empty Inductor cache (``TORCHINDUCTOR_CACHE_DIR`` a new temporary folder for the
pipeline process), then reads the run directory and prints a Markdown table per stage:

- wall: the stage's wall time, ``timings.json`` (``stages_s``, ``total_s``), s;
- timed: time inside timed sample blocks, sum of ``details.timed_ms`` of the execution records;
- warm-up: warm-up and calibration, sum of ``details.warmup_ms``;
- in-run compile: ``details.phase_times_ms.compile`` summed (module built, compiled or loaded,
  first iteration), in the worker processes of the run stage;
- compile samples: the measured compile samples, the sum of the samples of the compilation series
  ``compile_time_cold_ms`` and ``compile_time_warm_ms`` (``results/compilation-*.json``);
- process starts: ``details.process_starts`` summed; for the compile stage the number of cold and
  warm compile samples (one process each);
- noise reruns: execution records whose ``details`` have ``rerun``;
- stored: bytes the stage leaves in the run directory (export: run-configs/, compile: modules/ with
  modules/inductor-cache in brackets, run: results/, count (``--metrics latency,instructions``: the counting
  pass under callgrind) results/callgrind/, compare: comparison.json, recheck: ab/,
  report: comment/ and dashboard/, total: the whole run directory);
- overhead ratio: run stage = wall / (timed + warm-up + in-run compile); compile stage =
  wall / compile samples. 1.0 would be a stage that does nothing but measure.

Execution records come from ``results/<device>-<shard>.json`` (run stage) and ``ab/*.json``
(recheck stage: the paired A/B run). A noise rerun's first attempt counts in the timed, warm-up
and in-run compile columns (``rerun.first_timed_ms`` etc.); its wall time is printed below the table.
A field an older run lacks prints ``n/a``.

Usage: python build_tools/benchmarks/measure_main_job.py [--presets x86_64,comp-stats] [--runs N] [--keep DIR]

``--runs 2`` runs the pipeline twice into the same store (each with its own empty Inductor
cache); the second run compares with the first on the same commit, an A/A comparison, so every
``regressed`` or ``improved`` verdict of it is a false alarm.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STAGES = ("export", "compile", "run", "count", "compare", "recheck", "report")
STORED = {"export": ["run-configs"], "compile": ["modules"], "run": ["results"],
          "count": ["results/callgrind"],
          "compare": ["comparison.json"], "recheck": ["ab"], "report": ["comment", "dashboard"]}
COMPILE_SERIES = ("compile_time_cold_ms", "compile_time_warm_ms")


def read_json(path: Path) -> Any:
    """The parsed file, or None when it is missing or unreadable (an older or failed run)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def size(path: Path) -> int | None:
    """Bytes of a file, or of every file under a folder (links not followed); None when absent."""
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return None
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def records(files: list[Path], kind: str) -> list[dict[str, Any]]:
    """The benchmark records of ``kind`` (``execution`` or ``compilation``) in results files."""
    return [r for f in files for r in (read_json(f) or {}).get("benchmarks", []) if r.get("kind") == kind]


def total(values: list[Any]) -> float | None:
    """Sum of the numbers present; None when none is (the field is missing in every record)."""
    present = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(present) if present else None


def execution_costs(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed timed, warm-up and in-run compile time (ms), process starts and reruns of execution records."""
    details = [r.get("details") or {} for r in recs]
    if not recs:
        return {}
    firsts = [d.get("rerun") or {} for d in details]  # a noise rerun's first attempt counts too
    return {"timed": total([d.get("timed_ms") for d in details] + [f.get("first_timed_ms") for f in firsts]),
            "warmup": total([d.get("warmup_ms") for d in details]
                            + [f.get("first_warmup_ms") for f in firsts]),
            "compile_in_run": total([(d.get("phase_times_ms") or {}).get("compile") for d in details]
                                    + [(f.get("first_phase_times_ms") or {}).get("compile") for f in firsts]),
            "starts": total([d.get("process_starts") for d in details]),
            "reruns": sum("rerun" in d for d in details),
            "rerun_first_wall": total([(d.get("rerun") or {}).get("first_wall_time_ms") for d in details])}


def run_dir_costs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per stage (and ``total``): wall (s), times (ms), counts and stored bytes of one run directory."""
    timings = read_json(run_dir / "timings.json") or {}
    stages_s = timings.get("stages_s") or {}
    results = sorted(p for p in (run_dir / "results").glob("*.json") if not p.name.startswith("compilation-"))
    compilation = [r for r in records(sorted((run_dir / "results").glob("compilation-*.json")), "compilation")
                   if r.get("metric") in COMPILE_SERIES]
    costs: dict[str, dict[str, Any]] = {s: {"wall_s": stages_s.get(s)} for s in STAGES}
    costs["run"].update(execution_costs(records(results, "execution")))
    costs["recheck"].update(execution_costs(records(sorted((run_dir / "ab").glob("*.json")), "execution")))
    if compilation:
        costs["compile"]["samples"] = total([s for r in compilation for s in r.get("samples") or []])
        costs["compile"]["starts"] = sum(len(r.get("samples") or []) for r in compilation)
    for stage, parts in STORED.items():
        costs[stage]["bytes"] = total([size(run_dir / p) for p in parts])
    costs["compile"]["cache_bytes"] = size(run_dir / "modules" / "inductor-cache")
    summed = ("timed", "warmup", "compile_in_run", "samples", "starts", "reruns", "rerun_first_wall")
    costs["total"] = {k: total([costs[s].get(k) for s in STAGES]) for k in summed}
    costs["total"].update(wall_s=timings.get("total_s"), bytes=size(run_dir))
    run, comp = costs["run"], costs["compile"]
    measured = [run.get(k) for k in ("timed", "warmup", "compile_in_run")]
    if run["wall_s"] is not None and None not in measured and sum(measured) > 0:
        run["ratio"] = run["wall_s"] * 1e3 / sum(measured)
    if comp["wall_s"] is not None and comp.get("samples"):
        comp["ratio"] = comp["wall_s"] * 1e3 / comp["samples"]
    return costs


def fmt_s(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1e3:.1f}"


def fmt_bytes(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def fmt_count(n: float | None) -> str:
    return "n/a" if n is None else f"{n:.0f}"


def table(costs: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| stage | wall (s) | timed blocks (s) | warm-up (s) | in-run compile (s) | compile samples (s) "
             "| process starts | noise reruns | stored | overhead ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for stage in (*STAGES, "total"):
        c = costs[stage]
        # nothing timed there
        fmt = (lambda _: "") if stage in ("export", "count", "compare", "report") else None
        wall = "n/a" if c.get("wall_s") is None else f"{c['wall_s']:.1f}"
        stored = fmt_bytes(c.get("bytes"))
        if stage == "compile":
            stored += f" (cache {fmt_bytes(c.get('cache_bytes'))})"
        ratio = f"{c['ratio']:.2f}" if "ratio" in c else ("n/a" if stage in ("run", "compile") else "")
        s, n = fmt or fmt_s, fmt or fmt_count
        lines.append(f"| {'**total**' if stage == 'total' else stage} | {wall} | {s(c.get('timed'))} "
                     f"| {s(c.get('warmup'))} | {s(c.get('compile_in_run'))} | {s(c.get('samples'))} "
                     f"| {n(c.get('starts'))} | {n(c.get('reruns'))} | {stored} | {ratio} |")
    return lines


def execution_settings(run_dir: Path) -> str:
    """Samples per process and warm-up of the run configs, with where they were read."""
    export = read_json(run_dir / "run-configs" / "execution.json") or {}
    seen: collections.Counter[str] = collections.Counter()
    for device in (export.get("devices") or {}).values():
        for shard in device.get("shards") or []:
            objs = (shard.get("run_configs") or {}).get("keyed_obj_map") or {}
            for obj in objs.values():
                ec = objs.get(obj.get("execution_config")) if "module_generation_config" in obj else None
                if isinstance(ec, dict):
                    seen[f"{ec.get('processes', 'n/a')} processes × {ec.get('min_samples', 'n/a')} samples "
                         f"per process, blocks ≥ {ec.get('min_sample_time_ms', 'n/a')} ms, "
                         f"warm-up ≥ {ec.get('warmup_time_ms', 'n/a')} ms"] += 1
    if not seen:
        return "n/a (run-configs/execution.json missing or without execution configs)"
    found = "; ".join(f"{k} ({n} run configs)" for k, n in seen.items())
    return f"{found} — from run-configs/execution.json (execution_config of each run config)"


def torch_version(run_dir: Path) -> str:
    """The torch version the run's results files record (``environment.torch_version``)."""
    files = (run_dir / "results").glob("*.json")
    versions = {((read_json(p) or {}).get("environment") or {}).get("torch_version") for p in files}
    return ", ".join(sorted(v for v in versions if v)) or "n/a"


def git(*args: str) -> str:
    """Output of a read-only git command in the current directory, or ``n/a``."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "n/a"


def run_pipeline(presets: str, store: Path, cache: Path, metrics: str) -> tuple[list[str], float, int, Path]:
    """Run the pipeline with Inductor cache ``cache``; return the command, its wall time (s), exit code, run dir."""
    cmd = [sys.executable, "-m", "benchtrail.cli.app", "pipeline", "--benchmark-presets", presets,
           "--store", str(store), "--metrics", metrics]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache)),
                          stdout=subprocess.PIPE,
                          text=True)
    elapsed = time.monotonic() - start
    lines = proc.stdout.strip().splitlines()
    if proc.returncode not in (0, 2) or not lines:  # 2: a case failed, the run is complete
        sys.exit(f"pipeline failed with exit code {proc.returncode}: {shlex.join(cmd)}")
    return cmd, elapsed, proc.returncode, Path(lines[-1]).parents[1]  # <run dir>/comment/comment.md


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="x86_64,comp-stats",
                        help="presets to run (default: %(default)s)")
    parser.add_argument("--metrics", default="latency",
                        help="the pipeline's --metrics (latency,instructions adds the count stage; default "
                        "latency)")
    parser.add_argument("--runs", type=int, default=1,
                        help="pipelines to run into one store; each after the first is an A/A against the "
                        "first")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="use DIR (new or empty) as the store and keep it, instead of a temporary store")
    args = parser.parse_args()
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty (the store must be fresh)")
    started = dt.datetime.now(dt.UTC)
    commit = git("rev-parse",
                 "HEAD") + (" (uncommitted changes)" if git("status", "--porcelain", "-uno") else "")
    with tempfile.TemporaryDirectory(prefix="benchtrail-measure-") as tmp:
        store = args.keep.resolve() if args.keep else Path(tmp, "store")
        out = [f"# Cost of the main job — presets `{args.presets}`", "",
               f"- date (UTC): {started:%Y-%m-%d %H:%M}; CPUs: {os.cpu_count()}; git commit: {commit}",
               f"- command: `{shlex.join([Path(sys.executable).name, *sys.argv])}`"]
        for i in range(1, args.runs + 1):
            cache = Path(tmp, f"inductor-cache-{i}")
            cache.mkdir()
            cmd, elapsed, rc, run_dir = run_pipeline(args.presets, store, cache, args.metrics)
            costs = run_dir_costs(run_dir)
            counts = (read_json(run_dir / "comparison.json") or {}).get("counts")
            title = "first run" if i == 1 else "A/A against the first run"
            out += ["", f"## Run {i} of {args.runs} ({title}, empty Inductor cache)", "",
                    f"- pipeline: `{shlex.join(['benchtrail', *cmd[3:]])}` with "
                    f"TORCHINDUCTOR_CACHE_DIR={cache}; {elapsed:.1f} s as seen from here, exit code {rc}"
                    + (" (a case failed)" if rc else ""),
                    f"- run directory: {run_dir if args.keep else run_dir.relative_to(store)}",
                    f"- torch {torch_version(run_dir)}",
                    f"- execution settings: {execution_settings(run_dir)}",
                    "- verdicts (comparison.json counts): "
                    + (", ".join(f"{k} {v}" for k, v in counts.items()) if counts else "n/a"), ""]
            out += table(costs)
            first_wall = costs["total"].get("rerun_first_wall")
            if first_wall:
                out += ["", f"Noise reruns: their first attempts took {first_wall / 1e3:.1f} s of wall time "
                            "(rerun.first_wall_time_ms); their timed, warm-up and in-run compile times are "
                        "in the "
                            "columns above."]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
