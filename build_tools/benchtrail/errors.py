"""The one user-error class. ``cli.main`` is its only catch site (exit code 1)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user: a flag, a file or a value. The message says what to do."""


def suggest(value: str, allowed: Iterable[str]) -> str:
    """Return ' Did you mean 'x'?' for the closest allowed value, or '' when none is close."""
    close = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
