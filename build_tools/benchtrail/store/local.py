"""The ``file://`` store: a folder on disk, with create-only writes."""

from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.store.base import (
    ALL_FILES,
    POINTER_SCHEMA_VERSION,
    Json,
    RunKey,
    asset_path,
    check_attempt,
    check_id,
    is_safe_id,
    local_files,
    pointerless,
    run_path,
    select,
    shown,
    stored_time,
    unsafe_reason,
    upload_names,
)


def place_file(src: Path, dst: Path) -> bool:
    """Copy ``src`` to ``dst`` create-only (temp file, then ``os.link``). False when ``dst`` exists with
    other bytes (left as it is)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.link(tmp, dst)
        return True
    except FileExistsError:
        return filecmp.cmp(src, dst, shallow=False)
    finally:
        os.unlink(tmp)


def place_files(src_dir: Path, names: Iterable[str], dest: Path, conflict: str) -> None:
    """``place_file`` for each name, then one UserError listing the names whose ``dest`` copy differs,
    ending with ``conflict`` (what to do). A failed copy is a UserError too."""
    try:
        differs = [n for n in names if not place_file(src_dir / n, dest / n)]
    except OSError as exc:
        raise UserError(f"cannot copy {src_dir} into {dest}: {exc.strerror or exc}") from exc
    if differs:
        raise UserError(
            f"{len(differs)} file(s) already exist in {dest} with other content "
            f"({shown(differs)}); {conflict}"
        )


class Pointers(list[Json]):
    """The readable commit pointers of a commit (a list of dicts, oldest first), and in ``unreadable``
    why the others were skipped (one message per file, naming it)."""

    unreadable: tuple[str, ...] = ()


#: A commit pointer is a few hundred bytes; a bigger object is not read (it is reported as unreadable).
MAX_POINTER_BYTES = 64 * 1024


def pointer_problem(pointer: Json, name: str, commit: str) -> str | None:
    """Why a parsed pointer cannot name a run, or None. Anyone with create rights may have written it:
    nothing in it is used before this check (ids, its file name, ``commit`` and field types)."""
    run_id, attempt = pointer.get("run_id"), pointer.get("attempt")
    if not (is_safe_id(run_id) and len(run_id) <= 64):
        return f"run_id {str(run_id)[:80]!r} is not a run id (letters, digits, '.', '_', '-', at most 64)"
    if type(attempt) is not int or not 1 <= attempt <= 10_000:
        return f"attempt {str(attempt)[:80]!r} is not a whole number from 1"
    if name != f"{run_id}-{attempt}.json":
        return f"its name {name!r} is not {run_id}-{attempt}.json, the name its run writes"
    if pointer.get("commit") != commit:
        return (
            f"its commit {str(pointer.get('commit'))[:80]!r} is not the commit it is stored under ({commit})"
        )

    def list_of(field: str, valid: Callable[[Any], bool]) -> bool:
        return isinstance(value := pointer.get(field, []), list) and all(map(valid, value))

    if not list_of("devices", lambda d: isinstance(d, str)):
        return "devices is not a list of names"
    if not isinstance(pointer.get("torch_version", ""), str):
        return "torch_version is not a string"
    if not list_of(
        "baseline_keys",
        lambda k: (
            isinstance(k, dict)
            and isinstance(k.get("device"), str)
            and isinstance(k.get("torch_version"), str)
            and isinstance(k.get("gpu", ""), (str, type(None)))
            and type(k.get("method_version")) is int
        ),
    ):  # JSON: an int, not a bool
        return "baseline_keys is not a list of {device, gpu, torch_version, method_version}"
    if not list_of(
        "results", lambda r: isinstance(r, str) and r.startswith("results/") and unsafe_reason(r) is None
    ):
        return "results is not a list of safe names under results/"
    return None


def read_pointer_files(
    paths: Iterable[tuple[Path, str]], commit: str, unreadable: Iterable[str] = (), own_time: bool = False
) -> Pointers:
    """Pointers from ``(path, stored_at)`` pairs, oldest first by ``stored_at`` (when the store created
    it, never a time its writer chose; then run id, attempt), set on each. ``own_time`` (a local store,
    whose copies re-time files): the pointer's ``created`` instead, when valid. Unparsable files, those over
    ``MAX_POINTER_BYTES`` or failing :func:`pointer_problem` are skipped; ``unreadable`` says why."""
    found, problems = [], list(unreadable)
    for p, stored_at in paths:
        try:
            if p.stat().st_size > MAX_POINTER_BYTES:
                raise UserError(
                    f"commit pointer {p} is {p.stat().st_size} bytes, more than {MAX_POINTER_BYTES}"
                )
            pointer = jsonio.read_json(p, kind="commit pointer", supported=POINTER_SCHEMA_VERSION)
            if why := pointer_problem(pointer, p.name, commit):
                raise UserError(f"commit pointer {p}: {why}")
        except UserError as exc:
            problems.append(str(exc))
        except (
            OSError,
            ValueError,
            RecursionError,
        ) as exc:  # undecodable bytes, absurd numbers, deep nesting
            problems.append(f"commit pointer {p} cannot be read: {type(exc).__name__}: {str(exc)[:200]}")
        else:
            pointer["stored_at"] = (own_time and _created(pointer)) or stored_at  # the store's own record
            found.append(pointer)
    pointers = Pointers(sorted(found, key=lambda d: (d["stored_at"], d["run_id"], d["attempt"])))
    pointers.unreadable = tuple(problems)
    return pointers


def _created(pointer: Json) -> str | None:
    """A pointer's ``created`` (ISO 8601 with offset) in ``stored_time``'s form, or None."""
    import datetime

    created = pointer.get("created")
    if not isinstance(created, str):  # fromisoformat's TypeError
        return None
    try:
        when = datetime.datetime.fromisoformat(created)
    except ValueError:
        return None
    return stored_time(when) if when.tzinfo is not None else None


def pointer_document(commit: str, run_id: str, attempt: int, info: Json) -> Json:
    """The JSON object of a commit pointer (``schema_version`` ``POINTER_SCHEMA_VERSION``)."""
    return {
        "schema_version": POINTER_SCHEMA_VERSION,
        "commit": check_id(commit, "commit"),
        "run_id": check_id(run_id, "run id"),
        "attempt": check_attempt(attempt),
        **info,
    }


@dataclass(frozen=True)
class LocalStore:
    """A store rooted at a local folder (see ``Store``)."""

    root: Path

    @property
    def url(self) -> str:
        return self.root.resolve().as_uri()

    def run_dir(self, run_id: str, attempt: int) -> Path:
        """``<root>/runs/<run_id>/<attempt>``: the run directory itself (it may not exist yet)."""
        return self.root / run_path(run_id, attempt)

    def run_url(self, run_id: str, attempt: int) -> str:
        """The absolute path of the run directory, as shown in comments (``ls <path>``)."""
        return str(self.run_dir(run_id, attempt).resolve())

    def create_run_dir(self, run_id: str, attempt: int) -> Path:
        """Raises UserError: it exists already (a re-run must use a new attempt number)."""
        path = self.run_dir(run_id, attempt)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError as exc:
            raise UserError(
                f"run directory {path} exists; runs are never overwritten (use a new attempt)"
            ) from exc
        except OSError as exc:
            raise UserError(f"cannot create run directory {path}: {exc.strerror or exc}") from exc
        return path

    def upload_run(
        self,
        local_dir: Path,
        run_id: str,
        attempt: int,
        *,
        deadline_s: float = 600,
        patterns: Sequence[str] = ALL_FILES,
    ) -> int:
        """Copy the matching files create-only (none when ``local_dir`` is the run directory); returns how
        many of ``local_dir`` the run holds. Same bytes count as copied; ``deadline_s`` is ignored.

        Raises:
            UserError: an unsafe file name, no file matching, or a stored file with other bytes.
        """
        target = self.run_dir(run_id, attempt)
        names = upload_names(local_dir, patterns)
        if Path(local_dir).resolve() != target.resolve():
            place_files(
                Path(local_dir),
                names,
                target,
                "files in a run directory are never overwritten (use a new attempt)",
            )
        return len(names)

    def incomplete_runs(self) -> list[RunKey]:
        """The runs with a folder and no commit pointer (``pointerless``), sorted."""
        runs = [
            (d.parent.name, int(d.name))
            for d in self.root.glob("runs/*/*")
            if d.is_dir() and d.name.isdigit()
        ]
        return pointerless(runs, (p.name for p in self.root.glob("commits/*/*.json")))

    def run_files(self, run_id: str, attempt: int, *, deadline_s: float = 600) -> list[str]:
        """Relative to the run directory, sorted; [] for no such run."""
        target = self.run_dir(run_id, attempt)
        return local_files(target) if target.is_dir() else []

    def fetch_run(
        self,
        run_id: str,
        attempt: int,
        dest: Path | None = None,
        patterns: Sequence[str] = ALL_FILES,
        *,
        deadline_s: float = 600,
    ) -> Path:
        """The run directory itself when ``dest`` is None or it (``patterns`` must match something), else
        ``dest`` with the matching files copied in create-only. ``deadline_s`` is ignored.

        Raises:
            UserError: the run does not exist, nothing matches, or ``dest`` holds a file with other bytes.
        """
        source = self.run_dir(run_id, attempt)
        if not source.is_dir():
            raise UserError(f"no run {run_id}/{attempt} in store {self.url} (no folder {source})")
        names = select(local_files(source), patterns)
        if not names:
            raise UserError(f"no file of run {source} matches {', '.join(patterns)}")
        if dest is None or Path(dest).resolve() == source.resolve():
            return source
        place_files(source, names, Path(dest), "remove them or fetch into another folder")
        return Path(dest)

    def write_pointer(self, commit: str, run_id: str, attempt: int, info: Json) -> Path:
        """Record that run ``run_id``/``attempt`` holds results for ``commit`` (one new file per run)."""
        return jsonio.write_json(
            self.root / "commits" / commit / f"{run_id}-{attempt}.json",
            pointer_document(commit, run_id, attempt, info),
            exclusive=True,
        )

    def pointers(self, commit: str) -> list[Json]:
        """Oldest first by the ``created`` time in each (a copied store keeps its order), else by file
        mtime; unreadable ones skipped (``unreadable`` says why)."""
        folder = self.root / "commits" / check_id(commit, "commit")
        return read_pointer_files(
            ((p, stored_time(p.stat().st_mtime)) for p in sorted(folder.glob("*.json"))),
            commit,
            own_time=True,
        )

    def write_asset(self, name: str, data: bytes) -> Path:
        """``<root>/assets/<name>``, written create-only unless it exists (then kept as it is)."""
        return write_new(self.root / asset_path(name), data)


def write_new(path: Path, data: bytes) -> Path:
    """``path``, written atomically with ``data`` unless it exists (another writer's copy is kept)."""
    try:
        return jsonio.write_bytes_atomic(path, data, exclusive=True)
    except UserError:
        if path.exists():  # written before, or by another writer meanwhile
            return path
        raise


def open_local_store(url: str, path: str, read_only: bool) -> LocalStore:
    """Open the folder and check it can be written; ``read_only``: that it exists, writing nothing.

    Raises:
        UserError: the folder cannot be created or written; ``read_only``: it does not exist ("no such
            store") or is not a folder.
    """
    root = Path(path)
    if read_only:
        if not root.exists():
            raise UserError(
                f"no such store: {root} does not exist (store {url!r}); give the folder, "
                "file:///ABS/PATH or gs://BUCKET[/PREFIX] that `benchtrail "
                "pipeline` or `benchtrail upload` wrote to"
            )
        if not root.is_dir():
            raise UserError(
                f"store {url!r}: {root} is not a folder; a store is a folder holding runs/ and commits/"
            )
    else:
        try:
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
                pass
        except OSError as exc:
            raise UserError(f"store {url!r} cannot be written: {exc.strerror or exc}") from exc
    return LocalStore(root)
