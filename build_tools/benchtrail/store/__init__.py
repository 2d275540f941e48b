"""The artifact store: run directories and per-commit pointers (``docs/store.md``, ``docs/formats.md``).

``open_store`` takes a folder path, a ``file://`` URL or ``gs://bucket[/prefix]``. Layout::

    <root>/runs/<run_id>/<attempt>/...            one run directory, never overwritten
    <root>/commits/<sha>/<run_id>-<attempt>.json  pointer: which presets/devices that run holds

Both backends implement ``Store`` (``benchtrail.store.base``). The ``gs://`` backend imports
google-cloud-storage only when a ``gs://`` store is opened.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from benchtrail.errors import UserError
from benchtrail.store.base import ALL_FILES, POINTER_SCHEMA_VERSION, Store
from benchtrail.store.local import LocalStore, open_local_store, open_local_store_read_only

__all__ = ["ALL_FILES", "POINTER_SCHEMA_VERSION", "LocalStore", "Store", "open_store"]


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
    open_local = open_local_store_read_only if read_only else open_local_store
    if not url.strip():
        raise UserError("store URL is empty; give a folder, file:///ABS/PATH or gs://BUCKET[/PREFIX]")
    parsed = urlparse(url)
    if parsed.scheme == "gs":
        from benchtrail.store.gcs import open_gcs_store

        return open_gcs_store(url, **gcs_options)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UserError(f"store URL {url!r}: a file URL needs an absolute path, file:///ABS/PATH "
                            f"(here {parsed.netloc!r} would be read as a host); or pass a plain folder path")
        return open_local(url, url2pathname(parsed.path))
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return open_local(url, url)
    raise UserError(f"store URL {url!r}: scheme {parsed.scheme!r} is not supported; use a folder, file://PATH "
                    "or gs://BUCKET[/PREFIX]")
