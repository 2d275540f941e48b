"""``BoundedGithubRetry``: PyGithub's ``GithubRetry`` with a cap on every rate-limit wait.

``GithubRetry`` already waits ``Retry-After``, the primary limit's reset or ``secondary_rate_wait``, and
caps the last two at ``max_rate_limit_wait``. This adds: a ``Retry-After`` over the cap raises at once
(urllib3 would retry before GitHub's time); a 429 waits like a 403 rate limit; a POST is repeated only
after a rate limit or a failed connection, never a 5xx or broken read (GitHub may have acted); one
``RetryBudget`` shared by a client's requests; an injectable ``sleep`` (seconds).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from github import GithubRetry
from github.GithubException import GithubException, RateLimitExceededExceedsMaxWait
from urllib3 import Retry
from urllib3.exceptions import InvalidHeader, MaxRetryError, ProtocolError, ReadTimeoutError

#: The statuses GitHub answers a rate limit with.
RATE_LIMIT_STATUSES = frozenset({403, 429})
Sleep = Callable[[float], None]  # waits this many seconds
Clock = Callable[[], float]  # the time, in seconds


class RetryBudget:
    """``seconds`` all retries may take together, waits and requests alike, on ``clock`` from creation."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.deadline = clock() + seconds

    def left(self) -> float:
        """Seconds left; negative once spent."""
        return self.deadline - self.clock()


class RetryBudgetSpent(GithubException):
    """The answer asks for a retry after ``wait`` s, but only ``left`` s (negative: none) of ``budget``
    remain."""

    def __init__(
        self, status: int, data: Any, headers: dict[str, str], *, wait: float, left: float, budget: float
    ) -> None:
        super().__init__(status, data, headers)
        self.wait, self.left, self.budget = wait, left, budget


class BoundedGithubRetry(GithubRetry):
    """``GithubRetry(secondary_rate_wait=s, max_rate_limit_wait=cap, sleep=fn, **urllib3_retry_args)``.

    Waits in seconds; ``max_rate_limit_wait`` None: no cap. ``increment`` raises
    ``RateLimitExceededExceedsMaxWait`` (with ``wait``) over the cap, ``RetryBudgetSpent`` past ``budget``.
    """

    def __init__(
        self, *, sleep: Sleep = time.sleep, budget: RetryBudget | None = None, **kwargs: Any
    ) -> None:
        self.sleep_fn, self.budget = sleep, budget
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> BoundedGithubRetry:
        return super().new(**{"sleep": self.sleep_fn, "budget": self.budget, **kw})

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() == "POST" and status_code not in RATE_LIMIT_STATUSES:
            return False  # a 5xx may come after the comment was created: never post twice
        return super().is_retry(method, status_code, has_retry_after)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> GithubRetry:
        retry = self._increment(method, url, response, error, _pool, _stacktrace)
        if self.budget is None:
            return retry
        wait, left = retry._wait(response), self.budget.left()
        if wait <= left:
            return retry
        if response is None:
            raise MaxRetryError(_pool, url, error)  # as when the retries are used up
        raise RetryBudgetSpent(*self._answer(response, url), wait=wait, left=left, budget=self.budget.seconds)

    def _increment(self, *args: Any) -> GithubRetry:
        """The next retry, as GitHub asks, within the cap (``increment`` without the budget)."""
        method, url, response, error = args[:4]
        if (method or "").upper() == "POST" and isinstance(error, (ReadTimeoutError, ProtocolError)):
            raise error  # the request reached GitHub, which may have acted on it
        if response is None:
            return super().increment(*args)
        retry_after = self._retry_after(response)
        wait = self._reset_wait(response) if retry_after is None else retry_after
        self._check_cap(wait, response, url)
        if response.status == 403 and retry_after is None:
            # Raises MaxRetryError when the retries are used up, before GithubRetry reads the body:
            # the answer then reaches PyGithub with its message.
            Retry.increment(self, *args)
        retry = super().increment(*args)  # MaxRetryError when the retries are used up
        if response.status != 429 or retry_after is not None:
            return retry
        # A 429 without Retry-After: GithubRetry inspects 403s only, so wait as it would for one.
        backoff = max(wait if wait is not None else self.secondary_rate_wait, retry.get_backoff_time())
        self._check_cap(backoff, response, url)
        retry.get_backoff_time = lambda: backoff  # type: ignore[method-assign]  # as GithubRetry does
        return retry

    def sleep(self, response: Any = None) -> None:
        wait = self._wait(response)
        if wait > 0:
            self.sleep_fn(wait)

    def _wait(self, response: Any) -> float:
        """Seconds ``sleep`` waits: a non-zero ``Retry-After`` when respected, else the backoff."""
        respected = self.respect_retry_after_header and response is not None
        return (self._retry_after(response) if respected else None) or self.get_backoff_time()

    # -- helpers -------------------------------------------------------------------------------

    def _retry_after(self, response: Any) -> float | None:
        """Seconds of ``Retry-After`` (delta-seconds or HTTP date); None when absent or unreadable."""
        value = response.headers.get("Retry-After")
        try:
            return None if value is None else float(self.parse_retry_after(value))
        except InvalidHeader:
            return None

    @staticmethod
    def _reset_wait(response: Any) -> float | None:
        """Seconds until ``X-RateLimit-Reset`` plus 1 when ``X-RateLimit-Remaining`` is 0, as
        ``GithubRetry`` computes it; else None."""
        reset = str(response.headers.get("X-RateLimit-Reset", ""))
        if (
            response.status in RATE_LIMIT_STATUSES
            and response.headers.get("X-RateLimit-Remaining") == "0"
            and reset.isdigit()
        ):
            return max(0.0, int(reset) - time.time()) + 1
        return None

    @staticmethod
    def get_content(resp: Any, url: str) -> bytes:  # type: ignore[override]
        """``GithubRetry.get_content``, read once, so errors raised after it still carry GitHub's message."""
        body = getattr(resp, "_benchtrail_body", None)
        if body is None:
            body = resp._benchtrail_body = GithubRetry.get_content(resp, url)
        return body

    def _answer(self, response: Any, url: str | None) -> tuple[int, Any, dict[str, str]]:
        try:
            data = json.loads(self.get_content(response, url or ""))
        except (ValueError, OSError):
            data = None
        return response.status, data, dict(response.headers)

    def _check_cap(self, wait: float | None, response: Any, url: str | None) -> None:
        if wait is not None and self.max_rate_limit_wait is not None and wait > self.max_rate_limit_wait:
            raise RateLimitExceededExceedsMaxWait(*self._answer(response, url), wait=wait)
