"""Thresholds as data: ordered glob rules from a YAML file, first match wins (IREE's
``benchmark_thresholds.py`` idea, with the table in a file instead of code).

A rule's ``direction`` is optional: a series' direction is its metric's
(``benchtrail.results.schema.METRICS``, recorded on each record). A rule may repeat it, never turn it:
a rule whose direction contradicts its metric's is refused at load when its ``match`` names the metric
literally (``"compilation/graph_count/*"``), else when it matches a series of another direction.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import yaml

from benchtrail.errors import UserError
from benchtrail.results.schema import DIRECTIONS, METRICS

#: Version history of the thresholds file:
#:   1 — first version (``direction`` became optional later: it defaults to the metric's).
SCHEMA_VERSION = 1
UNITS = ("percent", "absolute")
_KEYS = {"match", "unit", "threshold", "direction"}
_REQUIRED = {"match", "unit", "threshold"}


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
        missing = sorted(_REQUIRED - set(rule))
        if unknown or missing:
            raise UserError(f"{where}: unknown keys {unknown}, missing keys {missing}; allowed: {sorted(_KEYS)}")
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
    key = f"{kind}/{metric}/{name}"
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
