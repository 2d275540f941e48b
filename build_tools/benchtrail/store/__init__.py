"""The artifact store: run directories and per-commit pointers (docs/store.md, docs/formats.md).

``open_store`` takes a folder path, a ``file://`` URL, ``gs://bucket[/prefix]`` or ``git:REMOTE#BRANCH``
(no ``//``; its run is ``git:REMOTE#BRANCH/runs/<id>/<attempt>/``). Every backend implements ``Store``;
everything else URL-shaped about a store (is it remote, a run's URL, the line that fetches a run, a
browser link) is here. A remote backend is one module and its line in ``REMOTES``, imported only when a
store of its scheme is opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlparse
from urllib.request import url2pathname

from benchtrail.errors import UserError
from benchtrail.store.base import ALL_FILES, Store, run_path
from benchtrail.store.local import LocalStore, open_local_store

__all__ = [
    "ALL_FILES",
    "FORMS",
    "REMOTES",
    "LocalStore",
    "Remote",
    "Store",
    "browser_link",
    "fetch_command",
    "is_local",
    "open_store",
    "remote",
    "run_url",
    "split_run_url",
    "written_url",
]


class Remote(NamedTuple):
    """A remote backend: ``opener`` (opens one from its URL, importing the backend's module only then),
    ``link`` (a stored file's URL → where a browser opens it) and ``copy`` (a run's URL and a folder → the
    shell line that copies the run there)."""

    opener: Callable[..., Store]
    link: Callable[[str], str]
    copy: Callable[[str, str], str]


def _open_gcs(url: str, **options: Any) -> Store:
    from benchtrail.store.gcs import open_gcs_store  # google-cloud-storage, only for a gs:// store

    return open_gcs_store(url, **options)


def _open_git(url: str, **options: Any) -> Store:
    from benchtrail.store.git_branch import open_git_store

    return open_git_store(url, **options)


def _git_link(url: str) -> str:
    from benchtrail.store.git_url import browser_link as git_link

    return git_link(url)


def _git_copy(run: str, dest: str) -> str:
    from benchtrail.store.git_url import fetch_command as git_copy

    return git_copy(run, dest)


#: The remote backends by URL scheme.
REMOTES = {
    "gs": Remote(
        _open_gcs,
        lambda url: "https://storage.cloud.google.com/" + url.split("://", 1)[1],
        lambda run, dest: f"gcloud storage cp -r {run} {dest}",
    ),
    "git": Remote(_open_git, _git_link, _git_copy),
}
#: How each remote backend's store URL is written, for messages.
FORMS = {"gs": "gs://BUCKET[/PREFIX]", "git": "git:REMOTE#BRANCH"}
_RUN_URL = re.compile(
    r"^(?P<store>[^/:]+://[^/]+(?:/.+?)?|git:[^#]*#.+?)"
    r"/runs/(?P<run_id>[^/]+)/(?P<attempt>[0-9]+)/?$"
)
#: What ``open_store`` takes, for its messages.
SUPPORTED = "a folder, file:///ABS/PATH, gs://BUCKET[/PREFIX] or git:REMOTE#BRANCH"


def _scheme(url: str) -> str | None:
    """``git`` for ``git:…`` (no ``//``), the scheme of ``SCHEME://…``, else None (a path)."""
    if url.startswith("git:"):
        return "git"
    scheme, sep, _ = url.partition("://")
    return scheme if sep else None


def written_url(url: str) -> str:
    """``url`` as a workflow should be given it: a ``git:`` URL with its defaults filled in (checked, nothing
    resolved), any other unchanged. Raises UserError for a malformed ``git:`` URL."""
    if _scheme(url) != "git":
        return url
    from benchtrail.store.git_url import parse_url

    remote_, branch = parse_url(url)
    return f"git:{remote_}#{branch}"


def remote(url: str) -> Remote | None:
    """The remote backend of a store's (or a run's) URL; None for a folder, ``file://`` or another scheme."""
    scheme = _scheme(url)
    return REMOTES.get(scheme) if scheme else None


def is_local(url: str) -> bool:
    """Whether ``url`` is a folder path or a ``file://`` URL."""
    return _scheme(url) in (None, "file")


def run_url(store_url: str, run_id: str, attempt: int) -> str:
    """``<store URL>/runs/<run id>/<attempt>/``."""
    return f"{store_url.rstrip('/')}/{run_path(run_id, attempt)}/"


def split_run_url(url: str) -> tuple[str, str, int] | None:
    """``(store URL, run id, attempt)`` of ``SCHEME://HOST[/PREFIX]/runs/<id>/<attempt>/`` or
    ``git:REMOTE#BRANCH/runs/<id>/<attempt>/``, else None."""
    match = _RUN_URL.match(url)
    return (match["store"], match["run_id"], int(match["attempt"])) if match else None


def fetch_command(run: str, dest: str = ".") -> str:
    """The shell line that fetches a run: ``gcloud storage cp -r URL DEST`` for a ``gs://`` run, a shallow
    ``git clone`` of the branch for a ``git:`` run (git_url.py), ``ls PATH``
    for a folder."""
    backend = remote(run)
    return backend.copy(run, dest) if backend else f"ls {run}"


def browser_link(url: str) -> str:
    """Where a browser opens a stored file: ``https://storage.cloud.google.com/BUCKET/PATH`` for ``gs://``
    (Cloud Storage's authenticated browser download), the file on GitHub for a ``git:`` store on GitHub
    (git_url.py), else ``url`` itself."""
    backend = remote(url)
    return backend.link(url) if backend else url


def open_store(url: str, *, read_only: bool = False, **gcs_options: Any) -> Store:
    """Open the store at ``url`` and check that it can be used.

    Args:
        url: a folder path, ``file://PATH``, ``gs://BUCKET[/PREFIX]`` or ``git:REMOTE#BRANCH``.
        read_only: for commands that only read a store (``history``, ``compare-builds``): a folder
            must exist already and is neither created nor written to (no write check); a ``gs://``
            or ``git:`` store is opened as always (listing the bucket, fetching the branch writes nothing).
        gcs_options: for ``gs://``, passed to ``open_gcs_store`` (``staging``, ``retry``,
            ``max_workers``, ``client``); for ``git:``, to ``open_git_store``
            (``staging``, ``cwd``); ignored for a folder.

    Raises:
        UserError: an unsupported scheme; a folder that cannot be created or written (``read_only``:
            a folder that does not exist, "no such store"); a malformed ``gs://`` URL, no
            credentials, a missing bucket or no permission (naming the bucket); a ``git:`` remote that
            cannot be fetched (naming it, the branch and what git said).
    """
    if not url.strip():
        raise UserError(f"store URL is empty; give {SUPPORTED}")
    parsed = urlparse(url)
    if (found := remote(url)) is not None:
        return found.opener(url, **gcs_options)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UserError(
                f"store URL {url!r}: a file URL needs an absolute path, file:///ABS/PATH "
                f"(here {parsed.netloc!r} would be read as a host); or pass a plain folder path"
            )
        return open_local_store(url, url2pathname(parsed.path), read_only)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return open_local_store(url, url, read_only)
    raise UserError(f"store URL {url!r}: scheme {parsed.scheme!r} is not supported; use {SUPPORTED}")
