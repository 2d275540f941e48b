"""Start worker processes for jobs, with a timeout, and collect their responses.

A worker process is forked from a pre-imported server (:mod:`benchtrail.worker.server`, one per
checkout and working directory, started on first use), or, where the server cannot start (a
checkout from before it, ``BENCHTRAIL_WORKER_START=spawn``), spawned as ``python -m benchtrail.worker``
per job. Either way each job gets a new process; a forked one skips the ``import torch``.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any
from pathlib import Path

from benchtrail.project import import_root
from benchtrail.suite.definitions import CompileMode, Task
from benchtrail.suite.entry_points import INDUCTOR_MODES
from benchtrail.worker.protocol import ProtocolError, Request, Response, read_response

#: How workers start: ``fork`` (from the pre-imported server; the default) or ``spawn`` (a new
#: interpreter per job, as before the server existed). Read from ``BENCHTRAIL_WORKER_START``.
START_METHODS = ("fork", "spawn")
#: Seconds a server may take to import torch and greet before we fall back to spawning.
SERVER_START_TIMEOUT_S = 300.0


def start_method() -> str:
    """``BENCHTRAIL_WORKER_START`` (default ``fork``).

    Raises:
        ValueError: any other value, naming the allowed ones.
    """
    method = os.environ.get("BENCHTRAIL_WORKER_START", "fork")
    if method not in START_METHODS:
        raise ValueError(f"BENCHTRAIL_WORKER_START={method!r}; allowed: {', '.join(START_METHODS)}")
    return method


def worker_pythonpath(start: Path = Path(".")) -> str:
    """``PYTHONPATH`` of a worker: the project root of ``start`` (``benchtrail.project.import_root``)
    first, then the inherited ``PYTHONPATH`` (without repeating the root); empty when both are."""
    root = import_root(start)
    paths = [str(root)] if root else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join(paths)


def _environment(threads: int, env: dict[str, str] | None) -> dict[str, str]:
    """The worker's environment: ours, ``OMP_NUM_THREADS``, the project's ``PYTHONPATH``, then ``env``."""
    full = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": worker_pythonpath(), **(env or {})}
    if not full["PYTHONPATH"]:
        del full["PYTHONPATH"]  # an empty entry would put the worker's working directory on sys.path twice
    return full


class ServerUnavailable(Exception):
    """The checkout's worker cannot serve (it predates the server, or failed to start)."""


class WorkerServer:
    """A running ``python -m benchtrail.worker --serve`` for one environment and working directory.

    Raises:
        ServerUnavailable: from the constructor, when the server does not greet in time.
    """

    def __init__(self, env: dict[str, str], cwd: Path | None) -> None:
        # Unnamed: nothing is left in the temporary folder even when this process is killed (SIGKILL runs no cleanup).
        self.log = tempfile.TemporaryFile(prefix="benchtrail-server-", suffix=".log")
        self.proc = subprocess.Popen([sys.executable, "-m", "benchtrail.worker", "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=cwd,
                                     start_new_session=True)
        self._buffer = b""
        hello = self._read(time.monotonic() + SERVER_START_TIMEOUT_S)
        if not hello or "server" not in hello:
            tail = self._log_tail()
            self.close()
            raise ServerUnavailable(f"the worker did not start a server ({tail})")
        self.served_versions = tuple(hello.get("served_versions", (1,)))
        self.features = tuple(hello.get("features", ()))  # benchtrail.worker.protocol.FEATURES; none before them

    def _log_tail(self) -> str:
        try:
            fd = self.log.fileno()  # pread: the server shares the file offset, which a seek would move
            text = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
            return " / ".join(text.strip().splitlines()[-3:])
        except OSError:
            return "no log"

    def _read(self, deadline: float) -> dict | None:
        """The next JSON line from the server; None at end of output or after ``deadline``."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, pairs: list[tuple[Path, Path]], log: Path, env: dict[str, str], threads: int,
            timeouts: Sequence[float], cwd: Path | None = None, inductor: bool = True,
            compiles: bool = True) -> tuple[int | None, str]:
        """Fork one child that answers each (request, response) file pair in turn, in ``cwd`` (default: ours).
        ``inductor``: the job compiles with Inductor, so the server probes the C++ compiler first (once);
        ``compiles``: the job's module is compiled (any mode but eager), so the server imports Dynamo and
        Inductor first (once).

        ``timeouts[i]`` is the seconds request ``i`` may take from the moment the one before it was
        answered (its response file appeared); past it the child's process group is killed.
        Returns (exit code, or None when killed; a reason when it did not exit 0).

        Raises:
            ServerUnavailable: the server itself died.
        """
        job = {"jobs": [[str(a), str(b)] for a, b in pairs], "log": str(log), "env": env, "threads": threads,
               "cwd": str(Path(cwd or ".").resolve()), "inductor": inductor, "compiles": compiles}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise ServerUnavailable(f"the worker server stopped: {exc}") from exc
        started = self._read(time.monotonic() + 60)
        if not started:
            raise ServerUnavailable(f"the worker server did not fork a worker ({self._log_tail()})")
        pid = started["pid"]
        with _LOCK:
            _LIVE.add(pid)
        done, since = 0, time.monotonic()
        try:
            while True:
                finished = self._read(min(since + timeouts[min(done, len(timeouts) - 1)], time.monotonic() + 1.0))
                if finished is not None:
                    code = finished["returncode"]
                    return code, "" if code == 0 else f"worker exited with code {code}"
                if self.proc.poll() is not None:
                    raise ServerUnavailable("the worker server stopped")
                answered = sum(1 for _, response in pairs if response.exists())
                if answered > done:
                    done, since = answered, time.monotonic()
                elif time.monotonic() > since + timeouts[min(done, len(timeouts) - 1)]:
                    _kill_group(pid)
                    self._read(time.monotonic() + 30)
                    return None, f"worker did not finish within {timeouts[min(done, len(timeouts) - 1)]:g} s"
        except BaseException:  # Ctrl-C or SIGTERM (see cli._terminate): never leave a worker behind
            _kill_group(pid)
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
            _kill_group(self.proc.pid)
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_live_workers() -> None:
    """Kill every forked worker a server is running for this process now (each its whole process group): what
    a thread that runs a worker cannot do itself when Ctrl-C or SIGTERM reaches only the main thread (a duet
    round runs its two arms' workers from two threads: ``benchtrail.runner.ab``)."""
    with _LOCK:
        live = list(_LIVE)
    for pid in live:
        _kill_group(pid)


_SERVERS: dict[tuple[str, str], WorkerServer | None] = {}
_LOCK = threading.Lock()
#: Process ids (and groups) of the forked workers running now (:func:`kill_live_workers`).
_LIVE: set[int] = set()
#: Servers kept running at most (each holds an imported torch, ~350 MB): the least recently used one
#: is stopped first. A paired run needs two; a test session makes one per checkout it uses.
MAX_SERVERS = 3


def server_for(env: dict[str, str], cwd: Path | None, method: str | None = None) -> WorkerServer | None:
    """The server of the checkout that ``env``'s ``PYTHONPATH`` imports, started on first use (in ``cwd``;
    each job then runs in its own working directory); None where workers are spawned (``method`` or
    else ``BENCHTRAIL_WORKER_START`` is ``spawn``, or the checkout's worker predates the server:
    remembered, so it is tried once). A server imports ``benchtrail`` from ``PYTHONPATH`` or
    site-packages, not from a working directory (it lives in ``build_tools/``)."""
    if (method or start_method()) == "spawn":
        return None
    key = (env.get("PYTHONPATH", ""), sys.executable)
    with _LOCK:
        if key not in _SERVERS:
            running = [k for k, s in _SERVERS.items() if s is not None]
            for old in running[:max(len(running) - MAX_SERVERS + 1, 0)]:
                _SERVERS.pop(old).close()
            try:
                _SERVERS[key] = WorkerServer(env, cwd)
            except ServerUnavailable:
                _SERVERS[key] = None
        _SERVERS[key] = _SERVERS.pop(key)  # most recently used last
        return _SERVERS[key]


def _server_environment(full: dict[str, str], env: dict[str, str] | None) -> dict[str, str]:
    """A server's own environment: a job's, less what the job adds (``env``) but its ``PYTHONPATH``;
    each child then takes its job's whole environment."""
    return {k: v for k, v in full.items() if k == "PYTHONPATH" or k not in (env or {})}


def can_fork(env: dict[str, str] | None = None, cwd: Path | None = None) -> bool:
    """Whether workers of this checkout (``env``, ``cwd`` as for :func:`run_in_worker`) start by fork."""
    return server_for(_server_environment(_environment(1, env), env), cwd) is not None


def features_of(env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, ...]:
    """What this checkout's workers do beyond their protocol versions (``benchtrail.worker.protocol.FEATURES``,
    as its server greets); none where workers are spawned or the server predates the features."""
    server = server_for(_server_environment(_environment(1, env), env), cwd)
    return server.features if server is not None else ()


@atexit.register
def close_servers() -> None:
    """Stop every server (at exit, and in tests)."""
    with _LOCK:
        for server in _SERVERS.values():
            if server is not None:
                server.close()
        _SERVERS.clear()


def _spawn(request: Path, response: Path, timeout_s: float, env: dict[str, str], cwd: Path | None) -> tuple[int | None, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtrail.worker", str(request), str(response)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, f"worker did not finish within {timeout_s:g} s"
    except BaseException:  # Ctrl-C or SIGTERM (see cli._terminate): never leave a worker behind
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    tail = output.decode("utf-8", "replace").strip().splitlines()[-5:]
    return proc.returncode, "" if proc.returncode == 0 else f"worker exited with code {proc.returncode}: " + " / ".join(tail)


#: Compile modes that run Inductor's C++ toolchain, by value.
_INDUCTOR_MODES = frozenset(m.value for m in INDUCTOR_MODES + (CompileMode.AOT_INDUCTOR,))


#: Compile modes that compile (Dynamo, export, Inductor), by value: all but eager.
_COMPILING_MODES = frozenset(m.value for m in CompileMode if m is not CompileMode.EAGER)
#: Tasks whose worker imports Dynamo even for an eager module (``torch.func``'s Jacobians do).
_DYNAMO_TASKS = frozenset({Task.JACOBIAN.value})


def _uses_mode(request: Request, modes: frozenset[str], tasks: frozenset[str] = frozenset()) -> bool:
    """Whether the request's module is compiled in one of ``modes`` (a ``mode`` of its packed config, the
    compile config's: a Jacobian of an Inductor module, a backward graph, all the same mode), or its case's
    ``task`` is one of ``tasks``."""
    stack: list[Any] = [request.config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("mode") in modes or item.get("task") in tasks:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _uses_inductor(request: Request) -> bool:
    """Whether the request's module compiles with Inductor (:func:`_uses_mode`)."""
    return _uses_mode(request, _INDUCTOR_MODES)


def _read(response: Path, code: int | None, why: str) -> Response:
    if code is None:
        return Response(status="timeout", reason=why)
    if not response.exists():
        return Response(status="failed", reason=why or "the worker wrote no response")
    try:
        return read_response(json.loads(response.read_text(encoding="utf-8")))
    except (ProtocolError, ValueError) as exc:  # ValueError: not JSON
        return Response(status="failed", reason=f"the worker's response cannot be read: {exc}")


#: Status of a request that a forked worker never started because an earlier one in the same process
#: crashed or timed out; the caller runs it again in a fresh process (never recorded).
NOT_RUN = "not-run"


def _answers(pairs: list[tuple[Path, Path]], code: int | None, why: str) -> list[Response]:
    """The responses of one forked process: each answered request's; the first unanswered one takes
    the process's fate (``timeout``, or ``failed`` with ``why``); those after it are :data:`NOT_RUN`."""
    out: list[Response] = []
    culprit = None
    for i, (_, response) in enumerate(pairs):
        if response.exists():
            out.append(_read(response, 0, ""))
        elif culprit is None:
            culprit = i
            out.append(_read(response, code, why or "the worker wrote no response"))
        else:
            out.append(Response(status=NOT_RUN, reason=f"not run: request {culprit} of its worker process ended it"))
    return out


def run_in_workers(requests: Sequence[Request], timeouts: Sequence[float], threads: int,
                   env: dict[str, str] | None = None, cwd: Path | None = None,
                   method: str | None = None) -> list[Response]:
    """Answer ``requests`` in one fresh worker process, in order, and return their responses.

    Forked from the checkout's server when it has one (:func:`server_for`); otherwise each request
    gets its own spawned ``python -m benchtrail.worker``. ``timeouts[i]`` bounds request ``i``.
    A crash, a timeout or a response this side cannot read (e.g. a newer protocol version) becomes a
    response with status ``failed`` or ``timeout`` and a reason; when a forked process ends that way,
    the requests after the one it was answering are :data:`NOT_RUN`. This function does not raise for them. See :func:`run_in_worker` for
    ``threads``, ``env`` and ``cwd``; ``method`` (``fork`` or ``spawn``) overrides :func:`start_method`.
    """
    if not requests:
        return []
    full = _environment(threads, env)
    with tempfile.TemporaryDirectory(prefix="benchtrail-worker-") as tmp:
        pairs = [(Path(tmp, f"request-{i}.json"), Path(tmp, f"response-{i}.json")) for i in range(len(requests))]
        for request, (path, _) in zip(requests, pairs):
            path.write_text(json.dumps(request.to_json()), encoding="utf-8")
        server = server_for(_server_environment(full, env), cwd, method)
        if server is not None:
            try:
                code, why = server.run(pairs, Path(tmp, "worker.log"), full, threads, timeouts, cwd,
                                       any(map(_uses_inductor, requests)),
                                       any(_uses_mode(r, _COMPILING_MODES, _DYNAMO_TASKS) for r in requests))
            except ServerUnavailable as exc:
                code, why = 1, str(exc)
                with _LOCK:
                    _SERVERS.pop(next((k for k, s in _SERVERS.items() if s is server), None), None)
                server.close()
            if code not in (0, None):
                log = Path(tmp, "worker.log")
                tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
                why = why + (": " + " / ".join(tail) if tail else "")
            return _answers(pairs, code, why)
        responses = []
        for (request, response), timeout in zip(pairs, timeouts):
            code, why = _spawn(request, response, timeout, full, cwd)
            responses.append(_read(response, code, why))
        return responses


def run_in_worker(request: Request, timeout_s: float, threads: int,
                  env: dict[str, str] | None = None, cwd: Path | None = None, method: str | None = None) -> Response:
    """Run ``request`` in a fresh worker process and return its response
    (:mod:`benchtrail.worker.protocol`; the worker may be an older commit's, see its compatibility rule).

    The worker runs in its own session so a timeout kills it and the compile subprocesses it
    started. ``threads`` is the worker's torch threads (``OMP_NUM_THREADS`` of a spawned one,
    ``torch.set_num_threads`` of a forked one); ``env`` adds environment variables (read when the job
    runs, e.g. ``TORCHINDUCTOR_CACHE_DIR``; not those torch reads at import); ``cwd`` is the worker's
    working directory (default: ours), which comes first on its ``sys.path``. ``PYTHONPATH`` starts
    with the project root of our working directory (``benchtrail.project.import_root``), then the
    inherited ``PYTHONPATH``, so the worker imports the project's suite and models wherever it runs
    and whether or not the project is installed; a ``PYTHONPATH`` in ``env`` replaces all of that
    (a paired run's arm names its own checkout: ``benchtrail.runner.ab.Arm.env``). ``method``
    (``fork`` or ``spawn``) overrides :func:`start_method`.
    """
    return run_in_workers([request], [timeout_s], threads, env, cwd, method)[0]
