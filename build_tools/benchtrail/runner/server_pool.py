"""This process's worker servers (``python -m benchtrail.worker --serve``): one per checkout or shared
between checkouts, leased per job, all stopped at exit. Design: docs/architecture.md, worker protocol."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: ``BENCHTRAIL_WORKER_START``: ``fork`` (from the pre-imported server; the default) or ``spawn`` (a new
#: interpreter per job).
START_METHODS = ("fork", "spawn")
#: Seconds a server may take to import torch and greet before we fall back to spawning.
SERVER_START_TIMEOUT_S = 300.0
#: Environment variables: a process's, or those a job adds.
Env = dict[str, str]
#: How a worker process ended: (exit code, or None when killed; a reason when it did not exit 0).
Outcome = tuple[int | None, str]


def start_method() -> str:
    """``BENCHTRAIL_WORKER_START`` (default ``fork``); ValueError for a value not in ``START_METHODS``."""
    method = os.environ.get("BENCHTRAIL_WORKER_START", "fork")
    if method not in START_METHODS:
        raise ValueError(f"BENCHTRAIL_WORKER_START={method!r}; allowed: {', '.join(START_METHODS)}")
    return method


class ServerUnavailable(Exception):
    """The checkout's worker cannot serve (it predates the server, or failed to start)."""


class Refused(Exception):
    """A server shared between checkouts would not fork a job of this one."""


class WorkerServer:
    """A running worker server for one environment and working directory; the constructor raises
    ServerUnavailable when it does not greet in time."""

    def __init__(self, env: Env, cwd: Path | None, shareable: bool = False) -> None:
        # Unnamed: nothing is left behind even when this process is killed (SIGKILL runs no cleanup).
        self.log = tempfile.TemporaryFile(prefix="benchtrail-server-", suffix=".log")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "benchtrail.worker", "--serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:  # e.g. a working directory that is gone
            self.log.close()
            raise ServerUnavailable(f"the worker server could not start: {exc}") from exc
        self._buffer = b""
        hello = self._read(SERVER_START_TIMEOUT_S)
        if not hello or "server" not in hello:
            why = self._log_tail()
            self.close()
            raise ServerUnavailable(f"the worker did not start a server ({why})")
        self.features = tuple(hello.get("features", ()))  # the protocol's features; none before them
        self.busy = False  # running a job for a caller that leased it (server_for)
        self.key = _key(env)  # the checkout it was started for
        self.shareable = shareable  # whether other checkouts may use it (server_for)

    def _log_tail(self) -> str:
        try:
            fd = self.log.fileno()  # pread: the server shares the file offset, which a seek would move
            return tail(os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace"), 3)
        except OSError:
            return "no log"

    def _read(self, timeout: float) -> dict | None:
        """The next JSON line from the server; None at end of output or after ``timeout`` seconds."""
        fd, deadline = self.proc.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0] or not (chunk := os.read(fd, 65536)):
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(
        self,
        pairs: list[tuple[Path, Path]],
        log: Path,
        env: Env,
        threads: int,
        timeouts: Sequence[float],
        cwd: Path | None,
        inductor: bool,
        compiles: bool,
    ) -> Outcome:
        """Fork one child that answers each (request, response) file pair in turn, in ``cwd`` (default: ours).

        ``inductor``: the server probes the C++ compiler first; ``compiles``: it imports Dynamo and Inductor
        first (each once). ``timeouts[i]``: seconds for request ``i`` from the previous answer, then the
        child's process group is killed.

        Raises:
            ServerUnavailable: the server itself died.
            Refused: the job's ``PYTHONPATH`` (in ``env``) is not the server's and the server cannot fork it.
        """
        job = {
            "jobs": [list(map(str, pair)) for pair in pairs],
            "log": str(log),
            "env": env,
            "threads": threads,
            "cwd": str(Path(cwd or ".").resolve()),
            "inductor": inductor,
            "compiles": compiles,
        }
        if "pythonpath" in self.features:
            job["pythonpath"] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise ServerUnavailable(f"the worker server stopped: {exc}") from exc
        started = self._read(60)
        if not started:
            raise ServerUnavailable(f"the worker server did not fork a worker ({self._log_tail()})")
        if "refused" in started:
            raise Refused(started["refused"])
        pid = started["pid"]
        with _LOCK:
            _LIVE.add(pid)
        done, since = 0, time.monotonic()
        try:
            while True:
                timeout = timeouts[min(done, len(timeouts) - 1)]
                if (finished := self._read(min(since + timeout - time.monotonic(), 1.0))) is not None:
                    code = finished["returncode"]
                    return code, "" if code == 0 else f"worker exited with code {code}"
                if self.proc.poll() is not None:
                    raise ServerUnavailable("the worker server stopped")
                answered = sum(response.exists() for _, response in pairs)
                if answered > done:
                    done, since = answered, time.monotonic()
                elif time.monotonic() > since + timeout:
                    kill_group(pid)
                    self._read(30)
                    return None, f"worker did not finish within {timeout:g} s"
        except BaseException:  # Ctrl-C or SIGTERM (the CLI's handler): never leave a worker behind
            kill_group(pid)
            raise
        finally:
            with _LOCK:
                _LIVE.discard(pid)

    def close(self) -> None:
        """Stop the server (end of its input, then a kill if it lingers)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            kill_group(self.proc.pid)
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def tail(text: str, lines: int = 5) -> str:
    """The last ``lines`` lines of a worker's output or log, on one line."""
    return " / ".join(text.strip().splitlines()[-lines:])


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_live_workers() -> None:
    """Kill the process group of every forked worker running for this process now: Ctrl-C or SIGTERM
    reaches only the main thread, not the threads that run a duet round's workers."""
    with _LOCK:
        for pid in _LIVE:
            kill_group(pid)


#: The running servers, least recently used first.
_SERVERS: list[WorkerServer] = []
#: Keys (``PYTHONPATH``, interpreter) of checkouts whose worker has no server (it predates it): tried once.
_NO_SERVER: set[tuple[str, str]] = set()
#: Keys whose jobs a shared server refused: they get servers of their own.
_REFUSED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()
#: Process ids (and groups) of the forked workers running now (:func:`kill_live_workers`).
_LIVE: set[int] = set()
#: Servers kept running at most (each holds an imported torch, ~350 MB), least recently used stopped first;
#: a paired run needs two.
MAX_SERVERS = 3


def _key(env: Env) -> tuple[str, str]:
    """A checkout's server key: its ``PYTHONPATH`` and the interpreter."""
    return env.get("PYTHONPATH", ""), sys.executable


def _shareable(pythonpath: str) -> bool:
    """Whether checkouts with ``pythonpath`` may fork from another's server: every entry an absolute folder
    (a relative one depends on the server's working directory) holding no ``benchtrail`` or ``torch``."""
    entries = pythonpath.split(os.pathsep) if pythonpath else []
    return all(
        os.path.isabs(p)
        and not os.path.isfile(p)
        and not any(Path(p, n).exists() for n in ("benchtrail", "torch"))
        for p in entries
    )


def server_for(
    env: Env, cwd: Path | None, method: str | None = None, lease: bool = False
) -> WorkerServer | None:
    """A server for the checkout that ``env``'s ``PYTHONPATH`` imports; None where workers are spawned
    (``spawn``, or a checkout whose worker has no server: tried once).

    Its own server first, else a shareable one (:func:`_shareable`), else a new one started in ``cwd`` (in
    ``sys.prefix`` when shareable). ``lease``: the caller runs a job and then calls :func:`release`; a
    leased server is neither handed out again nor stopped meanwhile."""
    if (method or start_method()) == "spawn":
        return None
    key = _key(env)
    with _LOCK:
        if key in _NO_SERVER:
            return None
        shareable = key not in _REFUSED and _shareable(key[0])
        usable = [
            s
            for s in reversed(_SERVERS)
            if not (lease and s.busy)
            and (s.key == key or (shareable and s.shareable and "pythonpath" in s.features))
        ]
        # The checkout's own server first, then a shared one; the most recently used first.
        server = min(usable, key=lambda s: s.key != key, default=None)
        if server is None:
            idle = [s for s in _SERVERS if not s.busy]
            for old in idle[: max(len(_SERVERS) - MAX_SERVERS + 1, 0)]:
                _SERVERS.remove(old)
                old.close()
            try:
                # A server other checkouts may share outlives this one's folder (a paired run's base
                # worktree): it starts in a folder that stays, holding no modules (its jobs run in their own).
                server = WorkerServer(env, Path(sys.prefix) if shareable else cwd, shareable)
            except ServerUnavailable:
                _NO_SERVER.add(key)
                return None
        else:
            _SERVERS.remove(server)
        _SERVERS.append(server)  # most recently used last
        if lease:
            server.busy = True
        return server


def release(server: WorkerServer) -> None:
    """End the lease of :func:`server_for`."""
    with _LOCK:
        server.busy = False


@atexit.register
def close_servers(pythonpath: str | None = None) -> None:
    """Stop every server and forget which checkouts had none or were refused; with ``pythonpath``, only
    that ``PYTHONPATH``'s idle servers."""
    with _LOCK:
        for server in [s for s in _SERVERS if pythonpath is None or (s.key[0] == pythonpath and not s.busy)]:
            _SERVERS.remove(server)
            server.close()
        if pythonpath is None:
            _NO_SERVER.clear()
            _REFUSED.clear()


def run_leased(
    server: WorkerServer | None,
    server_env: Env,
    cwd: Path | None,
    method: str | None,
    run: Callable[[WorkerServer], Outcome],
) -> Outcome:
    """``run(server)`` on the leased ``server``, released after; a refused job runs on a server started for
    its own ``PYTHONPATH``. A server that died is dropped, and ServerUnavailable raised."""
    while server is not None:
        try:
            return run(server)
        except Refused:
            with _LOCK:
                _REFUSED.add(_key(server_env))
        except ServerUnavailable:
            with _LOCK:
                if server in _SERVERS:
                    _SERVERS.remove(server)
            server.close()
            raise
        finally:
            release(server)
        server = server_for(server_env, cwd, method, lease=True)
    raise ServerUnavailable("the checkout's worker could not start a server of its own")
