"""argparse types of the CLI's flags: whole numbers, seconds, run keys, run ids, commit SHAs, repository
names and paths. Not here: ``presets`` and ``metric_names``, the types of cli/options.py's parents (which
``benchtrail --help`` builds without this module), and evaluate-detector's own types (cli/detector.py).

Each type raises ``ArgumentTypeError`` (argparse prints ``argument --flag: <message>`` and exits 1). Imports
no third-party package: the command families declare their flags with it.
"""

from __future__ import annotations

import math
import re
from argparse import ArgumentTypeError
from collections.abc import Callable
from pathlib import Path

from benchtrail.errors import UserError

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


# -- numbers -------------------------------------------------------------------------------------


def whole_number(
    minimum: int, expected: str | None = None, *, show_number: bool = False
) -> Callable[[str], int]:
    """argparse type: digits only, at least ``minimum``; else ``expected <expected>, got '<text>'`` (default
    ``a whole number from <minimum>``; ``show_number``: a number below ``minimum`` unquoted)."""
    wanted = expected or f"a whole number from {minimum}"

    def parse(text: str) -> int:
        if not text.isdigit():
            raise ArgumentTypeError(f"expected {wanted}, got {text!r}")
        if int(text) < minimum:
            shown = int(text) if show_number else repr(text)
            raise ArgumentTypeError(f"expected {wanted}, got {shown}")
        return int(text)

    return parse


#: ``--attempt`` of a run (``GITHUB_RUN_ATTEMPT``), from 1.
attempt = whole_number(1, "a whole number from 1 (GITHUB_RUN_ATTEMPT)")
#: ``--attempt`` of ``upload`` and ``fetch``, from 1.
store_attempt = whole_number(1, "an attempt number (a whole number from 1)")
#: ``--max-commits``: first-parent commits, from 1.
max_commits = whole_number(1, "a whole number of commits from 1")
#: ``--pr``: a pull request number, from 1.
pr_number = whole_number(1, "a PR number (a whole number from 1)")


def run_key(text: str) -> tuple[int, int]:
    """argparse type: ``ID/ATTEMPT`` (whole numbers from 1) as a tuple."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ArgumentTypeError(f"expected RUN_ID/ATTEMPT, e.g. 1234/1, got {text!r}")
    return tuple(map(int, parts))


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0 (a budget)."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < math.inf:
        raise ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def deadline_seconds(text: str) -> float:
    """argparse type: seconds > 0, ``inf`` included (a retry deadline: ``inf`` never gives up)."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


# -- names and paths -----------------------------------------------------------------------------


def run_id(text: str) -> str:
    """argparse type: a run id (the store's ``check_id`` rule)."""
    from benchtrail.store.base import check_id

    try:
        return check_id(text, "run id")
    except UserError as exc:
        raise ArgumentTypeError(str(exc)) from None


def commit_sha(text: str) -> str:
    """argparse type: a full 40- or 64-hex-digit commit SHA, lowercased."""
    from benchtrail.git import FULL_SHA

    if not FULL_SHA.fullmatch(text):
        raise ArgumentTypeError(f"expected a full 40- or 64-hex-digit commit SHA, got {text!r}")
    return text.lower()


def repo_name(text: str) -> str:
    """argparse type: a GitHub repository ``OWNER/NAME``."""
    if not _REPO.fullmatch(text):
        raise ArgumentTypeError(f"expected OWNER/NAME, got {text!r}")
    return text


def path_argument(text: str) -> Path:
    """A path flag's value; an empty one (``--output ''``) is refused rather than read as ``.``."""
    if not text.strip():
        raise ArgumentTypeError("empty path; give a file or folder name")
    return Path(text)


def check_output_dir(out_dir: Path) -> None:
    """Refuse an ``--output-dir`` that exists and is not a folder (a ``UserError`` naming flag and path)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--output-dir {out_dir} is a file; give a folder (new, or one that exists)")
