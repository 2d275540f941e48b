"""GCS test fixtures: the real gcp-storage-emulator, a bucket per test, and a fault-injecting proxy.

tests/conftest.py registers this module as a plugin (``pytest_plugins``): its fixtures need no import.

``FaultProxy`` is a small threaded HTTP proxy in front of the emulator. It forwards every request
unchanged, except that it

* answers a chosen status (503, 429, …) to the first N matching requests, or to all of them;
* drops the connection of matching requests: after reading the request, after forwarding it (the
  response is lost), or half-way through the body (half the body reaches the emulator);
* adds an item to an object listing (a name the emulator itself would refuse to store, such as one
  with a ``..`` segment: what a hostile or foreign bucket could hold);
* enforces ``ifGenerationMatch=0`` on uploads (412 when the object exists), which the emulator ignores;
* calls a test's function with a matching request's body before forwarding it (``"before"``: e.g. a
  forger who creates an object just before a client's upload of it).

Every request is logged as ``(method, path with query, outcome)``, the outcome being the status sent
or ``"dropped"``.
"""

from __future__ import annotations

import email.parser
import http.client
import json
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from benchtrail.store.emulator import Emulator, start_emulator

#: google-cloud-storage's retry policy with short backoff, so fault tests take seconds.
FAST_RETRY = DEFAULT_RETRY.with_delay(initial=0.02, maximum=0.2, multiplier=2.0)

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
               "upgrade",
               "content-length"}


@dataclass
class Fault:
    """What the proxy does to requests whose path starts with ``path_prefix`` (and method is in ``methods``).

    ``kind``: ``"status"`` (answer ``status``), ``"drop"`` (close without answering), ``"drop-response"``
    (forward, then close without relaying the answer), ``"drop-mid-body"`` (forward half the body,
    then close both connections), ``"list-item"`` (add ``item`` to the ``items`` of a JSON listing) or
    ``"before"`` (call ``callback(body)``, then go on as without a fault). ``times``: how many requests it
    hits (None: all).
    """

    kind: str
    status: int = 503
    item: dict | None = None
    callback: Callable[[bytes], None] | None = None
    times: int | None = None
    path_prefix: str = "/upload/"
    methods: tuple[str, ...] = ("POST", "PUT")
    hits: int = 0

    def takes(self, method: str, path: str) -> bool:
        if method not in self.methods or not path.startswith(self.path_prefix):
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


@dataclass
class FaultProxy:
    """The proxy (see the module docstring): ``add`` faults, ``start``, point a client at ``url``, read ``log``."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, int | str]] = field(default_factory=list)
    enforce_create_only: bool = True
    upstream_answers_to_partial_bodies: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, kind: str, **kwargs) -> Fault:
        fault = Fault(kind, **kwargs)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()

    def outcomes(self, path_prefix: str = "/upload/") -> list[int | str]:
        with self.lock:
            return [o for _, p, o in self.log if p.startswith(path_prefix)]

    def _record(self, method: str, path: str, outcome: int | str) -> None:
        with self.lock:
            self.log.append((method, path, outcome))

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self.lock:
            return next((f for f in self.faults if f.takes(method, path)), None)

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while (size := int(self.rfile.readline().strip() or b"0", 16)):
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                    return data
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                path = urlsplit(self.path).path
                fault = proxy._fault_for(self.command, path)
                if fault and fault.kind == "drop-mid-body":
                    return self._drop_mid_body()
                body = self._body()
                if fault and fault.kind == "before":
                    fault.callback(body)
                if fault and fault.kind == "status":
                    return self._answer(path, fault.status, {"error": {"code": fault.status,
                                                                       "message": f"injected {fault.status}"}})
                if fault and fault.kind == "drop":
                    proxy._record(self.command, self.path, "dropped")
                    self.close_connection = True
                    return None
                if proxy.enforce_create_only and self._exists_but_must_not(path, body):
                    return self._answer(path, 412, {"error": {"code": 412, "message":
                                        "At least one of the pre-conditions you specified did not hold."}})
                status, headers, payload = self._forward(body)
                if fault and fault.kind == "drop-response":
                    proxy._record(self.command, self.path, "dropped")
                    self.close_connection = True
                    return None
                if fault and fault.kind == "list-item" and status == 200:
                    listing = json.loads(payload)
                    listing["items"] = [*(listing.get("items") or []), fault.item]
                    payload = json.dumps(listing).encode()
                # Recorded before the answer is sent: a client that has its answer finds it in the log.
                proxy._record(self.command, self.path, status)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return None

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def _answer(self, path: str, status: int, obj: dict) -> None:
                payload = json.dumps(obj).encode()
                proxy._record(self.command, self.path, status)  # before the answer, as in _handle
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _upstream(self) -> http.client.HTTPConnection:
                parts = urlsplit(proxy.upstream)
                return http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                conn = self._upstream()
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    response = conn.getresponse()
                    return response.status, response.getheaders(), response.read()
                finally:
                    conn.close()

            def _drop_mid_body(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                half = self.rfile.read(length // 2)
                parts = urlsplit(proxy.upstream)
                with socket.create_connection((parts.hostname, parts.port), timeout=30) as upstream:
                    head = f"{self.command} {self.path} HTTP/1.1\r\n" + "".join(
                        f"{k}: {v}\r\n" for k, v in self.headers.items() if k.lower() != "connection"
                    ) + "Connection: close\r\n\r\n"
                    upstream.sendall(head.encode("latin-1") + half)
                    upstream.shutdown(socket.SHUT_WR)  # the emulator reads a short body, then EOF
                    answer = b"".join(iter(lambda: upstream.recv(65536), b"")).decode("latin-1")
                with proxy.lock:
                    proxy.upstream_answers_to_partial_bodies.append(answer)
                proxy._record(self.command, self.path, "dropped")
                self.close_connection = True

            def _exists_but_must_not(self, path: str, body: bytes) -> bool:
                query = parse_qs(urlsplit(self.path).query)
                if self.command != "POST" or query.get("ifGenerationMatch") != ["0"]:
                    return False
                if not path.startswith("/upload/storage/v1/b/"):
                    return False
                bucket = path.split("/")[5]
                name = (query.get("name") or [None])[0] or _object_name(self.headers.get("Content-Type", ""),
                                                                        body)
                conn = self._upstream()
                try:
                    conn.request("GET", f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}")
                    response = conn.getresponse()
                    response.read()
                    return response.status == 200
                finally:
                    conn.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()


def _object_name(content_type: str, body: bytes) -> str:
    """The object name in an upload request's metadata (JSON body, or first part of multipart/related)."""
    if content_type.startswith("multipart/"):
        message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode()
                                                        + b"\r\n\r\n" + body)
        return json.loads(message.get_payload()[0].get_payload())["name"]
    return json.loads(body or b"{}")["name"]


@pytest.fixture(scope="session")
def gcs_emulator() -> Emulator:
    """One gcp-storage-emulator subprocess for the session (in memory, on a free port)."""
    emulator = start_emulator()
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def gcs_env(gcs_emulator, monkeypatch, tmp_path):
    """Point google-cloud-storage at the emulator (anonymous) and the store's staging at ``tmp_path``."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    monkeypatch.setenv("BENCHTRAIL_STAGING", str(tmp_path / "staging"))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    return gcs_emulator


@pytest.fixture
def gcs_bucket(gcs_env) -> str:
    """A new, empty bucket in the emulator; its name."""
    name = f"bt-{uuid.uuid4().hex[:12]}"
    storage.Client(project="test").create_bucket(name)
    return name


@pytest.fixture
def fault_proxy(gcs_emulator, gcs_bucket, monkeypatch):
    """A ``FaultProxy`` in front of the emulator; ``STORAGE_EMULATOR_HOST`` points at the proxy."""
    proxy = FaultProxy(upstream=gcs_emulator.url).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    try:
        yield proxy
    finally:
        proxy.stop()

