"""Broken documents (real smoke-run outputs, each broken one way) are rejected by their JSON Schema,
the error naming what is wrong."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from tests.helpers.schemas import errors, store_files


def _first(history_store, pattern: str) -> Any:
    store, files = store_files(history_store)
    path = next(p for p in files if re.fullmatch(pattern, p.relative_to(store).as_posix()))
    return json.loads(path.read_text(encoding="utf-8"))


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def _set(path: tuple, value: Any):
    return lambda doc: _parent(doc, path).__setitem__(path[-1], value)


def _delete(*path: Any):
    return lambda doc: _parent(doc, path).__delitem__(path[-1])


RESULTS, COMPARISON = r"runs/[^/]+/1/results/c2-standard-16-0\.json", r"runs/[^/]+/1/comparison\.json"
BROKEN = {  # (file pattern, schema, how it is broken, what the error names)
    "results: an unknown status": (RESULTS, "results.schema.json", _set(("benchmarks", 0, "status"), "okay"),
                                   "$.benchmarks[0].status"),
    "results: no schema_version": (RESULTS, "results.schema.json", _delete("schema_version"),
                                   "schema_version"),
    "results: a newer schema_version": (RESULTS, "results.schema.json", _set(("schema_version",), 3),
                                        "$.schema_version"),
    "results: latency higher-is-better": (RESULTS, "results.schema.json",
                                          _set(("benchmarks", 0, "direction"), "higher-is-better"),
                                          "$.benchmarks[0].direction"),
    "results: version 2 without direction": (RESULTS, "results.schema.json",
                                             _delete("benchmarks", 0, "direction"),
                                             "direction"),
    "results: an unknown details key": (RESULTS, "results.schema.json",
                                        _set(("benchmarks", 0, "details", "bogus_key"), "x"), "bogus_key"),
    "results: execution in ms": (RESULTS, "results.schema.json", _set(("benchmarks", 0, "unit"), "ms"),
                                 "$.benchmarks[0].unit"),
    "results: ok without samples": (RESULTS, "results.schema.json", _set(("benchmarks", 0, "samples"), []),
                                    "$.benchmarks[0].samples"),
    "results: an unknown correctness quantity": (
        RESULTS, "results.schema.json",
        _set(("benchmarks", 1, "details", "correctness", "quantity"), "output"),
        "quantity"),
    "results: no torch version": (RESULTS, "results.schema.json", _delete("environment", "torch_version"),
                                  "torch_version"),
    "results: a preset that is a path": (RESULTS, "results.schema.json", _set(("run", "presets"), ["../x"]),
                                         "$.run"),
    "comparison: an unknown verdict": (COMPARISON, "comparison.schema.json",
                                       _set(("rows", 0, "verdict"), "worse"),
                                       "$.rows[0].verdict"),
    "comparison: an unknown mark": (COMPARISON, "comparison.schema.json", _set(("rows", 0, "mark"), "maybe"),
                                    "$.rows[0].mark"),
    "comparison: a regression without a mark": (
        COMPARISON, "comparison.schema.json",
        lambda d: d["rows"][0].update(verdict="regressed", mark=None), "$.rows[0].mark"),
    "comparison: a verdict missing from counts": (COMPARISON, "comparison.schema.json",
                                                  _delete("counts", "inconclusive"),
                                                  "$.counts"),
    "comparison: version 2": (COMPARISON, "comparison.schema.json", _set(("schema_version",), 2),
                              "$.schema_version"),
    "comment: no schema_version": (r"runs/[^/]+/1/comment/comment\.json", "comment.schema.json",
                                   _delete("schema_version"), "schema_version"),
    "comment: a marker of another tool": (r"runs/[^/]+/1/comment/comment\.json", "comment.schema.json",
                                          _set(("marker",), "<!-- other -->"), "$.marker"),
    "pointer: attempt 0": (r"commits/.+\.json", "pointer.schema.json", _set(("attempt",), 0), "$.attempt"),
    "bench document: an unknown status": (r"runs/[^/]+/1/results/docs/.+\.json", "bench-document.schema.json",
                                          _set(("status",), "okay"), "$.status"),
    "bench document: an unknown flattened key": (r"runs/[^/]+/1/results/docs/.+\.json",
                                                 "bench-document.schema.json",
                                                 _set(("details.memory.bogus",), 1), "details.memory.bogus"),
    "execution export: an unknown field of a run config": (
        r"runs/[^/]+/1/run-configs/execution\.json", "execution-export.schema.json",
        lambda d: next(o for s in d["devices"].values()
                       for o in s["shards"][0]["run_configs"]["keyed_obj_map"].values()
                       if "execution_config" in o).update(priority=1), "keyed_obj_map"),
    "module info: an Inductor module with an artifact": (
        r"runs/[^/]+/1/modules/vrelu3\.inductor\.cpu/module_info\.json", "module-info.schema.json",
        _set(("artifact",), "exported_program.pt2"), "$.artifact"),
    "compile stats: ok without compile times": (
        r"runs/[^/]+/1/modules/vrelu3\.inductor\.cpu/compile-stats\.json", "compile-stats.schema.json",
        _delete("cold_ms"), "cold_ms"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_documents_are_rejected(history_store, case):
    pattern, schema, mutate, named = BROKEN[case]
    doc = _first(history_store, pattern)
    assert not errors(schema, doc), "the unbroken document validates"
    broken = copy.deepcopy(doc)
    mutate(broken)
    found = errors(schema, broken)
    assert found, f"{case}: the broken document validates"
    assert any(named in e for e in found), found


def test_broken_history_and_convert_documents_are_rejected():
    point = {"commit": "a" * 40, "run_id": "r1", "attempt": 1, "median": 1.0, "iqr": 0.0, "min": 1.0,
             "max": 1.0,
             "n": 1, "status": "ok", "p25": 1.0, "p75": 1.0, "torch_version": "2.13.0"}
    series = {"name": "m.eager.cpu.graph_count", "kind": "compilation", "metric": "graph_count",
              "unit": "count",
              "device_name": "c2-standard-16", "presets": ["smoke"], "compile_config": "eager", "task": None,
              "points": [point]}
    history = {"schema_version": 1, "ref": "main", "head": "a" * 40, "store": "file:///s",
               "commits": [{"commit": "a" * 40, "run_id": "r1", "attempt": 1}],
               "series": {"x-graph_count": series},
               "skipped": []}
    assert not errors("history.schema.json", history)
    bad = copy.deepcopy(history)
    bad["series"]["x-graph_count"]["points"][0]["status"] = "okay"
    assert any("status" in e for e in errors("history.schema.json", bad))
    bad = copy.deepcopy(history)
    bad["commits"][0]["attempt"] = None  # a run id without an attempt
    assert errors("history.schema.json", bad)
    assert errors("gab.schema.json", [{"name": "a", "unit": "us", "value": 1.0}])  # no extra
    # lower without upper
    assert errors("bmf.schema.json", {"a": {"latency": {"value": 1.0, "lower_value": 0.5}}})

