"""The comparison document (``comparison.json``): its rows, its versions, building it and reading it back.

:func:`benchtrail.compare.verdicts.compare` gives each series a :class:`Row`; :func:`build_comparison`
makes the document of those rows, :func:`load_comparison` reads one (every schema version) as a
:class:`Comparison`, and :func:`gate` and :func:`count_rows` read its rows. This module never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError
from benchtrail.results.schema import ResultsFile

#: Version history of comparison.json:
#:   1 — first version.
#:   2 — rows gain ci_low, ci_high (percent), q_value, mde (percent), outcome and mark.
#:   3 — rows gain ab: the paired A/B re-check of a suspected regression (``benchtrail.runner.recheck``).
#:   4 — rows gain quarantined: the reason when the series is in the quarantine file.
#:   5 — rows gain recheck: ``not-reached`` when a time-bounded re-check (``ab --total-budget-s``) did not
#:       reach the suspect row, else null. Also (same version) the root gains missing_shards: the shards
#:       of the head run's execution export that wrote no results file (null without an export), and
#:       baseline may be ``{reason, store, store_error}`` when ``compare --store`` could not read the store.
#:   6 — a stored baseline gains devices (each head device's own baseline run: commit, reason, run_id,
#:       attempt), lacking (device → why it has none), ignored (stored runs the trust refused, with the
#:       reason) and trust (what the trust accepts); baseline may be ``{reason, lacking, ignored, trust}``
#:       when every candidate was refused. Rows of a device whose baseline key differs are ``not-comparable``.
#:   7 — verdict ``insufficient-samples`` (and its count); a row's threshold carries the series' direction.
#:       Also (same version, optional) a regressed row of a paired re-check may have profile: the operators
#:       whose self time changed most, base and head, and the paths of both traces (``benchtrail.compare.why``);
#:       and (same version, optional) a row's ab may have level: the confidence level of the paired run's
#:       interval (its last look under sequential sampling; 0.99 when absent).
#:   8 — verdict ``inconclusive`` (an interval that crosses the threshold, or lies beyond it with q >= alpha),
#:       ``similar`` only when the interval lies within it; ``noisy`` is no longer a verdict but a row's label
#:       ``noisy`` (bool). A re-checked row shows the paired figures that decided it (change, ci_low, ci_high,
#:       q_value, p_value, mde, outcome) and keeps the stored ones in ``stored``; its ``ab`` may have ``guard``
#:       (a paired arm far from its own stored run: not used) and ``stop`` (why the paired run stopped).
SCHEMA_VERSION = 8
#: Marks of a regressed row: ``unconfirmed`` until a paired A/B run confirms it (``benchtrail.runner.recheck``),
#: ``confirmed`` after, ``accepted`` when a ``benchmarks-accept:`` trailer names it, ``quarantined``
#: when the quarantine file lists the series (``benchtrail.compare.rules``). Only the first two gate.
MARKS = ("confirmed", "unconfirmed", "accepted", "quarantined")
VERDICTS = ("regressed", "improved", "inconclusive", "similar", "new", "removed", "failed", "not-comparable",
            "insufficient-samples")
#: Verdicts of rows whose interval decided nothing: ``noisy`` is one of versions 1 to 7 (read, never written).
INCONCLUSIVE = ("inconclusive", "noisy")


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
    threshold: dict[str, Any] | None
    head_details: dict[str, Any]
    base_details: dict[str, Any]
    ci_low: float | None = None
    ci_high: float | None = None
    q_value: float | None = None
    mde: float | None = None
    outcome: str | None = None
    mark: str | None = None
    ab: dict[str, Any] | None = None
    quarantined: str | None = None
    recheck: str | None = None
    profile: dict[str, Any] | None = None
    noisy: bool | None = None
    stored: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        """The field ``key`` (a comparison.json row key), for code that reads rows by key.

        Raises:
            KeyError: ``key`` is not a field of a row.
        """
        if key not in _ROW_FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when a row has no such field."""
        return getattr(self, key) if key in _ROW_FIELDS else default

    @classmethod
    def of(cls, row: Row | Mapping[str, Any]) -> Row:
        """``row`` itself, or the row of a comparison.json row object built in memory (fields it lacks, as rows
        of older versions do, take their defaults; keys that are not fields are ignored; nothing is checked:
        :func:`load_comparison` checks a file's rows)."""
        if isinstance(row, Row):
            return row
        return cls(**{k: row[k] for k in _ROW_FIELDS if k in row})


_ROW_FIELDS = frozenset(f.name for f in fields(Row))
#: Row keys only the re-check writes, absent (not null) elsewhere.
_RECHECK_ONLY = ("profile", "stored")


@dataclass(frozen=True)
class Comparison:
    """A ``comparison.json`` document: typed rows over the JSON object they were read from or built as.

    ``document`` is that object, kept as it is so that a stage that rewrites the file (the re-check) writes
    every key it had, rows of older schema versions included; ``rows`` are its rows as :class:`Row`
    (fields an older row lacks take their defaults). The document's keys can also be read by key
    (``comparison["missing_shards"]``, ``"missing_shards" in comparison``), as older callers do.
    """

    document: dict[str, Any]
    rows: tuple[Row, ...]

    @classmethod
    def of(cls, comparison: Comparison | dict[str, Any]) -> Comparison:
        """``comparison`` itself, or the Comparison of a comparison.json object built in memory (its rows
        taken as they are: :func:`load_comparison` checks a file)."""
        if isinstance(comparison, Comparison):
            return comparison
        return cls(comparison, tuple(Row.of(r) for r in comparison["rows"]))

    @property
    def schema_version(self) -> int:
        return self.document["schema_version"]

    @property
    def head(self) -> dict[str, Any]:
        """The head side: ``commit``, ``dirty``, ``run``, ``torch_version``, ``devices``, ``runner_checks``."""
        return self.document["head"]

    @property
    def base(self) -> dict[str, Any] | None:
        return self.document.get("base")

    @property
    def baseline(self) -> dict[str, Any] | None:
        """The stored baseline the head was compared with (``benchtrail.compare.baseline``), or None."""
        return self.document.get("baseline")

    @property
    def counts(self) -> dict[str, int]:
        return self.document["counts"]

    @property
    def missing_shards(self) -> list[dict[str, Any]] | None:
        """``[{device_name, shard_index}]`` that wrote no results (None: no export to check, or before version 5)."""
        return self.document.get("missing_shards")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object to write (the document itself, key for key)."""
        return self.document

    def __getitem__(self, key: str) -> Any:
        return self.document[key]

    def __contains__(self, key: object) -> bool:
        return key in self.document

    def get(self, key: str, default: Any = None) -> Any:
        return self.document.get(key, default)


def accepted(row: Row | Mapping[str, Any], accept: Sequence[str]) -> bool:
    """Whether the row's name or id matches one of the ``accept`` globs (``benchmarks-accept:`` trailers)."""
    import fnmatch

    name, sid = row["name"], row["id"]
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(sid, g) for g in accept)


def _side(files: list[ResultsFile]) -> dict[str, Any] | None:
    if not files:
        return None
    f = files[0]
    return {"commit": f.commit, "dirty": f.dirty, "run": f.run,
            "torch_version": f.environment.get("torch_version"), "devices": sorted({b.device_name for f in files
                                                                                     for b in f.benchmarks})}


def count_rows(rows: Sequence[Row | Mapping[str, Any]], version: int = SCHEMA_VERSION) -> dict[str, int]:
    """``counts`` of comparison.json of ``version``: rows per verdict (``noisy`` before version 8, ``inconclusive``
    from it) and regressed rows per mark (``quarantined`` from version 4).

    Raises:
        KeyError: a row object without ``verdict`` or ``mark``.
    """
    verdicts = VERDICTS if version >= 8 else tuple(v if v != "inconclusive" else "noisy" for v in VERDICTS)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in verdicts}
    marks = MARKS if version >= 4 else MARKS[:3]  # quarantined from version 4
    counts.update({m: sum(r["mark"] == m for r in rows if r["verdict"] == "regressed") for m in marks})
    return counts


def upgraded(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (comparison.json's object, any version) as of ``SCHEMA_VERSION``, for a stage that adds this
    version's keys to it (the re-check): each row with every field, those an older row lacks at their defaults
    (a regressed row without a mark ``unconfirmed``); a ``noisy`` verdict ``inconclusive`` with the label, a
    ``similar`` one whose interval did not decide (UNKNOWN) ``inconclusive``; ``missing_shards`` null when
    absent; ``counts`` again. A document of this version is returned as it is."""
    if document.get("schema_version") == SCHEMA_VERSION:
        return document
    rows = []
    for row in document["rows"]:
        plain = {k: v for k, v in asdict(Row.of(row)).items() if k not in _RECHECK_ONLY or v is not None}
        if plain["verdict"] == "noisy":
            plain.update(verdict="inconclusive", noisy=True)
        elif plain["verdict"] == "similar" and plain["outcome"] == "UNKNOWN" and plain["ci_low"] is not None:
            plain["verdict"] = "inconclusive"
        if plain["verdict"] == "regressed" and plain["mark"] is None:
            plain["mark"] = "unconfirmed"
        rows.append(plain)
    return {**document, "schema_version": SCHEMA_VERSION, "missing_shards": document.get("missing_shards"),
            "rows": rows, "counts": count_rows(rows)}


def gate(rows: Sequence[Row | Mapping[str, Any]], fail_on: str | None) -> list[str]:
    """Names of the rows (typed, or comparison.json's row objects) that fail the gate ``fail_on`` (only
    ``"regressed"``): regressions neither accepted nor quarantined."""
    if fail_on is None:
        return []
    return [r["name"] for r in rows if r["verdict"] == fail_on and r["mark"] not in ("accepted", "quarantined")]


def comparison_to_dict(rows: list[Row], base: list[ResultsFile], head: list[ResultsFile],
                       thresholds_source: str, baseline: dict[str, Any] | None = None,
                       missing_shards: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON object of ``comparison.json``; ``head.runner_checks`` lists the ``benchtrail doctor``
    checks that failed where the head results were measured (:func:`failed_by_device`);
    ``missing_shards`` the ``{device_name, shard_index}`` of the head run's execution export that wrote
    no results file (None: the head has no execution export to check against)."""
    # profile and stored are set by the re-check only, on the rows it profiled or decided: absent elsewhere
    plain = [{k: v for k, v in asdict(r).items() if k not in _RECHECK_ONLY or v is not None} for r in rows]
    head_side = _side(head)
    if head_side is not None:
        head_side["runner_checks"] = failed_by_device(head)
    return {
        "schema_version": SCHEMA_VERSION,
        "head": head_side,
        "base": _side(base),
        "baseline": baseline,
        "thresholds_source": thresholds_source,
        "counts": count_rows(plain),
        "rows": plain,
        "missing_shards": missing_shards,
    }


def build_comparison(rows: list[Row], base: list[ResultsFile], head: list[ResultsFile], thresholds_source: str,
                     baseline: dict[str, Any] | None = None,
                     missing_shards: list[dict[str, Any]] | None = None) -> Comparison:
    """The :class:`Comparison` of ``rows`` (its document: :func:`comparison_to_dict`)."""
    return Comparison(comparison_to_dict(rows, base, head, thresholds_source, baseline, missing_shards), tuple(rows))


def load_comparison(path: str | Path) -> Comparison:
    """Read and validate ``comparison.json`` of any schema version (every row checked against :class:`Row`;
    fields an older row lacks take their defaults in ``rows``, and stay absent in ``document``).

    Raises:
        UserError: unreadable, an unknown schema version, a missing or malformed field, or a
            verdict outside ``VERDICTS``; the message names the file and the field.
    """
    from benchtrail import jsonio
    from benchtrail.suite.serialization import from_plain

    obj = jsonio.read_json(path, kind="comparison", supported=SCHEMA_VERSION)
    for key, kind in (("rows", list), ("counts", dict), ("head", dict)):
        if not isinstance(obj.get(key), kind):
            raise UserError(f"comparison {path}: field {key!r} must be a {kind.__name__}, got {obj.get(key)!r}")
    for key in ("base", "baseline"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise UserError(f"comparison {path}: field {key!r} must be an object or null")
    rows = []
    for i, row in enumerate(obj["rows"]):
        checked = from_plain(row, Row, where=f"comparison {path}: rows[{i}]")
        rows.append(checked)
        if checked.mark not in (None, *MARKS):
            raise UserError(f"comparison {path}: rows[{i}] has mark {checked.mark!r}; allowed: {', '.join(MARKS)}")
        allowed = VERDICTS if obj["schema_version"] >= 8 else (*VERDICTS, "noisy")
        if checked.verdict not in allowed:
            raise UserError(f"comparison {path}: rows[{i}] ({checked.name!r}) has verdict {checked.verdict!r}; "
                            f"allowed: {', '.join(allowed)}")
    if not isinstance(obj["head"].get("commit"), str):
        raise UserError(f"comparison {path}: head.commit must be a string")
    missing = obj.get("missing_shards")  # absent before version 5: read as null (not checked)
    if missing is not None and not (isinstance(missing, list) and all(
            isinstance(m, dict) and set(m) == {"device_name", "shard_index"} and isinstance(m["device_name"], str)
            and isinstance(m["shard_index"], int) and not isinstance(m["shard_index"], bool) for m in missing)):
        raise UserError(f"comparison {path}: field 'missing_shards' is {missing!r}; allowed: null or a list of "
                        "{device_name: <string>, shard_index: <integer>}")
    return Comparison(obj, tuple(rows))


def failed_checks(report: dict[str, Any] | None) -> list[dict[str, str]]:
    """The failed checks of a ``benchtrail doctor`` report (a results file's ``environment.doctor``) as
    ``[{name, value, expected}]``; [] for none."""
    failed = set((report or {}).get("failed") or ())
    return [{k: c[k] for k in ("name", "value", "expected")} for c in (report or {}).get("checks", ())
            if c.get("name") in failed]


def failed_by_device(files: list[ResultsFile]) -> list[dict[str, Any]]:
    """``[{device, failed: [{name, value, expected}]}]`` over results files whose ``environment.doctor`` has
    failed checks, one entry per device name (the first value of each check wins when shards disagree);
    what comparison.json's ``head.runner_checks`` holds. A file that names no device (a compilation file with
    no series: an eager-only run) counts under the devices of the other files of its host, else under the
    host's name."""
    def device_of(f: ResultsFile) -> str:
        return f.run.get("device_name") or ", ".join(sorted({b.device_name for b in f.benchmarks}))

    host_devices: dict[str, set[str]] = {}
    for f in files:
        if device_of(f) and f.environment.get("hostname"):
            host_devices.setdefault(f.environment["hostname"], set()).add(device_of(f))
    host_device = {host: ", ".join(sorted(devices)) for host, devices in host_devices.items()}
    merged: dict[str, dict[str, dict[str, str]]] = {}
    for f in files:
        failed = failed_checks(f.environment.get("doctor"))
        if not failed:
            continue
        host = f.environment.get("hostname")
        device = device_of(f) or host_device.get(host) or host or "?"
        for item in failed:
            merged.setdefault(device, {}).setdefault(item["name"], item)
    return [{"device": d, "failed": list(checks.values())} for d, checks in sorted(merged.items())]
