import json
from dataclasses import replace

import numpy as np
import pytest

from benchtrail.compare.comment import render
from benchtrail.compare.comment_size import MAX_COMMENT_CHARS
from benchtrail.compare.document import SCHEMA_VERSION, Comparison, comparison_to_dict
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.tables import format_value
from benchtrail.compare.verdicts import compare
from tests.helpers.cli import run_cli
from tests.helpers.comparisons import comparison_of, write_comparison
from tests.helpers.records import apply_recheck, record, results, spread

rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws from ``rng`` seeded afresh: its samples do not depend on which tests ran before it in its
    process (pytest-xdist's work stealing changes that from run to run)."""
    global rng
    rng = np.random.default_rng(1)


def test_format_value_picks_readable_units():
    assert format_value(21400.0, "us") == "21.40 ms"
    assert format_value(650.25, "us") == "650.2 µs"
    assert format_value(3.0, "count") == "3"
    assert format_value(None, "us") == "—"


def test_comment_has_verdict_line_sections_rows_and_marker():
    base = [record("slow", 100 * (1 + 0.01 * rng.standard_normal(20))), record("same", spread(50.0, 20)),
            record("m-graph_breaks", [0.0], kind="compilation", metric="graph_breaks", unit="count",
                   name="sqrl.inductor.cpu.graph_breaks", break_reasons=[])]
    head = [record("slow", 130 * (1 + 0.01 * rng.standard_normal(20))), record("same", spread(50.0, 20)),
            record("m-graph_breaks", [1.0], kind="compilation", metric="graph_breaks", unit="count",
                   name="sqrl.inductor.cpu.graph_breaks",
                   break_reasons=[{"reason": "Data-dependent branching", "count": 1}])]
    body, full, data = render(Comparison.of(comparison_of(base, head)))
    lines = body.splitlines()
    assert lines[0] == "### benchtrail: 2 regressions, 0 improvements, 1 similar · 1 new graph break"
    assert lines[1].startswith("`ccccccc` vs baseline `bbbbbbb` (merge base)")
    assert "#### Confirmed regressions and improvements" in body and "| `slow.inference-bs1` |" in body
    assert "new graph break: `Data-dependent branching`" in body
    assert "<details><summary>Similar: 1 series</summary>" in body
    assert body.rstrip().endswith("<!-- benchtrail:comment run=r1 attempt=1 -->")
    assert data["marker"] in body and data["counts"]["regressed"] == 2
    assert full == body and "| `same.inference-bs1` |" in full


def test_oversized_comment_drops_the_full_table_but_full_md_keeps_it():
    many = [record(f"case{i:05d}", spread(10.0, 10)) for i in range(1500)]
    body, full, _ = render(Comparison.of(comparison_of(many, many)))
    assert len(body) <= MAX_COMMENT_CHARS
    assert "see full.md" in body
    assert full.count("| `case") == 1500


def test_gs_run_url_gives_gcloud_and_explain_lines_for_the_worst_row():
    base = [record("slow", [100.0 + i for i in range(20)]), record("same", spread(50.0, 20))]
    head = [record("slow", [150.0 + i for i in range(20)]), record("same", spread(50.0, 20))]
    body, _, _ = render(Comparison.of(comparison_of(base, head)), "gs://bucket/pre/runs/123/1/")
    assert "Artifacts: `gcloud storage cp -r gs://bucket/pre/runs/123/1/ .`" in body
    assert "Reproduce: `benchtrail explain slow.inference-bs1.c2-standard-16 --run gs://bucket/pre/runs/123/1/`" in body


def test_partial_baseline_says_what_it_lacks():
    base = [record("a", spread(10.0, 10))]
    head = [record("a", spread(10.0, 10)), record("b", spread(10.0, 10))]
    body, _, _ = render(Comparison.of(comparison_of(base, head)))
    assert body.splitlines()[2] == "The baseline lacks 1 series: those rows are new, not compared."


def test_recheck_line_counts_confirmed_cleared_and_unchecked_suspects():
    from benchtrail.runner.ab import Arm
    base = [record(f"r{i}", 100 * (1 + 0.005 * rng.standard_normal(20))) for i in range(3)]
    head = [record(f"r{i}", 130 * (1 + 0.005 * rng.standard_normal(20))) for i in range(3)]
    comparison = comparison_of(base, head)
    ids = [r.update(mark="unconfirmed") or r["id"] for r in comparison["rows"]]
    paired = {ids[0]: {**comparison["rows"][0], "head_details": {"ab": {"rounds": 3}}},
              ids[1]: {**comparison["rows"][1], "verdict": "similar", "change": 0.4, "ci_low": -1.0, "ci_high": 1.5,
                       "head_details": {"ab": {"rounds": 4}}},
              ids[2]: {**comparison["rows"][2], "verdict": "failed", "reason": "head failed: boom", "head_details": {}}}
    checked = apply_recheck(comparison, paired, Arm("base", "b" * 40, None), Arm("head", "c" * 40, None))
    body, _, _ = render(Comparison.of(checked))
    assert body.splitlines()[0].startswith("### benchtrail: 2 regressions (1 unconfirmed, 1 confirmed), 0 improvements, 1 similar")
    assert ("Paired A/B re-check of 3 suspected changes against the baseline commit on this runner: "
            "1 confirmed, 1 cleared, 1 could not be re-checked.") in body
    stored = comparison["rows"][1]
    assert ("cleared by a paired A/B run on this machine: +0.4% (99% CI -1.0% to +1.5%) after 4 rounds; "
            f"the stored baseline gave {stored['change']:+.1f}% (99% CI {stored['ci_low']:+.1f}% to "
            f"{stored['ci_high']:+.1f}%)") in body


def test_a_correctness_mismatch_is_a_failed_row_with_the_quantity_and_errors():
    reason = ("gradient differs from reference: max abs error 6.5e+03, max rel error 255 (atol 0.001, "
              "rtol 0.00013)")
    mismatch = record("grad", spread(80.0, 10), status="mismatch")
    mismatch = type(mismatch)(**{**mismatch.__dict__, "reason": reason})
    body, _, data = render(Comparison.of(comparison_of([record("grad", spread(80.0, 10))], [mismatch])))
    assert data["counts"]["failed"] == 1
    section = body.split("Failed or not comparable")[1]
    row = next(line for line in section.splitlines() if "`grad.inference-bs1`" in line)
    assert row.endswith("| failed [1] |")
    assert f"- [1] head mismatch: {reason}" in section.splitlines()  # the reason, said once under the table


def test_dashboard_line_links_the_runs_dashboard_in_a_browser():
    body, _, _ = render(Comparison.of(comparison_of([record("a")], [record("a")])), "gs://bucket/pre/runs/123/1/",
                        "dashboard/index.html")
    assert ("Dashboard (history by commit): https://storage.cloud.google.com/bucket/pre/runs/123/1/dashboard/index.html"
            in body.splitlines())
    body, _, _ = render(Comparison.of(comparison_of([record("a")], [record("a")])), "/store/runs/r/1",
                        "dashboard/index.html")
    assert "Dashboard (history by commit): `/store/runs/r/1/dashboard/index.html`" in body.splitlines()
    body, _, _ = render(Comparison.of(comparison_of([record("a")], [record("a")])), "/store/runs/r/1")
    assert "Dashboard" not in body


def test_comment_cli_links_the_run_dashboard_and_actions_artifacts_and_shows_notes_as_plain_text(tmp_path, capsys):
    from benchtrail.github.post import load_comment
    from tests.helpers.schemas import errors

    base = [record("slow", [100.0 + i for i in range(20)]), record("same", spread(50.0, 20))]
    head = [record("slow", [150.0 + i for i in range(20)]), record("same", spread(50.0, 20))]
    out = tmp_path / "comment"
    note = "⚠ the run could not be stored: 403 for @octo-org/team on *gs://b/runs/1/1/* <b>x</b>"
    code, stdout, err = run_cli(
        capsys, "comment", "--comparison", write_comparison(tmp_path, comparison_of(base, head)),
        "--output-dir", out, "--run-url", "gs://bucket/pre/runs/123/1/",
        "--dashboard", "dashboard/index.html", "--artifacts-url", "https://github.com/o/r/actions/runs/123",
        "--note", note, "--note", "second  note")
    assert code == 0, err
    assert stdout.strip().splitlines()[-1] == str(out / "comment.md")
    lines = (out / "comment.md").read_text().splitlines()
    assert lines[2] == ("⚠ the run could not be stored: 403 for \\@octo-org/team on \\*gs://b/runs/1/1/\\* "
                        "\\<b\\>x\\</b\\>")
    assert lines[3] == "second note"
    for line in ("Dashboard (history by commit): "
                 "https://storage.cloud.google.com/bucket/pre/runs/123/1/dashboard/index.html",
                 "Artifacts: `gcloud storage cp -r gs://bucket/pre/runs/123/1/ .`",
                 "Reproduce: `benchtrail explain slow.inference-bs1.c2-standard-16 --run gs://bucket/pre/runs/123/1/`",
                 "Actions artifacts of this run: https://github.com/o/r/actions/runs/123#artifacts"):
        assert line in lines
    assert lines[-1] == "<!-- benchtrail:comment run=r1 attempt=1 -->"
    data = json.loads((out / "comment.json").read_text())
    assert data["schema_version"] == 2 and data["notes"] == [note, "second  note"]
    assert data["body"] == (out / "comment.md").read_text()
    assert load_comment(out / "comment.json")["notes"] == [note, "second  note"]  # post.py reads it
    assert errors("comment.schema.json", data) == []
    assert "⚠ the run could not be stored" in (out / "full.md").read_text()


def test_comment_cli_without_flags_writes_no_notes_and_no_links(tmp_path, capsys):
    out = tmp_path / "comment"
    comparison = write_comparison(tmp_path, comparison_of([record("a")], [record("a")]))
    code, _, err = run_cli(capsys, "comment", "--comparison", comparison, "--output-dir", out)
    assert code == 0, err
    body = (out / "comment.md").read_text()
    assert "Artifacts" not in body and "Dashboard" not in body
    assert json.loads((out / "comment.json").read_text())["notes"] == []


def test_a_local_run_folder_gets_an_ls_line_and_a_folder_dashboard(tmp_path, capsys):
    out = tmp_path / "comment"
    comparison = write_comparison(tmp_path, comparison_of([record("a")], [record("a")]))
    code, _, err = run_cli(capsys, "comment", "--comparison", comparison, "--output-dir", out,
                           "--run-url", "/store/runs/r/1", "--dashboard", "dashboard/index.html")
    assert code == 0, err
    lines = (out / "comment.md").read_text().splitlines()
    assert "Artifacts: `ls /store/runs/r/1`" in lines
    assert "Dashboard (history by commit): `/store/runs/r/1/dashboard/index.html`" in lines
    assert "Reproduce: `benchtrail explain a.inference-bs1.c2-standard-16 --run /store/runs/r/1`" in lines


@pytest.mark.parametrize("flags, message", [
    (["--dashboard", "dashboard/index.html"], "--dashboard 'dashboard/index.html' is a path relative to the run, "
                                              "so it needs --run-url"),
    (["--run-url", "gs://bucket/pre/"], "--run-url 'gs://bucket/pre/': a store URL must be a run's URL, "
                                        "gs://BUCKET[/PREFIX]/runs/<id>/<attempt>/ or "
                                        "git:REMOTE#BRANCH/runs/<id>/<attempt>/"),
    (["--run-url", "git:origin#data"], "--run-url 'git:origin#data': a store URL must be a run's URL"),
    (["--run-url", "file:///store/runs/r/1"], "for a local run give its folder path"),
    (["--run-url", "/my store/runs/r/1"], "--run-url '/my store/runs/r/1': allowed: a run's store URL "
                                          "(gs://BUCKET[/PREFIX]/runs/<id>/<attempt>/ or "
                                          "git:REMOTE#BRANCH/runs/<id>/<attempt>/) or a folder path, "
                                          "without spaces"),
    (["--run-url", "gs://b/runs/1/1/", "--dashboard", "../../other/index.html"],
     "--dashboard '../../other/index.html': allowed: a relative path inside the run"),
    (["--run-url", "gs://b/runs/1/1/", "--dashboard", "/abs/index.html"], "allowed: a relative path inside the run"),
    (["--artifacts-url", "github.com/o/r/actions/runs/1"], "--artifacts-url 'github.com/o/r/actions/runs/1': "
                                                           "allowed: the https:// URL"),
    (["--artifacts-url", "https://x/`rm`"], "allowed: the https:// URL"),
    (["--note", " "], "--note '': a note needs text"),
])
def test_comment_cli_refuses_bad_links_and_notes_naming_the_flag_and_writes_nothing(tmp_path, capsys, flags, message):
    out = tmp_path / "comment"
    code, stdout, err = run_cli(capsys, "comment", "--comparison",
                                write_comparison(tmp_path, comparison_of([record("a")], [record("a")])),
                                "--output-dir", out, *flags)
    assert code == 1 and stdout == ""
    assert message in err
    assert not out.exists()


def test_recheck_line_counts_and_names_the_rows_a_bounded_recheck_did_not_reach():
    from benchtrail.runner.ab import Arm
    from benchtrail.runner.recheck import by_size

    base = [record(f"r{i}", 100 * (1 + 0.005 * rng.standard_normal(20))) for i in range(8)]
    head = [record(f"r{i}", (130 + i) * (1 + 0.005 * rng.standard_normal(20))) for i in range(8)]
    comparison = comparison_of(base, head)
    for row in comparison["rows"]:
        row["mark"] = "unconfirmed"
    ordered = by_size(Comparison.of(comparison).rows)
    assert [r.id for r in ordered] == [f"r{i}" for i in range(7, -1, -1)]  # largest change first
    first = ordered[0]
    paired = {first.id: replace(first, head_details={"ab": {"rounds": 2}})}
    missed = {r.id: 600.0 for r in ordered[1:]}
    checked = apply_recheck(comparison, paired, Arm("base", "b" * 40, None), Arm("head", "c" * 40, None),
                    not_reached=missed)
    rows = {r["id"]: r for r in checked["rows"]}
    assert rows["r7"]["mark"] == "confirmed" and rows["r7"].get("recheck") is None
    for sid in missed:
        assert (rows[sid]["mark"], rows[sid]["recheck"], rows[sid]["ab"]) == ("unconfirmed", "not-reached", None)
        assert rows[sid]["reason"] == "not re-checked: the re-check's time budget of 600 s ran out"
    assert checked["schema_version"] == SCHEMA_VERSION
    body, _, _ = render(Comparison.of(checked))
    named = ", ".join(f"`r{i}.inference-bs1`" for i in range(5))  # in the comparison's row order, one device: no suffix
    assert ("Paired A/B re-check of 1 suspected change against the baseline commit on this runner: 1 confirmed, "
            f"0 cleared. 7 more suspected changes not re-checked: the re-check's time budget ran out first "
            f"({named} and 2 more); they stay unconfirmed.") in body.splitlines()
    assert body.count("not re-checked: the re-check's time budget of 600 s ran out") == 1  # the rows' reason, once


def test_a_store_that_could_not_be_read_and_shards_that_did_not_report_are_said_at_the_top():
    head = [record("fast", spread(50.0, 20))]
    comparison = comparison_to_dict(compare([], [results(*head, commit="c" * 40)], load_thresholds()), [],
                                    [results(*head, commit="c" * 40)], "thresholds.yaml",
                                    {"reason": "the store could not be read: 503 on gs://b/o", "store_error": "503"})
    comparison["missing_shards"] = [{"device_name": "laptop", "shard_index": 1}]
    lines = render(Comparison.of(comparison))[0].splitlines()
    assert "no baseline: the store could not be read: 503 on gs://b/o; every series is new" in lines[1]
    assert lines[2] == ("⚠ Shards that did not report: laptop shard 1. Their run configs are listed as failed "
                        "(the job failed, timed out or was cancelled).")


def test_the_comment_names_each_devices_baseline_what_is_lacking_and_the_ignored_runs():
    comparison = comparison_of([record("a", spread(100.0, 20))], [record("a", spread(100.0, 20))])
    comparison["head"]["devices"] = ["c2-standard-16", "a2-highgpu-1g", "g2-standard-8"]
    comparison["baseline"] = {
        "commit": "b" * 40, "reason": "merge base", "run_id": "7", "attempt": 1, "run_dir": "x",
        "devices": {"c2-standard-16": {"commit": "b" * 40, "reason": "merge base", "run_id": "7", "attempt": 1},
                    "a2-highgpu-1g": {"commit": "d" * 40, "reason": "merge base~2", "run_id": "5", "attempt": 1}},
        "lacking": {"g2-standard-8": "no trusted run of the merge base has its baseline key"},
        "ignored": [{"commit": "b" * 40, "run_id": "9", "attempt": 1,
                     "reason": "run 9/1 was made by a pull_request event, not a push or manual run"}],
        "trust": "runs of .github/workflows/benchmark.yml"}
    comparison["base"]["devices"] = ["c2-standard-16", "a2-highgpu-1g"]
    lines = render(Comparison.of(comparison))[0].splitlines()
    assert lines[1].startswith("`ccccccc` vs baselines `ddddddd` (merge base~2) for a2-highgpu-1g, `bbbbbbb` "
                               "(merge base) for c2-standard-16 · presets x86_64")
    assert ("⚠ Ignored 1 stored run that is not a trusted baseline: `bbbbbbb`: run 9/1 was made by a "
            "pull\\_request event, not a push or manual run.") in lines
    assert ("The baseline lacks devices g2-standard-8: those rows are new, not compared. g2-standard-8: no "
            "trusted run of the merge base has its baseline key.") in lines
