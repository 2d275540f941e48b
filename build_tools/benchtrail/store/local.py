"""The ``file://`` store: a folder on disk, with create-only writes."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchtrail import jsonio
from benchtrail.errors import UserError

#: Version history of commit pointers:
#:   1 — first version.
POINTER_SCHEMA_VERSION = 1
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_segment(value: str, what: str) -> str:
    if not _SAFE.match(value) or ".." in value:
        raise UserError(f"{what} {value!r} is not path-safe: use letters, digits, '.', '_' and '-' only")
    return value


@dataclass(frozen=True)
class LocalStore:
    """A store rooted at a local folder."""

    root: Path

    @property
    def url(self) -> str:
        return self.root.resolve().as_uri()

    def run_dir(self, run_id: str, attempt: int) -> Path:
        return self.root / "runs" / _check_segment(run_id, "run id") / str(attempt)

    def create_run_dir(self, run_id: str, attempt: int) -> Path:
        """Create a new, empty run directory.

        Raises:
            UserError: it exists already (a re-run must use a new attempt number).
        """
        path = self.run_dir(run_id, attempt)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError as exc:
            raise UserError(f"run directory {path} exists; runs are never overwritten (use a new attempt)") from exc
        except OSError as exc:
            raise UserError(f"cannot create run directory {path}: {exc.strerror or exc}") from exc
        return path

    def write_pointer(self, commit: str, run_id: str, attempt: int, info: dict[str, Any]) -> Path:
        """Record that run ``run_id``/``attempt`` holds results for ``commit`` (one new file per run)."""
        path = self.root / "commits" / _check_segment(commit, "commit") / f"{run_id}-{attempt}.json"
        pointer = {"schema_version": POINTER_SCHEMA_VERSION, "commit": commit, "run_id": run_id,
                   "attempt": attempt, **info}
        return jsonio.write_json(path, pointer, exclusive=True)

    def pointers(self, commit: str) -> list[dict[str, Any]]:
        """The pointers of ``commit``, oldest first (by their ``created`` time). Unreadable ones are skipped."""
        folder = self.root / "commits" / commit
        found = []
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                found.append(jsonio.read_json(p, kind="commit pointer", supported=POINTER_SCHEMA_VERSION))
            except UserError:
                continue
        return sorted(found, key=lambda d: str(d.get("created", "")))


def open_store(url: str) -> LocalStore:
    """Open the store at ``url`` (a path or ``file://`` URL) and check that it can be written.

    Raises:
        UserError: an unsupported scheme, or the folder cannot be created or written.
    """
    parsed = urlparse(url)
    if parsed.scheme == "file":
        root = Path(parsed.path)
    elif parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        root = Path(url)
    else:
        raise UserError(f"store URL {url!r}: scheme {parsed.scheme!r} is not supported; use a folder or file://PATH")
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise UserError(f"store {url!r} cannot be written: {exc.strerror or exc}") from exc
    return LocalStore(root)

