"""Rules as data: the thresholds and quarantine files, ordered glob rules read by one YAML loader.

Both files are YAML mappings with ``schema_version: 1`` and one list of rules; both ship a default
in ``benchtrail/data/`` (a project may name others: ``[tool.benchtrail]`` ``thresholds``, ``quarantine``).

Thresholds (IREE's ``benchmark_thresholds.py`` idea, with the table in a file instead of code): the
first rule whose ``match`` glob matches ``"<kind>/<metric>/<name>"`` wins. A rule's ``direction`` is
optional: a series' direction is its metric's (``benchtrail.results.schema.METRICS``, recorded on each
record). A rule may repeat it, never turn it: a rule whose direction contradicts its metric's is
refused at load when its ``match`` names the metric literally (``"compilation/graph_count/*"``), else
when it matches a series of another direction.

Quarantine: flaky series that run and are reported but never gate::

    schema_version: 1
    quarantine:
      - match: "sqrl.inductor.*"          # glob over a series' name or id
        reason: "flaky under load, #123"   # shown in the comment
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from benchtrail.errors import UserError
from benchtrail.results.schema import DIRECTIONS, METRICS, rule_key

#: Version history of the thresholds and quarantine files (one number: one loader):
#:   1 — first version (a threshold's ``direction`` became optional later: it defaults to the metric's).
SCHEMA_VERSION = 1
UNITS = ("percent", "absolute")
_THRESHOLD_KEYS = {"match", "unit", "threshold", "direction"}
_THRESHOLD_REQUIRED = {"match", "unit", "threshold"}
_QUARANTINE_KEYS = ("match", "reason")


def shipped_file(name: str) -> Path:
    """The path of ``benchtrail/data/<name>`` (``thresholds.yaml``, ``quarantine.yaml``)."""
    return Path(str(resources.files("benchtrail") / "data" / name))


def load_rule_list(path: Path, kind: str, key: str, *, allow_empty: bool, only_known_keys: bool) -> list[Any]:
    """The list under ``key`` of the rules file ``path``, checked for ``schema_version: SCHEMA_VERSION``.

    ``kind`` names the file in messages (``thresholds``, ``quarantine``). ``allow_empty``: an empty list
    is valid; ``only_known_keys``: a top-level key other than ``schema_version`` and ``key`` is refused.
    The items are returned as YAML gave them; the caller checks each.

    Raises:
        UserError: unreadable file or invalid YAML (``cannot load <kind> file <path>: ...``), not a
            mapping or another ``schema_version``, an unknown top-level key (with ``only_known_keys``),
            or ``key`` not a list (or empty, without ``allow_empty``); the message names the file.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot load {kind} file {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(f"{kind} file {path}: expected a mapping with schema_version: {SCHEMA_VERSION} "
                        f"and a {key} list")
    unknown = sorted(set(data) - {"schema_version", key}) if only_known_keys else []
    rules = data.get(key)
    if unknown or not isinstance(rules, list) or not (rules or allow_empty):
        raise UserError(f"{kind} file {path}: expected keys schema_version and {key} (a "
                        f"{'' if allow_empty else 'non-empty '}list)" + (f"; unknown: {', '.join(unknown)}"
                                                                          if unknown else ""))
    return rules


# -- thresholds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """A change larger than ``threshold`` (percent of the baseline median, or absolute units) counts.

    ``direction`` is None in a rule that leaves it to the metric; :func:`find_threshold` returns the
    rule with the series' direction filled in.
    """

    match: str
    unit: str
    threshold: float
    direction: str | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower-is-better"


def default_thresholds_path() -> Path:
    """The thresholds file shipped with benchtrail."""
    return shipped_file("thresholds.yaml")


def load_thresholds(path: Path | None = None) -> tuple[Threshold, ...]:
    """Load and validate a thresholds file (default: the shipped one).

    Raises:
        UserError: see :func:`load_rule_list` (the list must not be empty); an unknown or missing key,
            a unit or direction outside the allowed values, or a negative threshold; names the rule's index.
    """
    path = Path(path) if path else default_thresholds_path()
    out = []
    for i, rule in enumerate(load_rule_list(path, "thresholds", "thresholds", allow_empty=False,
                                            only_known_keys=False)):
        where = f"thresholds file {path}, rule {i}"
        if not isinstance(rule, dict):
            raise UserError(f"{where}: expected a mapping, got {rule!r}")
        unknown = sorted(set(rule) - _THRESHOLD_KEYS)
        missing = sorted(_THRESHOLD_REQUIRED - set(rule))
        if unknown or missing:
            raise UserError(f"{where}: unknown keys {unknown}, missing keys {missing}; "
                            f"allowed: {sorted(_THRESHOLD_KEYS)}")
        if rule["unit"] not in UNITS:
            raise UserError(f"{where}: unit {rule['unit']!r} is not one of {', '.join(UNITS)}")
        direction = rule.get("direction")
        if direction is not None and direction not in DIRECTIONS:
            raise UserError(f"{where}: direction {direction!r} is not one of {', '.join(DIRECTIONS)} "
                            "(or leave it out: the metric's direction)")
        metric = _literal_metric(str(rule["match"]))
        if direction is not None and metric is not None and METRICS[metric].direction != direction:
            raise UserError(f"{where}: direction {direction} contradicts metric {metric!r}, which is "
                            f"{METRICS[metric].direction}; a rule can only narrow a metric's direction "
                            "(leave direction out)")
        value = rule["threshold"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise UserError(f"{where}: threshold must be a number >= 0, got {value!r}")
        out.append(Threshold(str(rule["match"]), rule["unit"], float(value), direction))
    return tuple(out)


def _literal_metric(match: str) -> str | None:
    """The metric a ``match`` glob names literally (its second ``/`` part, without glob characters), if known."""
    parts = match.split("/")
    if len(parts) >= 3 and not any(c in parts[1] for c in "*?[") and parts[1] in METRICS:
        return parts[1]
    return None


def find_threshold(thresholds: tuple[Threshold, ...], kind: str, metric: str, name: str,
                   direction: str | None = None) -> Threshold:
    """The first rule matching ``"<kind>/<metric>/<name>"``, with the series' direction filled in.

    Args:
        direction: the series' direction as its record holds it; None: its metric's (``METRICS``).

    Raises:
        UserError: no rule matches (the table should end with a catch-all); the series' metric has no
            known direction (not in ``METRICS`` and none given); the rule's direction contradicts the
            series' (names the rule's index, the series and the metric's direction).
    """
    key = rule_key(kind, metric, name)
    if direction is None:
        if metric not in METRICS:
            raise UserError(f"series {key!r}: metric {metric!r} has no known direction; known metrics: "
                            f"{', '.join(METRICS)} (docs/formats.md, 'Metrics')")
        direction = METRICS[metric].direction
    if direction not in DIRECTIONS:
        raise UserError(f"series {key!r} has direction {direction!r}; allowed: {', '.join(DIRECTIONS)}")
    for i, t in enumerate(thresholds):
        if fnmatch.fnmatchcase(key, t.match):
            if t.direction is not None and t.direction != direction:
                raise UserError(f"thresholds rule {i} ({t.match!r}) says {t.direction}, but series {key!r} is "
                                f"{direction} (its metric's direction); a rule can only narrow a metric's "
                                "direction: leave direction out of the rule or match fewer series")
            return replace(t, direction=direction)
    raise UserError(f"no threshold rule matches series {key!r}; add a catch-all rule such as '{kind}/*'")


# -- quarantine ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuarantineEntry:
    """One quarantined glob (over a series' name or id) and why."""

    match: str
    reason: str

    def matches(self, name: str, series_id: str) -> bool:
        return fnmatch.fnmatchcase(name, self.match) or fnmatch.fnmatchcase(series_id, self.match)


def default_quarantine_path() -> Path:
    """The quarantine file shipped with benchtrail (empty)."""
    return shipped_file("quarantine.yaml")


def load_quarantine(path: Path | None = None) -> tuple[QuarantineEntry, ...]:
    """Read a quarantine file (the shipped one when ``path`` is None); an empty list is valid.

    Raises:
        UserError: see :func:`load_rule_list` (no top-level key but ``schema_version`` and
            ``quarantine``), or an entry that is not ``{match: str, reason: str}``; the message names the
            file, the entry and the field.
    """
    path = Path(path) if path else default_quarantine_path()
    entries = []
    for i, item in enumerate(load_rule_list(path, "quarantine", "quarantine", allow_empty=True,
                                            only_known_keys=True)):
        if not isinstance(item, dict) or set(item) != set(_QUARANTINE_KEYS):
            keys = sorted(item) if isinstance(item, dict) else item
            raise UserError(f"quarantine file {path}: quarantine[{i}] must have exactly the keys "
                            f"{', '.join(_QUARANTINE_KEYS)}; got {keys!r}")
        for key in _QUARANTINE_KEYS:
            if not isinstance(item[key], str) or not item[key].strip():
                raise UserError(f"quarantine file {path}: quarantine[{i}].{key} must be a non-empty string, "
                                f"got {item[key]!r}")
        entries.append(QuarantineEntry(item["match"], item["reason"].strip()))
    return tuple(entries)


def find_quarantined(entries: tuple[QuarantineEntry, ...], name: str, series_id: str) -> QuarantineEntry | None:
    """The first entry matching the series (by name or id), or None."""
    return next((e for e in entries if e.matches(name, series_id)), None)


def unmatched_quarantine(entries: tuple[QuarantineEntry, ...], series: list[tuple[str, str]]) -> list[QuarantineEntry]:
    """Entries that match none of ``series`` (``(name, id)`` pairs): stale, worth a warning."""
    return [e for e in entries if not any(e.matches(name, sid) for name, sid in series)]
