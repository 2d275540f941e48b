#!/usr/bin/env python3
"""Measure uploads to a gs:// store: one blob at a time vs the transfer manager (threads).

Against a local gcp-storage-emulator, not real GCS: the emulator serves one request at a time and
rewrites its whole metadata index on every write, so these figures show the client side and the
emulator, not GCS throughput. Each measurement gets a fresh emulator (empty index).

Workloads: 1,000 artifacts of 1 KiB, and 5 files of 50 MB. Methods:

* sequential: ``Blob.upload_from_filename`` one file after the other, with the same options the store
  uses (``if_generation_match=0``, ``checksum="crc32c"``, ``DEFAULT_RETRY``);
* transfer manager: ``GcsStore.upload_run`` (``transfer_manager.upload_many``, threads), which also
  computes each file's crc32c and compares it with what the server stored.

``--latency-ms N`` puts a small threaded proxy in front of the emulator that waits N ms before
forwarding each request: a modelled network round trip, which is what dominates small uploads to real
GCS and what threads overlap.

Prints a markdown table (count, total MB, seconds, MB/s, files/s); MB = 10^6 bytes.

Usage: python build_tools/benchmarks/measure_upload.py [--workers 8] [--repeat 1] [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import os
import platform
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path

from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from benchtrail.store import open_store
from benchtrail.store.emulator import start_emulator

WORKLOADS = {"1,000 × 1 KiB": (1000, 1024), "5 × 50 MB": (5, 50_000_000)}


def make_files(folder: Path, count: int, size: int) -> list[Path]:
    folder.mkdir(parents=True)
    block = os.urandom(min(size, 1 << 20))
    paths = []
    for i in range(count):
        path = folder / f"artifact-{i:04d}.bin"
        with open(path, "wb") as f:
            left = size
            while left:
                f.write(block[: min(left, len(block))])
                left -= min(left, len(block))
        paths.append(path)
    return paths


def sequential(bucket: str, folder: Path, paths: list[Path]) -> None:
    blobs = storage.Client(project="bench").bucket(bucket)
    for path in paths:
        blobs.blob(f"seq/{path.relative_to(folder).as_posix()}").upload_from_filename(
            str(path), if_generation_match=0, checksum="crc32c", retry=DEFAULT_RETRY)


def transfer_manager(bucket: str, folder: Path, workers: int) -> None:
    open_store(f"gs://{bucket}/ci", max_workers=workers, staging=folder.parent / "staging").upload_run(
        folder, "bench", 1)


@contextlib.contextmanager
def delaying_proxy(upstream: str, latency_s: float):
    """A threaded HTTP proxy to ``upstream`` that sleeps ``latency_s`` before forwarding each request."""
    host, port = upstream.removeprefix("http://").split(":")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def relay(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(latency_s)
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(self.command, self.path, body=body or None,
                         headers={k: v for k, v in self.headers.items() if k.lower() != "connection"})
            response = conn.getresponse()
            payload = response.read()
            conn.close()
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = relay

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def measure(label: str, folder: Path, paths: list[Path], method: str, workers: int,
            latency_s: float) -> float:
    with start_emulator() as emulator, (delaying_proxy(emulator.url, latency_s) if latency_s
                                        else contextlib.nullcontext(emulator.url)) as endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        storage.Client(project="bench").create_bucket("bench")
        start = time.perf_counter()
        if method == "sequential":
            sequential("bench", folder, paths)
        else:
            transfer_manager("bench", folder, workers)
        elapsed = time.perf_counter() - start
        stored = list(storage.Client(project="bench").list_blobs("bench"))
        if len(stored) != len(paths):
            sys.exit(f"{label} {method}: {len(stored)} objects stored, expected {len(paths)}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8, help="transfer manager threads (default 8)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the best is shown (default 1)")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="modelled network round trip added to each request by a proxy (default 0)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="benchtrail-upload-") as tmp:
        for label, (count, size) in WORKLOADS.items():
            folder = Path(tmp, label.replace(" ", "").replace(",", "").replace("×", "x"), "run")
            paths = make_files(folder, count, size)
            for method in ("sequential", f"transfer manager, {args.workers} threads"):
                best = min(measure(label, folder, paths, method, args.workers, args.latency_ms / 1000)
                           for _ in range(args.repeat))
                rows.append((label, method, count, count * size / 1e6, best))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"uploads to gcp-storage-emulator {version('gcp-storage-emulator')} on 127.0.0.1 (not real GCS), "
          f"google-cloud-storage {version('google-cloud-storage')}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, {now}"
          + (f", {args.latency_ms:g} ms added per request by a proxy" if args.latency_ms else ""))
    print()
    print("| workload | method | count | total MB | seconds | MB/s | files/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, method, count, mb, seconds in rows:
        print(f"| {label} | {method} | {count} | {mb:.1f} | {seconds:.2f} | {mb / seconds:.2f} "
              f"| {count / seconds:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
