"""The rules for names, and the slug every file or object path made from a name uses.

An adopter's names may hold any printable text (``/``, ``..``, spaces, non-ASCII); only the empty name
and control characters are refused. Paths use ``slug(name)``, never the name. benchtrail's own suite
and every preset name keep ``SAFE_NAME`` (presets are typed in the PR trailer).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from benchtrail.errors import UserError

#: Path-safe names: safe as one path segment and in gcloud URLs (no wildcard ``[]*?``); ``..`` is
#: refused separately. benchtrail's own suite and every preset name follow it.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: What any other name may hold, in words (the message of :func:`name_problem`).
NAME_RULE = "any printable text, at least one character, without control characters or line breaks"
#: The longest name :func:`slug` keeps as it is.
MAX_SLUG_NAME = 80
#: Characters of the readable prefix of a hashed slug.
_SLUG_PREFIX = 40


class BadName(UserError, ValueError):
    """A name that breaks ``NAME_RULE``, or a preset name that breaks ``SAFE_NAME``."""


def name_problem(name: object) -> str | None:
    """Why ``name`` breaks ``NAME_RULE``, or None; control characters (Unicode Cc, U+2028, U+2029) are
    named by code point."""
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"it holds the control character U+{ord(ch):04X}"
    return None


def check_name(name: object, what: str) -> None:
    """Refuse a name that breaks ``NAME_RULE``; ``what`` (e.g. ``"Model 'resnet'"``) heads the message.

    Raises:
        BadName: ``<what> name <repr> is refused: <why>; allowed: <NAME_RULE>``.
    """
    problem = name_problem(name)
    if problem:
        raise BadName(f"{what} name {name!r} is refused: {problem}; allowed: {NAME_RULE}")


def slug(name: str) -> str:
    """One path segment matching ``SAFE_NAME``: a path-safe name of at most ``MAX_SLUG_NAME`` characters
    itself, else ``<ASCII prefix>-<10 hex of SHA-256 of its UTF-8>`` (at most 51 characters).

    ``slug("../../etc")`` → ``"etc-<hash>"``; ``slug("名前")`` → ``"<hash>"``.
    """
    if SAFE_NAME.match(name) and ".." not in name and len(name) <= MAX_SLUG_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    prefix = re.sub(r"\.{2,}", ".", prefix)
    prefix = re.sub(r"^[^A-Za-z0-9]+", "", prefix)[:_SLUG_PREFIX].rstrip("-.")
    return f"{prefix}-{digest}" if prefix else digest


def module_dir(name: str) -> str:
    """A module's folder relative to the run directory: ``modules/<slug(module name)>``."""
    return f"modules/{slug(name)}"
