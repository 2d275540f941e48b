"""Fault injection for the local GitHub server (``tests/helpers/github_server.py``): what it records and
what it breaks.

``Request`` is one request as the server saw it (``GitHubServer.requests``); ``FAILURES`` holds the
error answers ``GitHubServer.fail`` injects (``FailureOrder`` is one such order); ``Gate`` holds
requests at the server until the test releases them (``GitHubServer.hold``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

DOCS = "https://docs.github.com/rest"

FAILURES: dict[str, tuple[int, dict[str, str], dict[str, Any]]] = {
    "read-only": (403, {}, {"message": "Resource not accessible by integration",
                            "documentation_url": f"{DOCS}/issues/comments#create-an-issue-comment",
                            "status": "403"}),
    "validation": (422, {}, {"message": "Validation Failed", "status": "422",
                             "errors": [{"resource": "IssueComment", "code": "unprocessable",
                                         "field": "data", "message": "Body is invalid"}],
                             "documentation_url": f"{DOCS}/issues/comments#create-an-issue-comment"}),
    "secondary-rate-limit": (403, {"Retry-After": "1"}, {
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you "
                   "try again. If you reach out to GitHub Support for help, please include the "
                   "request ID 0000:0000:0000000:0000000:00000000.",
        "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
        "status": "403"}),
    "secondary-rate-limit-429": (429, {}, {
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you "
                   "try again.",
        "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
        "status": "429"}),
    "primary-rate-limit": (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "4102444800"}, {
        "message": "API rate limit exceeded for installation ID 1.",
        "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api#about-primary-rate-limits",
        "status": "403"}),
    "unavailable": (503, {"Retry-After": "3600"}, {"message": "Service Unavailable"}),
}


@dataclass
class Request:
    """One request as the server saw it; ``json`` is the decoded body (None when empty)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Any
    status: int = 0


@dataclass
class FailureOrder:
    method: str
    path: str
    kind: str
    times: int
    headers: dict[str, str | None]


@dataclass
class Gate:
    """Requests held at the server until released (``GitHubServer.hold``); ``held`` counts them."""

    method: str
    path: str
    skip: int
    times: int
    held: int = 0
    _events: list[threading.Event] = field(default_factory=list)
    _arrival: threading.Condition = field(default_factory=threading.Condition)

    def _take(self) -> threading.Event | None:
        """The event a matching request waits on, or None (skipped or past ``times``); under the server lock."""
        if self.skip > 0:
            self.skip -= 1
            return None
        if self.times <= 0:
            return None
        self.times -= 1
        event = threading.Event()
        with self._arrival:
            self._events.append(event)
            self.held += 1
            self._arrival.notify_all()
        return event

    def wait_arrived(self, n: int = 1, timeout_s: float = 60.0) -> None:
        """Return once ``n`` requests are held (or were held and released).

        Raises:
            AssertionError: fewer arrived within ``timeout_s`` seconds (the client never sent them).
        """
        with self._arrival:
            if not self._arrival.wait_for(lambda: self.held >= n, timeout_s):
                raise AssertionError(f"{self.method} {self.path}: {self.held} request(s) held, expected {n}")

    def release(self, index: int | None = None) -> None:
        """Let held request ``index`` (0-based, in arrival order) be answered; None: all of them."""
        with self._arrival:
            for event in self._events if index is None else [self._events[index]]:
                event.set()

