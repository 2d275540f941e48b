"""The one way tests run ``git``, and the repositories they build with it."""

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

#: Who commits, as environment variables git reads before its configuration.
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com"}
#: An environment of only ``IDENTITY`` and ``PATH``: no ``HOME``, so no user's git configuration.
ISOLATED = {**IDENTITY, "PATH": "/usr/bin:/bin:/usr/local/bin"}


def git(repo: Path | str | None, *args: str, isolated: bool = False, identity: bool = False,
        strip: bool = True, env: Mapping[str, str] | None = None) -> str:
    """Run ``git *args`` in ``repo`` (checked); return its stdout, stripped unless ``strip`` is false.

    ``isolated`` runs it in ``ISOLATED`` (commits as ``t``, outside the user's configuration);
    ``identity`` commits as ``t`` in the inherited environment; ``env``: variables added to either
    (a commit's dates, say)."""
    base = ISOLATED if isolated else {**os.environ, **IDENTITY} if identity else None
    if env:
        base = {**(os.environ if base is None else base), **env}
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=base)
    return done.stdout.strip() if strip else done.stdout


def commit(repo: Path, message: str) -> str:
    """An empty commit on ``repo``'s HEAD, made in ``ISOLATED``; its sha."""
    git(repo, "commit", "-q", "--allow-empty", "-m", message, isolated=True)
    return git(repo, "rev-parse", "HEAD", isolated=True)


def git_repo(root: Path) -> str:
    """A git repository at ``root`` with one commit (its message: the folder's name); returns its sha."""
    git(root, "init", "-q", "-b", "main", isolated=True)
    return commit(root, root.name)


def two_commit_repo(root: Path, module: str, base: str, head: str) -> Path:
    """A git repository at ``root`` (created) whose HEAD~1 holds ``module`` (a file name, e.g. ``slowmod.py``)
    with the text ``base`` and HEAD with ``head``: the two arms of a paired A/B run. Returns ``root``."""
    root.mkdir()
    git(root, "init", "-q")
    for text, message in ((base, "base"), (head, "head")):
        (root / module).write_text(text)
        git(root, "add", module)
        git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message)
    return root
