"""Moving bytes between local files and one GCS bucket, with google-cloud-storage.

Uploads are create-only (``if_generation_match=0``: GCS answers 412 Precondition Failed for a name
that exists) and crc32c-checked (the checksum travels with each upload and GCS refuses a body that
does not match; the crc32c GCS reports back is compared with the local file's). Many files move at
once through ``google.cloud.storage.transfer_manager`` with threads. Transient errors (429, 408, 5xx,
dropped connections, timeouts) are retried by the library's ``DEFAULT_RETRY`` (exponential backoff
with jitter) until one deadline shared by the whole transfer runs out (``SharedDeadline``).
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
    """``$BENCHTRAIL_STORE_DEADLINE_S`` in seconds, or infinity when it is unset or empty (no cap).

    Raises:
        UserError: it is not a finite number of seconds above 0, naming the variable and the value.
    """
    text = os.environ.get(DEADLINE_ENV, "").strip()
    if not text:
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(f"{DEADLINE_ENV}={os.environ[DEADLINE_ENV]!r} is not allowed: give "
                        "the seconds that every GCS store operation may spend retrying, a number above 0 "
                        "(e.g. 30), or leave it unset")
    return value


def request_timeout_s() -> float:
    """Seconds to wait for one HTTP response: ``REQUEST_TIMEOUT_S``, or less under ``deadline_cap()``."""
    return min(REQUEST_TIMEOUT_S, deadline_cap())


@dataclass(frozen=True)
class SharedDeadline:
    """A retry strategy whose deadline is shared by every request of one transfer.

    google-cloud-storage accepts any callable that wraps a function with retries. This one applies
    ``policy`` (``google.cloud.storage.retry.DEFAULT_RETRY`` unless configured: retries 429, 408, 500,
    502, 503, 504 and connection errors, exponential backoff from 1 s with jitter) with its timeout set
    to what is left until ``deadline_at`` (``time.monotonic()`` seconds). An operation that starts after
    the deadline is tried once; none sleeps past it (api_core raises ``RetryError`` instead), so a
    transfer ends at most one request timeout after the deadline.
    """

    policy: Retry
    seconds: float
    deadline_at: float

    def __call__(self, func: Callable[..., Any],
                 on_error: Callable[[Exception], Any] | None = None) -> Any:
        return self.policy.with_timeout(max(0.0, self.deadline_at - time.monotonic()))(func, on_error=on_error)


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
        """A deadline ``seconds`` from now (at most ``$BENCHTRAIL_STORE_DEADLINE_S``) for the requests of
        one transfer.

        Raises:
            UserError: a bad ``BENCHTRAIL_STORE_DEADLINE_S`` (:func:`deadline_cap`).
        """
        seconds = min(seconds, deadline_cap())
        return SharedDeadline(self.retry, seconds, time.monotonic() + seconds)

    def explain(self, exc: BaseException, deadline: SharedDeadline, not_found: str = "") -> str:
        """One line saying what went wrong; ``not_found`` is what a 404 means in this context (default: a
        missing bucket)."""
        cause, prefix = exc, ""
        if isinstance(exc, api_exceptions.RetryError):
            cause = exc.cause or exc
            prefix = f"still failing when the {deadline.seconds:g} s retry deadline ran out; last error: "
        if isinstance(cause, api_exceptions.NotFound):
            return prefix + (not_found or f"bucket {self.bucket_name!r} does not exist; create it or fix the "
                             "store URL")
        if isinstance(cause, (api_exceptions.Forbidden, api_exceptions.Unauthorized)):
            return (prefix + f"no permission ({cause.code} {cause.message}); the store needs "
                    f"roles/storage.objectViewer and roles/storage.objectCreator on "
                    f"bucket {self.bucket_name!r}")
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
        """The blobs whose names start with ``prefix``, in name order.

        Raises:
            StoreError: a missing bucket, no permission, no credentials, or still failing at the deadline.
        """
        try:
            return list(self.client.list_blobs(self.bucket_name, prefix=prefix, max_results=max_results,
                                               retry=deadline, timeout=request_timeout_s()))
        except (api_exceptions.GoogleAPICallError, api_exceptions.RetryError, auth_exceptions.GoogleAuthError,
                OSError) as exc:
            raise StoreError(f"cannot list {self.object_url(prefix)}: "
                             f"{self.explain(exc, deadline)}") from exc

    def upload(self, src_dir: Path, names: Sequence[str], prefix: str, deadline_s: float, hint: str) -> None:
        """Upload ``src_dir/<name>`` to ``<prefix><name>`` for each name, create-only, crc32c-checked.

        An existing object with the same bytes (crc32c and size) counts as uploaded: a retry whose
        first try had succeeded meets its own object. ``hint`` ends the message about objects that
        exist with other bytes (what to do instead). Every file is tried before anything is raised.

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
            upload_kwargs={"if_generation_match": 0, "checksum": "crc32c", "retry": deadline,
                           "timeout": request_timeout_s()},
            worker_type=transfer_manager.THREAD, max_workers=self.max_workers, raise_exception=False)
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
            raise StoreError(f"upload of {len(failures)} of {len(names)} file(s) from {src_dir} to bucket "
                             f"{self.bucket_name!r} failed: " + "; ".join(failures[:5])
                             + (f"; and {len(failures) - 5} more" if len(failures) > 5 else ""))
        if conflicts:
            raise UserError(f"{len(conflicts)} object(s) already exist with other "
                            f"content: {shown(conflicts)}; never overwritten ({hint})")

    def download(self, chosen: Sequence[tuple[str, Any]], dest: Path, deadline: SharedDeadline, *,
                 cache: bool = False) -> None:
        """Download each ``(name, blob)`` to ``dest/<name>``: temp files, crc32c-checked, then linked in
        place.

        A local file with the blob's bytes is kept (not downloaded again); one with other bytes is an
        error, unless ``dest`` is a ``cache`` of ours (then it is replaced). Names must be safe already.

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
            raise UserError(f"{len(differs)} file(s) already exist in {dest} with other "
                            f"content ({shown(differs)}); "
                            "remove them or fetch into another folder")
        if not todo:
            return
        try:
            dest.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-", ignore_cleanup_errors=True) as tmp:
                parts = [Path(tmp) / str(i) for i in range(len(todo))]
                results = transfer_manager.download_many(
                    [(blob, str(part)) for (_, blob), part in zip(todo, parts)],
                    download_kwargs={"checksum": "crc32c", "retry": deadline, "timeout": request_timeout_s()},
                    worker_type=transfer_manager.THREAD, max_workers=self.max_workers, raise_exception=False)
                failures = []
                for (_, blob), part, result in zip(todo, parts, results):
                    where = self.object_url(blob.name)
                    if isinstance(result, Exception):
                        failures.append(f"{where}: {self.explain(result, deadline, 'it no longer exists')}")
                    elif blob.crc32c and file_crc32c(part) != blob.crc32c:
                        failures.append(f"{where}: downloaded bytes do not match its crc32c {blob.crc32c}")
                if failures:
                    raise StoreError(f"download of {len(failures)} of {len(todo)} object(s) from bucket "
                                     f"{self.bucket_name!r} failed: " + "; ".join(failures[:5]))
                for (name, blob), part in zip(todo, parts):
                    final = dest / name
                    final.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(part, final)  # create-only, like every write of benchtrail
                    except FileExistsError:
                        if file_crc32c(final) != blob.crc32c:
                            differs.append(name)
                if differs:
                    raise UserError(f"{len(differs)} file(s) appeared in {dest} during the "
                                    f"fetch with other content ({shown(differs)}); remove them or "
                                    f"fetch into another folder")
        except OSError as exc:
            raise UserError(f"cannot write into {dest}: {exc.strerror or exc}") from exc
