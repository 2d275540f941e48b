import numpy as np

from benchtrail.comment import MAX_COMMENT_CHARS, format_value, render
from benchtrail.compare import compare, comparison_to_dict
from benchtrail.thresholds import load_thresholds
from tests.records import record, results

rng = np.random.default_rng(1)


def _comparison(base, head):
    rows = compare([results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)], load_thresholds())
    return comparison_to_dict(rows, [results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)],
                              "thresholds.yaml", {"reason": "merge base"})


def test_format_value_picks_readable_units():
    assert format_value(21400.0, "us") == "21.40 ms"
    assert format_value(650.25, "us") == "650.2 µs"
    assert format_value(3.0, "count") == "3"
    assert format_value(None, "us") == "—"


def test_comment_has_verdict_line_sections_rows_and_marker():
    base = [record("slow", 100 * (1 + 0.01 * rng.standard_normal(20))), record("same", [50.0] * 20),
            record("m-graph_breaks", [0.0], kind="compilation", metric="graph_breaks", unit="count",
                   name="sqrl.inductor.cpu.graph_breaks", break_reasons=[])]
    head = [record("slow", 130 * (1 + 0.01 * rng.standard_normal(20))), record("same", [50.0] * 20),
            record("m-graph_breaks", [1.0], kind="compilation", metric="graph_breaks", unit="count",
                   name="sqrl.inductor.cpu.graph_breaks",
                   break_reasons=[{"reason": "Data-dependent branching", "count": 1}])]
    body, full, data = render(_comparison(base, head))
    lines = body.splitlines()
    assert lines[0] == "### benchtrail: 2 regressions, 0 improvements, 1 similar · 1 new graph break"
    assert lines[1].startswith("`ccccccc` vs baseline `bbbbbbb` (merge base)")
    assert "#### Regressions" in body and "`slow.inference-bs1.c2-standard-16`" in body
    assert "new graph break: `Data-dependent branching`" in body
    assert "<details><summary>All 3 series</summary>" in body
    assert body.rstrip().endswith("<!-- benchtrail:comment run=r1 attempt=1 -->")
    assert data["marker"] in body and data["counts"]["regressed"] == 2
    assert "#### All series" in full


def test_oversized_comment_drops_the_full_table_but_full_md_keeps_it():
    many = [record(f"case{i:05d}", [10.0] * 10) for i in range(600)]
    body, full, _ = render(_comparison(many, many))
    assert len(body) <= MAX_COMMENT_CHARS
    assert "see full.md" in body
    assert full.count("| `case") == 600


def test_gs_run_url_gives_gcloud_and_explain_lines_for_the_worst_row():
    base = [record("slow", [100.0 + i for i in range(20)]), record("same", [50.0] * 20)]
    head = [record("slow", [150.0 + i for i in range(20)]), record("same", [50.0] * 20)]
    body, _, _ = render(_comparison(base, head), "gs://bucket/pre/runs/123/1/")
    assert "Artifacts: `gcloud storage cp -r gs://bucket/pre/runs/123/1/ .`" in body
    assert "Reproduce: `benchtrail explain slow --run gs://bucket/pre/runs/123/1/`" in body


def test_partial_baseline_says_what_it_lacks():
    base = [record("a", [10.0] * 10)]
    head = [record("a", [10.0] * 10), record("b", [10.0] * 10)]
    body, _, _ = render(_comparison(base, head))
    assert body.splitlines()[2] == "The baseline lacks 1 series: those rows are new, not compared."


def test_recheck_line_counts_confirmed_cleared_and_unchecked_suspects():
    from benchtrail.confirm import apply
    from benchtrail.ab import Arm

    base = [record(f"r{i}", 100 * (1 + 0.005 * rng.standard_normal(20))) for i in range(3)]
    head = [record(f"r{i}", 130 * (1 + 0.005 * rng.standard_normal(20))) for i in range(3)]
    comparison = _comparison(base, head)
    for row in comparison["rows"]:
        row["mark"] = "unconfirmed"
    ids = [r["id"] for r in comparison["rows"]]
    paired = {ids[0]: {**comparison["rows"][0], "head_details": {"ab": {"rounds": 3}}},
              ids[1]: {**comparison["rows"][1], "verdict": "similar", "change": 0.4, "ci_low": -1.0, "ci_high": 1.5,
                       "head_details": {"ab": {"rounds": 4}}},
              ids[2]: {**comparison["rows"][2], "verdict": "failed", "reason": "head failed: boom", "head_details": {}}}
    checked = apply(comparison, paired, Arm("base", "b" * 40, None), Arm("head", "c" * 40, None))
    body, _, _ = render(checked)
    assert body.splitlines()[0].startswith("### benchtrail: 2 regressions (1 unconfirmed, 1 confirmed), 0 improvements, 1 similar")
    assert ("Paired A/B re-check of 3 suspected changes against the baseline commit on this runner: "
            "1 confirmed, 1 not confirmed, 1 could not be re-checked.") in body
    assert f"not confirmed: the stored baseline gave {comparison['rows'][1]['change']:+.1f}%" in body
    assert "a paired A/B run on this machine +0.4% (99% CI -1.0% to +1.5%, 4 rounds)" in body


def test_a_correctness_mismatch_is_a_failed_row_with_the_quantity_and_errors():
    reason = ("gradient differs from reference: max abs error 6.5e+03, max rel error 255 (atol 0.001, "
              "rtol 0.00013)")
    mismatch = record("grad", [80.0] * 10, status="mismatch")
    mismatch = type(mismatch)(**{**mismatch.__dict__, "reason": reason})
    body, _, data = render(_comparison([record("grad", [80.0] * 10)], [mismatch]))
    assert data["counts"]["failed"] == 1
    section = body.split("Failed, noisy or not comparable")[1]
    row = next(line for line in section.splitlines() if "`grad.inference-bs1.c2-standard-16`" in line)
    assert f"head mismatch: {reason}" in row


def test_dashboard_line_links_the_runs_dashboard_in_a_browser():
    body, _, _ = render(_comparison([record("a")], [record("a")]), "gs://bucket/pre/runs/123/1/", "dashboard/index.html")
    assert ("Dashboard (history by commit): https://storage.cloud.google.com/bucket/pre/runs/123/1/dashboard/index.html"
            in body.splitlines())
    body, _, _ = render(_comparison([record("a")], [record("a")]), "/store/runs/r/1", "dashboard/index.html")
    assert "Dashboard (history by commit): `/store/runs/r/1/dashboard/index.html`" in body.splitlines()
    body, _, _ = render(_comparison([record("a")], [record("a")]), "/store/runs/r/1")
    assert "Dashboard" not in body
