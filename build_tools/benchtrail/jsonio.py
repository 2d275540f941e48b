"""Deterministic, atomic JSON files with a root ``schema_version``: sorted keys, temp file, ``os.replace``."""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError


def dumps(obj: Any) -> str:
    """Indented JSON, sorted keys, trailing newline; NaN and infinities become null (read as missing)."""
    return json.dumps(_nan_to_none(obj), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nan_to_none(v) for v in obj]
    return obj


def write_bytes_atomic(path: Path, data: bytes, *, exclusive: bool = False) -> Path:
    """Write through a temp file and ``os.replace`` (``exclusive``: a create-only link); mode 0666 less umask.

    Raises UserError when the directory cannot be written, or ``exclusive`` and ``path`` exists.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0)  # read the umask (and put it back)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp creates 0600
        # a link fails if the target exists: a create-only rename
        (os.link if exclusive else os.replace)(tmp, path)
    except FileExistsError as exc:
        raise UserError(f"{path} already exists; benchtrail never overwrites it") from exc
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if os.path.exists(tmp):  # the temp file of a failed write, or the linked one's old name
            os.unlink(tmp)
    return path


def write_text_atomic(path: Path, text: str, *, exclusive: bool = False) -> Path:
    """:func:`write_bytes_atomic` of ``text`` encoded as UTF-8."""
    return write_bytes_atomic(path, text.encode(), exclusive=exclusive)


def write_png(path: Path, figure: Any, **savefig: Any) -> Path:
    """Save a matplotlib ``figure`` as a new PNG (``exclusive``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", **savefig)
    return write_bytes_atomic(path, buffer.getvalue(), exclusive=True)


def write_json(path: Path, obj: dict[str, Any], *, exclusive: bool = False) -> Path:
    """Atomic JSON write; ValueError when ``obj`` lacks ``schema_version``."""
    if "schema_version" not in obj:
        raise ValueError(f"refusing to write {path} without a root schema_version")
    return write_text_atomic(path, dumps(obj), exclusive=exclusive)


def read_json(path: str | Path, *, kind: str, supported: int, foreign: str | None = None) -> dict[str, Any]:
    """Read a JSON object written by benchtrail, checking ``schema_version`` ≤ ``supported``.

    ``kind`` names the file in messages ("results file"); ``foreign`` is the message after ``path`` for
    another tool's JSON (no object or no ``schema_version``).
    Raises UserError when the file is missing, not UTF-8, not JSON, not an object, or its version is absent
    or newer than ``supported``.
    """
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {kind} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{kind} {path} is not UTF-8 text (byte {exc.start}); benchtrail writes UTF-8 JSON"
        ) from exc
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{kind} {path} is not valid JSON (truncated or corrupt?): {exc.msg.removesuffix(' at')} at line "
            f"{exc.lineno} column {exc.colno}"
        ) from exc
    if foreign and not (isinstance(obj, dict) and "schema_version" in obj):
        raise UserError(f"{path} {foreign}")
    if not isinstance(obj, dict):
        raise UserError(f"{kind} {path}: expected a JSON object at the root, got {type(obj).__name__}")
    version = obj.get("schema_version")
    if type(version) is not int:  # a bool is no version
        raise UserError(f"{kind} {path}: missing or non-integer 'schema_version' (got {version!r})")
    if version < 1:
        raise UserError(f"{kind} {path}: schema_version {version} is not valid; versions start at 1")
    if version > supported:
        raise UserError(
            f"{kind} {path} has schema_version {version}, but this benchtrail reads versions "
            f"1..{supported}; upgrade benchtrail"
        )
    return obj


def check_new(*paths: Path) -> None:
    """Raise UserError, before any work, when one of ``paths`` exists."""
    for path in paths:
        if Path(path).exists():
            raise UserError(f"{path} already exists; benchtrail never overwrites it (choose another path)")
