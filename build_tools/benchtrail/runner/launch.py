"""Start worker processes for jobs, with a timeout, and collect their responses.

Each job gets a new process, forked from a pre-imported worker server, or, where none can start (an older
checkout, ``BENCHTRAIL_WORKER_START=spawn``), spawned as ``python -m benchtrail.worker``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchtrail.project import import_root
from benchtrail.runner.server_pool import (
    Env,
    Outcome,
    ServerUnavailable,
    WorkerServer,
    kill_group,
    run_leased,
    server_for,
    tail,
)
from benchtrail.suite.definitions import CompileMode, Task
from benchtrail.suite.entry_points import INDUCTOR_MODES
from benchtrail.worker.protocol import ProtocolError, Request, Response, read_response


def pythonpath(*first: str) -> str:
    """A ``PYTHONPATH``: ``first``, then the inherited ``PYTHONPATH``, each path once, empty ones left out."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(dict.fromkeys(p for p in (*first, *inherited) if p))


def worker_pythonpath() -> str:
    """A worker's ``PYTHONPATH``: our working directory's project root, then the inherited one."""
    return pythonpath(str(import_root() or ""))


#: glibc malloc thresholds of every worker and server (``GLIBC_TUNABLES``, read at process start): glibc's
#: adaptive mmap threshold made a process's allocation history decide whether MB-sized tensors fault afresh
#: on every call (docs/statistics.md, "Arms that agree with themselves"). Fixed: under 32 MiB from the heap,
#: up to 256 MiB of freed heap kept. Ours come after the user's (the last value wins).
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"


def _environments(threads: int, env: Env | None) -> tuple[Env, Env]:
    """(worker's, server's) environments: ours, ``OMP_NUM_THREADS``, the project's ``PYTHONPATH``,
    ``GLIBC_TUNABLES``, then ``env``; the server's lacks what ``env`` adds but its ``PYTHONPATH``."""
    tunables = ":".join(filter(None, (os.environ.get("GLIBC_TUNABLES"), MALLOC_TUNABLES)))
    full = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONPATH": worker_pythonpath(),
        "GLIBC_TUNABLES": tunables,
        **(env or {}),
    }
    if not full["PYTHONPATH"]:
        del full["PYTHONPATH"]  # an empty entry would put the worker's working directory on sys.path twice
    return full, {k: v for k, v in full.items() if k == "PYTHONPATH" or k not in (env or {})}


def _server(env: Env | None, cwd: Path | None) -> WorkerServer | None:
    """The server that workers of this checkout fork from."""
    return server_for(_environments(1, env)[1], cwd)


def can_fork(env: Env | None = None, cwd: Path | None = None) -> bool:
    """Whether workers of this checkout start by fork."""
    return _server(env, cwd) is not None


def features_of(env: Env | None, cwd: Path | None) -> tuple[str, ...]:
    """The protocol features this checkout's worker server greets with; none where workers are spawned."""
    return server.features if (server := _server(env, cwd)) else ()


def _spawn(request: Path, response: Path, timeout_s: float, env: Env, cwd: Path | None) -> Outcome:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchtrail.worker", str(request), str(response)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.communicate()
        return None, f"worker did not finish within {timeout_s:g} s"
    except BaseException:  # Ctrl-C or SIGTERM (the CLI's handler): never leave a worker behind
        kill_group(proc.pid)
        proc.wait()
        raise
    code = proc.returncode
    why = "" if code == 0 else f"worker exited with code {code}: " + tail(output.decode("utf-8", "replace"))
    return code, why


#: Compile modes that run Inductor's C++ toolchain, by value.
_INDUCTOR_MODES = frozenset(m.value for m in (*INDUCTOR_MODES, CompileMode.AOT_INDUCTOR))


#: Compile modes that compile (Dynamo, export, Inductor), by value: all but eager.
_COMPILING_MODES = frozenset(m.value for m in CompileMode if m is not CompileMode.EAGER)
#: Tasks whose worker imports Dynamo even for an eager module (``torch.func``'s Jacobians do).
_DYNAMO_TASKS = frozenset({Task.JACOBIAN.value})


def _uses_mode(config: Any, modes: frozenset[str], tasks: frozenset[str] = frozenset()) -> bool:
    """Whether any ``mode`` in a packed request ``config`` (or list of them) is in ``modes``, or its
    ``task`` in ``tasks``."""
    if isinstance(config, dict):
        if config.get("mode") in modes or config.get("task") in tasks:
            return True
        config = list(config.values())
    return isinstance(config, list) and any(_uses_mode(item, modes, tasks) for item in config)


def _read(response: Path, code: int | None = 0, why: str = "") -> Response:
    if code is None:
        return Response("timeout", why)
    if not response.exists():
        return Response("failed", why or "the worker wrote no response")
    try:
        return read_response(json.loads(response.read_text(encoding="utf-8")))
    except (ProtocolError, ValueError) as exc:  # ValueError: not JSON
        return Response("failed", f"the worker's response cannot be read: {exc}")


#: Status of a request that a forked worker never started because an earlier one in the same process
#: crashed or timed out; the caller runs it again in a fresh process (never recorded).
NOT_RUN = "not-run"


def _answers(pairs: list[tuple[Path, Path]], code: int | None, why: str) -> list[Response]:
    """One forked process's responses: the first unanswered request takes the process's fate (``timeout``,
    or ``failed`` with ``why``); those after it are :data:`NOT_RUN`."""
    culprit = next((i for i, (_, response) in enumerate(pairs) if not response.exists()), len(pairs))
    return [
        _read(response)
        if i < culprit
        else _read(response, code, why)
        if i == culprit
        else Response(NOT_RUN, f"not run: request {culprit} of its worker process ended it")
        for i, (_, response) in enumerate(pairs)
    ]


def run_in_workers(
    requests: Sequence[Request],
    timeouts: Sequence[float],
    threads: int,
    env: Env | None = None,
    cwd: Path | None = None,
    method: str | None = None,
) -> list[Response]:
    """Answer ``requests`` in order in one fresh worker process (spawned: one each), ``timeouts[i]`` seconds
    for request ``i``.

    A crash, a timeout or an unreadable response becomes status ``failed`` or ``timeout`` with a reason
    (requests after it in a forked process: :data:`NOT_RUN`); never raises for them. Arguments as for
    :func:`run_in_worker`.
    """
    if not requests:
        return []
    full, server_env = _environments(threads, env)
    with tempfile.TemporaryDirectory(prefix="benchtrail-worker-") as tmp:
        pairs = [
            (Path(tmp, f"request-{i}.json"), Path(tmp, f"response-{i}.json")) for i in range(len(requests))
        ]
        for request, (path, _) in zip(requests, pairs):
            path.write_text(json.dumps(request.to_json()), encoding="utf-8")
        log, server = Path(tmp, "worker.log"), server_for(server_env, cwd, method, lease=True)
        if server is not None:
            configs = [r.config for r in requests]
            compiles = _uses_mode(configs, _COMPILING_MODES, _DYNAMO_TASKS)
            inductor = _uses_mode(configs, _INDUCTOR_MODES)
            try:
                code, why = run_leased(
                    server,
                    server_env,
                    cwd,
                    method,
                    lambda s: s.run(pairs, log, full, threads, timeouts, cwd, inductor, compiles),
                )
            except ServerUnavailable as exc:
                code, why = 1, str(exc)
            if code not in (0, None) and log.exists() and (last := tail(log.read_text(errors="replace"))):
                why += ": " + last
            return _answers(pairs, code, why)
        return [
            _read(response, *_spawn(request, response, timeout, full, cwd))
            for (request, response), timeout in zip(pairs, timeouts)
        ]


def run_in_worker(
    request: Request,
    timeout_s: float,
    threads: int,
    env: Env | None = None,
    cwd: Path | None = None,
    method: str | None = None,
) -> Response:
    """Run ``request`` in a fresh worker process, in its own session so a timeout kills its compilers too.

    ``threads``: torch threads; ``env``: variables read when the job runs (not those torch reads at
    import), a ``PYTHONPATH`` there replacing our project root's; ``cwd``: the worker's working directory,
    first on its ``sys.path`` (default: ours); ``method``: ``fork`` or ``spawn`` as server_pool says.
    """
    return run_in_workers([request], [timeout_s], threads, env, cwd, method)[0]
