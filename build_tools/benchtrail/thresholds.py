"""Thresholds as data: ordered glob rules from a YAML file, first match wins (IREE's
``benchmark_thresholds.py`` idea, with the table in a file instead of code)."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from benchtrail.errors import UserError

#: Version history of the thresholds file:
#:   1 — first version.
SCHEMA_VERSION = 1
UNITS = ("percent", "absolute")
DIRECTIONS = ("lower-is-better", "higher-is-better")
_KEYS = {"match", "unit", "threshold", "direction"}


@dataclass(frozen=True)
class Threshold:
    """A change larger than ``threshold`` (percent of the baseline median, or absolute units) counts."""

    match: str
    unit: str
    threshold: float
    direction: str

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower-is-better"


def default_thresholds_path() -> Path:
    """The thresholds file shipped with benchtrail."""
    return Path(str(resources.files("benchtrail") / "data" / "thresholds.yaml"))


def load_thresholds(path: Path | None = None) -> tuple[Threshold, ...]:
    """Load and validate a thresholds file (default: the shipped one).

    Raises:
        UserError: unreadable or invalid YAML, unknown schema version, an unknown key, a unit or
            direction outside the allowed values, or a negative threshold; names the rule's index.
    """
    path = Path(path) if path else default_thresholds_path()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot load thresholds file {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(f"thresholds file {path}: needs schema_version: {SCHEMA_VERSION} and a thresholds list")
    rules = data.get("thresholds")
    if not isinstance(rules, list) or not rules:
        raise UserError(f"thresholds file {path}: 'thresholds' must be a non-empty list")
    out = []
    for i, rule in enumerate(rules):
        where = f"thresholds file {path}, rule {i}"
        if not isinstance(rule, dict):
            raise UserError(f"{where}: expected a mapping, got {rule!r}")
        unknown = sorted(set(rule) - _KEYS)
        missing = sorted(_KEYS - set(rule))
        if unknown or missing:
            raise UserError(f"{where}: unknown keys {unknown}, missing keys {missing}; allowed: {sorted(_KEYS)}")
        if rule["unit"] not in UNITS:
            raise UserError(f"{where}: unit {rule['unit']!r} is not one of {', '.join(UNITS)}")
        if rule["direction"] not in DIRECTIONS:
            raise UserError(f"{where}: direction {rule['direction']!r} is not one of {', '.join(DIRECTIONS)}")
        value = rule["threshold"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise UserError(f"{where}: threshold must be a number >= 0, got {value!r}")
        out.append(Threshold(str(rule["match"]), rule["unit"], float(value), rule["direction"]))
    return tuple(out)


def find_threshold(thresholds: tuple[Threshold, ...], kind: str, metric: str, name: str) -> Threshold:
    """The first rule matching ``"<kind>/<metric>/<name>"``.

    Raises:
        UserError: no rule matches (the table should end with a catch-all).
    """
    key = f"{kind}/{metric}/{name}"
    for t in thresholds:
        if fnmatch.fnmatchcase(key, t.match):
            return t
    raise UserError(f"no threshold rule matches series {key!r}; add a catch-all rule such as '{kind}/*'")
