"""A pre-imported parent that forks one worker process per job: ``python -m benchtrail.worker --serve``.

Importing torch, Dynamo and Inductor costs 3–6 s on a 2-core runner; the server imports them once
(the compilers only before the first compiled job) and a fork costs tens of ms, as ``multiprocessing``'s
forkserver with preload. Each child still runs one job and exits. Nothing CUDA is initialised here: a
forked child could not use it. A job whose ``PYTHONPATH`` provides a module the server has imported is
refused (it needs a server of its own). The design: docs/architecture.md; the spread between forked
processes: docs/statistics.md, "Worker processes".
"""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
import traceback
from typing import Any, TextIO

#: Version of the server's JSON-lines protocol (the requests inside keep their own version).
SERVER_VERSION = 1
#: The server's working directory, which ``python -m`` put first on ``sys.path``; a child takes its job's.
_START_DIR = os.getcwd()
#: The server's own ``PYTHONPATH`` entries, and the rest of its ``sys.path`` (stdlib, site-packages).
_OWN_ENTRIES = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_OWN_ABSOLUTE = {os.path.abspath(p) for p in _OWN_ENTRIES}  # abspath normalises too
_BASE_PATH = [p for p in sys.path[1:] if os.path.abspath(p) not in _OWN_ABSOLUTE]
#: Names no ``sys.path`` entry can shadow: built into the interpreter, or the running ``__main__``.
_UNSHADOWED = frozenset(sys.builtin_module_names) | {"__main__"}


def top_level_names(entries: list[str]) -> set[str]:
    """Top-level module names the ``sys.path`` folders provide (regular packages, ``.py``, ``.pyc``,
    extension modules; not namespace folders); a file entry (a zip) provides ``*``, any name."""
    names = set()
    for entry in entries:
        if os.path.isfile(entry):
            names.add("*")
            continue
        try:
            items = os.listdir(entry)
        except OSError:
            continue
        for item in items:
            stem, _, suffix = item.partition(".")
            if stem.isidentifier() and (
                (not suffix and os.path.isfile(os.path.join(entry, item, "__init__.py")))
                or suffix in ("py", "pyc")
                or suffix.endswith(("so", "pyd"))
            ):
                names.add(stem)
    return names - _UNSHADOWED


def refusal(entries: list[str] | None, cwd: str | None = None) -> str | None:
    """Why a job with ``PYTHONPATH`` ``entries`` and working directory ``cwd`` cannot fork here, or None."""
    if entries in (None, _OWN_ENTRIES):
        return None
    imported = {name.partition(".")[0] for name in list(sys.modules)} | {"*"}
    clash = sorted(top_level_names([*([cwd] if cwd else []), *entries, *_OWN_ENTRIES]) & imported)
    return (
        (
            f"its PYTHONPATH or the server's provides modules the server has imported "
            f"({', '.join(clash[:5])}); it needs a server of its own"
        )
        if clash
        else None
    )


def _preload() -> None:
    """Import what every job needs; none of it starts a thread that a fork would lose, or CUDA."""
    import torch
    import torch.export  # noqa: F401

    import benchtrail.worker.main  # noqa: F401


@functools.cache
def _preload_compilers() -> None:
    """Import Dynamo and Inductor (about 4 s on a 2-vCPU runner) before the first compiled job, so compile
    times never include them (``METHOD_VERSION`` 2)."""
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401

    gc.freeze()  # as after _preload: the new modules' objects out of the children's collector


@functools.cache
def _probe_inductor() -> None:
    """Let Inductor probe the C++ compiler and vector ISA (about 2 s) once, before the first Inductor job;
    every later child inherits the cached answer."""
    try:
        from torch._inductor import cpu_vec_isa

        cpu_vec_isa.pick_vec_isa()
    except Exception:
        pass


def _child(job: dict[str, Any], channel: int) -> int:
    """Run one job in a forked child; exit code 0 unless the response files could not be written."""
    os.close(channel)
    os.setsid()
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    if job.get("env") is not None:  # the job's whole environment, not the server's
        os.environ.clear()
        os.environ.update(job["env"])
    cwd = job.get("cwd")
    if job.get("pythonpath") not in (None, _OWN_ENTRIES):  # another checkout's (refusal)
        sys.path[:] = [cwd or _START_DIR, *job["pythonpath"], *_BASE_PATH]
    if cwd:  # the job's working directory, first on sys.path as for `python -m` started there
        if sys.path and sys.path[0] == _START_DIR:
            sys.path[0] = cwd
        os.chdir(cwd)
    import torch

    from benchtrail.worker.main import answer, release_modules

    if threads := job.get("threads"):
        torch.set_num_threads(int(threads))
    for paths in job["jobs"]:  # [request path, response path]
        answer(*paths)
    release_modules()
    return 0


def serve(stdin: TextIO, channel: int) -> int:
    """Greet on ``channel`` (a file descriptor), then fork a child for each job line read from ``stdin``.

    JSON lines (end of input stops the server)::

        server → runner, once: {"server": SERVER_VERSION, "pid", "served_versions": [1, ...], "features"?}
        runner → server:       {"jobs": [[request path, response path], ...], "log", "env", "threads",
                                "cwd"?, "pythonpath"? (entries for the child's sys.path), "inductor"?,
                                "compiles"? (default true: import Dynamo and Inductor before forking)}
        server → runner:       {"pid"}, then {"pid", "returncode"}; or {"refused": reason}, nothing forked
    """
    from benchtrail.worker.protocol import FEATURES, SERVED_VERSIONS

    def say(message: dict[str, Any]) -> None:
        os.write(channel, (json.dumps(message) + "\n").encode())

    _preload()
    # Move every object the imports made out of the collector's reach, so a child's gc.collect()
    # does not touch (and copy) the whole inherited heap (CPython's gc.freeze docs: "before a POSIX
    # fork() call, to make the GC copy-on-write friendly").
    gc.freeze()
    say(
        {
            "server": SERVER_VERSION,
            "pid": os.getpid(),
            "served_versions": list(SERVED_VERSIONS),
            "features": list(FEATURES),
        }
    )
    for line in stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if job.get("compiles", True):  # a runner from before the key: as before, everything imported
            _preload_compilers()
        if job.get("inductor"):
            _probe_inductor()
        # After the imports above: they are the child's too.
        if why := refusal(job.get("pythonpath"), job.get("cwd")):
            say({"refused": why})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(job, channel)
            except BaseException:  # the child must never return into the server's loop
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        say({"pid": pid})
        _, status = os.waitpid(pid, 0)
        say({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
    return 0


def main() -> int:
    """Entry point of ``--serve``: stdout becomes the channel; anything printed goes to stderr."""
    channel = os.dup(1)
    os.dup2(2, 1)
    return serve(sys.stdin, channel)
