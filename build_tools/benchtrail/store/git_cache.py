"""The ``git:`` store's cache: a bare repository holding one branch's tip, and add-only commits pushed to it.

The cache sits under the store's staging folder; it holds the branch's tip (fetched ``--depth 1``), one
fetch or write at a time (an ``fcntl`` lock). A write builds a commit that only adds files on top of the tip
(plumbing: no work tree, no checkout) and pushes it. A push that another writer beat is rebuilt on the new
tip and pushed again, a few times, never forced: added files never conflict unless both writers stored one
name with other bytes. ``create_cache`` makes the repository; git_branch.py builds the store on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchtrail.errors import StoreError, UserError
from benchtrail.store.git_url import git_env, run_git, said, shown_remote

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
class BranchCache:
    """Branch ``branch`` of ``remote`` as the bare repository ``cache`` holds it (``config``: git ``-c``
    settings for the remote; ``fetched_at``: when the tip was last fetched, ``time.monotonic``)."""

    remote: str
    branch: str
    cache: Path
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


def create_cache(cache: Path, url: str) -> None:
    """``git init --bare`` the cache of store ``url`` in a temporary folder, renamed into place (a cache
    another process made first is kept).

    Raises:
        UserError: the cache cannot be created, naming it and what went wrong.
    """
    temporary = cache.with_name(f"{cache.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        why = said(run_git(["init", "--quiet", "--bare", str(temporary)]))
        with contextlib.suppress(OSError):  # another process's cache is there
            temporary.rename(cache)
    except OSError as exc:
        why = exc.strerror or str(exc)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    if not (cache / "HEAD").is_file():
        raise UserError(f"git store {url}: cannot create its cache {cache}; {why}")
