"""The commands that run on any machine never import torch: ``--help``, ``compare --help``, and a real
``compare``, ``comment``, ``gate``, ``configure`` and ``export`` (issue 17; the setup job's export imports
neither torch nor scipy: 0.3 s instead of 5.6 s on a 2-vCPU VM). Each check runs the commands in a fresh
interpreter, through ``benchtrail.cli.main`` as the console script does, then looks at ``sys.modules``
there. Timings are measured by build_tools/benchmarks/measure_cli_startup.py, not asserted here."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchtrail.results.io import write_results
from tests.helpers.records import record, results, spread

#: Runs each argv of ``sys.argv[1]`` (a JSON list) through ``benchtrail.cli.main``, then prints one
#: last line: the exit codes, every imported module of the torch package and the modules of benchtrail.cli.
CHILD = """
import json, sys
from benchtrail.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    try:
        codes.append(main(argv))
    except SystemExit as exc:
        codes.append(exc.code)
print(json.dumps({"codes": codes, "torch": sorted(m for m in sys.modules if m.split(".")[0] == "torch"),
                  "cli": sorted(m for m in sys.modules if m.startswith("benchtrail.cli.")),
                  "scipy": "scipy" in sys.modules}))
"""


def _run(argvs: list[list[str]], cwd: Path, **env: str) -> dict:
    """Exit codes and torch modules of the child that ran ``argvs``."""
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argvs)], cwd=cwd, capture_output=True,
                          text=True,
                          env={**os.environ, **env}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_and_compare_help_do_not_import_torch_nor_other_commands(tmp_path):
    assert _run([["--help"]], tmp_path) == {"codes": [0], "torch": [], "scipy": False,
                                            "cli": ["benchtrail.cli.app", "benchtrail.cli.options"]}
    assert _run([["compare", "--help"]], tmp_path) == {
        "codes": [0], "torch": [], "scipy": False,
        "cli": ["benchtrail.cli.app", "benchtrail.cli.compare", "benchtrail.cli.options"]}


def test_the_registry_summaries_are_what_each_family_declares():
    """``benchtrail --help`` lists the registry's summaries without importing the families; each family
    declares its commands with the same help, in the registry's order."""
    from benchtrail.cli.app import COMMANDS, build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert [(c.dest, c.help) for c in sub._choices_actions] == [
        pair for _, _, pairs in COMMANDS for pair in pairs.items()]


def test_compare_comment_gate_and_configure_do_not_import_torch(tmp_path):
    base = write_results(tmp_path / "base.json", results(record("fast"), record("slow")))
    head = write_results(tmp_path / "head.json", results(record("fast"), record("slow", spread(150.0)),
                                                         commit="b" * 40))
    comparison = tmp_path / "comparison.json"
    out = tmp_path / "github-output"
    argvs = [["compare", "--base", str(base), "--head", str(head), "--output", str(comparison)],
             ["comment", "--comparison", str(comparison), "--output-dir", str(tmp_path / "comment")],
             ["gate", "--comparison", str(comparison)],
             ["configure"]]
    child = _run(argvs, tmp_path, GITHUB_EVENT_NAME="workflow_dispatch", BENCHMARK_PRESETS_INPUT="x86_64",
                 GITHUB_OUTPUT=str(out), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
                 BENCHMARKS_ACCEPT="")
    assert (child["codes"], child["torch"]) == ([0, 0, 0, 0], [])  # gate: the regression is not confirmed yet
    assert json.loads(comparison.read_text())["rows"] and (tmp_path / "comment").is_dir()
    assert "has-benchmarks=true" in out.read_text()


def test_the_cli_round_size_is_the_detectors():
    """``benchtrail.cli.detector`` repeats the round size so that declaring the command imports no scipy."""
    from benchtrail.cli.detector import ROUND_SAMPLES
    from benchtrail.detector.alert_rules import ROUND_SAMPLES as RULES_ROUND_SAMPLES

    assert ROUND_SAMPLES == RULES_ROUND_SAMPLES


def test_the_cli_modes_are_the_evaluations():
    """``benchtrail.cli.detector`` repeats the evaluation's modes so that declaring the command imports no
    numpy."""
    from benchtrail.cli.detector import MODES
    from benchtrail.detector.evaluate import MODES as EVALUATION_MODES

    assert MODES == EVALUATION_MODES


def test_export_imports_neither_torch_nor_scipy(tmp_path):
    """The setup job's two exports (the workflow's "Export run configs" step), in benchtrail's own checkout."""
    root = Path(__file__).resolve().parent.parent
    argvs = [["export", "execution", "--benchmark-presets", "x86_64,cuda,comp-stats", "--shard-count", "2",
              "--output", str(tmp_path / "execution.json")],
             ["export", "compilation", "--benchmark-presets", "x86_64,cuda,comp-stats",
              "--output", str(tmp_path / "compilation.json")]]
    child = _run(argvs, root)
    assert (child["codes"], child["torch"], child["scipy"]) == ([0, 0], [], False)
    execution = json.loads((tmp_path / "execution.json").read_text())
    assert set(execution["devices"]) == {"c2-standard-16", "a2-highgpu-1g"}
    assert json.loads((tmp_path / "compilation.json").read_text())["generation_configs"]["root_obj"]
