"""The stand-ins of ``tests/workflow_harness.py``: the actions and the one step it does not run itself.

``actions/checkout`` fetches from the test's git repository (or links benchtrail's own source for
``repository: */benchtrail``), ``actions/setup-python`` and ``google-github-actions/auth`` do
nothing (the test's interpreter; the GCS emulator takes anonymous requests), the artifact actions
keep artifacts in folders of the run, and the step named ``Install benchtrail`` links ``.venv`` to
the harness's environment. Each function takes the harness's run (``workflow_harness._Run``).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.actions_expressions import interpolate

ROOT = Path(__file__).resolve().parents[1]


def artifact_paths(path_input: str, workspace: Path) -> list[tuple[Path, str]]:
    """(file, path inside the artifact) for what upload-artifact takes for ``path_input``.

    As actions/upload-artifact does: each line is a glob (a folder brings all files under it);
    a line's search path is its leading segments without a wildcard; the artifact's root is that
    search path (one line) or the lines' common ancestor, and a lone file named without a wildcard
    is stored at the root.
    """
    lines = [line.strip() for line in path_input.splitlines() if line.strip()]
    wildcard = re.compile(r"[*?]|\[[^\]]{2,}\]")
    search_paths, files = [], set()
    for line in lines:
        full = line if line.startswith("/") else str(workspace / line)
        segments = full.rstrip("/").split("/")
        literal = next((i for i, seg in enumerate(segments) if wildcard.search(seg)), len(segments))
        search_paths.append("/".join(re.sub(r"\[(.)\]", r"\1", seg) for seg in segments[:literal]) or "/")
        for found in glob.glob(full):
            found_path = Path(found)
            files.update([str(found_path)] if found_path.is_file() else
                         (str(f) for f in found_path.rglob("*") if f.is_file()))
    if len(search_paths) > 1:
        root = os.path.commonpath(search_paths)
    elif len(files) == 1 and search_paths[0] in files:
        root = os.path.dirname(search_paths[0])
    else:
        root = search_paths[0]
    return sorted((Path(f), Path(f).relative_to(root).as_posix()) for f in files)


@dataclass
class StepResult:
    name: str
    outcome: str  # success | failure | skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""
    seconds: float = 0.0


def install(run: Any, step: dict[str, Any], name: str, workspace: Path, defaults: dict[str, Any],
            context: dict[str, Any], step_env: dict[str, str], files: dict[str, Path]) -> StepResult:
    """Stand-in for the install step: ``.venv`` links to the test's environment."""
    wd = workspace / interpolate(defaults.get("working-directory") or ".", context)
    (wd / ".venv").symlink_to(run.h.venv, target_is_directory=True)
    src = workspace / step_env.get("BENCHTRAIL_CHECKOUT", ".")
    if not (src / "constraints.txt").is_file() or not (src / "build_tools" / "benchtrail").is_dir():
        return StepResult(name, "failure", "failure", log=f"no benchtrail source in {src}")
    with open(files["GITHUB_ENV"], "a") as f:
        f.write(f"BENCHTRAIL_SRC={src}\n")
    return StepResult(name, "success", "success", outputs={"pip-install": step_env.get("PIP_INSTALL", "")},
                      log=f"stand-in: .venv -> {run.h.venv}; pip-install {step_env.get('PIP_INSTALL', '')!r}")

# -- actions ----------------------------------------------------------------------------------

def action(run: Any, step: dict[str, Any], name: str, with_: dict[str, Any], workspace: Path) -> StepResult:
    action = step["uses"].split("@")[0]
    try:
        if action == "actions/checkout":
            log = checkout(run, with_, workspace)
            return StepResult(name, "success", "success", log=log)
        if action == "actions/setup-python":
            return StepResult(name, "success", "success", log=f"stand-in: {sys.executable}")
        if action == "actions/upload-artifact":
            return upload(run, name, with_, workspace)
        if action == "actions/download-artifact":
            return download(run, name, with_, workspace)
        if action == "google-github-actions/auth":
            return StepResult(name, "success", "success", log="stand-in: anonymous emulator access")
    except (subprocess.CalledProcessError, OSError) as exc:
        return StepResult(name, "failure", "failure", log=f"{exc}\n{getattr(exc, 'stderr', '')}")
    raise AssertionError(f"no stand-in for action {action!r}")

def checkout(run: Any, with_: dict[str, Any], workspace: Path) -> str:
    repository = with_.get("repository") or run.github["repository"]
    dest = workspace / (with_.get("path") or ".")
    if repository != run.h.repository:
        assert repository.endswith("/benchtrail"), repository
        dest.symlink_to(ROOT, target_is_directory=True)
        return f"stand-in: {dest} -> benchtrail's source {ROOT}"
    ref = str(with_.get("ref") or run.github["sha"])
    depth = int(float(with_.get("fetch-depth", 1)))
    dest.mkdir(parents=True, exist_ok=True)
    git = lambda *args: subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True,  # noqa: E731
                                       text=True)
    git("init", "-q")
    git("remote", "add", "origin", f"file://{run.h.repo}")
    refspecs = ["+refs/heads/*:refs/remotes/origin/*"] if depth == 0 else []
    target = ref if re.fullmatch(r"[0-9a-f]{40}", ref) else f"refs/heads/{ref}"
    git("fetch", "-q", *([] if depth == 0 else [f"--depth={depth}"]), "origin", target, *refspecs)
    git("checkout", "-q", "--detach", "FETCH_HEAD")
    return f"stand-in: fetched {ref} (depth {depth or 'all'}) of {run.h.repo}"

def upload(run: Any, name: str, with_: dict[str, Any], workspace: Path) -> StepResult:
    artifact = str(with_["name"])
    target = run.result.artifacts / artifact
    if target.exists():
        return StepResult(name, "failure", "failure", log=f"an artifact named {artifact!r} exists already")
    files = artifact_paths(str(with_["path"]), workspace)
    if not files:
        if with_.get("if-no-files-found", "warn") == "error":
            return StepResult(name, "failure", "failure", log=f"no files found for {with_['path']!r}")
        return StepResult(name, "success", "success", log="no files found: nothing uploaded")
    for source, rel in files:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / rel)
    url = f"https://github.com/{run.h.repository}/actions/runs/{run.result.run_id}/artifacts/{artifact}"
    return StepResult(name, "success", "success", outputs={"artifact-url": url},
                      log=f"uploaded {len(files)} file(s) as {artifact}")

def download(run: Any, name: str, with_: dict[str, Any], workspace: Path) -> StepResult:
    run_id = with_.get("run-id")
    source = run.h.runs[int(float(run_id))].artifacts if run_id else run.result.artifacts
    available = sorted(p.name for p in source.iterdir())
    path = Path(str(with_.get("path") or "."))
    dest = path if path.is_absolute() else workspace / path
    if with_.get("name"):
        chosen, merge = [str(with_["name"])], True
        if chosen[0] not in available:
            return StepResult(name, "failure", "failure", log=f"Artifact not found: {chosen[0]}")
    else:
        chosen = [a for a in available if fnmatch.fnmatchcase(a, str(with_.get("pattern") or "*"))]
        merge = str(with_.get("merge-multiple", "false")).lower() == "true"
    for artifact in chosen:
        shutil.copytree(source / artifact, dest if merge else dest / artifact, dirs_exist_ok=True)
    return StepResult(name, "success", "success", log=f"downloaded {chosen} into {dest}")
