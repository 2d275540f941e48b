"""Run gcp-storage-emulator (a real HTTP GCS emulator, a test dependency) as a subprocess.

For tests, measurements and replaying a CI run without a bucket: ``STORAGE_EMULATOR_HOST=<Emulator.url>``.
It keeps objects in memory, serves one request at a time, and ignores preconditions such as
``ifGenerationMatch=0`` (the tests' fault proxy enforces it) and XML multipart uploads.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: Listen backlog 128, not http.server's 5: a burst from the transfer manager's threads is queued, not
#: dropped (a dropped SYN is retransmitted only after a second).
_LAUNCH = (
    "import socketserver, sys\n"
    "socketserver.TCPServer.request_queue_size = 128\n"
    "from gcp_storage_emulator.__main__ import main\n"
    "main(sys.argv[1:])\n"
)


#: The emulator listens on the loopback interface only.
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port of ``HOST`` that was free a moment ago."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


@dataclass
class Emulator:
    """A running emulator: ``url`` is what ``STORAGE_EMULATOR_HOST`` should hold."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Terminate (kill after 5 s) and remove the log."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_emulator(timeout_s: float = 30.0) -> Emulator:
    """``gcp-storage-emulator start --in-memory`` on a free port, once it answers HTTP.

    Raises RuntimeError, holding its log: it exited or did not answer within ``timeout_s``.
    """
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="gcs-emulator-", suffix=".log")[1])
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                "start",
                "--host",
                HOST,
                "--port",
                str(port),
                "--in-memory",
                "-q",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://{HOST}:{port}"
    emulator = Emulator(url, process, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/storage/v1/b?project=probe", timeout=2):
                return emulator
        except OSError:  # urllib.error.URLError included: not answering yet
            time.sleep(0.05)
    text = log.read_text(errors="replace")[-4000:]
    emulator.stop()
    raise RuntimeError(f"gcp-storage-emulator did not start on {url} within {timeout_s:g} s:\n{text}")
