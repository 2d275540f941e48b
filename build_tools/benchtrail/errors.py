"""The one user-error class (and its store subclass). ``cli.main`` is its catch site (exit code 1);
``compare --store`` also catches ``StoreError`` to compare without a baseline."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user: a flag, a file or a value. The message says what to do."""


class StoreError(UserError):
    """A store could not be reached or read: network or server errors still failing at the deadline,
    a missing bucket, no permission or no credentials; the message names the bucket. A ``UserError``
    everywhere, except that ``benchtrail compare --store`` catches it and compares without a baseline."""


def suggest(value: str, allowed: Iterable[str]) -> str:
    """Return ' Did you mean 'x'?' for the closest allowed value, or '' when none is close."""
    close = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
