"""Start worker processes for jobs, with a timeout, and collect their responses.

A worker process is forked from a pre-imported server (:mod:`benchtrail.worker.server`, one per
checkout, or one shared by checkouts that import the same benchtrail and torch, started on first use:
:mod:`benchtrail.runner.servers`), or, where the server cannot start (a checkout from before it,
``BENCHTRAIL_WORKER_START=spawn``), spawned as ``python -m benchtrail.worker`` per job. Either way each
job gets a new process; a forked one skips the ``import torch``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any
from pathlib import Path

from benchtrail.project import import_root
# WorkerServer, close_servers, kill_live_workers and start_method are used from here too (ab, detector, tests)
from benchtrail.runner.servers import (ServerUnavailable, WorkerServer, close_servers, kill_live_workers,  # noqa: F401
                                       run_leased, server_for,
                                       start_method)
from benchtrail.suite.definitions import CompileMode, Task
from benchtrail.suite.entry_points import INDUCTOR_MODES
from benchtrail.worker.protocol import ProtocolError, Request, Response, read_response


def worker_pythonpath(start: Path = Path(".")) -> str:
    """``PYTHONPATH`` of a worker: the project root of ``start`` (``benchtrail.project.import_root``)
    first, then the inherited ``PYTHONPATH`` (without repeating the root); empty when both are."""
    root = import_root(start)
    paths = [str(root)] if root else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join(paths)


#: glibc malloc thresholds of every worker and server (``GLIBC_TUNABLES``, read when a process starts, so a base
#: arm's worker from before this change gets them too). glibc's defaults adjust the mmap threshold to the size of
#: the largest mmapped chunk freed so far, so a process's allocation history decides whether an MB-sized tensor
#: is served from the heap or mmapped and page-faulted afresh on every call (2 MiB: 513 faults, 5x the time);
#: every worker forked from one server replays one history, so a whole paired arm measured 3x slow (issue 38).
#: Fixed thresholds (setting one turns the adjustment off) serve everything under 32 MiB from the heap and
#: keep up to 256 MiB of freed heap. The user's own tunables are kept, ours after them (the last value wins).
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"


def _environment(threads: int, env: dict[str, str] | None) -> dict[str, str]:
    """The worker's environment: ours, ``OMP_NUM_THREADS``, the project's ``PYTHONPATH``, ``GLIBC_TUNABLES``
    (:data:`MALLOC_TUNABLES`), then ``env``."""
    tunables = ":".join(t for t in (os.environ.get("GLIBC_TUNABLES"), MALLOC_TUNABLES) if t)
    full = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": worker_pythonpath(),
            "GLIBC_TUNABLES": tunables, **(env or {})}
    if not full["PYTHONPATH"]:
        del full["PYTHONPATH"]  # an empty entry would put the worker's working directory on sys.path twice
    return full


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
        server_env = _server_environment(full, env)
        server = server_for(server_env, cwd, method, lease=True)
        if server is not None:
            try:
                compiles = any(_uses_mode(r, _COMPILING_MODES, _DYNAMO_TASKS) for r in requests)
                code, why = run_leased(server, server_env, cwd, method, lambda s: s.run(
                    pairs, Path(tmp, "worker.log"), full, threads, timeouts, cwd, any(map(_uses_inductor, requests)),
                    compiles))
            except ServerUnavailable as exc:
                code, why = 1, str(exc)
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
