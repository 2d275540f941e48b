"""The light install (issue 43): the base requirements are what a local run needs; GCS, GitHub, the HTML
dashboard and change-point tracking are extras, and a command whose extra is missing names it in one line.
Each check runs ``benchtrail`` in a child process where the extra's package cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

from packaging.requirements import Requirement

from tests.helpers.git import git_repo
from tests.helpers.medians import step
from tests.helpers.stores import build_store, small_run

#: The child: make the modules named by argv[1] (JSON) unimportable, then run ``benchtrail`` with argv[2].
CHILD = ("import json, sys\nsys.modules.update(dict.fromkeys(json.loads(sys.argv[1])))\n"
         "from benchtrail.cli import main\nsys.exit(main(json.loads(sys.argv[2])))")


def _without(modules: list[str], *argv, cwd) -> subprocess.CompletedProcess:
    child = [sys.executable, "-c", CHILD, json.dumps(modules), json.dumps([str(a) for a in argv])]
    return subprocess.run(child, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_base_install_requires_only_what_a_local_run_needs(tmp_path):
    # Read in a folder without the checkout's build files (a stale benchtrail.egg-info would answer instead).
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('benchtrail')))"
    requires = json.loads(subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                                         text=True, check=True).stdout)
    base = [r for r in map(Requirement, requires) if r.marker is None]
    assert sorted(r.name for r in base) == ["jq", "matplotlib", "numpy", "pyyaml", "rich", "scipy"]


def test_every_command_is_declared_without_the_extras(tmp_path):
    """No module a command's parser imports imports an extra's package at import time."""
    code = ("import sys\nsys.modules.update(dict.fromkeys(['google', 'github', 'plotly', 'ruptures']))\n"
            "from benchtrail.cli.app import build_parser\nbuild_parser()")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_each_extras_command_without_it_names_the_install_in_one_line(tmp_path):
    repo, store, _ = build_store(tmp_path, step(10, 5, 1.2))
    commands = {("gcs", "google-cloud-storage"): ("google", "upload", "--run-dir", tmp_path, "--run-id", "x",
                                                  "--attempt", 1, "--store", "gs://bucket/x"),
                ("github", "PyGithub"): ("github", "gate-status"),
                ("track", "ruptures"): ("ruptures", "track", "--store", store, "--repo", repo)}
    for (extra, package), (module, command, *args) in commands.items():
        done = _without([module], command, *args, cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", (
            f"benchtrail: error: `benchtrail {command}` needs the {extra} extra: pip install {package} "
            f"(or \"benchtrail[{extra}]\"; docs/adopting.md, \"Install\")\n")), extra


def test_plot_without_plotly_and_ruptures_draws_the_pngs_without_change_points(tmp_path):
    repo, store, _ = build_store(tmp_path, step(10, 5, 1.2))  # 15 points: enough for change points
    history = tmp_path / "history.json"
    assert _without([], "history", "--store", store, "--repo", repo, "--output", history,
                    cwd=tmp_path).returncode == 0
    done = _without(["plotly", "ruptures"], "plot", "--history", history, "--output-dir", tmp_path / "plots",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ('no HTML dashboard (PNGs only): needs the dashboard extra: pip install plotly '
                           '(or "benchtrail[dashboard]"; docs/adopting.md, "Install")\n')
    pngs = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert pngs and all(p.endswith(".png") for p in pngs) and done.stdout.split() == [
        str(tmp_path / "plots" / p) for p in pngs]


def test_the_dashboard_stage_without_plotly_draws_the_pngs_and_says_which_extra_draws_the_html(tmp_path):
    (tmp_path / "repo").mkdir()
    run_dir = small_run(tmp_path / "run", git_repo(tmp_path / "repo"))
    (tmp_path / "store").mkdir()
    done = _without(["plotly"], "dashboard", "--store", tmp_path / "store", "--run-dir", run_dir,
                    "--run-id", "local-1", "--attempt", 1, cwd=tmp_path / "repo")
    assert done.returncode == 0, done.stderr
    assert 'no HTML dashboard (PNGs only): needs the dashboard extra: pip install plotly' in done.stderr
    assert sorted(p.name for p in (run_dir / "dashboard").iterdir()) == ["x86_64.png"]
