"""build_tools/benchmarks/measure_detection.py refuses bad arguments by name before it measures anything (its
figures are measurements, docs/detector.md, not tests)."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "build_tools" / "benchmarks" / "measure_detection.py"


@pytest.mark.parametrize("argv, message", [
    (["--trials", "0"], "--trials 0: allowed: a whole number from 1"),
    (["--conditions", "quiet,loud"], "--conditions 'quiet,loud': allowed: quiet, noise, comma-separated"),
    (["--conditions", ","], "--conditions ',': allowed: quiet, noise, comma-separated"),
    (["--trials", "two"], "argument --trials: invalid int value: 'two'"),
])
def test_bad_arguments_are_refused_naming_the_argument(argv, message):
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""
