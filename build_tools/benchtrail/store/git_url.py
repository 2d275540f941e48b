"""The URLs of the ``git:`` store (``git:REMOTE#BRANCH``, git_branch.py) and its git calls.

Torch-free and without the store itself: ``benchtrail.store`` imports it for a ``git:`` run's fetch line and
browser link.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from benchtrail.errors import StoreError, UserError

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "benchtrail-data"
#: Top-level folders of a run that are never committed: compiled artifacts (the Inductor cache among them)
#: and the run's dashboard. ``upload_run`` writes a note about them under ``NOTES``.
LEFT_OUT = ("modules", "dashboard")
NOTES = "not-stored"
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: ``git:REMOTE#BRANCH/<a path of the store>``: the branch ends before the first of the store's folders.
_STORED_URL = re.compile(r"^git:(?P<remote>[^#]*)#(?P<branch>.+?)/(?P<path>(?:runs|commits|assets)/.*)$")
_RUN_IN_PATH = re.compile(r"^runs/(?P<run_id>[^/]+)/(?P<attempt>[0-9]+)/?(?P<rel>.*)$")


def parse_url(url: str) -> tuple[str, str]:
    """``(REMOTE, BRANCH)`` of ``git:REMOTE#BRANCH``, with the defaults filled in (nothing resolved).

    Raises:
        UserError: not a ``git:`` URL, a branch name git or a URL cannot hold, or a remote URL with a
            password or token in it.
    """
    if not url.startswith("git:"):
        raise UserError(f"store URL {url!r} is not git:REMOTE#BRANCH")
    remote, _, branch = url[len("git:") :].rpartition("#") if "#" in url else (url[len("git:") :], "", "")
    remote, branch = remote.strip() or DEFAULT_REMOTE, branch.strip() or DEFAULT_BRANCH
    if _has_credentials(remote):
        raise UserError(
            f"store URL {shown_remote(url)!r}: the remote holds a user name or token; put the "
            "token in a credential helper (or leave it to actions/checkout's credentials) and "
            "give the URL without it"
        )
    if not _branch_ok(branch) or {"runs", "commits", "assets"} & set(branch.split("/")):
        raise UserError(
            f"store URL {shown_remote(url)!r}: {branch!r} is not a branch name benchtrail stores "
            "in (one `git check-ref-format --branch` accepts, not HEAD; no 'runs', 'commits' or "
            "'assets' segment, which would make a run's URL ambiguous)"
        )
    return remote, branch


def _branch_ok(branch: str) -> bool:
    """Whether git takes ``branch`` as a branch name as it is (``@{-1}`` and the like are refused)."""
    if branch in ("HEAD", "@"):
        return False
    proc = run_git(["check-ref-format", "--branch", branch], cwd=Path(os.sep))
    return not proc.returncode and proc.stdout.decode(errors="replace").strip() == branch


def _has_credentials(remote: str) -> bool:
    """Whether a URL remote holds a password, or any user info for http(s) (a token as the user name)."""
    if "://" not in remote:
        return False
    parts = urlsplit(remote)
    return parts.password is not None or (
        parts.username is not None and parts.scheme.lower() in ("http", "https", "ftp", "ftps")
    )


def shown_remote(remote: str) -> str:
    """``remote`` (or a ``git:`` URL) without the user info ``_has_credentials`` finds
    (``https://user:token@host/…`` → ``https://host/…``); ``ssh://git@host/…`` is kept."""
    prefix = "git:" if remote.startswith("git:") else ""
    rest = remote[len(prefix) :]
    if not _has_credentials(rest):
        return remote
    parts = urlsplit(rest)
    return prefix + urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def github_repo(remote: str) -> str | None:
    """``https://github.com/OWNER/REPO`` for a GitHub remote (https, ``git@github.com:`` or ssh), else
    None."""
    match = re.match(
        r"^(?:(?:https://(?:[^/@]*@)?|ssh://git@)github\.com/|(?:git@)?github\.com:)"
        r"([^/]+)/([^/]+?)(?:\.git)?/?$",
        remote,
    )
    return f"https://github.com/{match[1]}/{match[2]}" if match else None


def fetch_command(run: str, dest: str = ".") -> str:
    """The shell line that copies run ``git:REMOTE#BRANCH/runs/<id>/<n>/`` into
    ``DEST/benchtrail-<id>-<n>/runs/<id>/<n>/``: a shallow, sparse clone of the branch (``file://`` for a
    path, so that ``--depth`` holds) that checks out that run's folder alone.

    Raises:
        UserError: ``run`` is not such a URL.
    """
    match = _STORED_URL.match(run)
    where = _RUN_IN_PATH.match(match["path"]) if match else None
    if not match or not where or where["rel"]:
        raise UserError(f"{run!r} is not the URL of a run of a git: store (git:REMOTE#BRANCH/runs/<id>/<n>/)")
    folder = shlex.quote(f"{dest.rstrip('/') or '.'}/benchtrail-{where['run_id']}-{where['attempt']}")
    remote = match["remote"]
    remote = f"file://{remote}" if remote.startswith("/") else remote
    branch = shlex.quote(match["branch"])
    return (
        f"git clone --quiet --depth 1 --filter=blob:none --sparse --branch {branch} "
        f"{shlex.quote(remote)} {folder} && git -C {folder} sparse-checkout set --no-cone "
        f"/runs/{where['run_id']}/{where['attempt']}/"
    )


def browser_link(url: str) -> str:
    """Where a browser opens a stored file ``git:REMOTE#BRANCH/PATH``: on GitHub, the file in the branch; for
    a file the branch never holds (``LEFT_OUT``), the run's ``not-stored/`` notes, which say where it is.
    ``url`` itself for a remote elsewhere."""
    match = _STORED_URL.match(url)
    repo = github_repo(match["remote"]) if match else None
    if not match or not repo:
        return url
    path, where = match["path"], _RUN_IN_PATH.match(match["path"])
    if where and where["rel"].split("/", 1)[0] in LEFT_OUT:
        return f"{repo}/tree/{match['branch']}/runs/{where['run_id']}/{where['attempt']}/{NOTES}"
    return f"{repo}/{'tree' if path.endswith('/') else 'blob'}/{match['branch']}/{path}"


def git_env(config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment of every git call: no prompt, C messages, and ``config`` as ``GIT_CONFIG_*``
    (kept out of the command line, where other users could read a token)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    start = int(env.get("GIT_CONFIG_COUNT") or 0)
    for i, (key, value) in enumerate(config, start):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(start + len(config))
    return env


def run_git(
    args: Sequence[str], *, cwd: Path | None = None, stdin: bytes = b"", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS``, its output captured.

    Raises:
        StoreError: git is not installed.
    """
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env or git_env(), check=False
        )
    except FileNotFoundError as exc:
        raise StoreError("a git: store needs the git command, which is not installed") from exc


def said(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The last lines git wrote to stderr (``git said: …``), for a message."""
    lines = [line for line in proc.stderr.decode(errors="replace").splitlines() if line.strip()]
    return "git said: " + (" / ".join(lines[-4:]) or f"nothing (exit status {proc.returncode})")


def is_scp(remote: str) -> bool:
    """Whether git reads ``remote`` as scp syntax, ``[user@]host:path``: a ':' before the first '/', unless
    it is a one-letter drive (``C:``)."""
    colon, slash = remote.find(":"), remote.find("/")
    return colon > 1 and (slash < 0 or colon < slash)


def resolve_remote(
    remote: str, cwd: Path | None = None, branch: str = DEFAULT_BRANCH
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The URL or absolute path to fetch from and push to, and the settings to copy from the working
    repository: a remote name (``origin``) of the repository in ``cwd`` is its URL and brings that
    repository's ``http.*.extraheader``, ``credential.*`` and ``core.sshCommand`` settings (what
    ``actions/checkout`` leaves there for pushes, the last with ``ssh-key``); a relative path is made
    absolute. ``branch``: the store's, for the message.

    Raises:
        UserError: a remote name that is no remote of the repository in ``cwd`` (or no repository there).
    """
    if "://" in remote or is_scp(remote):  # a URL, or [user@]host:path
        return remote, ()
    if not _REMOTE_NAME.match(remote) or (Path(cwd or ".") / remote).exists():
        return str((Path(cwd or ".") / remote).expanduser().resolve()), ()
    found = run_git(["remote", "get-url", remote], cwd=cwd)
    if found.returncode:
        raise UserError(
            f"git store git:{remote}#{branch}: {remote!r} is not a remote of the repository in "
            f"{Path(cwd or '.').resolve()} ({said(found)}); give git:URL#{branch} or "
            f"git:/path/to/repo.git#{branch}"
        )
    url = found.stdout.decode().strip()
    if ":" not in url and not os.path.isabs(url):  # a path relative to that repository
        top = run_git(["rev-parse", "--show-toplevel"], cwd=cwd).stdout.decode().strip()
        url = str((Path(top) / url).resolve())
    wanted = r"^(http\..*extraheader|credential\..*|core\.sshcommand)$"
    settings = run_git(["config", "-z", "--includes", "--get-regexp", wanted], cwd=cwd).stdout
    items = (item.split("\n", 1) for item in settings.decode(errors="replace").split("\0") if "\n" in item)
    pairs = tuple((key, value) for key, value in items)
    return url, pairs
