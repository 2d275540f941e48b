"""The comparison document (``comparison.json``): its rows and versions, building it and reading it back."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.results.schema import ResultsFile

#: Version history of comparison.json:
#:   1 — first version.
#:   2 — rows gain ci_low, ci_high (percent), q_value, mde (percent), outcome and mark.
#:   3 — rows gain ab: the paired A/B re-check of a suspected regression.
#:   4 — rows gain quarantined: the reason when the series is in the quarantine file.
#:   5 — rows gain recheck: ``not-reached`` when a time-bounded re-check did not reach the suspect row, else
#:       null. Also the root gains missing_shards: the head export's shards that wrote no results file (null
#:       without an export), and baseline may be ``{reason, store, store_error}`` when the store
#:       was unreadable.
#:   6 — a stored baseline gains devices (each head device's baseline run: commit, reason, run_id, attempt),
#:       lacking (device → why it has none), ignored (stored runs the trust refused, with the reason) and
#:       trust; baseline may be ``{reason, lacking, ignored, trust}`` when every candidate was refused. Rows
#:       of a device whose baseline key differs are ``not-comparable``.
#:   7 — verdict ``insufficient-samples`` (and its count); a row's threshold carries the series' direction.
#:       Optional: a re-checked regressed row's profile (the operators whose self time changed most, base
#:       and head, and both traces' paths); a row's ab.level (the paired interval's level; absent: 0.99).
#:   8 — verdict ``inconclusive`` (an interval that crosses the threshold, or lies beyond it with q >= alpha),
#:       ``similar`` only when the interval lies within it; ``noisy`` is a row's bool label, not a verdict. A
#:       re-checked row shows the paired figures that decided it (change, ci_low, ci_high, q_value, p_value,
#:       mde, outcome), the stored ones in ``stored``; its ``ab`` may have ``guard`` (a paired arm far from
#:       its stored run: not used) and ``stop``. Optional: a confirmed ``instructions`` regression's
#:       functions, whose self instructions per call changed most, with their inclusive change (an older
#:       one, without ``ranked_by``: inclusive counts).
SCHEMA_VERSION = 8
#: Marks of a regressed row: ``unconfirmed`` until a paired A/B run confirms it, ``confirmed`` after,
#: ``accepted`` when a ``benchmarks-accept:`` trailer names it, ``quarantined`` when the quarantine file lists
#: the series. Only the first two gate.
MARKS = ("confirmed", "unconfirmed", "accepted", "quarantined")
VERDICTS = (
    "regressed",
    "improved",
    "inconclusive",
    "similar",
    "new",
    "removed",
    "failed",
    "not-comparable",
    "insufficient-samples",
)
#: Verdicts of rows whose interval decided nothing: ``noisy`` is one of versions 1 to 7 (read, never written).
INCONCLUSIVE = ("inconclusive", "noisy")
#: A JSON object: comparison.json or a part of it.
Json = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """One series in a comparison. ``change`` is percent for percent rules, else in ``unit``."""

    id: str
    name: str
    kind: str
    metric: str
    unit: str
    device_name: str
    module_name: str
    compile_config: str
    verdict: str
    reason: str | None
    base_median: float | None
    head_median: float | None
    base_iqr: float | None
    head_iqr: float | None
    base_n: int
    head_n: int
    change: float | None
    change_unit: str | None
    p_value: float | None
    threshold: Json | None
    head_details: Json
    base_details: Json
    ci_low: float | None = None
    ci_high: float | None = None
    q_value: float | None = None
    mde: float | None = None
    outcome: str | None = None
    mark: str | None = None
    ab: Json | None = None
    quarantined: str | None = None
    recheck: str | None = None
    profile: Json | None = None
    noisy: bool | None = None
    stored: Json | None = None
    functions: Json | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Row:
        """From a row object built in memory: missing fields default, other keys are ignored, nothing is
        checked."""
        return cls(**{k: row[k] for k in _ROW_FIELDS if k in row})

    def plain(self) -> Json:
        """Every field, but ``profile``, ``stored`` and ``functions`` only when set."""
        return {k: v for k, v in asdict(self).items() if k not in _OPTIONAL or v is not None}


_ROW_FIELDS = frozenset(f.name for f in fields(Row))
#: Row fields comparison.json holds only when set.
_OPTIONAL = ("profile", "stored", "functions")


@dataclass(frozen=True)
class Comparison:
    """Typed rows over the JSON ``document`` they came from, kept as it is so that a stage rewriting the
    file (the re-check) keeps every key, older rows included."""

    document: Json
    rows: tuple[Row, ...]

    @classmethod
    def of(cls, document: Json) -> Comparison:
        """From an object built in memory; nothing is checked."""
        return cls(document, tuple(map(Row.of, document["rows"])))

    @property
    def schema_version(self) -> int:
        version: int = self.document["schema_version"]  # checked by load_comparison
        return version

    @property
    def head(self) -> Json:
        """``commit``, ``dirty``, ``run``, ``torch_version``, ``devices``, ``runner_checks``; {} if none."""
        return self.document["head"] or {}

    @property
    def base(self) -> Json:
        """As ``head``."""
        return self.document.get("base") or {}

    @property
    def baseline(self) -> Json:
        """The stored baseline the head was compared with, or {}."""
        return self.document.get("baseline") or {}

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self.document["counts"]
        return counts

    @property
    def missing_shards(self) -> list[Json] | None:
        """``[{device_name, shard_index}]`` that wrote no results (None: no export, or before version 5)."""
        return self.document.get("missing_shards")


def accepted(row: Row, accept: Sequence[str]) -> bool:
    """Whether the row's name or id matches an ``accept`` glob (``benchmarks-accept:`` trailers)."""
    import fnmatch

    return any(fnmatch.fnmatchcase(row.name, g) or fnmatch.fnmatchcase(row.id, g) for g in accept)


def _side(files: list[ResultsFile], **extra: Any) -> Json | None:
    if not files:
        return None
    first = files[0]
    return {
        "commit": first.commit,
        "dirty": first.dirty,
        "run": first.run,
        "torch_version": first.environment.get("torch_version"),
        "devices": sorted({b.device_name for f in files for b in f.benchmarks}),
        **extra,
    }


def count_rows(rows: Sequence[Row], version: int = SCHEMA_VERSION) -> dict[str, int]:
    """Rows per verdict and regressed rows per mark, as comparison.json of ``version`` counts them."""
    verdicts = VERDICTS if version >= 8 else tuple(v if v != "inconclusive" else "noisy" for v in VERDICTS)
    marks = MARKS if version >= 4 else MARKS[:3]  # quarantined from version 4
    return {
        **{v: sum(r.verdict == v for r in rows) for v in verdicts},
        **{m: sum(r.mark == m for r in rows if r.verdict == "regressed") for m in marks},
    }


def upgraded(document: Json) -> Json:
    """``document`` of any version as of ``SCHEMA_VERSION``: rows with every field (a regressed row without
    a mark ``unconfirmed``), ``noisy`` and undecided ``similar`` verdicts ``inconclusive``, counts again."""
    if document.get("schema_version") == SCHEMA_VERSION:
        return document
    rows = []
    for row in map(Row.of, document["rows"]):
        if row.verdict == "noisy":
            row = replace(row, verdict="inconclusive", noisy=True)
        elif row.verdict == "similar" and row.outcome == "UNKNOWN" and row.ci_low is not None:
            row = replace(row, verdict="inconclusive")
        if row.verdict == "regressed" and row.mark is None:
            row = replace(row, mark="unconfirmed")
        rows.append(row)
    return {
        **document,
        "schema_version": SCHEMA_VERSION,
        "missing_shards": document.get("missing_shards"),
        "rows": [r.plain() for r in rows],
        "counts": count_rows(rows),
    }


def comparison_to_dict(
    rows: list[Row],
    base: list[ResultsFile],
    head: list[ResultsFile],
    thresholds_source: str,
    baseline: Json | None = None,
    missing_shards: list[Json] | None = None,
) -> Json:
    """``missing_shards``: the head export's ``{device_name, shard_index}`` that wrote no results file
    (None: no export to check against)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "head": _side(head, runner_checks=failed_by_device(head)),
        "base": _side(base),
        "baseline": baseline,
        "thresholds_source": thresholds_source,
        "counts": count_rows(rows),
        "rows": [r.plain() for r in rows],
        "missing_shards": missing_shards,
    }


def load_comparison(path: str | Path) -> Comparison:
    """Any schema version; fields an older row lacks default in ``rows``, stay absent in ``document``.

    Raises:
        UserError: unreadable, an unknown schema version, a missing or malformed field, or a
            verdict outside ``VERDICTS``; the message names the file and the field.
    """
    from benchtrail import jsonio
    from benchtrail.suite.serialization import from_plain

    obj = jsonio.read_json(path, kind="comparison", supported=SCHEMA_VERSION)
    for key, kind in (("rows", list), ("counts", dict), ("head", dict)):
        if not isinstance(obj.get(key), kind):
            raise UserError(
                f"comparison {path}: field {key!r} must be a {kind.__name__}, got {obj.get(key)!r}"
            )
    for key in ("base", "baseline"):
        if not isinstance(obj.get(key), (dict, type(None))):
            raise UserError(f"comparison {path}: field {key!r} must be an object or null")
    rows = tuple(
        from_plain(row, Row, where=f"comparison {path}: rows[{i}]") for i, row in enumerate(obj["rows"])
    )
    allowed = VERDICTS if obj["schema_version"] >= 8 else (*VERDICTS, "noisy")
    for i, row in enumerate(rows):
        if row.mark not in (None, *MARKS):
            raise UserError(
                f"comparison {path}: rows[{i}] has mark {row.mark!r}; allowed: {', '.join(MARKS)}"
            )
        if row.verdict not in allowed:
            raise UserError(
                f"comparison {path}: rows[{i}] ({row.name!r}) has verdict {row.verdict!r}; "
                f"allowed: {', '.join(allowed)}"
            )
    if not isinstance(obj["head"].get("commit"), str):
        raise UserError(f"comparison {path}: head.commit must be a string")
    missing = obj.get("missing_shards")  # absent before version 5: read as null (not checked)
    if missing is not None and not (
        isinstance(missing, list)
        and all(
            isinstance(m, dict)
            and set(m) == {"device_name", "shard_index"}
            and isinstance(m["device_name"], str)
            and type(m["shard_index"]) is int
            for m in missing
        )
    ):  # JSON: an int, not a bool
        raise UserError(
            f"comparison {path}: field 'missing_shards' is {missing!r}; allowed: null or a list "
            "of {device_name: <string>, shard_index: <integer>}"
        )
    return Comparison(obj, rows)


def failed_by_device(files: list[ResultsFile]) -> list[Json]:
    """``head.runner_checks``: ``[{device, failed: [{name, value, expected}]}]`` of the failed
    ``environment.doctor`` checks, one entry per device (shards disagreeing: the first value wins). A file
    naming no device counts under its host's other devices, else the host's name."""
    named = [
        (
            f.run.get("device_name") or ", ".join(sorted({b.device_name for b in f.benchmarks})),
            f.environment.get("hostname"),
            f.environment.get("doctor") or {},
        )
        for f in files
    ]
    host_devices: defaultdict[str | None, set[str]] = defaultdict(set)  # looked up by a missing host too
    for device, host, _ in named:
        if device and host:
            host_devices[host].add(device)
    merged: defaultdict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for device, host, doctor in named:
        device = device or ", ".join(sorted(host_devices[host])) or host or "?"
        for c in doctor.get("checks", ()):
            if c.get("name") in (doctor.get("failed") or ()):
                merged[device].setdefault(c["name"], {k: c[k] for k in ("name", "value", "expected")})
    return [{"device": d, "failed": list(checks.values())} for d, checks in sorted(merged.items())]
