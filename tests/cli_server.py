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
s = socket.socket(socket.AF_UNIX)
s.connect({socket!r})
message = json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
                      "bin": os.path.dirname(os.path.abspath(sys.argv[0]))}}).encode()
socket.send_fds(s, [struct.pack("!I", len(message)) + message], [0, 1, 2])
data = b""
while len(data) < 4:
    chunk = s.recv(4 - len(data))
    if not chunk:
        sys.exit(1)
    data += chunk
sys.exit(struct.unpack("!i", data)[0])
'''


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
        sys.path[0] = request["bin"]  # as for the console script: its own folder first
        sys.argv = [os.path.join(request["bin"], "benchtrail"), *request["argv"]]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
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
    import matplotlib.pyplot  # noqa: F401  (the dashboard's import cost, paid once)
    import torch  # noqa: F401

    import benchtrail.cli.app  # noqa: F401
    import benchtrail.pipeline.measure  # noqa: F401

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
        self.process = subprocess.Popen([sys.executable, "-c", f"from tests.cli_server import serve; "
                                        f"serve({self.socket!r})"], cwd=Path(__file__).resolve().parents[1],
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
        client.write_text(CLIENT.format(python=sys.executable, socket=self.socket))
        client.chmod(0o755)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
