"""Every git call of benchtrail, one function per question; and how a commit is written (``FULL_SHA``,
``short_sha``).

Each call answers None (or False) when git fails, prints nothing or is absent; the caller decides what that
means. Only :func:`interpret_trailers` raises, as its output must not be silently empty.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

#: The commit recorded when the working directory is not a git checkout (40 zeros, git's null sha).
UNKNOWN_COMMIT = "0" * 40
#: A full commit SHA: 40 hex digits (SHA-1) or 64 (SHA-256), either case.
FULL_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


def short_sha(commit: str) -> str:
    """A commit's 7-character short form, as git and the PR comment show it."""
    return commit[:7]


def git(cwd: Path, *args: str) -> str | None:
    """``git <args>`` in ``cwd``: its stripped stdout, or None when git fails, prints nothing or is absent."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def is_repository(path: Path) -> bool:
    """Whether ``path`` is inside a git repository (and git is installed)."""
    return git(path, "rev-parse", "--git-dir") is not None


def resolve_commit(repo: Path, ref: str) -> str | None:
    """The 40-hex sha of the commit ``ref`` names in ``repo``; None when it names none."""
    return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def toplevel(path: Path) -> Path | None:
    """The top-level folder of the checkout holding ``path``; None outside one."""
    top = git(path, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def state(cwd: Path) -> tuple[str, bool]:
    """``(sha, dirty)``: dirty when tracked files differ from HEAD; outside git ``(UNKNOWN_COMMIT, True)``."""
    commit = git(cwd, "rev-parse", "HEAD")
    if not commit:
        return UNKNOWN_COMMIT, True
    return commit, bool(git(cwd, "status", "--porcelain", "--untracked-files=no"))


def symbolic_ref(repo: Path, name: str) -> str | None:
    """The short name the symbolic ref ``name`` points to; None when it is none."""
    return git(repo, "symbolic-ref", "--quiet", "--short", name)


def merge_base(repo: Path, a: str, b: str) -> str | None:
    """The best common ancestor of ``a`` and ``b``; None when none or either is unknown."""
    return git(repo, "merge-base", a, b)


def is_ancestor(repo: Path, a: str, b: str) -> bool:
    """Whether commit ``a`` is an ancestor of (or equal to) commit ``b``."""
    try:
        return (
            subprocess.run(
                ["git", "merge-base", "--is-ancestor", a, b], cwd=repo, capture_output=True
            ).returncode
            == 0
        )
    except OSError:
        return False


def first_parents(repo: Path, ref: str, max_count: int) -> list[str]:
    """Up to ``max_count`` shas of ``ref``'s first-parent history, ``ref`` first; empty when git fails."""
    return (git(repo, "rev-list", "--first-parent", f"--max-count={max_count}", ref) or "").split()


def first_parent_log(repo: Path, a: str, b: str) -> list[tuple[str, str]]:
    """``[(sha, subject)]`` of the first-parent commits in ``a..b``, oldest first."""
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%H %s", f"{a}..{b}") or ""
    return [line.partition(" ")[::2] for line in out.splitlines()]  # (sha, subject or "")


def add_worktree(repo: Path, path: Path, commit: str) -> bool:
    """Whether ``path`` is a checkout after ``git worktree add --detach``."""
    return git(repo, "worktree", "add", "--detach", str(path), commit) is not None or path.is_dir()


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove the worktree at ``path`` (even with changes) and prune git's record of it."""
    git(repo, "worktree", "remove", "--force", str(path))
    git(repo, "worktree", "prune")


def interpret_trailers(message: str) -> str:
    """One ``key: value`` line per trailer of ``message``, parsed with git's defaults whatever the config.

    Raises FileNotFoundError without git, subprocess.CalledProcessError when git fails.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_DIR=os.devnull)
    out = subprocess.run(
        [
            "git",
            "-c",
            "core.commentChar=#",
            "-c",
            "trailer.separators=:",
            "interpret-trailers",
            "--parse",
            "--no-divider",
        ],
        input=message.encode(),
        env=env,
        capture_output=True,
        check=True,
    )
    return out.stdout.decode()
