"""The commit pointer's contents for a run directory, read from its results files (docs/formats.md)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.results.baseline_key import keys_of_results
from benchtrail.results.io import load_results_paths
from benchtrail.store.base import Json
from benchtrail.store.local import pointer_document


def pointer_info(run_dir: Path) -> Json:
    """From ``run_dir/results/*.json``; ``results`` lists their run-relative names (all a baseline lookup
    fetches). Raises UserError: no results files, or files of several commits or torch versions."""
    run_dir = Path(run_dir)
    paths = sorted((run_dir / "results").glob("*.json"))
    files = load_results_paths([run_dir])
    commits = {f.commit for f in files}
    versions = {f.environment.get("torch_version") for f in files}
    if len(commits) != 1 or len(versions) != 1:
        raise UserError(
            f"{run_dir}: a pointer needs results of one commit and one "
            f"torch version; found commits {sorted(commits)} and torch versions "
            f"{sorted(map(str, versions))}"
        )
    keys = sorted(k for ks in keys_of_results(files).values() for k in ks)
    return {
        "commit": commits.pop(),
        "dirty": any(f.dirty for f in files),
        "presets": sorted({p for f in files for p in f.run.get("presets", [])}),
        "devices": sorted({b.device_name for f in files for b in f.benchmarks}),
        "torch_version": versions.pop(),
        "baseline_keys": [k.to_dict() for k in keys],
        "results": [p.relative_to(run_dir).as_posix() for p in paths],
        "created": datetime.datetime.now(datetime.UTC).isoformat(),
    }


def check_own_pointer(store: Any, commit: str, run_id: str, attempt: int, info: Json, url: Any) -> None:
    """Read this run's pointer back: UserError when it is missing or another writer's (a store that lets a
    create race, or ignores preconditions as an emulator does); the run must not become a baseline."""
    wrote = json.loads(json.dumps(pointer_document(commit, run_id, attempt, info)))
    found = [
        {k: v for k, v in p.items() if k != "stored_at"}
        for p in store.pointers(commit)
        if (p["run_id"], p["attempt"]) == (str(run_id), attempt)
    ]
    if found != [wrote]:
        raise UserError(
            f"the pointer {url} is not the one run {run_id}/{attempt} wrote: "
            "another writer created or changed it under this run's name (a clash; this run "
            "must not be a baseline: check who holds the store's write identity)"
        )


def names_run(store: Any, run_dir: Path, run_id: str, attempt: int) -> bool:
    """Whether a pointer of the commits of ``run_dir``'s results names the run; True when it has none or
    they cannot be read (nothing to tell the commit by)."""
    results = sorted((Path(run_dir) / "results").glob("*.json"))
    try:
        commits = {f.commit for f in load_results_paths(results)}
    except UserError:  # compare says what is wrong
        return True
    return not commits or any(
        (p["run_id"], p["attempt"]) == (run_id, attempt) for c in commits for p in store.pointers(c)
    )
