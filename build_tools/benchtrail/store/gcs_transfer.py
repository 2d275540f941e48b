"""Moving bytes between local files and one GCS bucket, with google-cloud-storage's transfer manager.

Uploads are create-only (``if_generation_match=0``: 412 for a name that exists) and crc32c-checked both
ways. Transient errors are retried until one deadline shared by the whole transfer runs out.
"""

from __future__ import annotations

import base64
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import google_crc32c
from google.api_core import exceptions as api_exceptions
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exceptions
from google.cloud.storage import transfer_manager
from google.cloud.storage.exceptions import InvalidResponse

from benchtrail.errors import StoreError, UserError
from benchtrail.store.base import shown

#: Seconds a whole transfer may spend retrying transient errors (``--deadline``).
DEFAULT_DEADLINE_S = 600.0
#: Threads of the transfer manager (its own default, 8, also fits a requests connection pool of 10).
DEFAULT_MAX_WORKERS = 8
#: Longest wait for one HTTP response, in seconds (google-cloud-storage's default is 60 s too).
REQUEST_TIMEOUT_S = 60.0
#: Environment variable: seconds (a number > 0) that cap the retry deadline of every GCS store
#: operation (listing, fetch, upload, pointers; ``--deadline`` too) and the wait for one response.
DEADLINE_ENV = "BENCHTRAIL_STORE_DEADLINE_S"


def deadline_cap() -> float:
    """``$BENCHTRAIL_STORE_DEADLINE_S`` in seconds; infinity when unset or empty. Raises UserError: not
    a finite number above 0."""
    text = os.environ.get(DEADLINE_ENV, "").strip()
    if not text:
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(
            f"{DEADLINE_ENV}={os.environ[DEADLINE_ENV]!r} is not allowed: give "
            "the seconds that every GCS store operation may spend retrying, a number above 0 "
            "(e.g. 30), or leave it unset"
        )
    return value


def request_timeout_s() -> float:
    """Seconds to wait for one HTTP response: ``REQUEST_TIMEOUT_S``, or less under ``deadline_cap()``."""
    return min(REQUEST_TIMEOUT_S, deadline_cap())


@dataclass(frozen=True)
class SharedDeadline:
    """A retry strategy whose deadline (``deadline_at``, ``time.monotonic()`` seconds) is shared by every
    request of one transfer: ``policy`` (default ``DEFAULT_RETRY``: 429, 408, 5xx and connection errors,
    backoff from 1 s with jitter) with its timeout set to what is left. Past the deadline an operation is
    tried once, so a transfer ends at most one request timeout after it.
    """

    policy: Retry
    seconds: float
    deadline_at: float

    def __call__(self, func: Callable[..., Any], on_error: Callable[[Exception], Any] | None = None) -> Any:
        return self.policy.with_timeout(max(0.0, self.deadline_at - time.monotonic()))(
            func, on_error=on_error
        )


def file_crc32c(path: Path) -> str:
    """The crc32c of a file's bytes, base64 of the big-endian 4 bytes, as GCS reports it (``Blob.crc32c``)."""
    checksum = google_crc32c.Checksum()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            checksum.update(block)
    return base64.b64encode(checksum.digest()).decode("ascii")


@dataclass(frozen=True)
class BucketIO:
    """Listing, create-only uploads and checked downloads for bucket ``bucket_name``."""

    client: Any = field(repr=False, compare=False)
    bucket_name: str
    retry: Retry
    max_workers: int

    def object_url(self, name: str) -> str:
        return f"gs://{self.bucket_name}/{name}"

    def deadline(self, seconds: float) -> SharedDeadline:
        """``seconds`` from now, at most ``$BENCHTRAIL_STORE_DEADLINE_S`` (UserError when bad)."""
        seconds = min(seconds, deadline_cap())
        return SharedDeadline(self.retry, seconds, time.monotonic() + seconds)

    def explain(self, exc: BaseException, deadline: SharedDeadline, not_found: str = "") -> str:
        """One line; ``not_found``: what a 404 means here (default: a missing bucket)."""
        cause, prefix = exc, ""
        if isinstance(exc, api_exceptions.RetryError):
            cause = exc.cause or exc
            prefix = f"still failing when the {deadline.seconds:g} s retry deadline ran out; last error: "
        if isinstance(cause, api_exceptions.NotFound):
            return prefix + (
                not_found or f"bucket {self.bucket_name!r} does not exist; create it or fix the store URL"
            )
        if isinstance(cause, (api_exceptions.Forbidden, api_exceptions.Unauthorized)):
            return (
                prefix + f"no permission ({cause.code} {cause.message}); the store needs "
                f"roles/storage.objectViewer and roles/storage.objectCreator on "
                f"bucket {self.bucket_name!r}"
            )
        if isinstance(cause, api_exceptions.GoogleAPICallError):
            return prefix + f"{cause.code} {cause.message}"
        if isinstance(cause, InvalidResponse):  # raised by media uploads and downloads
            response = cause.response
            text = getattr(response, "text", "") or ""
            reason = getattr(response, "reason", "") or ""
            return prefix + f"{response.status_code} {reason} {text[:200]}".rstrip()
        if isinstance(cause, auth_exceptions.GoogleAuthError):
            return prefix + f"credentials failed: {cause}"
        return prefix + f"{type(cause).__name__}: {cause}"

    def list(self, prefix: str, deadline: SharedDeadline, max_results: int | None = None) -> list[Any]:
        """In name order. Raises StoreError: a missing bucket, no permission or credentials, or still
        failing at the deadline."""
        try:
            return list(
                self.client.list_blobs(
                    self.bucket_name,
                    prefix=prefix,
                    max_results=max_results,
                    retry=deadline,
                    timeout=request_timeout_s(),
                )
            )
        except (
            api_exceptions.GoogleAPICallError,
            api_exceptions.RetryError,
            auth_exceptions.GoogleAuthError,
            OSError,
        ) as exc:
            raise StoreError(f"cannot list {self.object_url(prefix)}: {self.explain(exc, deadline)}") from exc

    def upload(self, src_dir: Path, names: Sequence[str], prefix: str, deadline_s: float, hint: str) -> None:
        """Upload ``src_dir/<name>`` to ``<prefix><name>`` for each name, create-only, crc32c-checked.

        An existing object with the same bytes counts as uploaded (a retry meets its own first try).
        ``hint`` ends the message about objects with other bytes. Every file is tried before raising.

        Raises:
            UserError: objects that exist with other bytes; ``StoreError`` (a UserError): uploads that
                failed (naming them and the bucket).
        """
        deadline = self.deadline(deadline_s)
        bucket = self.client.bucket(self.bucket_name)
        blobs = [bucket.blob(prefix + n) for n in names]
        crcs = [file_crc32c(src_dir / n) for n in names]
        results = transfer_manager.upload_many(
            [(str(src_dir / n), b) for n, b in zip(names, blobs)],
            upload_kwargs={
                "if_generation_match": 0,
                "checksum": "crc32c",
                "retry": deadline,
                "timeout": request_timeout_s(),
            },
            worker_type=transfer_manager.THREAD,
            max_workers=self.max_workers,
            raise_exception=False,
        )
        conflicts, failures = [], []
        for name, blob, crc, result in zip(names, blobs, crcs, results):
            where = self.object_url(blob.name)
            if isinstance(result, api_exceptions.PreconditionFailed):
                try:
                    blob.reload(retry=deadline, timeout=request_timeout_s())
                except Exception as exc:
                    failures.append(f"{where}: {self.explain(exc, deadline, 'it vanished after a 412')}")
                    continue
                if blob.crc32c != crc or blob.size != (src_dir / name).stat().st_size:
                    conflicts.append(where)
            elif isinstance(result, Exception):
                failures.append(f"{where}: {self.explain(result, deadline)}")
            elif blob.crc32c != crc:
                failures.append(f"{where}: stored crc32c {blob.crc32c} differs from the local file's {crc}")
        if failures:
            raise StoreError(
                f"upload of {len(failures)} of {len(names)} file(s) from {src_dir} to bucket "
                f"{self.bucket_name!r} failed: "
                + "; ".join(failures[:5])
                + (f"; and {len(failures) - 5} more" if len(failures) > 5 else "")
            )
        if conflicts:
            raise UserError(
                f"{len(conflicts)} object(s) already exist with other "
                f"content: {shown(conflicts)}; never overwritten ({hint})"
            )

    def download(
        self, chosen: Sequence[tuple[str, Any]], dest: Path, deadline: SharedDeadline, *, cache: bool = False
    ) -> None:
        """Download each ``(name, blob)`` to ``dest/<name>`` (names already safe): crc32c-checked temp
        files linked in place. A local file with the same bytes is kept; with other bytes it is an error,
        unless ``dest`` is a ``cache`` of ours (then replaced).

        Raises:
            UserError: local files with other bytes; ``StoreError`` (a UserError): downloads that failed
                (naming the objects and the bucket).
        """
        todo, differs = [], []
        for name, blob in chosen:
            final = dest / name
            if final.is_file() and final.stat().st_size == blob.size and file_crc32c(final) == blob.crc32c:
                continue
            if final.exists() and not cache:
                differs.append(name)
                continue
            final.unlink(missing_ok=True)
            todo.append((name, blob))
        if differs:
            raise UserError(
                f"{len(differs)} file(s) already exist in {dest} with other "
                f"content ({shown(differs)}); "
                "remove them or fetch into another folder"
            )
        if not todo:
            return
        try:
            dest.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-", ignore_cleanup_errors=True) as tmp:
                parts = [Path(tmp) / str(i) for i in range(len(todo))]
                results = transfer_manager.download_many(
                    [(blob, str(part)) for (_, blob), part in zip(todo, parts)],
                    download_kwargs={"checksum": "crc32c", "retry": deadline, "timeout": request_timeout_s()},
                    worker_type=transfer_manager.THREAD,
                    max_workers=self.max_workers,
                    raise_exception=False,
                )
                failures = []
                for (_, blob), part, result in zip(todo, parts, results):
                    where = self.object_url(blob.name)
                    if isinstance(result, Exception):
                        failures.append(f"{where}: {self.explain(result, deadline, 'it no longer exists')}")
                    elif blob.crc32c and file_crc32c(part) != blob.crc32c:
                        failures.append(f"{where}: downloaded bytes do not match its crc32c {blob.crc32c}")
                if failures:
                    raise StoreError(
                        f"download of {len(failures)} of {len(todo)} object(s) from bucket "
                        f"{self.bucket_name!r} failed: " + "; ".join(failures[:5])
                    )
                for (name, blob), part in zip(todo, parts):
                    final = dest / name
                    final.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(part, final)  # create-only, like every write of benchtrail
                    except FileExistsError:
                        if file_crc32c(final) != blob.crc32c:
                            differs.append(name)
                if differs:
                    raise UserError(
                        f"{len(differs)} file(s) appeared in {dest} during the "
                        f"fetch with other content ({shown(differs)}); remove them or "
                        f"fetch into another folder"
                    )
        except OSError as exc:
            raise UserError(f"cannot write into {dest}: {exc.strerror or exc}") from exc
