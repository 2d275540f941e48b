"""The ``gs://`` store, a bucket and optional prefix: its layout and rules; the GCS transfer module moves
the bytes. docs/store.md describes both."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.api_core.retry import Retry
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from benchtrail import jsonio
from benchtrail.errors import StoreError, UserError
from benchtrail.store.base import (
    ALL_FILES,
    ASSETS,
    Json,
    RunKey,
    asset_path,
    check_id,
    check_relative_name,
    compile_patterns,
    empty_staging_dir,
    pointerless,
    run_path,
    shown,
    staging_root,
    stored_time,
    unsafe_reason,
    upload_names,
)
from benchtrail.store.gcs_transfer import DEFAULT_DEADLINE_S, DEFAULT_MAX_WORKERS, BucketIO, deadline_cap
from benchtrail.store.local import MAX_POINTER_BYTES, pointer_document, read_pointer_files, write_new

#: Seconds that opening a store or creating a run may spend retrying a listing. This one, the
#: transfers' ``DEFAULT_DEADLINE_S`` and ``--deadline`` are all capped by ``$BENCHTRAIL_STORE_DEADLINE_S``
#: (gcs_transfer.py, ``deadline_cap``).
LIST_DEADLINE_S = 60.0

_GS_URL = re.compile(r"^gs://(?P<bucket>[^/]*)(?:/(?P<prefix>.*))?$")
# https://cloud.google.com/storage/docs/buckets#naming (dotted names may be up to 222 characters).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


@dataclass(frozen=True)
class GcsStore:
    """A store in bucket ``io.bucket_name`` under ``prefix``; ``run_dir`` (and ``fetch_run``'s default
    destination) is under ``staging``, a local folder that mirrors the store's layout."""

    io: BucketIO
    prefix: str
    staging: Path

    @property
    def url(self) -> str:
        return self.io.object_url(self.prefix).rstrip("/")

    def _folder(self, *parts: str) -> str:
        """``<prefix>/<parts>/``: the start of the object names in that folder."""
        return "/".join(p for p in (self.prefix, *parts) if p) + "/"

    def _run_prefix(self, run_id: str, attempt: int) -> str:
        return self._folder(run_path(run_id, attempt))

    def run_url(self, run_id: str, attempt: int) -> str:
        """``gs://<bucket>/<prefix>/runs/<run_id>/<attempt>/``, for ``gcloud storage cp -r <url> .``."""
        return self.io.object_url(self._run_prefix(run_id, attempt))

    def run_dir(self, run_id: str, attempt: int) -> Path:
        """The local staging folder of a run: written before ``upload_run``, filled by ``fetch_run``."""
        return self.staging / run_path(run_id, attempt)

    def create_run_dir(self, run_id: str, attempt: int) -> Path:
        """Check that the run's prefix holds no object (a re-run reusing an attempt; racing writers are
        stopped by create-only uploads), then create its empty staging folder.

        Raises:
            UserError: an object exists under the run's prefix, or the staging folder is not empty.
        """
        prefix = self._run_prefix(run_id, attempt)
        found = self.io.list(prefix, self.io.deadline(LIST_DEADLINE_S), max_results=1)
        if found:
            raise UserError(
                f"run {self.io.object_url(prefix)} already holds objects (e.g. {found[0].name}); "
                "runs are never overwritten (use a new attempt)"
            )
        return empty_staging_dir(self.run_dir(run_id, attempt), run_id, attempt)

    def upload_run(
        self,
        local_dir: Path,
        run_id: str,
        attempt: int,
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
        patterns: Sequence[str] = ALL_FILES,
    ) -> int:
        """Upload the matching files create-only; returns how many of ``local_dir`` the run now holds. An
        object with the same bytes (crc32c and size) counts as uploaded; the prefix may hold other files.

        Raises:
            UserError: an unsafe file name, no file matching, objects that exist with other bytes
                ("… already exist … never overwritten"), or transfers still failing when
                ``deadline_s`` ran out, naming the bucket and the objects.
        """
        names = upload_names(local_dir, patterns)
        self.io.upload(
            Path(local_dir),
            names,
            self._run_prefix(run_id, attempt),
            deadline_s,
            hint="upload the run under a new attempt",
        )
        return len(names)

    def incomplete_runs(self) -> list[RunKey]:
        """The runs with objects and no commit pointer, sorted, from one listing of the whole store.
        Raises StoreError: the listing still failing at its deadline."""
        deadline = self.io.deadline(DEFAULT_DEADLINE_S)
        runs_prefix, commits_prefix = self._folder("runs"), self._folder("commits")
        runs = {
            (parts[0], int(parts[1]))
            for blob in self.io.list(runs_prefix, deadline)
            if len(parts := blob.name[len(runs_prefix) :].split("/")) > 2 and parts[1].isdigit()
        }
        return pointerless(runs, (b.name.rsplit("/", 1)[-1] for b in self.io.list(commits_prefix, deadline)))

    def run_files(self, run_id: str, attempt: int, *, deadline_s: float = DEFAULT_DEADLINE_S) -> list[str]:
        """Relative to the run's prefix, sorted, no folder placeholders; [] for no such run. Raises
        UserError: the listing still failing when ``deadline_s`` ran out."""
        prefix = self._run_prefix(run_id, attempt)
        return sorted(
            b.name[len(prefix) :]
            for b in self.io.list(prefix, self.io.deadline(deadline_s))
            if not b.name.endswith("/")
        )  # a folder placeholder, or the prefix itself

    def fetch_run(
        self,
        run_id: str,
        attempt: int,
        dest: Path | None = None,
        patterns: Sequence[str] = ALL_FILES,
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> Path:
        """Download the matching objects to ``dest/<run-relative name>`` (default ``run_dir``); returns
        ``dest``. Any unsafe name under the run refuses the whole fetch before a download.

        Raises:
            UserError: no such run, nothing matching, an unsafe object name, a local file with other
                bytes, or transfers still failing when ``deadline_s`` ran out.
        """
        prefix = self._run_prefix(run_id, attempt)
        dest = Path(dest) if dest is not None else self.run_dir(run_id, attempt)
        regex = compile_patterns(patterns)
        deadline = self.io.deadline(deadline_s)
        listed = self.io.list(prefix, deadline)
        if not listed:
            raise UserError(
                f"no run {run_id}/{attempt} in store {self.url} (no object under "
                f"{self.io.object_url(prefix)})"
            )
        chosen = []
        for blob in listed:
            name = blob.name[len(prefix) :]
            if not name or (name.endswith("/") and not blob.size):
                continue
            check_relative_name(name, self.io.object_url(blob.name))
            if regex.match(name):
                chosen.append((name, blob))
        if not chosen:
            raise UserError(
                f"no object of run {self.io.object_url(prefix)} matches {', '.join(patterns)} "
                f"(it holds e.g. {shown([b.name[len(prefix) :] for b in listed], 3)})"
            )
        self.io.download(chosen, dest, deadline)
        return dest

    def write_pointer(self, commit: str, run_id: str, attempt: int, info: Json) -> str:
        """Create ``<prefix>/commits/<sha>/<run_id>-<attempt>.json``; returns its ``gs://`` URL.
        Raises UserError: it exists with other content ("never overwritten"), or the upload failed."""
        document = pointer_document(commit, run_id, attempt, info)
        name = f"{run_id}-{attempt}.json"
        prefix = self._folder("commits", commit)
        with tempfile.TemporaryDirectory(prefix="benchtrail-pointer-") as folder:
            jsonio.write_json(Path(folder) / name, document)
            self.io.upload(
                Path(folder), [name], prefix, DEFAULT_DEADLINE_S, hint="each run writes its pointer once"
            )
        return self.io.object_url(prefix + name)

    def pointers(self, commit: str) -> list[Json]:
        """Oldest first by ``stored_at`` (GCS's ``timeCreated``), unreadable ones skipped; cached in
        ``staging/commits/<sha>/`` (pointers never change)."""
        prefix = self._folder("commits", check_id(commit, "commit"))
        deadline = self.io.deadline(DEFAULT_DEADLINE_S)
        chosen, too_big = [], []
        for blob in self.io.list(prefix, deadline):
            name = blob.name[len(prefix) :]
            if name.endswith(".json") and "/" not in name and unsafe_reason(name) is None:
                if (blob.size or 0) > MAX_POINTER_BYTES:
                    too_big.append(
                        f"commit pointer {self.io.object_url(blob.name)} is "
                        f"{blob.size} bytes, more than {MAX_POINTER_BYTES}; not read"
                    )
                else:
                    chosen.append((name, blob))
        folder = self.staging / "commits" / commit
        self.io.download(chosen, folder, deadline, cache=True)
        return read_pointer_files(
            ((folder / name, stored_time(blob.time_created)) for name, blob in chosen), commit, too_big
        )

    def write_asset(self, name: str, data: bytes) -> str:
        """Create ``<prefix>/assets/<name>`` unless it exists, and a copy in ``staging/assets/`` for pages
        staged under ``run_dir``. Raises UserError: the upload failed, or another writer's bytes differ."""
        local = write_new(self.staging / asset_path(name), data)
        prefix = self._folder(ASSETS)
        if not any(
            b.name == prefix + name
            for b in self.io.list(prefix + name, self.io.deadline(LIST_DEADLINE_S), max_results=1)
        ):
            self.io.upload(local.parent, [name], prefix, DEFAULT_DEADLINE_S, hint="assets are never replaced")
        return self.io.object_url(prefix + name)


def make_client() -> Any:
    """Anonymous against ``STORAGE_EMULATOR_HOST`` when set, else Application Default Credentials
    (``GOOGLE_CLOUD_PROJECT`` optional). Raises UserError: no credentials can be found."""
    project = os.environ.get("GOOGLE_CLOUD_PROJECT") or None
    try:
        if os.environ.get("STORAGE_EMULATOR_HOST"):
            return storage.Client(
                project=project or "benchtrail-emulator", credentials=AnonymousCredentials()
            )
        return storage.Client(project=project)
    except auth_exceptions.DefaultCredentialsError as exc:
        raise StoreError(
            "no Google Cloud credentials: run `gcloud auth application-default login`, or set "
            "GOOGLE_APPLICATION_CREDENTIALS (in GitHub Actions: google-github-actions/auth); "
            "for an emulator set STORAGE_EMULATOR_HOST"
        ) from exc


def open_gcs_store(
    url: str,
    *,
    staging: Path | None = None,
    retry: Retry | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    client: Any = None,
) -> GcsStore:
    """Open ``gs://bucket[/prefix]`` and check that the bucket exists and can be listed.

    Args:
        staging: local folder for run directories (default ``$BENCHTRAIL_STAGING`` or
            ``.benchtrail/staging``, then ``<bucket>/<prefix>`` below it).
        retry: default google-cloud-storage's ``DEFAULT_RETRY``; each transfer's deadline is its timeout.

    Raises:
        UserError: a malformed URL or bucket name, an unsafe prefix, a bad ``BENCHTRAIL_STORE_DEADLINE_S``;
            ``StoreError`` (a UserError): no credentials, a missing bucket, no permission, or a
            listing still failing at its deadline (an outage), each naming the bucket.
    """
    deadline_cap()  # a bad value is the user's error, raised before an outage (``compare`` only warns of one)
    match = _GS_URL.match(url)
    if not match:
        raise UserError(f"store URL {url!r} is not gs://BUCKET[/PREFIX]")
    bucket, prefix = match["bucket"], (match["prefix"] or "").strip("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise UserError(
            f"store URL {url!r}: {bucket!r} is not a valid bucket name (3-63 lowercase letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit)"
        )
    if prefix:
        check_relative_name(prefix, f"store URL {url!r}")
    if staging is None:
        staging = staging_root() / bucket / prefix
    io = BucketIO(
        client if client is not None else make_client(), bucket, retry or DEFAULT_RETRY, max_workers
    )
    # List at most one object under the prefix: the bucket exists and we may list it (a StoreError names the
    # bucket: missing, no permission or credentials, or still failing at LIST_DEADLINE_S).
    io.list(prefix + "/" if prefix else "", io.deadline(LIST_DEADLINE_S), max_results=1)
    return GcsStore(io, prefix, Path(staging))
