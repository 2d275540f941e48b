"""The adoption example (docs/examples/adopting-classes) used as its users use it: a git repository that is
not pip-installed, ``benchtrail`` run as a command from a subfolder of the project. The project's
packages must import in the CLI process and in every worker (compile, run, both arms of ``ab``).

Only the test's copy is changed: one worker process of 3 samples per case, to keep it fast, and a
line in the suite module that logs which file each process imported (``IMPORT_LOG``).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.git import git

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting-classes"
#: Appended to the copy's my_benchmarks/suite.py: each process that imports it logs its program (the last two
#: parts of its path: ``worker/__main__.py`` for ``python -m benchtrail.worker``) and the file.
IMPORT_LOG = """
import os as _os
import sys as _sys

if _os.environ.get("IMPORT_LOG"):
    with open(_os.environ["IMPORT_LOG"], "a", encoding="utf-8") as _log:
        _log.write(f"{'/'.join(_sys.argv[0].split(_os.sep)[-2:])}\\t{__file__}\\n")
"""
#: The program name a worker process logs.
WORKER = "worker/__main__.py"


def _project(folder: Path) -> Path:
    """Copy the example into ``folder`` with fewer samples and the import log; return the copy."""
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns(".benchtrail", "__pycache__"))
    suite = folder / "my_benchmarks" / "suite.py"
    text = re.sub(r"\bprocesses=\d+", "processes=1", suite.read_text())
    suite.write_text(re.sub(r"\bmin_samples=\d+", "min_samples=5", text) + IMPORT_LOG)
    return folder


def _repo(root: Path) -> Path:
    git(root, "init", "-q", identity=True)
    git(root, "add", "-A", identity=True)
    git(root, "commit", "-qm", "adopt benchtrail", identity=True)
    return root


def _env(**extra: str) -> dict[str, str]:
    """Our environment without GitHub's or benchtrail's variables (nothing in it names the temporary
    project: the tests check that it does not import on its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BENCHTRAIL_"))}
    return {**env, **extra}


def _benchtrail(command: list[str], cwd: Path, env: dict[str, str], *args: str) -> str:
    """Run ``benchtrail ARGS`` in ``cwd``; return the last line it printed (its main output)."""
    proc = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (f"benchtrail {' '.join(args)} exited "
                                  f"{proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _cli() -> list[str]:
    script = shutil.which("benchtrail", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "benchtrail.cli.app"]


def _cannot_import(cwd: Path, env: dict[str, str], python: str = sys.executable) -> bool:
    return subprocess.run([python, "-c", "import my_benchmarks"], cwd=cwd, env=env,
                          capture_output=True).returncode != 0


def test_the_example_compiles_and_runs_from_a_subfolder_without_being_installed(tmp_path):
    repo = _repo(_project(tmp_path / "my-project"))
    here = repo / "my_benchmarks"  # a subfolder: benchtrail finds pyproject.toml upwards
    log = tmp_path / "imports.log"
    env = _env(IMPORT_LOG=str(log))
    assert _cannot_import(here, env)  # not installed, not on any path

    cli = _cli()
    assert _benchtrail(cli, here, env, "export", "execution", "--output",
                       "execution.json") == "execution.json"
    assert _benchtrail(cli, here, env, "export", "compilation", "--output",
                       "compilation.json") == "compilation.json"
    compiled = _benchtrail(cli, here, env, "compile", "--run-configs", "compilation.json", "--output-dir",
                           "run",
                           "--device-name", "laptop")
    assert compiled == "run/results/compilation-laptop.json"
    results = _benchtrail(cli, here, env, "run", "--run-configs", "execution.json", "--device-name", "laptop",
                          "--modules-dir", "run", "--output", "run/results/laptop-0.json")
    assert results == "run/results/laptop-0.json"

    records = json.loads((here / results).read_text())["benchmarks"]
    assert records and all((r["status"], r["reason"]) == ("ok", None) for r in records), records
    # 1 process x 5 samples, from the copy's ExecutionConfig
    assert all(len(r["samples"]) == 5 for r in records)
    stats = [json.loads(p.read_text())
             for p in sorted((here / "run" / "modules").glob("*/compile-stats.json"))]
    # the content hash read each model's source
    assert stats and all(s["status"] == "ok" for s in stats), stats
    imported = {tuple(line.split("\t")) for line in log.read_text().splitlines()}
    assert {file for _, file in imported} == {str(repo / "my_benchmarks" / "suite.py")}
    assert WORKER in {program for program, _ in imported}  # the workers imported it, not only the CLI


@pytest.mark.parametrize("installed", [False, True], ids=["not-installed", "installed-editable"])
def test_each_ab_arm_imports_the_project_from_its_own_checkout(tmp_path, installed):
    """The project lives in ``bench/`` of its repository; ``ab`` runs from ``bench/my_benchmarks``.
    The base arm's workers must import ``bench/my_benchmarks`` of the base commit's worktree, even
    when an editable install of the head's checkout would resolve the package."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _project(repo / "bench")
    _repo(repo)
    (repo / "CHANGES.md").write_text("head\n")
    git(repo, "add", "CHANGES.md", identity=True)
    git(repo, "commit", "-qm", "head", identity=True)
    here = repo / "bench" / "my_benchmarks"
    log = tmp_path / "imports.log"
    env = _env(IMPORT_LOG=str(log))
    cli = _cli()
    if installed:  # a venv that sees ours, plus `pip install -e bench` (setuptools' editable finder)
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
        site, ours = (subprocess.run([python, "-c", purelib], check=True, capture_output=True,
                                     text=True).stdout.strip()
                      for python in (str(venv / "bin" / "python"), sys.executable))
        Path(site, "zz_ours.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        pyproject = repo / "bench" / "pyproject.toml"
        if "[tool.setuptools" not in pyproject.read_text():  # flat layout: name the packages, however many
            with pyproject.open("a") as f:
                f.write('\n[tool.setuptools.packages.find]\ninclude = ["my_*"]\n')
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "-e", str(repo / "bench")], check=True, env=env, cwd=tmp_path)
        cli = [str(venv / "bin" / "python"), "-m", "benchtrail.cli.app"]
        assert not _cannot_import(tmp_path, env, cli[0])  # the install resolves the head's package anywhere
    else:
        assert _cannot_import(here, env)

    comment = _benchtrail(cli, here, env, "ab", "--base-ref", "HEAD~1", "--benchmark-presets", "smoke",
                          "--output-dir", "ab", "--max-rounds", "1")
    assert comment == "ab/comment/comment.md"
    rows = json.loads((here / "ab" / "comparison.json").read_text())["rows"]
    assert rows and all(r["verdict"] != "failed" for r in rows), rows
    workers = {file for program, file in (line.split("\t") for line in log.read_text().splitlines())
               if program == WORKER}
    head_file = str(repo / "bench" / "my_benchmarks" / "suite.py")
    (base_file,) = workers - {head_file}
    assert head_file in workers
    assert re.search(r"/benchtrail-ab-[^/]+/base/bench/my_benchmarks/suite\.py$", base_file), base_file
