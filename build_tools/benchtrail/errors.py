"""The user-error class, its store subclass, and the exit codes (README "Exit codes")."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: 0 ok; 1 user or input error; 2 some benchmarks (or module compilations) failed; 3 a regression that no
#: ``benchmarks-accept:`` trailer accepts (``compare``/``ab --fail-on regressed``; ``gate``: a confirmed one);
#: 4 a runner check failed (only ``doctor``; warnings exit 0).
EXIT_OK, EXIT_USER_ERROR, EXIT_BENCHMARKS_FAILED, EXIT_REGRESSION, EXIT_CHECK_FAILED = 0, 1, 2, 3, 4


#: The extra (pyproject.toml) and the package that pip installs for each top-level module the base lacks.
EXTRAS = {
    "google": ("gcs", "google-cloud-storage"),
    "github": ("github", "PyGithub"),
    "plotly": ("dashboard", "plotly"),
    "ruptures": ("track", "ruptures"),
}


def missing_extra(exc: ModuleNotFoundError) -> str:
    """What to install for the module ``exc`` misses; re-raises ``exc`` when no extra installs it."""
    top = (exc.name or "").partition(".")[0]
    if top not in EXTRAS:
        raise exc
    extra, package = EXTRAS[top]
    return f'the {extra} extra: pip install {package} (or "benchtrail[{extra}]"; docs/adopting.md, "Install")'


class UserError(Exception):
    """Bad input from the user: a flag, a file or a value. The message says what to do."""


class StoreError(UserError):
    """A store unreachable or unreadable at the deadline (network, no bucket, permission, credentials); the
    message names the bucket. ``compare --store`` catches it and compares without a baseline."""


def suggest(value: str, allowed: Iterable[str]) -> str:
    """Return ' Did you mean 'x'?' for the closest allowed value, or '' when none is close."""
    close = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
