"""The workflows' install step (build_tools/github_actions/install.sh): the adopting project's environment
first and without benchtrail's constraints, then benchtrail keeping the project's torch; the CPU build of
that torch in every job on a CPU runner (setup, compile, process, a CPU device's execute leg: issue 39), the
project's own build on a GPU runner; no torch in the poster and the tracker (issue 19). ci.yml's CPU runner
takes torch from PyTorch's CPU index too.

The step runs for real with a stand-in ``python`` whose ``-m venv`` makes a ``pip`` that records its
arguments and a ``python`` that reports the torch version "installed" so far; the stand-in pip answers
``--dry-run --report`` with the torch version the test says pip would resolve.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.actions_expressions import interpolate

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INSTALL = '"$src/build_tools/github_actions/install.sh"'
#: The torch mode of each job's install step (install.sh's argument); an execute leg's comes from its device's
#: architecture (TORCH_BUILD, test_an_execute_leg_installs_the_torch_build_of_its_devices_architecture).
MODES = {("benchmark.yml", "setup"): "cpu", ("benchmark.yml", "compile"): "cpu",
         ("benchmark.yml", "compile-cuda"): "project", ("benchmark.yml", "execute"): '"$TORCH_BUILD"',
         ("benchmark.yml", "process"): "cpu", ("benchmark.yml", "pages"): "none",
         ("post_benchmark_comment.yml", "post"): "none",
         ("post_benchmark_comment.yml", "gate"): "none"}

# The stand-in venv's pip: one log line per call; a `-c FILE` other than constraints.txt is logged as
# `-c [its lines]`. `torch==V` records V as installed (`V+cpu` from the CPU index); the project's packages
# (`-r requirements.txt`) record $PROJECT_TORCH when set and no torch is installed yet.
PIP = r"""#!/bin/bash
venv=$(cd "$(dirname "$0")/.." && pwd)
line=() report="" prev=""
for a in "$@"; do
  if [ "$prev" = -c ] && [[ $a != */constraints.txt ]]; then line+=("[$(paste -sd ' ' "$a")]"); else line+=("$a"); fi
  if [ "$prev" = --report ]; then report=$a; fi
  prev=$a
done
echo "${line[*]}" >> "$PIP_LOG"
if [ -n "$report" ]; then
  if [ -n "$RESOLVED_TORCH" ]; then
    echo "{\"install\": [{\"metadata\": {\"name\": \"numpy\", \"version\": \"2.4.6\"}}, {\"metadata\": {\"name\": \"torch\", \"version\": \"$RESOLVED_TORCH\"}}]}" > "$report"
  else
    echo '{"install": []}' > "$report"
  fi
  exit 0
fi
if [[ " $* " == *" --index-url "* ]] && [ -n "$NO_CPU_BUILD" ]; then exit 1; fi
if [[ " $* " == *"[torch,ci]"* ]] && [ -n "$CONFLICT" ]; then exit 1; fi
for a in "$@"; do
  case $a in
    torch==*) v=${a#torch==}; [[ " $* " == *" --index-url "* ]] && v=$v+cpu; echo "$v" > "$venv/torch-version" ;;
  esac
done
if [[ " $* " == *" requirements.txt"* ]] && [ -n "$PROJECT_TORCH" ] && [ ! -f "$venv/torch-version" ]; then
  echo "$PROJECT_TORCH" > "$venv/torch-version"
fi
"""
# The stand-in venv's python: `-c ...` prints the installed torch version (install.sh asks for nothing else).
VENV_PYTHON = '#!/bin/bash\nvenv=$(cd "$(dirname "$0")/.." && pwd)\ncat "$venv/torch-version" 2>/dev/null\n'


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _install_step(name: str, job_id: str) -> dict[str, Any]:
    return next(s for s in _load(name)["jobs"][job_id]["steps"] if s.get("name") == "Install benchtrail")


def _fake_python(bin_dir: Path) -> None:
    """A ``python`` whose ``-m venv DIR`` makes the stand-in ``DIR/bin/pip`` and ``DIR/bin/python``."""
    bin_dir.mkdir()
    (bin_dir / "pip-template").write_text(PIP)
    (bin_dir / "python-template").write_text(VENV_PYTHON)
    (bin_dir / "python").write_text(f'#!/bin/bash\n[ "$1 $2" = "-m venv" ] || exit 9\nmkdir -p "$3/bin"\n'
                                    f'cp {bin_dir / "pip-template"} "$3/bin/pip"\n'
                                    f'cp {bin_dir / "python-template"} "$3/bin/python"\nchmod +x "$3"/bin/*\n')
    (bin_dir / "python").chmod(0o755)


def _torch_build(architecture: str) -> str:
    """The execute job's TORCH_BUILD for a matrix leg of a device of ``architecture``, as Actions sets it."""
    return interpolate(_install_step("benchmark.yml", "execute")["env"]["TORCH_BUILD"],
                       {"matrix": {"architecture": architecture}})


def _install(tmp_path: Path, name: str, job_id: str, called: bool, pip_install: str = "",
             architecture: str | None = None, **fake: str
             ) -> tuple[subprocess.CompletedProcess, list[str], str]:
    """Run the job's install step in a workspace whose project folder is ``bench/``: the process, pip's
    calls (the dry run's report path as ``REPORT``) and benchtrail's source folder as install.sh names it
    (no trailing ``/.``). ``architecture``: the execute job's matrix leg (its device's architecture)."""
    if shutil.which("jq") is None:
        pytest.skip("the jq CLI is not installed (apt-get install jq)")
    workspace, log = tmp_path / "ws", tmp_path / "pip.log"
    project = workspace / "bench"
    project.mkdir(parents=True)
    source = workspace / (".benchtrail-src" if called else ".")
    source.mkdir(exist_ok=True)
    for part in ("constraints.txt", "build_tools"):  # benchtrail's source (own repository: the workspace)
        (source / part).symlink_to(ROOT / part)
    _fake_python(tmp_path / "bin")
    checkout = ".benchtrail-src" if called else "."
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "GITHUB_WORKSPACE": str(workspace),
           "GITHUB_ENV": str(tmp_path / "github_env"), "BENCHTRAIL_CHECKOUT": checkout,
           "PIP_INSTALL": pip_install,
           "PIP_LOG": str(log), "RESOLVED_TORCH": "", "PROJECT_TORCH": "", "NO_CPU_BUILD": "", "CONFLICT": "",
           "TMPDIR": str(tmp_path), **fake}
    if architecture is not None:
        env["TORCH_BUILD"] = _torch_build(architecture)
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           _install_step(name, job_id)["run"]],
                          cwd=project, env=env, capture_output=True, text=True, timeout=60)
    calls = [" ".join("REPORT" if i and parts[i - 1] == "--report" else p for i, p in enumerate(parts))
             for parts in (line.split(" ") for line in log.read_text().splitlines())] if log.exists() else []
    return proc, calls, os.path.normpath(f"{workspace}/{checkout}")


def test_each_job_installs_the_torch_it_needs():
    """The jobs on CPU runners (setup, compile, process): the CPU build; compile-cuda: the project's own;
    execute: its leg's (below); the poster: none. Each installs the `ci` extra; the tracker (benchtrail's own
    repository only) installs benchtrail with it and without its torch extra."""
    for (name, job_id), mode in MODES.items():
        run = _install_step(name, job_id)["run"]
        assert run.strip().splitlines()[-1].strip() == f"{INSTALL} {mode}", (name, job_id)
        assert "pip install" not in run  # every pip call is install.sh's
    jobs_with_install = {(name, job_id) for name in ("benchmark.yml", "post_benchmark_comment.yml")
                         for job_id, job in _load(name)["jobs"].items()
                         if any(s.get("name") == "Install benchtrail" for s in job.get("steps", []))}
    assert jobs_with_install == set(MODES)
    tracker = _install_step("track_regressions.yml", "track")["run"]
    assert tracker.strip() == "python -m venv .venv && .venv/bin/pip install -c constraints.txt -e '.[ci]'"


def test_torch_is_a_range_in_an_extra_and_pinned_only_in_constraints_txt():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.split(">")[0].split("=")[0].strip() == "torch"]
    extras = project["optional-dependencies"]
    assert extras["torch"] == ["torch>=2.11"]
    assert "torch>=2.11" in extras["test"]  # the README's test command and .ci/run install torch through it
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().splitlines()
    readme = (ROOT / "README.md").read_text()
    assert "pip install -c constraints.txt -e '.[torch]' && .venv/bin/benchtrail pipeline" in readme
    assert "pip install -c constraints.txt -e '.[test]' && .venv/bin/python -m pytest" in readme


@pytest.mark.parametrize("job_id, architecture, cpu_runner", [
    ("setup", None, True), ("compile", None, True), ("process", None, True), ("execute", "cpu", True),
    ("execute", "cuda", False), ("compile-cuda", None, False),
])
def test_benchtrails_own_repository_installs_with_its_constraints_and_the_cpu_build_on_cpu_runners(
        tmp_path, job_id, architecture, cpu_runner):
    """A job on a CPU runner installs torch 2.13.0 from PyTorch's CPU index before anything else (PyPI's
    default Linux build is the CUDA one); a job on a GPU runner, constraints.txt's torch as pip finds it."""
    proc, calls, src = _install(tmp_path, "benchmark.yml", job_id, called=False, architecture=architecture,
                                RESOLVED_TORCH="2.13.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "github_env").read_text() == f"BENCHTRAIL_SRC={tmp_path}/ws/.\n"
    pins = f"-c {src}/constraints.txt"
    cpu = [f"install --quiet --dry-run --report REPORT {pins} -e {src}[torch,ci]",
           f"install --no-deps --index-url {CPU_INDEX} {pins} torch==2.13.0"]
    assert calls == (cpu if cpu_runner else []) + [f"install {pins} -e {src}[torch,ci]"]


def test_an_execute_leg_installs_the_torch_build_of_its_devices_architecture(tmp_path):
    """TORCH_BUILD from the leg's matrix.architecture: `cpu` for a CPU device, the project's own build on a
    GPU. Called from another repository, a CPU leg installs the CPU build of the project's torch version."""
    step = _install_step("benchmark.yml", "execute")
    assert step["env"]["TORCH_BUILD"] == "${{ matrix.architecture == 'cpu' && 'cpu' || 'project' }}"
    assert (_torch_build("cpu"), _torch_build("cuda")) == ("cpu", "project")
    proc, calls, src = _install(tmp_path, "benchmark.yml", "execute", True, "-r requirements.txt", "cpu",
                                RESOLVED_TORCH="2.14.1", PROJECT_TORCH="2.14.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls[1:] == [f"install --no-deps --index-url {CPU_INDEX} torch==2.14.1",
                         "install -r requirements.txt", f"install -c [torch==2.14.1+cpu] -e {src}[torch,ci]"]


def test_ci_takes_torch_from_pytorchs_cpu_index():
    """ci.yml's runner has no GPU: .ci/run's `pip install -c constraints.txt` also sees PyTorch's CPU index,
    whose 2.13.0+cpu sorts above PyPI's 2.13.0 (the CUDA build), so pip takes the CPU build."""
    (job,) = _load("ci.yml")["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("run") == "bash .ci/run"]
    assert step["env"] == {"PIP_EXTRA_INDEX_URL": CPU_INDEX}
    assert job["runs-on"] == "ubuntu-latest"


def test_the_poster_installs_no_torch(tmp_path):
    for called in (False, True):
        proc, calls, src = _install(tmp_path / str(called), "post_benchmark_comment.yml", "post", called)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert calls == [f"install -c {src}/constraints.txt -e {src}[ci]"]


def test_a_called_run_installs_the_projects_environment_first_then_benchtrail_keeping_its_torch(tmp_path):
    """The model jobs: the project's packages without benchtrail's constraints, then benchtrail with the
    one constraint that keeps the torch they brought (a nightly CUDA build here)."""
    nightly = "2.15.0.dev20261201+cu128"
    proc, calls, src = _install(tmp_path, "benchmark.yml", "execute", True, "-e . -r requirements.txt",
                                "cuda", PROJECT_TORCH=nightly)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == ["install -e . -r requirements.txt", f"install -c [torch=={nightly}] -e {src}[torch,ci]"]
    assert not [c for c in calls if "constraints.txt" in c]
    # The project brings no torch: benchtrail's range picks one.
    proc, calls, src = _install(tmp_path / "none", "benchmark.yml", "compile-cuda", True,
                                "-r requirements.txt")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == ["install -r requirements.txt", f"install -e {src}[torch,ci]"]


def test_a_called_setup_installs_the_cpu_build_of_the_torch_the_project_resolves_to(tmp_path):
    proc, calls, src = _install(tmp_path, "benchmark.yml", "setup", True, "-e . -r requirements.txt",
                                RESOLVED_TORCH="2.14.1", PROJECT_TORCH="2.14.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == [f"install --quiet --dry-run --report REPORT -e . -r requirements.txt -e {src}[torch,ci]",
                     f"install --no-deps --index-url {CPU_INDEX} torch==2.14.1",
                     "install -e . -r requirements.txt",
                     f"install -c [torch==2.14.1+cpu] -e {src}[torch,ci]"]
    # A version the CPU index lacks (a local build): a warning, and the project's own build.
    proc, calls, src = _install(tmp_path / "local", "benchmark.yml", "setup", True, "-r requirements.txt",
                                RESOLVED_TORCH="2.15.0a0+git1234", PROJECT_TORCH="2.15.0a0+git1234",
                                NO_CPU_BUILD="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "::warning title=benchtrail install::no CPU build of torch 2.15.0a0" in proc.stdout
    assert calls[1:] == [f"install --no-deps --index-url {CPU_INDEX} torch==2.15.0a0",
                         "install -r requirements.txt",
                         f"install -c [torch==2.15.0a0+git1234] -e {src}[torch,ci]"]


def test_a_project_torch_outside_benchtrails_range_fails_the_step_naming_it(tmp_path):
    proc, calls, _ = _install(tmp_path, "benchmark.yml", "process", True, "-r requirements.txt",
                              PROJECT_TORCH="2.9.1", CONFLICT="1")
    assert proc.returncode == 1
    assert "::error title=benchtrail install::benchtrail does not install beside the project's torch 2.9.1" in proc.stdout
    # Without benchtrail's source there, the step fails and says why (before install.sh).
    proc, calls, _ = _install(tmp_path / "missing", "benchmark.yml", "setup", True,
                              BENCHTRAIL_CHECKOUT="missing")
    assert proc.returncode == 1 and "::error title=benchtrail::no benchtrail source" in proc.stdout and calls == []


def test_install_sh_refuses_an_unknown_mode(tmp_path):
    proc = subprocess.run([str(ROOT / "build_tools/github_actions/install.sh"), "cuda"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "install.sh takes project, cpu or none, not 'cuda'" in proc.stdout


def test_every_file_the_package_reads_at_run_time_ships_in_the_wheel():
    """A wheel (``pip install "benchtrail @ git+https://..."``) holds the packages' Python files and what
    package-data names; every other file under the packages must match one of its patterns (.ci/run's wheel
    step runs the smoke pipeline from the wheel, but not every command)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["benchtrail"]
    package = ROOT / "build_tools" / "benchtrail"
    data = [p.relative_to(package) for p in package.rglob("*")
            if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts]
    assert data and [p for p in data if not any(p.match(pattern) for pattern in patterns)] == []
    assert not [p for p in (ROOT / "benchmark_suites").rglob("*")
                if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts]


def test_a_command_that_needs_torch_says_so_where_torch_is_not_installed(tmp_path):
    """torch is an extra: where it is missing, a command that runs models fails naming it (exit 1)."""
    child = ("import sys; sys.modules['torch'] = None\n"  # `import torch` raises ModuleNotFoundError
             "from benchtrail.cli import main\n"
             "sys.exit(main(['pipeline', '--benchmark-presets', 'smoke', '--store', 'store']))")
    done = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip() == (
        "benchtrail: error: `benchtrail pipeline` needs torch, which is not installed here: install the project's "
        "torch, or benchtrail's torch extra (pip install \"benchtrail[torch] @ ...\"; docs/adopting.md, \"Install\")")
