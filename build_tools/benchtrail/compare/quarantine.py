"""Quarantine: a data file of flaky series that run and are reported but never gate.

The file (default: ``benchtrail/data/quarantine.yaml``, or ``[tool.benchtrail] quarantine``)::

    schema_version: 1
    quarantine:
      - match: "sqrl.inductor.*"          # glob over a series' name or id
        reason: "flaky under load, #123"   # shown in the comment
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from benchtrail.errors import UserError

#: Version history of the quarantine file:
#:   1 — first version.
SCHEMA_VERSION = 1
_KEYS = ("match", "reason")


@dataclass(frozen=True)
class Entry:
    """One quarantined glob and why."""

    match: str
    reason: str

    def matches(self, name: str, series_id: str) -> bool:
        return fnmatch.fnmatchcase(name, self.match) or fnmatch.fnmatchcase(series_id, self.match)


def default_quarantine_path() -> Path:
    """The quarantine file shipped with benchtrail (empty)."""
    return Path(str(resources.files("benchtrail") / "data" / "quarantine.yaml"))


def load_quarantine(path: Path | None = None) -> tuple[Entry, ...]:
    """Read a quarantine file (the shipped one when ``path`` is None).

    Raises:
        UserError: unreadable YAML, a missing or unsupported ``schema_version``, or an entry that is
            not ``{match: str, reason: str}``; the message names the file, the entry and the field.
    """
    path = Path(path) if path else default_quarantine_path()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"quarantine file {path}: cannot read it ({exc})") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(f"quarantine file {path}: expected a mapping with schema_version: {SCHEMA_VERSION}")
    unknown = sorted(set(data) - {"schema_version", "quarantine"})
    if unknown or not isinstance(data.get("quarantine"), list):
        raise UserError(f"quarantine file {path}: expected keys schema_version and quarantine (a list)"
                        + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    entries = []
    for i, item in enumerate(data["quarantine"]):
        if not isinstance(item, dict) or set(item) != set(_KEYS):
            keys = sorted(item) if isinstance(item, dict) else item
            raise UserError(f"quarantine file {path}: quarantine[{i}] must have exactly the keys "
                            f"{', '.join(_KEYS)}; got {keys!r}")
        for key in _KEYS:
            if not isinstance(item[key], str) or not item[key].strip():
                raise UserError(f"quarantine file {path}: quarantine[{i}].{key} must be a non-empty string, "
                                f"got {item[key]!r}")
        entries.append(Entry(item["match"], item["reason"].strip()))
    return tuple(entries)


def find(entries: tuple[Entry, ...], name: str, series_id: str) -> Entry | None:
    """The first entry matching the series, or None."""
    return next((e for e in entries if e.matches(name, series_id)), None)


def unmatched(entries: tuple[Entry, ...], series: list[tuple[str, str]]) -> list[Entry]:
    """Entries that match none of ``series`` (``(name, id)`` pairs): stale, worth a warning."""
    return [e for e in entries if not any(e.matches(name, sid) for name, sid in series)]
