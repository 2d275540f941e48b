"""A pre-imported parent for worker processes: ``python -m benchtrail.worker --serve``.

Starting ``python -m benchtrail.worker`` costs an ``import torch`` (with Dynamo and Inductor, 3–6 s on
a 2-core runner) before the first sample. This server imports them once (Dynamo and Inductor before
the first job whose module is compiled: a server of eager jobs never pays for them) and forks one child
per job, so a fresh worker process costs a fork (tens of milliseconds; the same idea as ``multiprocessing``'s
forkserver with ``set_forkserver_preload``, and Android's zygote). Each child is still a new process
that runs its job and exits, so caches, allocator state and Dynamo's counters do not leak between
jobs; it differs from a spawned worker in sharing the server's address-space layout and string hash
seed (docs/statistics.md, "Worker processes", says what that does to the spread between processes).
Nothing CUDA is initialised here: CUDA cannot be used in a forked child of a process that did.

The runner (``benchtrail.runner.workers``) talks to the server in JSON lines; stdout is the
protocol channel and nothing else writes to it (the server's own ``print``s go to stderr)::

    server → runner, once:  {"server": SERVER_VERSION, "pid": int, "served_versions": [1, ...],
                             "features": ["duet", ...] (what its worker does beyond its versions; optional)}
    runner → server, a job: {"jobs": [[request path, response path], ...], "log": path,
                             "env": {name: value} (the whole environment), "threads": int,
                             "cwd": path (the working directory; optional),
                             "pythonpath": [entry, ...] (the job's PYTHONPATH, to put on the child's
                             sys.path; optional: absent, the child keeps the server's),
                             "inductor": bool (a job compiles with Inductor; optional),
                             "compiles": bool (a job's module is compiled, any mode but eager, or its
                             task imports Dynamo, the Jacobian; optional, default true: Dynamo and
                             Inductor are imported before forking it)}
    server → runner:        {"pid": child pid}   then, when it has exited:   {"pid": int, "returncode": int}
                            or, for a job it cannot take:   {"refused": reason} (nothing forked)

One server serves the jobs of several checkouts (``features`` lists ``pythonpath``): a job whose
``pythonpath`` differs from the server's own ``PYTHONPATH`` gets a child whose ``sys.path`` is the job's
working directory, the job's entries, then the server's path less its own entries (stdlib, site-packages):
the path ``python -m`` would start with there. What the server imported before the fork cannot be
imported again from the job's entries, so a job whose entries (or the server's own) provide a top-level
module the server has imported (``benchtrail`` of another checkout, a second ``torch``) is refused; the
runner then starts a server for that ``PYTHONPATH`` alone (``benchtrail.runner.servers``).

A job's child starts its own session (the runner kills the whole group on a timeout), sends its
output to ``log``, sets ``env``, its working directory (also first on ``sys.path``, so one server
serves every working directory of a checkout) and ``torch.set_num_threads(threads)``, and answers each
request in turn in one process (:func:`benchtrail.worker.main.answer`, which builds each module once). End of
input stops the server. A checkout from before this module answers ``--serve`` with an error exit
and no greeting; the runner then spawns ``python -m benchtrail.worker`` per job as before.
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
    """The top-level module names that the ``sys.path`` entries (folders) provide: regular packages (a folder
    with ``__init__.py``; a namespace folder never shadows a module), ``.py`` and ``.pyc`` files and extension
    modules; an entry that is a file (a zip) provides ``*``, as any name; unreadable entries provide none."""
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
                    or suffix in ("py", "pyc") or suffix.endswith(("so", "pyd"))):
                names.add(stem)
    return names - _UNSHADOWED


def refusal(entries: list[str] | None, cwd: str | None = None) -> str | None:
    """Why a job with ``PYTHONPATH`` ``entries`` (and working directory ``cwd``, first on its ``sys.path``)
    cannot be forked from this server (module docstring), or None."""
    if entries in (None, _OWN_ENTRIES):
        return None
    imported = {name.partition(".")[0] for name in list(sys.modules)} | {"*"}
    clash = sorted(top_level_names([*([cwd] if cwd else []), *entries, *_OWN_ENTRIES]) & imported)
    return (f"its PYTHONPATH or the server's provides modules the server has imported "
            f"({', '.join(clash[:5])}); it needs a server of its own") if clash else None


def _preload() -> None:
    """Import what every job needs; none of it starts a thread that a fork would lose, or CUDA."""
    import torch
    import torch.export  # noqa: F401

    import benchtrail.worker.main  # noqa: F401


@functools.cache
def _preload_compilers() -> None:
    """Import Dynamo and Inductor (about 4 s on a 2-vCPU runner), once, before the first job whose module is
    compiled (any compile mode but eager): a server whose jobs are all eager never pays for them, and a
    compiled module's compile time never includes importing them (``METHOD_VERSION`` 2)."""
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401

    gc.freeze()  # as after _preload: the new modules' objects out of the children's collector


@functools.cache
def _probe_inductor() -> None:
    """Inductor probes the C++ compiler and the CPU's vector ISA once per process (g++ runs, a test
    build; about 2 s): do it here, once, before the first job that compiles with Inductor. It caches
    its answer in the process (functools), so every later child inherits it; a machine without a
    compiler fails later, in the job that needs one."""
    try:
        from torch._inductor import cpu_vec_isa

        cpu_vec_isa.pick_vec_isa()
    except Exception:
        pass


def _child(job: dict[str, Any], channel: int) -> int:
    """Run one job in a forked child; the exit code (0 unless the response files could not be written)."""
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
    """Greet on ``channel`` (a file descriptor), then fork a child for each job read from ``stdin``."""
    from benchtrail.worker.protocol import FEATURES, SERVED_VERSIONS

    def say(message: dict[str, Any]) -> None:
        os.write(channel, (json.dumps(message) + "\n").encode())

    _preload()
    # Move every object the imports made out of the collector's reach, so a child's gc.collect()
    # does not touch (and copy) the whole inherited heap (CPython's gc.freeze docs: "before a POSIX
    # fork() call, to make the GC copy-on-write friendly").
    gc.freeze()
    say({"server": SERVER_VERSION, "pid": os.getpid(), "served_versions": list(SERVED_VERSIONS),
         "features": list(FEATURES)})
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
            except BaseException:  # noqa: B036 - the child must never return into the server's loop
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
