"""The rules for names, and the safe slug that every file or object path made from a name uses.

benchtrail's own suite keeps path-safe names (:data:`SAFE_NAME`, without ``..``). An adopter's names
(models, compile and execution configs, devices, and the run config and module names made of them)
may hold any printable character (``|``, backticks, ``<``, ``*``, ``/``, ``..``, ``::``, spaces,
non-ASCII...): :func:`check_name` refuses only the empty name and control characters (line breaks
included). Names are never used as paths raw: :func:`slug` makes the file or folder name.
Preset names keep :data:`SAFE_NAME` (they are typed in the PR trailer and name dashboard pages).
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
    """A name that breaks :data:`NAME_RULE` (or a preset name that breaks :data:`SAFE_NAME`); the
    message names it, says why and what is allowed."""


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid name (:data:`NAME_RULE`), or None when it is.

    A control character is any of Unicode category Cc (``\\n``, ``\\r``, ``\\t``, ``\\x00``...,
    ``\\x7f``, ``\\x85``) or a line/paragraph separator (U+2028, U+2029); it is named by code point.
    """
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"it holds the control character U+{ord(ch):04X}"
    return None


def check_name(name: object, what: str) -> None:
    """Refuse a name that breaks :data:`NAME_RULE`.

    Args:
        name: the name.
        what: what it names, for the message (e.g. ``"Model 'resnet'"`` or ``"device name"``).

    Raises:
        BadName: ``<what> name <repr> is refused: <why>; allowed: <NAME_RULE>``.
    """
    problem = name_problem(name)
    if problem:
        raise BadName(f"{what} name {name!r} is refused: {problem}; allowed: {NAME_RULE}")


def slug(name: str) -> str:
    """The file or folder name made from ``name``: one path segment matching :data:`SAFE_NAME`.

    A name that already is path-safe (:data:`SAFE_NAME`, no ``..``, at most :data:`MAX_SLUG_NAME`
    characters) is its own slug, so the runs, stores and older workers of path-safe suites keep their
    paths. Any other name gives ``<ASCII prefix>-<10 hex digits of the SHA-256 of its UTF-8>``: at most
    51 characters, distinct for distinct names (up to the hash), never ``.``/``..``, never with ``/``.

    ``slug("resnet18.inductor.cpu")`` → itself; ``slug("../../etc")`` → ``"etc-<hash>"``;
    ``slug("名前")`` → ``"<hash>"``.
    """
    if SAFE_NAME.match(name) and ".." not in name and len(name) <= MAX_SLUG_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    prefix = re.sub(r"\.{2,}", ".", prefix)
    prefix = re.sub(r"^[^A-Za-z0-9]+", "", prefix)[:_SLUG_PREFIX].rstrip("-.")
    return f"{prefix}-{digest}" if prefix else digest


def module_dir(name: str) -> str:
    """The run directory's folder of a module (its artifact, ``module_info.json``, ``compile-stats.json``):
    ``modules/<slug(module name)>``, relative to the run directory."""
    return f"modules/{slug(name)}"
