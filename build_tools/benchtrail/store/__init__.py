"""The artifact store: run directories and per-commit pointers (``docs/store.md``, ``docs/formats.md``).

``open_store`` takes a folder path, a ``file://`` URL or ``gs://bucket[/prefix]``. Layout::

    <root>/runs/<run_id>/<attempt>/...            one run directory, never overwritten
    <root>/commits/<sha>/<run_id>-<attempt>.json  pointer: which presets/devices that run holds

Both backends implement ``Store`` (``benchtrail.store.base``). Everything else URL-shaped about a store (is it
remote, a run's URL, the line that fetches a run, a browser link) is here. A remote backend is one module and
its line in ``REMOTES``; the ``gs://`` one imports google-cloud-storage only when a ``gs://`` store is opened.
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

__all__ = ["ALL_FILES", "REMOTES", "LocalStore", "Remote", "Store", "browser_link",
           "fetch_command", "is_local", "open_store", "remote", "run_url", "split_run_url"]


class Remote(NamedTuple):
    """A remote backend: ``opener`` (opens one from its URL, importing the backend's module only then),
    ``browser`` (what replaces ``<scheme>://`` in a link a browser opens) and ``copy`` (the shell command
    that copies a run's URL to a folder)."""

    opener: Callable[..., Store]
    browser: str
    copy: str


def _open_gcs(url: str, **options: Any) -> Store:
    from benchtrail.store.gcs import open_gcs_store  # google-cloud-storage, only for a gs:// store

    return open_gcs_store(url, **options)


#: The remote backends by URL scheme.
REMOTES = {"gs": Remote(_open_gcs, "https://storage.cloud.google.com/",
                        "gcloud storage cp -r")}
_RUN_URL = re.compile(r"^(?P<store>[^/:]+://[^/]+(?:/.+?)?)/runs/(?P<run_id>[^/]+)/(?P<attempt>[0-9]+)/?$")


def remote(url: str) -> Remote | None:
    """The remote backend of a store's (or a run's) URL; None for a folder, ``file://`` or another scheme."""
    scheme, sep, _ = url.partition("://")
    return REMOTES.get(scheme) if sep else None


def is_local(url: str) -> bool:
    """Whether ``url`` is a folder path or a ``file://`` URL."""
    return "://" not in url or url.startswith("file://")


def run_url(store_url: str, run_id: str, attempt: int) -> str:
    """``<store URL>/runs/<run id>/<attempt>/``."""
    return f"{store_url.rstrip('/')}/{run_path(run_id, attempt)}/"


def split_run_url(url: str) -> tuple[str, str, int] | None:
    """``(store URL, run id, attempt)`` of ``SCHEME://HOST[/PREFIX]/runs/<id>/<attempt>/``, else None."""
    match = _RUN_URL.match(url)
    return (match["store"], match["run_id"], int(match["attempt"])) if match else None


def fetch_command(run: str, dest: str = ".") -> str:
    """The shell line that fetches a run: ``gcloud storage cp -r URL DEST`` for a ``gs://`` run, ``ls PATH``
    for a folder."""
    backend = remote(run)
    return f"{backend.copy} {run} {dest}" if backend else f"ls {run}"


def browser_link(url: str) -> str:
    """Where a browser opens a stored file: ``https://storage.cloud.google.com/BUCKET/PATH`` for ``gs://``
    (Cloud Storage's authenticated browser download), else ``url`` itself."""
    backend = remote(url)
    return backend.browser + url.split("://", 1)[1] if backend else url


def open_store(url: str, *, read_only: bool = False, **gcs_options: Any) -> Store:
    """Open the store at ``url`` and check that it can be used.

    Args:
        url: a folder path, ``file://PATH`` or ``gs://BUCKET[/PREFIX]``.
        read_only: for commands that only read a store (``history``, ``compare-builds``): a folder
            must exist already and is neither created nor written to (no write check); a ``gs://``
            store is opened as always (listing the bucket writes nothing).
        gcs_options: for ``gs://`` only, passed to ``benchtrail.store.gcs.open_gcs_store``
            (``staging``, ``retry``, ``max_workers``, ``client``); ignored for a folder.

    Raises:
        UserError: an unsupported scheme; a folder that cannot be created or written (``read_only``:
            a folder that does not exist, "no such store"); a malformed ``gs://`` URL, no
            credentials, a missing bucket or no permission (naming the bucket).
    """
    if not url.strip():
        raise UserError("store URL is empty; give a folder, file:///ABS/PATH or gs://BUCKET[/PREFIX]")
    parsed = urlparse(url)
    if parsed.scheme in REMOTES:
        return REMOTES[parsed.scheme].opener(url, **gcs_options)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UserError(f"store URL {url!r}: a file URL needs an absolute path, file:///ABS/PATH "
                            f"(here {parsed.netloc!r} would be read as a host); or pass a plain folder path")
        return open_local_store(url, url2pathname(parsed.path), read_only)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return open_local_store(url, url, read_only)
    raise UserError(f"store URL {url!r}: scheme {parsed.scheme!r} is not supported; "
                    "use a folder, file://PATH or gs://BUCKET[/PREFIX]")
