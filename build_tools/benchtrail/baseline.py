"""Find the baseline run for a head commit (DESIGN.md's rule).

1. An explicit ``--base-commit``.
2. Else the merge base of HEAD with the default branch (HEAD itself when there is none) and its
   first-parent ancestors, up to ``MAX_ANCESTORS``, until one has a run with results for one of
   the head's device names and the same torch version.
3. Else the most recent earlier run of the head commit itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail.environment import git as _git
from benchtrail.errors import UserError
from benchtrail.store import LocalStore

MAX_ANCESTORS = 10


@dataclass(frozen=True)
class Baseline:
    """The chosen baseline: its commit, why it was chosen, and its run directory."""

    commit: str
    reason: str
    run_id: str
    attempt: int
    run_dir: Path

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "reason": self.reason, "run_id": self.run_id, "attempt": self.attempt,
                "run_dir": str(self.run_dir)}


def resolve_commit(repo: Path, ref: str) -> str:
    """The full sha of ``ref`` in ``repo``, or ``ref`` itself when git cannot resolve it."""
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") or ref


def default_branch(repo: Path) -> str | None:
    """``origin/HEAD``'s target, else the first of origin/main, main, origin/master, master that exists."""
    ref = _git(repo, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if ref:
        return ref
    for name in ("origin/main", "main", "origin/master", "master"):
        if _git(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"):
            return name
    return None


def candidate_commits(repo: Path, head: str) -> list[tuple[str, str]]:
    """``[(sha, reason)]``: the merge base with the default branch, then its first-parent ancestors."""
    branch = default_branch(repo)
    base = _git(repo, "merge-base", head, branch) if branch else None
    reason = "merge base"
    if base is None:
        base, reason = head, "HEAD (no default branch)"
    listed = _git(repo, "rev-list", "--first-parent", f"--max-count={MAX_ANCESTORS + 1}", base)
    shas = listed.split() if listed else [base]
    return [(sha, reason if i == 0 else f"{reason}~{i}") for i, sha in enumerate(shas)]


def _usable(pointer: dict[str, Any], devices: set[str], torch_version: str, exclude: tuple[str, int] | None) -> bool:
    if exclude and (pointer.get("run_id"), pointer.get("attempt")) == exclude:
        return False
    return bool(devices & set(pointer.get("devices", []))) and pointer.get("torch_version") == torch_version


def _latest(store: LocalStore, commit: str, reason: str, devices: set[str], torch_version: str,
            exclude: tuple[str, int] | None) -> Baseline | None:
    usable = [p for p in store.pointers(commit) if _usable(p, devices, torch_version, exclude)]
    if not usable:
        return None
    p = usable[-1]
    return Baseline(commit, reason, p["run_id"], int(p["attempt"]), store.run_dir(p["run_id"], int(p["attempt"])))


def find_baseline(store: LocalStore, repo: Path, head: str, devices: set[str], torch_version: str,
                  explicit: str | None = None, exclude: tuple[str, int] | None = None) -> Baseline | None:
    """Return the baseline run for ``head``, or None when no stored run qualifies.

    Raises:
        UserError: ``explicit`` is given but the store holds no usable run for it.
    """
    if explicit:
        sha = resolve_commit(repo, explicit)
        found = _latest(store, sha, "given by --base-commit", devices, torch_version, exclude)
        if found is None:
            raise UserError(f"--base-commit {explicit}: the store {store.url} has no run of {sha} for devices "
                            f"{sorted(devices)} with torch {torch_version}")
        return found
    for sha, reason in candidate_commits(repo, head):
        found = _latest(store, sha, reason, devices, torch_version, exclude)
        if found:
            return found
    return _latest(store, head, "earlier run of this commit", devices, torch_version, exclude)


def fetch_baseline_results(store: LocalStore, repo: Path, head: str, devices: set[str], torch_version: str,
                           explicit: str | None = None,
                           exclude: tuple[str, int] | None = None) -> tuple[Path | None, Baseline | None]:
    """Find the baseline run (:func:`find_baseline`) and fetch its ``results/*.json`` from the store.

    Returns ``(local run directory, baseline)``, or ``(None, None)`` when no stored run qualifies.

    Raises:
        UserError: as :func:`find_baseline`, or the store cannot be read.
    """
    baseline = find_baseline(store, repo, head, devices, torch_version, explicit, exclude)
    if baseline is None:
        return None, None
    return store.fetch_run(baseline.run_id, baseline.attempt, patterns=("results/*.json",)), baseline
