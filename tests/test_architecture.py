"""The layout's rules hold: the import contracts (``lint-imports``), the lint rules (``ruff check``), the
library's format (``ruff format``), the types (``mypy``) and the size of modules.

The tools are configured in pyproject.toml (``[tool.importlinter]``, ``[tool.ruff]``, ``[tool.mypy]``) and
described in docs/architecture.md. They run here, so the README's test command checks them; each runs from the
repository root with the executable installed next to this interpreter (the ``test`` extra), without a
cache in the working tree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the test extra (pip install -c constraints.txt -e '.[test]')")
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_import_contracts_are_kept():
    """Layers (cli → pipeline → stages and wings → data model → leaves), no cycle, a torch-free core."""
    proc = _run("lint-imports", "--no-cache", "--no-logo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_library_is_formatted():
    """``ruff format`` would change nothing in build_tools/benchtrail (tests and scripts are excluded)."""
    proc = _run("ruff", "format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing(tmp_path):
    """--strict on results, stats, store, worker.protocol and compare.document; default checks on the rest of
    compare (issue 46). A cache of its own under tmp_path: every run costs what a fresh clone's does."""
    proc = _run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout + proc.stderr


def test_no_module_of_the_library_is_over_450_lines():
    """benchtrail's modules and the suite's stay small enough to read whole (issue 17)."""
    too_long = {}
    for top in (ROOT / "build_tools" / "benchtrail", ROOT / "benchmark_suites"):
        for path in sorted(top.rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > 450:
                too_long[str(path.relative_to(ROOT))] = lines
    assert too_long == {}


def test_the_map_names_every_module():
    """docs/architecture.md's package table names each module of the library in its package's row."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Packages") : doc.index("## Data flow")].splitlines()
    library = ROOT / "build_tools" / "benchtrail"
    unnamed = []
    for path in sorted(library.rglob("*.py")):
        rel = path.relative_to(library)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        rows = [row for row in table if row.startswith(f"| `{rel.parts[0]}{'/' if rel.parent.name else ''}`")]
        if len(rel.parts) > 1 and not (rows and f"`{path.stem}`" in rows[0]):
            unnamed.append(str(rel))
        elif len(rel.parts) == 1 and not rows:
            unnamed.append(str(rel))
    assert unnamed == [], "name each in its package's row of docs/architecture.md's package table"
