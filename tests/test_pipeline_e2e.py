"""The main job end to end on the smoke preset: two runs, the second compared with the first.

The runs are those of the session's ``history_store`` (tests/conftest.py): its runs at commits c1 and c2,
c2's first parent (one real pipeline per run, shared with the history, dashboard and schema tests).
"""

import json

import pytest

from benchtrail.cli import main
from benchtrail.results.io import load_results_paths


@pytest.fixture(scope="module")
def two_runs(history_store):
    return history_store["store"], (history_store["run_dirs"]["c1"], history_store["run_dirs"]["c2"])


@pytest.mark.e2e
def test_second_run_compares_each_row_with_the_value_the_first_stored(two_runs):
    _, (first, second) = two_runs
    stored = {b.id: b.median for f in load_results_paths([first]) for b in f.benchmarks}
    comparison = json.loads((second / "comparison.json").read_text())
    assert comparison["baseline"]["run_id"] == first.parent.name
    rows = comparison["rows"]
    assert {r["id"] for r in rows} == set(stored)
    for row in rows:
        assert row["base_median"] == stored[row["id"]], row["name"]
        assert row["verdict"] in ("similar", "regressed", "improved", "inconclusive")  # compared, not new


@pytest.mark.e2e
def test_comment_has_a_row_per_benchmark_and_the_run_directory_is_complete(two_runs, capsys):
    store, (_first, second) = two_runs
    body = (second / "comment" / "comment.md").read_text()
    # one device: no device suffix
    for name in ("vrelu3.eager.inference-bs1", "vrelu3.inductor.inference-bs1",
                 "mlp.eager.inference-bs1", "vrelu3.inductor.cpu.graph_count"):
        assert f"`{name}`" in body
    assert body.startswith("### benchtrail: ")
    for rel in ("run-configs/execution.json", "run-configs/compilation.json", "results/c2-standard-16-0.json",
                "results/compilation-c2-standard-16.json", "modules/vrelu3.inductor.cpu/compile-stats.json",
                "modules/vrelu3.inductor.cpu/module_info.json", "comment/comment.json", "comment/full.md"):
        assert (second / rel).is_file(), rel
    assert len(list((second / "results" / "docs").glob("bench_*.json"))) == 3
    stats = json.loads((second / "modules/vrelu3.inductor.cpu/compile-stats.json").read_text())
    assert stats["status"] == "ok" and stats["graph_count"] == 1 and stats["compile_time_ms"] > 0
    assert stats["kernel_count"] > 0 and stats["artifact_bytes"] > 0  # a suite model's real Inductor module
    pointers = sorted((store / "commits").glob("*/*.json"))
    assert len(pointers) == 4  # one per run of the history: c1, c2, s1, c3
    assert all(json.loads(p.read_text())["devices"] == ["c2-standard-16"] for p in pointers)


@pytest.mark.e2e
def test_unwritable_store_fails_before_anything_runs(tmp_path, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    assert main(["pipeline", "--benchmark-presets", "smoke", "--store", str(blocker / "store")]) == 1
    assert "cannot be written" in capsys.readouterr().err
