"""The ``git:`` store: runs and pointers committed to one branch of a git repository (``docs/store.md``).

``git:REMOTE#BRANCH``: REMOTE a URL, a path or a remote of the repository in the working directory (default
``origin``), BRANCH default ``benchtrail-data``. Everything goes through the ``git`` command, in a bare cache
repository under the staging folder (git_cache.py: the fetch, the add-only commit and its
push). This module lays runs, pointers and the notes of files left out onto it.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.store.base import (
    ALL_FILES,
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
from benchtrail.store.git_cache import BranchCache, create_cache
from benchtrail.store.git_url import LEFT_OUT, NOTES, parse_url, resolve_remote, shown_remote
from benchtrail.store.local import MAX_POINTER_BYTES, pointer_document, read_pointer_files, write_new


@dataclass(frozen=True)
class GitStore(BranchCache):
    """A store in branch ``branch`` of ``remote`` (see ``Store``).

    ``cache`` is a bare repository holding the branch's tip (``BranchCache``); ``staging`` holds run
    directories (``run_dir``), the pointers read (``commits/``) and the assets (``assets/``), as a GCS
    store's does.
    """

    staging: Path = field(kw_only=True)

    def _run_files(self, run_id: str, attempt: int) -> dict[str, tuple[str, int]]:
        """The run's files (relative names) at the tip, fetched again when the tip has none."""
        prefix = run_path(run_id, attempt) + "/"
        files = self._ls(self.tip(), prefix) or self._ls(self.fetch(), prefix)
        return {name[len(prefix) :]: blob for name, blob in files.items()}

    def run_url(self, run_id: str, attempt: int) -> str:
        """``git:<remote>#<branch>/runs/<run_id>/<attempt>/`` (``fetch_command`` copies
        it)."""
        return f"{self.url}/{run_path(run_id, attempt)}/"

    def run_dir(self, run_id: str, attempt: int) -> Path:
        """The local staging folder of a run: written before ``upload_run``, filled by ``fetch_run``."""
        return self.staging / run_path(run_id, attempt)

    def create_run_dir(self, run_id: str, attempt: int) -> Path:
        """Check that the branch (fetched now) holds no file of the run, then create its empty staging folder.

        Raises:
            UserError: the branch holds files of the run, or the staging folder is not empty.
        """
        found = self._ls(self.fetch(), run_path(run_id, attempt) + "/")
        if found:
            raise UserError(
                f"run {self.run_url(run_id, attempt)} already holds files (e.g. {min(found)}); "
                "runs are never overwritten (use a new attempt)"
            )
        return empty_staging_dir(self.run_dir(run_id, attempt), run_id, attempt)

    def upload_run(
        self,
        local_dir: Path,
        run_id: str,
        attempt: int,
        *,
        deadline_s: float = 600,
        patterns: Sequence[str] = ALL_FILES,
    ) -> int:
        """Commit the files of ``local_dir`` matching ``patterns`` into ``runs/<id>/<attempt>/``, create-only,
        and push. Files under ``LEFT_OUT`` are never committed: a note ``not-stored/<artifact>.md`` says what
        was left out and where it is (``left_out_note``); a note that exists is kept. A file stored with the
        same bytes counts as uploaded; when one differs, nothing is committed. ``deadline_s`` is ignored.

        Returns:
            The number of files of ``local_dir`` now stored in the run (those left out not counted).

        Raises:
            UserError: an unsafe file name, no file matching, files stored with other bytes ("… already
                exist … never overwritten"); StoreError: the fetch or the push failed.
        """
        prefix, local_dir = run_path(run_id, attempt), Path(local_dir)
        names = upload_names(local_dir, patterns)
        kept = [n for n in names if n.split("/", 1)[0] not in LEFT_OUT]
        files: dict[str, bytes | Path] = {f"{prefix}/{n}": local_dir / n for n in kept}
        notes = []
        if len(kept) < len(names):
            note_name, text = left_out_note(local_dir, sorted(set(names) - set(kept)), run_id, attempt)
            files[f"{prefix}/{note_name}"] = text.encode()
            notes.append(f"{prefix}/{note_name}")
        differs = [
            d
            for d in self.add(files, lambda n: f"benchtrail: run {run_id}/{attempt}, {n} file(s)", notes)
            if d not in notes
        ]
        if differs:
            raise UserError(
                f"{len(differs)} file(s) already exist in {self.url} with other content "
                f"({shown(differs)}); never overwritten (upload the run under a new attempt)"
            )
        return len(kept)

    def incomplete_runs(self) -> list[tuple[str, int]]:
        """The runs with files and no commit pointer (``pointerless``), sorted (the
        branch fetched now)."""
        names = list(self._ls(self.fetch(), "runs/", "commits/"))
        runs = {
            (p[1], int(p[2]))
            for n in names
            if len(p := n.split("/")) > 3 and p[0] == "runs" and p[2].isdigit()
        }
        return pointerless(runs, (n.rsplit("/", 1)[-1] for n in names if n.startswith("commits/")))

    def run_files(self, run_id: str, attempt: int, *, deadline_s: float = 600) -> list[str]:
        """The names of the run's files, relative to its directory, sorted; [] for no such run."""
        return sorted(self._run_files(run_id, attempt))

    def fetch_run(
        self,
        run_id: str,
        attempt: int,
        dest: Path | None = None,
        patterns: Sequence[str] = ALL_FILES,
        *,
        deadline_s: float = 600,
    ) -> Path:
        """Write the run's files matching ``patterns`` into ``dest`` (default: ``run_dir``), create-only.
        Every name of the run is checked before anything is written. ``deadline_s`` is ignored.

        Raises:
            UserError: no such run, nothing matching, an unsafe name, a local file with other bytes.
        """
        dest = Path(dest) if dest is not None else self.run_dir(run_id, attempt)
        files, regex = self._run_files(run_id, attempt), compile_patterns(patterns)
        if not files:
            raise UserError(f"no run {run_id}/{attempt} in store {self.url}")
        where = self.run_url(run_id, attempt)
        chosen = sorted(n for n in files if regex.match(check_relative_name(n, where)))
        if not chosen:
            raise UserError(
                f"no file of run {self.run_url(run_id, attempt)} matches {', '.join(patterns)} "
                f"(it holds e.g. {shown(sorted(files), 3)})"
            )
        differs = []
        for name, data in zip(chosen, self._blobs([files[n][0] for n in chosen]), strict=True):
            if write_new(dest / name, data).read_bytes() != data:
                differs.append(name)
        if differs:
            raise UserError(
                f"{len(differs)} file(s) already exist in {dest} with other content "
                f"({shown(differs)}); remove them or fetch into another folder"
            )
        return dest

    def write_pointer(self, commit: str, run_id: str, attempt: int, info: dict[str, Any]) -> str:
        """Commit and push ``commits/<sha>/<run_id>-<attempt>.json`` (one new file per run).

        Returns:
            Its URL, ``git:<remote>#<branch>/commits/<sha>/<run_id>-<attempt>.json``.

        Raises:
            UserError: the pointer exists with other content ("never overwritten"); StoreError: the push
                failed.
        """
        path = f"commits/{commit}/{run_id}-{attempt}.json"
        data = jsonio.dumps(pointer_document(commit, run_id, attempt, info)).encode()
        message = f"benchtrail: pointer of run {run_id}/{attempt} to {commit[:12]}"
        if self.add({path: data}, lambda _: message):
            raise UserError(
                f"1 file(s) already exist in {self.url} with other content ({path}); never "
                "overwritten (each run writes its pointer once)"
            )
        return f"{self.url}/{path}"

    def pointers(self, commit: str) -> list[dict[str, Any]]:
        """The pointers of ``commit`` (the branch as fetched in the last ``FRESH_S``), oldest first by their
        own ``created`` (git records no time a writer cannot choose); unreadable ones are skipped. They are
        copied into ``staging/commits/<sha>/``."""
        prefix = f"commits/{check_id(commit, 'commit')}/"
        tip = self.recent_tip()
        chosen, too_big = {}, []
        for path, (blob, size) in self._ls(tip, prefix).items():
            name = path[len(prefix) :]
            if not (name.endswith(".json") and "/" not in name and unsafe_reason(name) is None):
                continue
            if size > MAX_POINTER_BYTES:
                too_big.append(
                    f"commit pointer {self.url}/{path} is {size} bytes, more than "
                    f"{MAX_POINTER_BYTES}; not read"
                )
            else:
                chosen[name] = blob
        folder = self.staging / "commits" / commit
        for name, data in zip(chosen, self._blobs(list(chosen.values())), strict=True):
            jsonio.write_bytes_atomic(folder / name, data)
        when = stored_time(int(self._out("show", "-s", "--format=%ct", tip))) if tip else ""
        return read_pointer_files(((folder / n, when) for n in chosen), commit, too_big, own_time=True)

    def write_asset(self, name: str, data: bytes) -> Path:
        """``staging/assets/<name>``, written unless it exists, where pages staged under ``run_dir`` find it.
        Not committed: assets serve the dashboards, which the branch never holds (``LEFT_OUT``)."""
        return write_new(self.staging / asset_path(name), data)


def left_out_note(local_dir: Path, names: Sequence[str], run_id: str, attempt: int) -> tuple[str, str]:
    """``(note name, Markdown)``: which files of the run the branch leaves out and where they are, the
    GitHub Actions artifact ``$BENCHTRAIL_ARTIFACT_NAME`` of workflow run ``$GITHUB_RUN_ID`` (kept
    ``$BENCHTRAIL_ARTIFACT_RETENTION_DAYS`` days, default 90), or nowhere outside GitHub Actions.

    Raises:
        UserError: a retention that is not a whole number of days from 1.
    """
    env, sizes = os.environ, dict[str, tuple[int, int]]()
    for name in names:
        count, size = sizes.get(name.split("/", 1)[0], (0, 0))
        sizes[name.split("/", 1)[0]] = (count + 1, size + (Path(local_dir) / name).stat().st_size)
    artifact, ci_run = env.get("BENCHTRAIL_ARTIFACT_NAME", ""), env.get("GITHUB_RUN_ID", "")
    lines = [
        f"# Files of run {run_id}/{attempt} not stored in this branch",
        "",
        "Compiled artifacts (`modules/`, the Inductor cache among them) and the run's dashboard "
        "(`dashboard/`) are never committed to the data branch: they would grow it by megabytes a run.",
        "",
        "| folder | files | bytes |",
        "|---|---:|---:|",
        *(f"| `{folder}/` | {count} | {size} |" for folder, (count, size) in sorted(sizes.items())),
        "",
    ]
    if env.get("GITHUB_ACTIONS") == "true" and ci_run:
        days = env.get("BENCHTRAIL_ARTIFACT_RETENTION_DAYS") or "90"
        if not days.isdigit() or int(days) < 1:
            raise UserError(
                f"BENCHTRAIL_ARTIFACT_RETENTION_DAYS={days!r} is not a whole number of days from 1"
            )
        until = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=int(days))).date()
        page = f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env.get('GITHUB_REPOSITORY', '')}"
        lines.append(
            f"Where they are: the GitHub Actions artifact `{artifact or '(name not given)'}` of "
            f"workflow run {ci_run} ({page}/actions/runs/{ci_run}), kept until {until} "
            f"({days} days after this upload); after that, nowhere."
        )
        key = artifact or f"run-{ci_run}"
    else:
        lines.append(
            "Where they are: not kept. The run was stored outside GitHub Actions; only the "
            "writer's own copy (its staging folder) held them."
        )
        key = "local"
    key = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-.") or "local"
    return f"{NOTES}/{key}.md", "\n".join(lines) + "\n"


def open_git_store(url: str, *, staging: Path | None = None, cwd: Path | None = None) -> GitStore:
    """Open ``git:REMOTE#BRANCH`` and fetch the branch (one that does not exist yet is created by the
    first write).

    Args:
        url: the store URL.
        staging: the folder of the cache and the run directories (default ``$BENCHTRAIL_STAGING`` or
            ``.benchtrail/staging``, then ``git-<remote>-<hash>`` below it).
        cwd: the repository whose remotes a remote name (``origin``) names (default: the working directory).

    Raises:
        UserError: a malformed URL, a remote name that is no remote there; StoreError: the remote cannot be
            read (none there, no permission), naming it and what git said.
    """
    remote, branch = parse_url(url)
    resolved, config = resolve_remote(remote, cwd, branch)
    if staging is None:
        tail = re.sub(r"[^A-Za-z0-9]+", "-", shown_remote(resolved).removesuffix(".git"))[-40:].strip("-")
        digest = hashlib.sha1(f"{resolved}#{branch}".encode()).hexdigest()[:10]
        staging = staging_root() / f"git-{tail}-{digest}"
    store = GitStore(resolved, branch, Path(staging).resolve() / "cache.git", config, staging=Path(staging))
    if not (store.cache / "HEAD").is_file():
        create_cache(store.cache, store.url)
    store.fetch()
    return store
