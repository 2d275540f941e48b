#!/usr/bin/env python3
"""Run benchtrail's smoke pipeline under other torch versions, as an adopting project would install it.

The checkout is built once into a wheel (``python -m build``: an sdist, then the wheel from it, as .ci/run
does and as ``pip install "benchtrail @ git+https://...@<sha>"`` builds one). For each ``--torch`` version
(default 2.14.1): a fresh venv, ``pip install torch==<version>`` (the project's torch, installed first), then
that wheel *without* constraints.txt (``pip install "<wheel>[torch]"``), then ``benchtrail pipeline --benchmark-presets smoke --store <tmp>`` from
a folder outside the checkout. Prints a table: the torch version asked for, the one the pipeline ran with
(the results files' ``environment.torch_version``: pip must have kept the project's torch), the install and
pipeline exit codes, the pipeline's wall-clock seconds and the cases whose status is ``ok`` out of all.
Not run by .ci/run (it downloads torch); docs/adopting.md, "Supported torch versions", records its output.

Usage: python build_tools/benchmarks/check_torch_versions.py [--torch 2.14.1 ...] [--python python3.11]
    [--keep DIR]

Exit status: 0 when every version ran the smoke pipeline with every case ok, else 1.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z0-9.+]*)?$")


@dataclass
class Outcome:
    """One torch version's check: exit codes (None: the step did not run), seconds, cases."""

    torch: str
    ran_with: str = "-"
    install_rc: int | None = None
    pipeline_rc: int | None = None
    pipeline_s: float | None = None
    cases_ok: int = 0
    cases: int = 0
    note: str = ""

    @property
    def passed(self) -> bool:
        return (self.pipeline_rc == 0 and self.cases > 0 and self.cases_ok == self.cases
                and self.ran_with == self.torch)


def torch_version(text: str) -> str:
    """argparse type: a torch version such as 2.14.1."""
    if not VERSION.match(text):
        raise argparse.ArgumentTypeError(f"expected a torch version such as 2.14.1, got {text!r}")
    return text


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> int:
    """Run ``cmd`` with its output appended to ``log``; its exit code."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def count_cases(store: Path) -> tuple[int, int, set[str]]:
    """Cases whose status is ``ok``, all cases, and the torch versions, over the execution results of
    every run in ``store`` (``runs/<id>/<attempt>/results/*.json``)."""
    ok = total = 0
    torches: set[str] = set()
    for path in sorted(store.glob("runs/*/*/results/*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "benchmarks" not in data:
            continue
        torches.add(data["environment"]["torch_version"])
        for record in data["benchmarks"]:
            if record.get("kind", "execution") == "execution":
                total += 1
                ok += record["status"] == "ok"
    return ok, total, torches


def build_wheel(out: Path, console: Console) -> Path:
    """The checkout's wheel, built into ``out``.

    Raises:
        RuntimeError: the build failed (its log's tail in the message).
    """
    console.print(f"building the wheel of {ROOT}")
    log = out / "build.log"
    out.mkdir(parents=True, exist_ok=True)
    if _run([sys.executable, "-m", "build", "--outdir", str(out / "dist"), str(ROOT)], log):
        raise RuntimeError(f"python -m build failed:\n{log.read_text()[-3000:]}")
    (wheel,) = (out / "dist").glob("benchtrail-*.whl")
    return wheel


def check(version: str, python: str, wheel: Path, work: Path, console: Console) -> Outcome:
    """Install torch ``version``, then ``wheel`` with its torch extra, into a fresh venv under ``work``; run
    the smoke pipeline there. A failed step's log tail is printed."""
    outcome = Outcome(version)
    work.mkdir(parents=True)
    log = work / "log.txt"
    venv = work / "venv"
    console.print(f"torch {version}: installing into {venv} (log: {log})")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    outcome.install_rc = (_run([python, "-m", "venv", str(venv)], log)
                          or _run([*pip, f"torch=={version}"], log)
                          or _run([*pip, f"{wheel}[torch]"], log))
    if outcome.install_rc:
        outcome.note = "install failed"
        console.print(log.read_text()[-3000:])
        return outcome
    console.print(f"torch {version}: benchtrail pipeline --benchmark-presets smoke")
    store = work / "store"
    start = time.perf_counter()
    outcome.pipeline_rc = _run([str(venv / "bin" / "benchtrail"), "pipeline", "--benchmark-presets", "smoke",
                                "--store", str(store)], log, cwd=work)
    outcome.pipeline_s = time.perf_counter() - start
    outcome.cases_ok, outcome.cases, torches = count_cases(store)
    outcome.ran_with = ", ".join(sorted(torches)) or "-"
    if outcome.pipeline_rc:
        outcome.note = "pipeline failed"
        console.print(log.read_text()[-3000:])
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", type=torch_version, action="append", metavar="VERSION",
                        help="a torch version to check (repeatable; default 2.14.1)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter for the venvs (default: this one)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR (must not exist) and keep it: venvs, stores, logs (default: a "
                        "temporary folder)")
    args = parser.parse_args(argv)
    versions = args.torch or ["2.14.1"]
    console = Console()
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: the folder exists; name a new one")
    with tempfile.TemporaryDirectory(prefix="benchtrail-torch-") as tmp:
        base = args.keep or Path(tmp)
        try:
            wheel = build_wheel(base / "wheel", console)
        except RuntimeError as exc:
            console.print(str(exc), style="red", markup=False, highlight=False)
            return 1
        outcomes = [check(v, args.python, wheel, base / f"torch-{v}", console) for v in versions]
    table = Table(title="benchtrail smoke pipeline per torch version (installed without constraints.txt)")
    for column in ("torch", "ran with", "install exit", "pipeline exit", "wall time (s)", "cases ok", "note"):
        table.add_column(column)
    for o in outcomes:
        table.add_row(o.torch, o.ran_with, str(o.install_rc),
                      "-" if o.pipeline_rc is None else str(o.pipeline_rc),
                      "-" if o.pipeline_s is None else f"{o.pipeline_s:.1f}", f"{o.cases_ok}/{o.cases}",
                      o.note)
    console.print(table)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
