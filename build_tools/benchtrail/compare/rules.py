"""Rules as data: the thresholds and quarantine files (YAML, ``schema_version: 1``, one list of rules,
defaults in ``benchtrail/data/``) and :class:`Rules`, the one value a comparison is judged by.

Thresholds (IREE's ``benchmark_thresholds.py``, the table in a file): the first rule whose ``match`` glob
matches ``"<kind>/<metric>/<name>"`` wins; its optional ``direction`` may repeat its metric's, never turn
it. Quarantine: series reported but never gated::

    quarantine:
      - {match: "sqrl.inductor.*", reason: "flaky under load, #123"}   # glob over a name or id; why
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from benchtrail.errors import UserError
from benchtrail.results.schema import DIRECTIONS, METRICS

#: Version history of the thresholds and quarantine files (one number: one loader):
#:   1 — first version (a threshold's ``direction`` became optional later: it defaults to the metric's).
SCHEMA_VERSION = 1
UNITS = ("percent", "absolute")
_THRESHOLD_REQUIRED = {"match", "unit", "threshold"}
_THRESHOLD_KEYS = _THRESHOLD_REQUIRED | {"direction"}
_QUARANTINE_KEYS = ("match", "reason")


def rules_file(path: Path | None, key: str) -> Path:
    """``path``, else the shipped ``benchtrail/data/<key>.yaml`` (``key``: ``thresholds``, ``quarantine``)."""
    return Path(path or str(resources.files("benchtrail") / "data" / f"{key}.yaml"))


def load_rule_list(path: Path | None, key: str, *, allow_empty: bool) -> tuple[Path, list[Any]]:
    """The rules file ``path`` (default: the shipped ``<key>.yaml``) and its ``key`` list, items unchecked;
    ``allow_empty`` (the quarantine file): an empty list is valid and unknown top-level keys are refused.
    Raises UserError, naming the file, when it is unreadable, not YAML, not a mapping with this
    ``schema_version``, has an unknown key (``allow_empty``) or no (non-empty) ``key`` list."""
    path = rules_file(path, key)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot load {key} file {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"{key} file {path}: expected a mapping with schema_version: {SCHEMA_VERSION} and a {key} list"
        )
    unknown = sorted(set(data) - {"schema_version", key}) if allow_empty else []
    rules = data.get(key)
    if unknown or not isinstance(rules, list) or not (rules or allow_empty):
        raise UserError(
            f"{key} file {path}: expected keys schema_version and {key} (a "
            f"{'' if allow_empty else 'non-empty '}list)"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return path, rules


# -- thresholds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """A change larger than ``threshold`` (percent of the baseline median, or absolute units) counts;
    ``direction`` None leaves it to the metric."""

    match: str
    unit: str
    threshold: float
    direction: str | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower-is-better"


def load_thresholds(path: Path | None = None) -> tuple[Threshold, ...]:
    """Load and check a thresholds file (default: the shipped one). Raises UserError, naming the rule, as
    :func:`load_rule_list` or for an unknown or missing key, a bad unit or direction, a negative threshold."""
    path, rules = load_rule_list(path, "thresholds", allow_empty=False)
    out = []
    for i, rule in enumerate(rules):
        where = f"thresholds file {path}, rule {i}"
        if not isinstance(rule, dict):
            raise UserError(f"{where}: expected a mapping, got {rule!r}")
        unknown = sorted(set(rule) - _THRESHOLD_KEYS)
        missing = sorted(_THRESHOLD_REQUIRED - set(rule))
        if unknown or missing:
            raise UserError(
                f"{where}: unknown keys {unknown}, missing keys {missing}; allowed: {sorted(_THRESHOLD_KEYS)}"
            )
        if rule["unit"] not in UNITS:
            raise UserError(f"{where}: unit {rule['unit']!r} is not one of {', '.join(UNITS)}")
        direction = rule.get("direction")
        if direction not in (None, *DIRECTIONS):
            raise UserError(
                f"{where}: direction {direction!r} is not one of {', '.join(DIRECTIONS)} "
                "(or leave it out: the metric's direction)"
            )
        # The metric the match names literally (its second "/" part, without glob characters), if known.
        parts = str(rule["match"]).split("/")
        metric = METRICS.get(parts[1]) if len(parts) >= 3 and not any(c in parts[1] for c in "*?[") else None
        if direction and metric and metric.direction != direction:
            raise UserError(
                f"{where}: direction {direction} contradicts metric {parts[1]!r}, which is "
                f"{metric.direction}; a rule can only narrow a metric's direction "
                "(leave direction out)"
            )
        value = rule["threshold"]
        if type(value) not in (int, float) or not 0 <= value < math.inf:  # not bool, NaN or infinite
            raise UserError(f"{where}: threshold must be a number >= 0, got {value!r}")
        out.append(Threshold(str(rule["match"]), rule["unit"], float(value), direction))
    return tuple(out)


def find_threshold(
    thresholds: tuple[Threshold, ...], kind: str, metric: str, name: str, direction: str | None = None
) -> Threshold:
    """The first rule matching ``"<kind>/<metric>/<name>"``, with ``direction`` (None: the metric's) filled
    in. Raises UserError when no rule matches or the rule's direction contradicts the series'."""
    key = f"{kind}/{metric}/{name}"
    direction = direction or METRICS[metric].direction
    for i, t in enumerate(thresholds):
        if fnmatch.fnmatchcase(key, t.match):
            if t.direction not in (None, direction):
                raise UserError(
                    f"thresholds rule {i} ({t.match!r}) says {t.direction}, but series {key!r} "
                    f"is {direction} (its metric's direction); a rule can only narrow a metric's "
                    "direction: leave direction out of the rule or match fewer series"
                )
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


def load_quarantine(path: Path | None = None) -> tuple[QuarantineEntry, ...]:
    """Read a quarantine file (None: the shipped, empty one). Raises UserError, naming the file, entry and
    field, as :func:`load_rule_list` or for an entry not ``{match: str, reason: str}``."""
    path, items = load_rule_list(path, "quarantine", allow_empty=True)
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != set(_QUARANTINE_KEYS):
            keys = sorted(item) if isinstance(item, dict) else item
            raise UserError(
                f"quarantine file {path}: quarantine[{i}] must have exactly the keys "
                f"{', '.join(_QUARANTINE_KEYS)}; got {keys!r}"
            )
        for key in _QUARANTINE_KEYS:
            if not isinstance(item[key], str) or not item[key].strip():
                raise UserError(
                    f"quarantine file {path}: quarantine[{i}].{key} must be a non-empty string, "
                    f"got {item[key]!r}"
                )
    return tuple(QuarantineEntry(item["match"], item["reason"].strip()) for item in items)


def unmatched_quarantine(
    entries: tuple[QuarantineEntry, ...], series: list[tuple[str, str]]
) -> list[QuarantineEntry]:
    """Entries that match none of ``series`` (``(name, id)`` pairs): stale, worth a warning."""
    return [e for e in entries if not any(e.matches(name, sid) for name, sid in series)]


# -- the rules of a comparison -------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """What a comparison is judged by: ``thresholds`` (read from ``source``), ``accept`` globs (a regression
    they match is accepted) and ``quarantine`` entries."""

    thresholds: tuple[Threshold, ...] = ()
    accept: tuple[str, ...] = ()
    quarantine: tuple[QuarantineEntry, ...] = ()
    source: str = ""

    @classmethod
    def load(
        cls, thresholds: Path | None = None, accept: Sequence[str] | None = (), quarantine: Path | None = None
    ) -> Rules:
        """The rules of the thresholds and quarantine files (default: the shipped ones) and ``accept``.
        Raises UserError on a bad thresholds or quarantine file."""
        return cls(
            load_thresholds(thresholds),
            tuple(accept or ()),
            load_quarantine(quarantine),
            str(rules_file(thresholds, "thresholds")),
        )

    def quarantined(self, name: str, series_id: str) -> QuarantineEntry | None:
        """The first quarantine entry matching the series (by name or id), or None."""
        return next((e for e in self.quarantine if e.matches(name, series_id)), None)
