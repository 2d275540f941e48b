"""The JSON Schemas of ``docs/schemas/`` (docs/formats.md, "JSON Schemas") against real outputs.

Every JSON file of four real ``smoke`` pipeline runs and their store (``history_store``) must match a
path pattern of ``RUN_FILES`` / ``STORE_FILES`` and validate against its schema, so a new file
format without a schema fails here. The outputs of the other commands (history, compare, comment,
convert, doctor, evaluate-detector) are made here from those runs and validated too; broken documents
must be rejected (tests/test_schemas_broken.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from benchtrail.compare.document import Comparison
from tests.helpers.cli import run_cli
from tests.helpers.schemas import (
    ROOT,
    RUN_FILES,
    SCHEMAS,
    STORE_FILES,
    assert_valid,
    check_tree,
    errors,
    registry,
    schema_of,
    schemas,
    store_files,
)

DRAFT = "https://json-schema.org/draft/2020-12/schema"

#: Schemas of outputs that other commands write (validated by the tests below).
OTHER_OUTPUTS = {"history.schema.json": "benchtrail history",
                 "gab.schema.json": "benchtrail convert --to gab",
                 "bmf.schema.json": "benchtrail convert --to bmf",
                 "doctor.schema.json": "benchtrail doctor --json",
                 "detector.schema.json": "benchtrail evaluate-detector",
                 "detector-counts.schema.json": "benchtrail evaluate-detector --metric instructions"}


def _refs(node: Any):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_schema_is_valid_draft_2020_12_its_refs_resolve_and_a_test_covers_it():
    assert schemas(), f"no schema in {SCHEMAS}"
    for name, schema in schemas().items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == DRAFT, name
        assert schema.get("title") and schema.get("description"), (f"{name}: say what the file is and who "
                                                                   "writes it")
        resolver = registry().resolver(base_uri=name)
        for ref in _refs(schema):
            resolver.lookup(ref)  # raises for a $ref to a missing file or definition
    covered = {s for _, s in RUN_FILES + STORE_FILES} | set(OTHER_OUTPUTS)
    assert covered == set(schemas()), ("every schema has a path pattern or a test of the command that writes "
                                       "it")


def test_path_patterns_map_each_kind_of_file_to_its_schema():
    run = "runs/local-20261129T211357Z-59262283/1/"
    assert schema_of(run + "results/c2-standard-16-0.json") == "results.schema.json"
    assert schema_of(run + "results/compilation-c2-standard-16.json") == "results.schema.json"
    assert schema_of(run
                     + "results/docs/bench_mlp.eager.inference-bs1.c2-standard-16_20261129T211444Z_07cf06a8."
                     "json") \
        == "bench-document.schema.json"
    assert schema_of(run + "ab/ab-head.json") == "results.schema.json"
    assert schema_of("results/c2-standard-16-0.instructions.json", run_dir=True) == "results.schema.json"
    assert schema_of("commits/" + "a" * 40
                     + "/local-20261129T211357Z-59262283-1.json") == "pointer.schema.json"
    for unknown in (run + "results/docs/notes.json", run + "new-format.json", run + "modules/m/extra.json",
                    "commits/abc/x-1.json", "history.json"):
        assert schema_of(unknown) is None, unknown


@pytest.mark.e2e
def test_every_json_file_of_real_smoke_runs_has_a_schema_and_validates(history_store):
    unmatched, invalid, seen = check_tree(store_files(history_store)[0])
    assert not unmatched, ("files without a schema (add one to docs/schemas/ and a pattern to RUN_FILES / "
                           f"STORE_FILES, or a non-JSON pattern): {unmatched}")
    assert not invalid, "\n".join(invalid[:40])
    runs = len(history_store["run_dirs"])
    expected = {"execution-export.schema.json": runs, "compilation-export.schema.json": runs,
                "comparison.schema.json": runs, "comment.schema.json": runs, "pointer.schema.json": runs}
    assert {s: len(seen.get(s, ())) for s in expected} == expected
    # smoke: 3 eager / Inductor modules, 3 cases on one device; compilation series of the Inductor module
    for schema, per_run in (("module-info.schema.json", 3), ("compile-stats.schema.json", 3),
                            ("bench-document.schema.json", 3), ("results.schema.json", 2)):
        assert len(seen.get(schema, ())) == per_run * runs, (schema, seen.get(schema))


@pytest.mark.e2e
@pytest.mark.parametrize("extra", [(), ("--ref", "side", "--max-commits", "2")])
def test_history_json_of_the_real_runs_validates(history_store, tmp_path, capsys, extra):
    output = tmp_path / "history.json"
    code, _out, err = run_cli(capsys, "history", "--store", history_store["store"], "--repo",
                              history_store["repo"],
                          "--output", output, *extra)
    assert code == 0, err
    assert_valid("history.schema.json", output)
    data = json.loads(output.read_text())
    assert {s["kind"] for s in data["series"].values()} == {"execution", "compilation"}


@pytest.mark.e2e
def test_compare_and_comment_of_two_real_runs_validate_with_baseline_rows_and_marks(history_store, tmp_path,
                                                                                    capsys):
    runs = history_store["run_dirs"]
    comparison = tmp_path / "comparison.json"
    # Every series of c1 as the baseline of c2's, and every regression accepted (a mark on regressed rows).
    code, _, err = run_cli(capsys, "compare", "--base", runs["c1"], "--head", runs["c2"], "--accept", "*",
                           "--output", comparison)
    assert code == 0, err
    assert_valid("comparison.schema.json", comparison)
    code, _, err = run_cli(capsys, "comment", "--comparison", comparison, "--output-dir",
                           tmp_path / "comment")
    assert code == 0, err
    assert_valid("comment.schema.json", tmp_path / "comment" / "comment.json")
    # Without a baseline every series is new (base and baseline null).
    alone = tmp_path / "alone.json"
    assert run_cli(capsys, "compare", "--head", runs["c3"], "--output", alone)[0] == 0
    assert_valid("comparison.schema.json", alone)
    assert json.loads(alone.read_text())["base"] is None


@pytest.mark.e2e
def test_a_paired_recheck_of_a_real_comparison_validates(history_store, tmp_path):
    """``confirm.apply`` gives re-checked rows their ``ab`` entry: here the comparison is c1 against c3 and
    the paired rows a real comparison of c2 with c3; the rows a stored baseline suspected are made so by
    hand (a paired run needs workers and a worktree)."""
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.verdicts import compare
    from benchtrail.pipeline.report_stages import compare_stage
    from benchtrail.results.io import load_results_paths
    from benchtrail.runner.ab import Arm
    from benchtrail.runner.recheck import suspects
    from tests.helpers.records import apply_recheck

    runs, commits = history_store["run_dirs"], history_store["commits"]
    path = compare_stage([Path(runs["c1"])], [Path(runs["c3"])], tmp_path / "comparison.json", None)
    comparison = json.loads(path.read_text())
    rows = [r for r in comparison["rows"] if r["kind"] == "execution"]
    rows[0].update(verdict="regressed", mark="unconfirmed")
    rows[1].update(verdict="improved", mark=None)
    suspected = len(suspects(Comparison.of(comparison)))
    assert suspected >= 2
    paired = {r.id: asdict(r) for r in compare(load_results_paths([runs["c2"]]),
                                               load_results_paths([runs["c3"]]),
                                               load_thresholds())}
    base, head = Arm("base", commits["c2"], Path(runs["c2"])), Arm("head", commits["c3"], Path(runs["c3"]))
    updated = apply_recheck(comparison, paired, base, head)
    assert sum(r["ab"] is not None for r in updated["rows"]) == suspected
    assert not errors("comparison.schema.json", updated)


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["gab", "bmf"])
def test_convert_of_a_real_run_validates(history_store, tmp_path, capsys, fmt):
    output = tmp_path / f"{fmt}.json"
    code, _, err = run_cli(capsys, "convert", "--to", fmt, "--results", history_store["run_dirs"]["c3"],
                           "--output", output)
    assert code == 0, err
    assert_valid(f"{fmt}.schema.json", output)
    assert_valid(f"{fmt}.schema.json", ROOT / "tests" / "data" / "convert" / f"expected-{fmt}.json")


def test_doctor_json_validates(tmp_path, capsys):
    output = tmp_path / "doctor.json"
    code, _, err = run_cli(capsys, "doctor", "--json", output)
    assert code in (0, 4), err  # 4: a check failed on this machine; the file is written either way
    assert_valid("doctor.schema.json", output)


def test_evaluate_detector_output_validates(tmp_path):
    """A tiny real evaluation (about 10 s), and the same judged again at another threshold."""
    from benchtrail.detector.evaluate import EvalConfig, evaluate, rejudge
    from benchtrail.jsonio import write_json

    doc = evaluate(EvalConfig(aa=1, ab=1, deltas_pct=(50.0,), matrix_size=64, sample_time_ms=1.0,
                              warmup_s=0.1,
                              calibration_samples=20, max_samples=30))
    assert_valid("detector.schema.json", write_json(tmp_path / "detector.json", doc, exclusive=True))
    again = rejudge(json.loads((tmp_path / "detector.json").read_text()), 90.0)
    assert_valid("detector.schema.json", write_json(tmp_path / "again.json", again, exclusive=True))


def test_evaluate_detector_instructions_output_validates():
    """A ``--metric instructions`` document of synthetic counts (no valgrind): the setup and processes that
    ``evaluate_counts`` and ``count_worker`` write, comparisons drawn and judged by
    ``detector.count_evaluation``."""
    import numpy as np

    from benchtrail.detector.count_evaluation import draw_comparisons, rejudge
    from tests.helpers.instruction_counts import synthetic

    counts = synthetic()  # 6 processes, 8 repeats of the base and of δ = 0.25% and 1%
    process = {"calls_per_block": 1, "overhead": 1984.0, "base_instructions": 13_373_294.0, "pid": 7,
               "loop_instructions_per_iteration": 74.0, "loop_iterations": [0, 452, 1807], "wall_s": 74.9,
               "phase_seconds": {"start": 0.0, "counted": 43.1}, "seconds_after_start": 44.2,
               "cpu_capability": "DEFAULT", "torch": "2.13.0"}
    setup = {"metric": "instructions", "counter": "callgrind", "valgrind": "3.19.0", "cpu": "AuthenticAMD X",
             "matrix_size": 384, "dtype": "float32", "torch_threads": 1, "torch": "2.13.0", "seed": 0,
             "threshold_pct": 0.5, "threshold_match": "execution/*", "series": "matmul.eager.inference",
             "aa": 30, "ab": 10, "deltas_pct": [0.25, 1.0], "samples_per_side": 5, "repeats_per_process": 8,
             "parallel": 2, "collect_s": 208.8, "processes": [{**process, "counts": c} for c in counts],
             "background_load": None, "cpu_model": "AMD EPYC", "cpu_count": 2, "python": "3.11.7",
             "machine": "x86_64", "date": "2026-12-05T12:23:33+00:00", "elapsed_s": 208.9}
    drawn = draw_comparisons(counts, (0.25, 1.0), 30, 10, 5, np.random.default_rng(0))
    doc = rejudge({"schema_version": 1, "setup": setup, "comparisons": drawn}, 0.5)
    assert not errors("detector-counts.schema.json", doc)
    assert [(r["similar"], r["regressed"]) for r in doc["rows"]] == [(30, 0), (10, 0), (0, 10)]  # δ 0, ¼, 1
    assert errors("detector.schema.json", doc)  # the latency evaluation's schema is not this document's
    doc["comparisons"][0]["verdict"] = "noisy"  # a label, never a verdict
    assert any("$.comparisons[0].verdict" in e for e in errors("detector-counts.schema.json", doc))


def _check_jsonschema() -> list[str]:
    exe = Path(sys.executable).with_name("check-jsonschema")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "check_jsonschema"]


@pytest.mark.e2e
def test_check_jsonschema_validates_by_hand_as_formats_md_says(history_store, tmp_path):
    """``check-jsonschema --schemafile docs/schemas/results.schema.json results/*.json``, with the schemas'
    relative ``$ref``s resolved from their folder; a broken file fails it."""
    run_dir = Path(history_store["run_dirs"]["c3"])
    files = sorted(str(p) for p in (run_dir / "results").glob("*.json"))
    for schema, paths in (("results.schema.json", files),
                          ("comparison.schema.json", [str(run_dir / "comparison.json")])):
        done = subprocess.run([*_check_jsonschema(), "--schemafile", str(SCHEMAS / schema), *paths],
                              capture_output=True, text=True, cwd=run_dir, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    broken = json.loads((run_dir / "comparison.json").read_text())
    broken["rows"][0]["head_details"]["bogus"] = 1  # checked through the $ref to results.schema.json
    (tmp_path / "comparison.json").write_text(json.dumps(broken))
    done = subprocess.run([*_check_jsonschema(), "--schemafile", str(SCHEMAS / "comparison.schema.json"),
                           str(tmp_path / "comparison.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "bogus" in done.stdout, done.stdout + done.stderr
