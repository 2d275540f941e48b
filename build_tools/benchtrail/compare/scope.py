"""What a comparison covers, judged around the verdicts: the baseline series within the head run's
selection, devices whose baselines were measured differently or cannot be used, and run configs the head
run's execution export expected but got no result for."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from benchtrail import jsonio
from benchtrail.compare.baseline import unusable
from benchtrail.compare.document import Json, Row
from benchtrail.compare.verdicts import Unreported
from benchtrail.results.baseline_key import difference, keys_of_results
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.suite.export import SCHEMA_VERSION as EXPORT_VERSION
from benchtrail.suite.export import load_execution
from benchtrail.suite.filters import compile_filter
from benchtrail.suite.names import slug


def _exports(head: list[Path]) -> list[Path]:
    """The execution exports (``<dir>/run-configs/execution.json``) of the head run directories."""
    return [e for e in (Path(p) / "run-configs" / "execution.json" for p in head) if e.is_file()]


def unreported(
    head: list[Path], head_files: list[ResultsFile], skipped_devices: tuple[str, ...]
) -> tuple[tuple[Unreported, ...], list[Json] | None]:
    """``(run configs with no record, shards that did not report)`` of the head run directories' execution
    exports, ``skipped_devices`` left out; ``((), None)`` when no head has an export. A shard reported when
    its ``results/<slug(device)>-<index>.json`` exists or a head results file says it ran it; a shard
    without run configs has nothing to report. Raises UserError when an export cannot be read."""
    exports = _exports(head)
    if not exports:
        return (), None
    ran = {(f.run.get("device_name"), f.run.get("shard_index")) for f in head_files}
    recorded = {b.id for f in head_files for b in f.benchmarks}
    lacking: dict[str, Unreported] = {}
    missing: list[Json] = []
    for export in exports:
        results_dir = export.parent.parent / "results"
        for device, shards in sorted(load_execution(export).items()):
            if device in skipped_devices:
                continue
            for index, rcs in sorted(shards.items()):
                reported = (
                    ran & {(device, index), (device, None)}
                    or (results_dir / f"{slug(device)}-{index}.json").is_file()
                )
                shard = {"device_name": device, "shard_index": index}
                if not reported and rcs and shard not in missing:  # an empty shard has no job (matrix.jq)
                    missing.append(shard)
                why = (
                    "reported without it (it was run with --filter or --benchmark-id)"
                    if reported
                    else "did not report (its job failed, timed out or was cancelled)"
                )
                for rc in rcs:
                    if rc.id not in recorded and rc.id not in lacking:
                        gen = rc.module_generation_config
                        lacking[rc.id] = Unreported(
                            rc.id,
                            rc.name,
                            device,
                            gen.name,
                            gen.compile_config.name,
                            f"no result: shard {index} of device {device} {why}",
                        )
    return tuple(lacking.values()), missing


def key_mismatches(base: list[ResultsFile], head: list[ResultsFile], any_origin: bool) -> dict[str, str]:
    """``{device: what differs}`` for the devices of both sides whose baseline keys differ (GPU model, torch
    version, method version, origin unless ``any_origin``)."""
    base_keys = keys_of_results(base)
    return {
        d: why
        for d, keys in keys_of_results(head).items()
        if d in base_keys and (why := difference(base_keys[d], keys, any_origin=any_origin))
    }


def exported_filter(head: list[Path]) -> re.Pattern[str] | None:
    """The head exports' ``--filter``, compiled; None when none was given or no head has an export.
    Raises UserError when an export cannot be read or its filter is not a regular expression."""
    for export in _exports(head):
        text = jsonio.read_json(export, kind="execution export", supported=EXPORT_VERSION).get("filter")
        if isinstance(text, str):
            return compile_filter(text)
    return None


def in_selection(
    base: list[ResultsFile], head: list[ResultsFile], pattern: re.Pattern[str] | None
) -> list[ResultsFile]:
    """``base`` without the records the head lacks that lie outside the head run's selection: its presets
    (a record's own, else its run's) and the ``--filter`` ``pattern`` (over name, id or module name). A
    series the head did not select is so not ``removed``; unchanged when the head files name no presets."""
    wanted = {p for f in head for p in f.run.get("presets") or ()}
    if not wanted:
        return base
    in_head = {b.id for f in head for b in f.benchmarks}

    def chosen(b: BenchmarkRecord, run_presets: set[str]) -> bool:
        presets = set(b.presets) or run_presets
        return (pattern is None or any(map(pattern.search, (b.name, b.id, b.module_name)))) and (
            not presets or bool(presets & wanted)
        )

    kept = []
    for f in base:
        run_presets = set(f.run.get("presets") or ())
        records = tuple(b for b in f.benchmarks if b.id in in_head or chosen(b, run_presets))
        if records:
            kept.append(replace(f, benchmarks=records))
    return kept


def unusable_baselines(rows: list[Row], baseline: Json | None) -> tuple[list[Row], dict[str, str]]:
    """``rows`` with each ``new`` row of a device whose baseline run cannot be used made ``not-comparable``
    with the reason, and those ``{device: reason}``."""
    why = unusable(baseline)
    return [
        replace(r, verdict="not-comparable", reason=why[r.device_name])
        if r.verdict == "new" and r.device_name in why
        else r
        for r in rows
    ], why
