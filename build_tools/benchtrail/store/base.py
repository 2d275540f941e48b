"""What every store offers (``Store``), and the name rules both backends share.

A store holds run directories and commit pointers (``docs/store.md``)::

    <root>/runs/<run_id>/<attempt>/<relative name>   files of one run, never overwritten
    <root>/commits/<sha>/<run_id>-<attempt>.json     pointer: which presets/devices that run holds
    <root>/assets/<name>                             shared by runs (one plotly.js), never overwritten

Names are checked before any I/O: safe as local paths and in ``gcloud storage`` URLs (no ``[]*?``, ``..``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from benchtrail.errors import UserError

#: Version history of commit pointers:
#:   1 — first version.
#:   2 — gains baseline_keys (one per device and baseline key) and results (the run's results file
#:       names, the only ones a baseline lookup fetches).
POINTER_SCHEMA_VERSION = 2

#: Every file of a run; the default of ``fetch_run`` and ``upload_run``.
ALL_FILES: tuple[str, ...] = ("**",)
#: A JSON object: a commit pointer, or the fields its writer gives it.
Json = dict[str, Any]
#: ``(run id, attempt)`` of a stored run.
RunKey = tuple[str, int]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Characters that ``gcloud storage`` treats as wildcards in a URL, so no stored name may hold them.
WILDCARDS = frozenset("[]*?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_safe_id(value: Any) -> TypeGuard[str]:
    """A safe run id or commit: letters, digits, ``.``, ``_`` and ``-``, no ``..``."""
    return isinstance(value, str) and bool(_SAFE_ID.match(value)) and ".." not in value


def check_id(value: str, what: str) -> str:
    """``value`` if :func:`is_safe_id`, else UserError quoting it."""
    if not is_safe_id(value):
        raise UserError(f"{what} {value!r} is not path-safe: use letters, digits, '.', '_' and '-' only")
    return value


def check_attempt(attempt: int) -> int:
    """``attempt`` if a whole number from 1 (as ``GITHUB_RUN_ATTEMPT``), else UserError."""
    if type(attempt) is not int or attempt < 1:  # a bool is no attempt
        raise UserError(f"attempt {attempt!r} is not a whole number from 1")
    return attempt


#: The folder of files that runs share (``<root>/assets/<name>``), and the way to it from a run directory.
ASSETS = "assets"
ASSETS_FROM_RUN = f"../../../{ASSETS}"


def asset_path(name: str) -> str:
    """``assets/<name>``; UserError unless ``name`` is one safe path segment."""
    if "/" in check_relative_name(name, "asset"):
        raise UserError(f"asset name {name!r} has a '/': assets are files directly under {ASSETS}/")
    return f"{ASSETS}/{name}"


def run_path(run_id: str, attempt: int) -> str:
    """``runs/<run_id>/<attempt>``, both checked."""
    return f"runs/{check_id(run_id, 'run id')}/{check_attempt(attempt)}"


def unsafe_reason(name: str) -> str | None:
    """Why a ``/``-separated name relative to a run directory is unsafe, or None."""
    if not name:
        return "it is empty"
    if name.startswith("/"):
        return "it is absolute"
    if "\\" in name:
        return "it contains a backslash"
    if _CONTROL.search(name):
        return "it contains a control character"
    if WILDCARDS & set(name):
        return f"it contains a gcloud wildcard character ({''.join(sorted(WILDCARDS & set(name)))})"
    for segment in name.split("/"):
        if segment in (".", ".."):
            return f"it has a {segment!r} path segment"
        if not segment:
            return "it has an empty path segment"
    return None


def check_relative_name(name: str, where: str) -> str:
    """``name`` if safe, else UserError naming ``where`` (the object or file) and why."""
    if reason := unsafe_reason(name):
        raise UserError(
            f"{where}: name {name!r} is refused because {reason}; benchtrail only stores and "
            "fetches names that are safe as paths and in gcloud URLs"
        )
    return name


#: One part of a glob segment: a character class (``[abc]``, ``[!abc]``; a ``]`` first is in it, so ``[]``
#: and ``[!]`` are unclosed), else one character (an unclosed ``[`` included).
_GLOB_PART = re.compile(r"\[!?+\]?+[^]]*\]|.", re.DOTALL)


def _segment_regex(segment: str) -> str:
    def part(match: re.Match[str]) -> str:
        text = match[0]
        if text in ("*", "?"):
            return "[^/]*" if text == "*" else "[^/]"
        if len(text) == 1:
            return re.escape(text)
        body = text[1:-1].replace("\\", "\\\\")  # a class; [!...] never matches "/"
        if body.startswith("!"):
            return f"[^/{body[1:]}]"
        return f"[\\{body}]" if body.startswith("^") else f"[{body}]"

    return _GLOB_PART.sub(part, segment)


def compile_patterns(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regex for the run-relative names any of ``patterns`` selects: ``*``, ``?`` and ``[abc]``/``[!abc]``
    within one segment, a ``**`` segment for any number of segments (``modules/m1/**``; ``**``: every file).

    Raises:
        UserError: no pattern, or a pattern that is empty, absolute or has a ``..`` segment.
    """
    if not patterns:
        raise UserError("no pattern given: pass at least one, e.g. '**' for every file of the run")
    alternatives = []
    for pattern in patterns:
        if not pattern or pattern.startswith("/") or ".." in pattern.split("/") or "\\" in pattern:
            raise UserError(
                f"pattern {pattern!r} must be relative to the run directory, without '..' "
                "(e.g. 'results/*.json', 'modules/<name>/**')"
            )
        *folders, last = pattern.split("/")
        regex = "".join("(?:[^/]+/)*" if part == "**" else _segment_regex(part) + "/" for part in folders)
        alternatives.append(f"(?:{regex}{'.+' if last == '**' else _segment_regex(last)})")
    return re.compile("^(?:" + "|".join(alternatives) + ")$")


def select(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The names matched by ``patterns``, sorted."""
    return sorted(filter(compile_patterns(patterns).match, names))


def shown(names: Sequence[str], limit: int = 5) -> str:
    """``a, b, c and 4 more``."""
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def upload_names(local_dir: Path, patterns: Sequence[str]) -> list[str]:
    """The files of ``local_dir`` an upload of ``patterns`` stores; UserError: an unsafe name, or none."""
    names = select(local_files(local_dir), patterns)
    if not names:
        raise UserError(f"no file under {local_dir} matches {', '.join(patterns)}: nothing to upload")
    return names


def local_files(folder: Path) -> list[str]:
    """Relative ``/``-separated names of the files under ``folder``, sorted (symlinked folders not
    followed). UserError: ``folder`` is not a folder, or a file name is unsafe."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"run directory {folder} does not exist or is not a folder")
    return [
        check_relative_name(path.relative_to(folder).as_posix(), str(path))
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


class Store(Protocol):
    """What the ``file://`` and ``gs://`` stores provide. ``run_dir`` is always local: for GCS a staging
    folder. ``write_asset`` is create-only: an existing asset is kept (its name carries its version)."""

    @property
    def url(self) -> str: ...

    def run_url(self, run_id: str, attempt: int) -> str: ...

    def run_dir(self, run_id: str, attempt: int) -> Path: ...

    def create_run_dir(self, run_id: str, attempt: int) -> Path: ...

    def upload_run(
        self,
        local_dir: Path,
        run_id: str,
        attempt: int,
        *,
        deadline_s: float = 600,
        patterns: Sequence[str] = ALL_FILES,
    ) -> int: ...

    def run_files(self, run_id: str, attempt: int, *, deadline_s: float = 600) -> list[str]: ...

    def incomplete_runs(self) -> list[RunKey]: ...

    def fetch_run(
        self,
        run_id: str,
        attempt: int,
        dest: Path | None = None,
        patterns: Sequence[str] = ALL_FILES,
        *,
        deadline_s: float = 600,
    ) -> Path: ...

    def write_pointer(self, commit: str, run_id: str, attempt: int, info: Json) -> Path | str: ...

    def pointers(self, commit: str) -> list[Json]: ...

    def write_asset(self, name: str, data: bytes) -> Path | str: ...


def staging_root() -> Path:
    """Where a remote store stages its runs: ``BENCHTRAIL_STAGING``, else ``.benchtrail/staging``."""
    return Path(os.environ.get("BENCHTRAIL_STAGING") or Path(".benchtrail") / "staging")


def empty_staging_dir(path: Path, run_id: str, attempt: int) -> Path:
    """Create a remote store's staging folder of a run. Raises UserError when it cannot be created or is not
    empty."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create staging folder {path}: {exc.strerror or exc}") from exc
    if any(path.iterdir()):
        raise UserError(
            f"staging folder {path} of run {run_id}/{attempt} is not empty; remove it or set "
            "BENCHTRAIL_STAGING to another folder"
        )
    return path


def stored_time(when: Any) -> str:
    """An aware ``datetime`` or POSIX seconds as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC), a pointer's
    ``stored_at``: such strings sort in time order."""
    import datetime

    moment = (
        when
        if isinstance(when, datetime.datetime)
        else datetime.datetime.fromtimestamp(float(when), datetime.UTC)
    )
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pointerless(runs: Iterable[RunKey], pointer_names: Iterable[str]) -> list[RunKey]:
    """The ``runs`` no pointer file name (``<run id>-<attempt>.json``, any commit) names, sorted: runs
    never finished storing, which stay, listed as incomplete, never a baseline."""
    named = set(pointer_names)
    return sorted({(r, a) for r, a in runs if f"{r}-{a}.json" not in named})
