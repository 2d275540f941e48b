"""``benchtrail`` commands that start in milliseconds: a fork server with benchtrail and torch imported.

The workflow harness runs a few dozen ``.venv/bin/benchtrail`` commands per workflow run; each
would spend 1–3 s importing torch. Instead ``.venv/bin/benchtrail`` is a small client
(:data:`CLIENT`) that hands its argv, environment, working directory and standard streams (the file
descriptors themselves, over a Unix socket) to this server. The server forks; the child takes them
over and runs ``benchtrail.cli.app.main(argv)``, exactly what the console script runs, and its exit
code becomes the client's. Each command runs in a fresh fork of the same pristine process, so no
state passes from one command to the next. When the client goes away before the command ends (a
step killed by its timeout) the command gets SIGTERM, which benchtrail turns into an unwinding exit
that kills its worker processes.

Each command's worker server (``python -m benchtrail.worker --serve``, which would import torch, Dynamo and
Inductor again: 5–7 s of CPU per command here) is forked from this server too: a command's ``sys.executable``
is a second client (:data:`PYTHON`, written beside the first) that hands exactly that command line to the
server and execs the real interpreter for any other. The forked server child takes the command's streams,
environment, working directory and the ``sys.path`` that ``python -m`` started there with that
``PYTHONPATH`` would have, then runs :func:`benchtrail.worker.server.main`, as ``python -m`` would. Where
that ``sys.path`` would import another ``benchtrail`` (a base checkout's own worker), the child execs the
real interpreter instead, so such a server is the checkout's own.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

#: The client, written as ``bin/benchtrail`` with the interpreter and socket path filled in.
CLIENT = '''#!{python} -I
import array, json, os, socket, struct, sys
{prologue}s = socket.socket(socket.AF_UNIX)
s.connect({socket!r})
message = json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
                      "bin": os.path.dirname(os.path.abspath(sys.argv[0])), "kind": {kind!r}}}).encode()
socket.send_fds(s, [struct.pack("!I", len(message)) + message], [0, 1, 2])
data = b""
while len(data) < 4:
    chunk = s.recv(4 - len(data))
    if not chunk:
        sys.exit(1)
    data += chunk
sys.exit(struct.unpack("!i", data)[0])
'''
#: The interpreter a command sees as ``sys.executable`` (``bin/.benchtrail-python``): the worker server's
#: command line goes to the server, any other is the real interpreter's.
PYTHON_PROLOGUE = '''if sys.argv[1:] != ["-m", "benchtrail.worker", "--serve"]:
    os.execv({python!r}, [{python!r}, *sys.argv[1:]])
'''
PYTHON = ".benchtrail-python"


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the command and never return."""
    code = 1
    try:
        os.setpgrp()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if request.get("kind") == "worker-server":
            code = _worker_server(request)
            return
        sys.executable = os.path.join(request["bin"], PYTHON)  # its worker server comes here too
        sys.path[0] = request["bin"]  # as for the console script: its own folder first
        sys.argv = [os.path.join(request["bin"], "benchtrail"), *request["argv"]]
        from benchtrail.cli import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a bug: print its traceback as the console script would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


#: ``sys.path`` of ``python -I`` (the standard library and site-packages, with their ``.pth`` files): what a
#: worker server's path holds after its working directory and ``PYTHONPATH`` (set by :func:`serve`).
_SITE_PATH: list[str] = []


def _worker_server(request: dict) -> int:
    """In the forked child, with the command's streams, environment and working directory: become
    ``python -m benchtrail.worker --serve`` started there, or exec it where its ``sys.path`` holds
    another ``benchtrail``."""
    import benchtrail

    entries = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    path = [request["cwd"], *entries]
    ours = Path(benchtrail.__file__).resolve().parent
    if any((Path(p) / "benchtrail" / "__init__.py").is_file() and (Path(p) / "benchtrail").resolve() != ours
           for p in path):
        os.execv(sys.executable, [sys.executable, "-m", "benchtrail.worker", "--serve"])
    sys.path[:] = [*path, *(p for p in _SITE_PATH if p not in path)]
    sys.argv = [str(ours / "worker" / "__main__.py"), "--serve"]
    # read the working directory at import
    for name in ("benchtrail.worker.server", "benchtrail.worker.__main__"):
        sys.modules.pop(name, None)
    from benchtrail.worker.server import main

    return main()


def _watch(conn: socket.socket, pid: int) -> None:
    """Send the child's exit code to the client; SIGTERM the child if the client goes away first."""
    terminated = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            try:
                conn.sendall(struct.pack("!i", code if code >= 0 else 128 - code))
            except OSError:
                pass
            conn.close()
            return
        readable, _, _ = select.select([conn], [], [], 0.05)
        if readable and not terminated and not conn.recv(1, socket.MSG_PEEK):
            os.kill(pid, signal.SIGTERM)
            terminated = True


def serve(path: str) -> None:
    """Accept commands on the Unix socket ``path`` until killed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import torch
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401
    from torch._inductor import cpu_vec_isa

    import benchtrail.cli.app
    import benchtrail.pipeline.measure_stages
    import benchtrail.worker.main  # noqa: F401

    cpu_vec_isa.pick_vec_isa()  # the C++ probe a worker server runs once (cached in the process)
    _SITE_PATH[:] = json.loads(subprocess.run([sys.executable, "-I", "-c",
                                               "import json, sys; print(json.dumps(sys.path))"],
                                              capture_output=True, text=True, check=True).stdout)

    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        try:
            header, fds, _, _ = socket.recv_fds(conn, 4, 3)
            request = json.loads(_recv_exact(conn, struct.unpack("!I", header)[0]))
        except (OSError, ValueError, ConnectionError):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            server.close()
            conn.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        threading.Thread(target=_watch, args=(conn, pid), daemon=True).start()


class CliServer:
    """The server as a subprocess; :meth:`install` writes a ``bin/benchtrail`` client into a folder."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "benchtrail.sock")
        self.process = subprocess.Popen([sys.executable, "-c", f"from tests.helpers.cli_server import serve; "
                                        f"serve({self.socket!r})"], cwd=Path(__file__).resolve().parents[2],
                                        stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        line = self.process.stdout.readline()
        if line.strip() != "ready" or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"the benchtrail fork server did not start: {line!r}")

    def install(self, venv: Path) -> None:
        """Make ``venv/bin/benchtrail`` a client of this server."""
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        client = venv / "bin" / "benchtrail"
        client.write_text(CLIENT.format(python=sys.executable, socket=self.socket, prologue="", kind="cli"))
        client.chmod(0o755)
        python = venv / "bin" / PYTHON
        python.write_text(CLIENT.format(python=sys.executable, socket=self.socket, kind="worker-server",
                                        prologue=PYTHON_PROLOGUE.format(python=sys.executable)))
        python.chmod(0o755)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
