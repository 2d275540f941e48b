"""The ``git:`` store: runs and pointers committed to one branch of a git repository (``docs/store.md``).

``git:REMOTE#BRANCH``: REMOTE a URL, a path or a remote of the repository in the working directory (default
``origin``), BRANCH default ``benchtrail-data``. Everything goes through the ``git`` command. A bare cache
repository under the staging folder holds the branch's tip (fetched ``--depth 1``); a write builds a commit
that only adds files on top of the tip (plumbing: no work tree, no checkout) and pushes it. A push that
another writer beat is rebuilt on the new tip and pushed again, a few times, never forced: added files
never conflict unless both writers stored one name with other bytes.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import StoreError, UserError
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
    stored_time,
    unsafe_reason,
    upload_names,
)
from benchtrail.store.git_url import (
    LEFT_OUT,
    NOTES,
    create_cache,
    git_env,
    parse_url,
    resolve_remote,
    run_git,
    said,
    shown_remote,
)
from benchtrail.store.local import MAX_POINTER_BYTES, pointer_document, read_pointer_files, write_new

#: Where the cache and the run directories live unless ``BENCHTRAIL_STAGING`` says otherwise.
DEFAULT_STAGING = Path(".benchtrail") / "staging"
#: Pushes of one write before giving up (each after a fetch and a rebuild on the new tip).
PUSH_TRIES = 6
_IDENTITY = ("-c", "user.name=benchtrail", "-c", "user.email=benchtrail@users.noreply.github.com")
_RACE = re.compile(
    r"fetch first|non-fast-forward|cannot lock ref|failed to update ref|incorrect old value"
    r"|stale info|shallow update not allowed"
)
_TIP = "refs/benchtrail/tip"
#: Seconds a fetched tip serves reads of pointers before the next read fetches again (a history walk reads
#: the pointers of every commit: one fetch, not one per commit).
FRESH_S = 30.0


@dataclass(frozen=True)
class GitStore:
    """A store in branch ``branch`` of ``remote`` (see ``benchtrail.store.base.Store``).

    ``cache`` is a bare repository holding the branch's tip; ``staging`` holds run directories
    (``run_dir``), the pointers read (``commits/``) and the assets (``assets/``), as a GCS store's does.
    """

    remote: str
    branch: str
    cache: Path
    staging: Path
    config: tuple[tuple[str, str], ...] = ()
    fetched_at: list[float] = field(default_factory=list, compare=False)

    @property
    def url(self) -> str:
        return f"git:{shown_remote(self.remote)}#{self.branch}"

    def _git(
        self, *args: str, stdin: bytes = b"", index: Path | None = None, ok: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS`` in the cache repository; unless ``ok``, a failure is a StoreError."""
        env = git_env(self.config)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        proc = run_git(["--git-dir", str(self.cache), *_IDENTITY, *args], stdin=stdin, env=env)
        if proc.returncode and not ok:
            raise StoreError(
                f"git store {self.url} (remote {shown_remote(self.remote)}, branch "
                f"{self.branch}): git {args[0]} failed; {said(proc)}"
            )
        return proc

    def _out(self, *args: str, stdin: bytes = b"") -> str:
        return self._git(*args, stdin=stdin).stdout.decode().strip()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the cache's lock file (``fcntl.flock``): one fetch or write at a time among the processes and
        threads that share the staging folder (git's own locks make a second ``fetch --depth 1`` fail)."""
        with open(self.cache / "benchtrail.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def fetch(self) -> str | None:
        """Fetch the branch's tip into the cache; return it (None: the branch does not exist yet).

        Raises:
            StoreError: the remote cannot be read (none there, no permission, no network), naming it.
        """
        with self._locked():
            return self._fetch()

    def _fetch(self) -> str | None:
        """``fetch`` with the lock held."""
        proc = self._git(
            "fetch", "--quiet", "--no-tags", "--depth", "1", self.remote, f"refs/heads/{self.branch}", ok=True
        )
        if proc.returncode and "couldn't find remote ref" not in proc.stderr.decode(errors="replace"):
            raise StoreError(
                f"git store {self.url}: cannot fetch branch {self.branch!r} from remote "
                f"{shown_remote(self.remote)}; {said(proc)}"
            )
        self._git("update-ref", *(["-d", _TIP] if proc.returncode else [_TIP, "FETCH_HEAD"]))
        self.fetched_at[:] = [time.monotonic()]
        return self.tip()

    def recent_tip(self) -> str | None:
        """The tip, fetched again when the last fetch is more than ``FRESH_S`` old."""
        fresh = self.fetched_at and time.monotonic() - self.fetched_at[0] < FRESH_S
        return self.tip() if fresh else self.fetch()

    def tip(self) -> str | None:
        """The branch's tip as last fetched or pushed, or None."""
        proc = self._git("rev-parse", "--quiet", "--verify", f"{_TIP}^{{commit}}", ok=True)
        return proc.stdout.decode().strip() or None

    def _ls(self, tip: str | None, *paths: str) -> dict[str, tuple[str, int]]:
        """``{path: (blob id, size)}`` of the files under ``paths`` at ``tip`` ({} without a tip)."""
        if tip is None:
            return {}
        out = self._git("ls-tree", "-r", "-z", "--long", "--full-tree", tip, "--", *paths).stdout
        found = {}
        for entry in out.decode(errors="surrogateescape").split("\0"):
            if entry:
                meta, path = entry.split("\t", 1)
                _, kind, blob, size = meta.split()
                if kind == "blob":
                    found[path] = (blob, int(size))
        return found

    def _blobs(self, blobs: Sequence[str]) -> list[bytes]:
        """The bytes of ``blobs`` (``git cat-file --batch``), in their order."""
        out = self._git("cat-file", "--batch", stdin="".join(f"{b}\n" for b in blobs).encode()).stdout
        found, at = [], 0
        for _ in blobs:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            found.append(out[header_end + 1 : header_end + 1 + size])
            at = header_end + 1 + size + 1
        return found

    def _run_files(self, run_id: str, attempt: int) -> dict[str, tuple[str, int]]:
        """The run's files (relative names) at the tip, fetched again when the tip has none."""
        prefix = run_path(run_id, attempt) + "/"
        files = self._ls(self.tip(), prefix) or self._ls(self.fetch(), prefix)
        return {name[len(prefix) :]: blob for name, blob in files.items()}

    def _hash(self, files: Mapping[str, bytes | Path]) -> dict[str, str]:
        """Write each file's bytes into the cache; ``{branch path: blob id}``."""
        paths = {n: v for n, v in files.items() if isinstance(v, Path)}
        out = self._out(
            "hash-object",
            "-w",
            "--no-filters",
            "--stdin-paths",
            stdin="".join(f"{v.resolve()}\n" for v in paths.values()).encode(),
        ).split()
        blobs = dict(zip(paths, out, strict=True))
        for name, value in files.items():
            if not isinstance(value, Path):
                blobs[name] = self._out("hash-object", "-w", "--no-filters", "--stdin", stdin=value)
        return blobs

    def _commit(self, tip: str | None, blobs: Mapping[str, str], message: str) -> str:
        """A commit that adds ``blobs`` to ``tip``'s tree (an orphan commit without a tip)."""
        index = self.cache / f"index-{os.getpid()}-{threading.get_ident()}"
        try:
            self._git("read-tree", *([tip] if tip else ["--empty"]), index=index)
            self._git(
                "update-index",
                "--add",
                "-z",
                "--index-info",
                index=index,
                stdin="".join(f"100644 {b}\t{n}\0" for n, b in blobs.items()).encode(),
            )
            tree = self._git("write-tree", index=index).stdout.decode().strip()
        finally:
            index.unlink(missing_ok=True)
        return self._out("commit-tree", "--no-gpg-sign", tree, *(["-p", tip] if tip else []), "-m", message)

    def add(
        self,
        files: Mapping[str, bytes | Path],
        message: Callable[[int], str],
        may_differ: Collection[str] = (),
    ) -> list[str]:
        """Commit the ``files`` (branch path: bytes or a local file) that the branch does not hold yet and
        push them, all or nothing: when the branch holds any of them with other bytes (but those in
        ``may_differ``), nothing is committed. ``message`` makes the commit message from the number of files
        added. A push another writer beat is fetched, rebuilt on the new tip and pushed again
        (``PUSH_TRIES`` pushes at most).

        Returns:
            The paths the branch already holds with other bytes (left as they are, not added).

        Raises:
            StoreError: the push refused for another reason (no permission, a protected branch), or still
                beaten after ``PUSH_TRIES`` pushes, naming the remote, the branch and what git said.
        """
        blobs = self._hash(files)
        with self._locked():
            return self._add(blobs, message, may_differ)

    def _add(
        self, blobs: Mapping[str, str], message: Callable[[int], str], may_differ: Collection[str]
    ) -> list[str]:
        """``add`` with the lock held, the files hashed."""
        tip = self.tip() or self._fetch()
        for attempt in range(PUSH_TRIES):
            stored = self._ls(tip, *blobs)
            new = {n: b for n, b in blobs.items() if n not in stored}
            differs = sorted(n for n, b in blobs.items() if n in stored and stored[n][0] != b)
            if not new or set(differs) - set(may_differ):
                return differs
            commit = self._commit(tip, new, message(len(new)))
            push = self._git(
                "push", "--quiet", "--no-verify", self.remote, f"{commit}:refs/heads/{self.branch}", ok=True
            )
            if not push.returncode:
                self._git("update-ref", _TIP, commit)
                return differs
            if not _RACE.search(push.stderr.decode(errors="replace")) or attempt + 1 == PUSH_TRIES:
                why = "another writer kept winning" if attempt + 1 == PUSH_TRIES else "refused"
                raise StoreError(
                    f"git store {self.url}: push to branch {self.branch!r} of remote "
                    f"{shown_remote(self.remote)} {why} ({attempt + 1} tries); {said(push)}"
                )
            time.sleep(random.uniform(0.05, 0.25) * 2**attempt)
            tip = self._fetch()
        raise AssertionError("unreachable")

    def run_url(self, run_id: str, attempt: int) -> str:
        """``git:<remote>#<branch>/runs/<run_id>/<attempt>/`` (``benchtrail.store.fetch_command`` copies
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
        """The runs with files and no commit pointer (``benchtrail.store.base.pointerless``), sorted (the
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
        staging = Path(os.environ.get("BENCHTRAIL_STAGING") or DEFAULT_STAGING) / f"git-{tail}-{digest}"
    store = GitStore(resolved, branch, Path(staging).resolve() / "cache.git", Path(staging), config)
    if not (store.cache / "HEAD").is_file():
        create_cache(store.cache, store.url)
    store.fetch()
    return store
