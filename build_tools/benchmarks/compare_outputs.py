#!/usr/bin/env python3
"""Prove that a change leaves benchtrail's outputs alone: fingerprint what a checkout writes, then diff.

Usage:
    python build_tools/benchmarks/compare_outputs.py record --checkout DIR --output FP.json
        [--python PY | --venv V] [--steps seed,main,smoke] [--keep DIR]
    python build_tools/benchmarks/compare_outputs.py diff A.json B.json [--ignore REGEX]...

``record`` runs, in the checkout DIR and into fresh temporary folders:

- ``seed``: the README's seed-compatible commands ("Seed-compatible scripts call the same code"), each
  through ``bash -o pipefail`` with the checkout as working directory and only the output files moved into
  the temporary folder: the export piped through the seed's jq filter, the seed runner on its output
  (``--verbose``; it compiles into its own temporary folder and skips the CUDA run configs), the export
  script without ``--output`` (the seed's shape) and ``benchtrail export ... --format seed``, the export
  script with ``--output F --shard_count 2``, and ``build_tools/github_actions/matrix.jq`` on that file.
  Not run: ``benchmark_user_tool.py explain --gcs_url`` (needs GCS), ``gpu_check.sh`` and CUDA runs (need
  a GPU), and the runner's other inputs (an execution export, ``--modules_dir``): more minutes, same code.
- ``main``: the README main job ``benchtrail pipeline --benchmark-presets x86_64,comp-stats --store S``,
  twice into the same store: the second run compares with the first (and re-checks suspects).
- ``smoke``: ``benchtrail pipeline --benchmark-presets smoke --store S2``, twice likewise.

It runs the checkout's own code: without ``--python`` it makes a venv (``--venv V``: made once, then
reused) with ``pip install -c constraints.txt -e 'DIR[torch]'`` (local wheels, 1 to 2 minutes); with
``--python PY`` (e.g. ``.venv/bin/python`` for /work/main) it uses that interpreter. Either way it first
checks that ``benchtrail.__file__`` (and ``benchtrail.worker``, imported with the ``PYTHONPATH`` a worker
gets) lies in DIR, refuses otherwise, and prints which benchtrail it ran. The interpreter's folder comes
first on ``PATH`` (the seed scripts run by their shebang); ``PYTHONPATH``, ``BENCHTRAIL_*``, ``GITHUB_*``
and ``CI`` are removed; ``TORCHINDUCTOR_CACHE_DIR`` is an empty folder; ``NO_COLOR`` is set.

Then it normalises every file written (and each command's stdout and stderr, ``logs/``, and its exit
status) into ``{path: normalised content}``, paths relative to the temporary folder (``seed/``, ``main/``,
``smoke/``: the stores). Masked in paths and contents alike: run ids (``<run1>``, ``<run2>``: each store's
runs in the order of their time), timestamps and dates, the 8-hex id of a ``bench_*`` document, git shas
(40 hex, a prefix of 7+ of a commit of the checkout's history, other 7-40 hex with letters and digits),
the head commit's subject, a `` (dirty)`` mark (the checkout's state, not the code's), absolute paths (the
checkout, the temporary folder and the interpreter's folder by name, others as ``<path>``) and numbers (not
inside names such as ``c2-standard-16``, ``bs1`` or a hex id). By kind:

- JSON (and JSON Lines): the set of key paths (``$.rows[].verdict``; a list's elements merged) with the
  types found there, and the set of masked string values at each: ids, content hashes, names, units, metric
  names, statuses, schema strings stay verbatim (a string of several lines is kept as its masked lines).
  Numbers are types only, except ``*version`` keys and the run-config exports (``run-configs/``, the seed
  exports, ``matrix.json``), whose numbers the suite fixes. Booleans are types only (``dirty``, ``noisy``).
  String values that vary with timing or the host are types only: ``VARYING_KEYS`` (verdict, mark,
  outcome, stop, recheck, reasons, labels, messages, host facts) and ``VARYING_PATH`` (the doctor's load
  checks: status, value, advice, failed and warned names; a paired run's ``guard``).
- Markdown, HTML, logs and other text: the set of masked lines (HTML also split at tags and at ``,"``; a
  line wrapped at the terminal's width joined; runs of spaces as one), so row counts and order do not
  count. Verdict words are masked as ``<v>``, a list of counts as ``<counts>``, a unit after a number as
  ``<unit>`` (``µs`` or ``ms`` follows the size), the benchmark an ``explain`` line names as
  ``<benchmark>``. Left out (``OPTIONAL_LINE``): benchmark rows of the comment's and terminal's tables,
  footnotes and legends, the paired re-check's lines, the runner-check warning, the verdict sections'
  ``<summary>`` lines and the compilation-statistics table (only changed series), table separators.
- Binary files (PNG, ``.pt2``, ``.so``, the vendored ``plotly.min.js``) and Torch's Inductor cache
  (``modules/inductor-cache/**``): presence only.

Optional, since timing decides whether they exist: files matching ``OPTIONAL_FILES`` (``ab/`` of the
re-check, ``distributions/`` strip plots, ``profiles/``, a run journal) may be in one fingerprint only
(listed as not counted) and, in both, are compared by key paths and types only (which series the re-check
picked is timing); a JSON subtree rooted at an ``OPTIONAL_KEYS`` key (``ab``, ``rerun``, ``guard``,
``stored``, ``recheck``, ``mark``, ``runner_checks``, ``failed``…) may be absent, null or an empty list on
one side, and is compared in full (nulls aside) when both have it. So the doctor's load checks, noise
reruns, re-checks and verdicts (similar, inconclusive, unconfirmed…) do not count; anything else does.

``diff`` prints the differences file by file (command exit statuses, files only in one, kinds, key paths
only in one, types, kept values only in one, text lines only in one) and exits 1 when there are any;
``--ignore REGEX`` (repeatable) skips the files (and commands) whose path it finds.

A record of 05088eb took 27-28 minutes on this project's 2-vCPU VM, two records side by side with other work
on it (load 4-6: seed 9-10 min, main job 16-17 min for both runs, smoke 1 min), and 56 minutes at load
8-12 (seed 16, main job 38); on a quiet VM 8 minutes (seed 2, main job 5, smoke 1). ``--steps smoke``
alone takes 1-2 minutes. ``--keep DIR`` keeps the outputs for a closer look.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from output_fingerprint import Masker, diff_file, fingerprint_files, run_labels

FORMAT_VERSION = 1
JQ_FILTER = ("'flatten | map(.run_configs) | { root_obj:(map(.root_obj) | flatten), "
             "keyed_obj_map:(map(.keyed_obj_map) | add) }'")
EXPORT = "build_tools/benchmarks/export_benchmark_config.py execution --benchmark_preset=x86_64,cuda"
SEED_COMMANDS = (
    ("export-jq", f"{EXPORT} | jq {JQ_FILTER} > {{out}}/run_configs.json"),
    ("export-seed-shape", f"{EXPORT} > {{out}}/seed-export.json"),
    ("benchtrail-export-seed",
     "benchtrail export execution --benchmark-presets x86_64,cuda --output - --format seed "
     "> {out}/benchtrail-export-seed.json"),
    ("export-output", f"{EXPORT} --output {{out}}/execution.json --shard_count 2"),
    ("matrix-jq", "jq --argjson labels '{}' -f build_tools/github_actions/matrix.jq {out}/execution.json "
                  "> {out}/matrix.json"),
    ("run", "build_tools/benchmarks/run_benchmarks_on_linux.py --output={out}/results.json --verbose "
            "--run_config={out}/run_configs.json"),
)
PIPELINES = {"main": "x86_64,comp-stats", "smoke": "smoke"}
STEPS = ("seed", "main", "smoke")


# --- recording -------------------------------------------------------------------------------------


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def make_venv(checkout: Path, venv: Path) -> Path:
    """A venv at ``venv`` with the checkout installed editable (reused when it imports the checkout)."""
    python = venv / "bin" / "python"
    if python.exists() and benchtrail_file(python, checkout, quiet=True):
        return python
    print(f"compare_outputs: making a venv for {checkout} in {venv} (1-2 min)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(checkout / "constraints.txt"),
                          "-e", f"{checkout}[torch]"], capture_output=True, text=True)
    if pip.returncode:
        sys.exit(f"compare_outputs: pip install failed:\n{pip.stdout}{pip.stderr}")
    return python


def benchtrail_file(python: Path, checkout: Path, quiet: bool = False) -> str | None:
    """Where ``python`` imports benchtrail from, as the CLI and as a worker (``PYTHONPATH`` = checkout);
    None (or an exit, unless ``quiet``) when that is not the checkout's ``build_tools/benchtrail``."""
    probe = ("import benchtrail, benchtrail.worker, benchtrail.cli.app, os; print(os.path.realpath("
             "benchtrail.__file__)); print(os.path.realpath(benchtrail.worker.__file__))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = []
    for extra in ({}, {"PYTHONPATH": str(checkout)}):
        proc = subprocess.run([str(python), "-c", probe], cwd=checkout, env={**env, **extra},
                              capture_output=True, text=True)
        found += proc.stdout.split() if proc.returncode == 0 else [f"(import failed: {proc.stderr.strip()})"]
    package = (checkout / "build_tools" / "benchtrail").resolve()
    if all(Path(f).is_relative_to(package) for f in found if not f.startswith("(")) and len(found) == 4:
        return found[0]
    if quiet:
        return None
    sys.exit(f"compare_outputs: {python} imports benchtrail from {found}, not from {package}; "
             "leave out --python to make a venv for the checkout")


def environment(python: Path, cache: Path) -> dict[str, str]:
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "CI", "NO_COLOR")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("BENCHTRAIL_", "GITHUB_"))}
    return {**env, "PATH": f"{python.parent}{os.pathsep}{env.get('PATH', '')}", "NO_COLOR": "1",
            "TORCHINDUCTOR_CACHE_DIR": str(cache)}


def run_logged(name: str, cmd: str | list[str], logs: Path, checkout: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` in the checkout (a string through ``bash -o pipefail``), stdout and stderr to ``logs``."""
    argv = ["bash", "-o", "pipefail", "-c", cmd] if isinstance(cmd, str) else cmd
    logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(logs / f"{name}.out", "w") as out, open(logs / f"{name}.err", "w") as err:
        rc = subprocess.run(argv, cwd=checkout, env=env, stdout=out, stderr=err).returncode
    shown = cmd if isinstance(cmd, str) else " ".join(cmd)
    print(f"  {name}: exit {rc}, {time.monotonic() - start:.0f} s: {shown}", flush=True)
    return rc


def record(args: argparse.Namespace) -> int:
    checkout = Path(args.checkout).resolve()
    steps = [s for s in args.steps.split(",") if s]
    if unknown := set(steps) - set(STEPS):
        sys.exit(f"compare_outputs: unknown steps {sorted(unknown)}; known: {', '.join(STEPS)}")
    commit = git(checkout, "rev-parse", "HEAD")
    dirty = bool(git(checkout, "status", "--porcelain", "--untracked-files=no"))
    if args.keep:
        out = Path(args.keep).resolve()
        out.mkdir(parents=True, exist_ok=False)
    else:
        out = Path(tempfile.mkdtemp(prefix="compare-outputs-"))
    try:
        started = time.monotonic()
        python = Path(args.python).absolute() if args.python else make_venv(
            checkout, Path(args.venv).resolve() if args.venv else out / "_venv")
        where = benchtrail_file(python, checkout)
        print(f"compare_outputs: benchtrail from {where} (python {python}; workers import the same), "
              f"checkout {checkout} at {commit[:12]}{' (dirty)' if dirty else ''}", flush=True)
        env = environment(python, out / "_inductor-cache")
        cli = [str(python.parent / "benchtrail")] if (python.parent / "benchtrail").exists() else [
            str(python), "-m", "benchtrail.cli.app"]
        exits: dict[str, int] = {}
        seconds: dict[str, float] = {}
        for step in steps:
            t0 = time.monotonic()
            print(f"compare_outputs: step {step}", flush=True)
            if step == "seed":
                (out / "seed").mkdir()
                for name, cmd in SEED_COMMANDS:
                    exits[f"seed/{name}"] = run_logged(
                        name, cmd.replace("{out}", str(out / "seed")), out / "logs" / "seed", checkout, env)
            else:
                for i in (1, 2):
                    cmd = [*cli, "pipeline", "--benchmark-presets", PIPELINES[step], "--store",
                           str(out / step)]
                    exits[f"{step}/pipeline-{i}"] = run_logged(
                        f"pipeline-{i}", cmd, out / "logs" / step, checkout, env)
            seconds[step] = round(time.monotonic() - t0, 1)
        shas = set(git(checkout, "rev-list", "--max-count=500", "HEAD").split())
        roots = {str(out): "<out>", str(checkout): "<checkout>", str(python.parent): "<bin>"}
        if os.path.realpath(out) != str(out):
            roots[os.path.realpath(out)] = "<out>"
        mask = Masker(roots, run_labels(out), shas, git(checkout, "log", "-1", "--format=%s"))
        fingerprint = {"format_version": FORMAT_VERSION,
                       "recorded": {"checkout": str(checkout), "commit": commit, "dirty": dirty,
                                    "benchtrail": where, "python": str(python), "steps": steps,
                                    "seconds": {**seconds, "total": round(time.monotonic() - started, 1)}},
                       "exits": exits, "files": fingerprint_files(out, mask)}
        Path(args.output).write_text(json.dumps(fingerprint, indent=1, sort_keys=True) + "\n")
        print(f"compare_outputs: {len(fingerprint['files'])} files, {seconds} s; fingerprint {args.output}"
              + ("" if all(rc == 0 for rc in exits.values()) else f"; non-zero exits: {exits}"))
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)


def diff(args: argparse.Namespace) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    ignore = [re.compile(r) for r in args.ignore]
    count = 0
    for name in sorted(set(a["exits"]) | set(b["exits"])):
        if a["exits"].get(name) != b["exits"].get(name) and not any(r.search(name) for r in ignore):
            print(f"command {name}: exit {a['exits'].get(name)} vs {b['exits'].get(name)}")
            count += 1
    fa, fb = a["files"], b["files"]
    notes = []
    for name in sorted(set(fa) | set(fb)):
        if any(r.search(name) for r in ignore):
            continue
        if name not in fa or name not in fb:
            side, entry = ("A", fa[name]) if name in fa else ("B", fb[name])
            if entry.get("optional"):
                notes.append(f"{name} (only in {side})")
            else:
                print(f"{name}: only in {side}")
            count += not entry.get("optional")
            continue
        lines = diff_file(fa[name], fb[name])
        if lines:
            print(f"{name}:")
            print("\n".join(f"  {line}" for line in lines))
            count += len(lines)
    if notes:
        print(f"(not counted: {len(notes)} optional files in one side only: {', '.join(notes)})")
    print(f"{count} difference(s) between {args.a} and {args.b}")
    return 1 if count else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a checkout's commands and write their fingerprint")
    rec.add_argument("--checkout", required=True, help="a checkout of this repository")
    rec.add_argument("--output", required=True, help="fingerprint file to write (JSON)")
    how = rec.add_mutually_exclusive_group()
    how.add_argument("--python", help="interpreter importing the checkout's benchtrail (default: a new venv)")
    how.add_argument("--venv", help="venv folder for the checkout: made when absent, else reused")
    rec.add_argument("--steps", default=",".join(STEPS), help="comma-separated subset of seed,main,smoke")
    rec.add_argument("--keep", help="folder to write the outputs into and keep (must not exist)")
    dif = sub.add_parser("diff", help="print the differences between two fingerprints; exit 1 if any")
    dif.add_argument("a")
    dif.add_argument("b")
    dif.add_argument("--ignore", action="append", default=[], help="regex of file paths to skip (repeatable)")
    args = parser.parse_args(argv)
    return record(args) if args.command == "record" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
