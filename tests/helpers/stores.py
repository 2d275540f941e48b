"""Stores and run directories made for tests: a store with one run per commit of a git history, a run
directory of small results files, and a copy of the session's history store."""

import shutil
from pathlib import Path

from benchtrail.results.io import write_results
from benchtrail.store import open_store
from tests.helpers.git import git
from tests.helpers.records import record, results


def build_store(root, medians: list[float], other: list[float] | None = None, gaps: tuple[int, ...] = ()):
    """A git repo with one commit per median and a local store with a run (one results file) per commit
    not in ``gaps``. ``other``: a second, unrelated series' medians."""
    repo, store_dir = root / "repo", root / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    store = open_store(str(store_dir))
    shas = []
    for i, m in enumerate(medians):
        (repo / "f.txt").write_text(str(i))
        git(repo, "add", "f.txt", isolated=True)
        git(repo, "commit", "-q", "-m", f"commit {i}", isolated=True)
        shas.append(git(repo, "rev-parse", "HEAD", isolated=True))
        if i in gaps:
            continue
        recs = [record("mlp", [m * (1 + 0.001 * k) for k in range(-5, 5)])]
        if other:
            recs.append(record("gelu", [other[i]] * 10))
        run_id = f"run-{i:03d}"
        write_results(store.run_dir(run_id, 1) / "results" / "c2-standard-16-0.json",
                      results(*recs, commit=shas[-1]))
        store.write_pointer(shas[-1], run_id, 1, {"devices": ["c2-standard-16"], "presets": ["x86_64"],
                                                  "torch_version": "2.13.0",
                                                  "created": f"2026-01-01T00:00:{i:02d}Z"})
    return repo, store_dir, shas


def small_run(run_dir: Path, *commits: str) -> Path:
    """A run directory whose results files (one per commit) hold one execution series each."""
    from benchtrail.results.io import write_results
    from tests.helpers.records import record, results

    for i, commit in enumerate(commits):
        write_results(run_dir / "results" / f"c2-standard-16-{i}.json",
                      results(record("rc1", [100.0 + j for j in range(10)]), commit=commit))
    return run_dir


def store_copy(history_store, dest: Path) -> Path:
    """A copy of the history store holding what history and compare-builds read: the commit pointers and
    each run's results/*.json."""
    store = Path(history_store["store"])
    shutil.copytree(store / "commits", dest / "commits")
    for run_dir in history_store["run_dirs"].values():
        target = dest / run_dir.relative_to(store) / "results"
        target.mkdir(parents=True)
        for f in (run_dir / "results").glob("*.json"):
            shutil.copyfile(f, target / f.name)
    return dest
