"""comment.md of many rows fits GitHub's limits, code points and UTF-8 bytes (issue 16): rows cut by
section priority and counted, full.md keeping every row; a git run URL's trace links."""

import pytest

from benchtrail.compare.comment import render
from benchtrail.compare.comment_header import note_line
from benchtrail.compare.comment_size import MAX_COMMENT_CHARS
from benchtrail.compare.document import Comparison
from tests.helpers.cli import run_cli
from tests.helpers.comparisons import comparison_of, write_comparison
from tests.helpers.records import record, spread

_TEMPLATE_PATTERN = ("reg", "bad", "m-gb", "imp", "imp", "imp", "same", "same", "same", "same")
_SECTIONS = {"Confirmed changes": lambda r: r["kind"] == "execution" and r["verdict"] in ("regressed", "improved"),
             "Compilation statistics": lambda r: r["kind"] == "compilation" and r["verdict"] not in ("similar", "new"),
             "Failed or not comparable": lambda r: r["kind"] == "execution" and r["verdict"] in ("failed", "not-comparable"),
             "Similar": lambda r: r["verdict"] == "similar"}
_NAMES = {"ascii": lambda i: f"torchbench.case{i:05d}.inference-bs1",
          "emoji": lambda i: "🚀😀🌈🔥" * 10 + f"-{i:05d}",  # 40 code points of 4 UTF-8 bytes each
          "cjk": lambda i: "模型基准测试" * 7 + f"-{i:05d}"}  # 42 code points of 3 UTF-8 bytes each


def _many_rows(n, name):
    """A real comparison of five series (regressed, improved, similar, failed, a compilation regression) whose
    rows are cloned into ``n`` rows named ``name(i)``, one in ten regressed (no randomness: fixed samples)."""
    gb = {"kind": "compilation", "metric": "graph_breaks", "unit": "count", "name": "m.inductor.cpu.graph_breaks",
              "break_reasons": []}
    base = [record("reg", spread(100.0, 10)), record("imp", spread(100.0, 10)), record("same", spread(100.0, 10)),
            record("bad", spread(100.0, 10)), record("m-gb", [0.0], **gb)]
    head = [record("reg", spread(130.0, 10)), record("imp", spread(70.0, 10)), record("same", spread(100.0, 10)),
            record("bad", status="failed"), record("m-gb", [2.0], **gb)]
    comparison = comparison_of(base, head)
    templates = {r["id"]: r for r in comparison["rows"]}
    rows = []
    for i in range(n):
        row = dict(templates[_TEMPLATE_PATTERN[i % len(_TEMPLATE_PATTERN)]])
        row["id"] = row["name"] = row["module_name"] = name(i)
        rows.append(row)
    comparison["rows"] = rows
    for verdict in ("regressed", "improved", "similar", "failed"):
        comparison["counts"][verdict] = sum(r["verdict"] == verdict for r in rows)
    return comparison


def _check_cut_comment(body, full, comparison, max_chars, max_bytes):
    """Assert ``body`` is within both caps and counts what it leaves out truly; return (code points, bytes)."""
    import re

    from benchtrail.compare.comment import FOLDED

    order = ("Confirmed changes", "Compilation statistics", *(name for name, _ in FOLDED))  # the blocks' priorities

    size = (len(body), len(body.encode("utf-8")))
    assert size[0] <= max_chars and size[1] <= max_bytes, size
    rows = comparison["rows"]
    headings = {"Confirmed regressions and improvements": "Confirmed changes", "Compilation statistics":
                "Compilation statistics"}
    shown, cut, title = {}, {}, None
    for line in body.splitlines():
        if line.startswith("#### ") or line.startswith("<details><summary>"):
            title = headings.get(line[5:]) or re.fullmatch(r"<details><summary>(.*): \d+ series</summary>", line)[1]
            shown[title], cut[title] = 0, 0
        elif line.startswith("| `"):
            shown[title] += 1
        elif m := re.fullmatch(r"(?:… and )?(\d+) (?:more )?rows? left out here: see full\.md\.", line):
            cut[title] = int(m[1])
    assert cut.get("Similar") and shown.get("Confirmed changes")  # the folded similar rows went first
    for section, in_section in _SECTIONS.items():
        group = [r for r in rows if in_section(r)]
        if section == "Confirmed changes":  # regressions first, then improvements
            group.sort(key=lambda r: r["verdict"] != "regressed")
        assert shown.get(section, 0) + cut.get(section, 0) == len(group), section
        for r in group[:shown.get(section, 0)]:  # the rows shown are each table's first rows
            assert f"| `{r['name'] if r['kind'] == 'execution' else r['module_name']}` |" in body
    partial = [s for s in order if cut.get(s)]  # once a section is cut, the ones after it show no rows
    assert all(shown.get(s, 0) == 0 for s in order[order.index(partial[0]) + 1:])
    left_out = [line for line in body.splitlines() if "rows left out to fit GitHub's comment size limit" in line]
    assert left_out == [f"{len(rows) - sum(shown.values())} of {len(rows)} rows left out to fit GitHub's comment "
                        "size limit: see full.md in the run's artifacts for every row."]
    table = [line for line in full.splitlines() if line.startswith("| `")]
    assert sorted(line.split("`")[1] for line in table) == sorted(r["name"] for r in rows)  # full.md keeps every row
    assert body.rstrip("\n").splitlines()[-1] == "<!-- benchtrail:comment run=r1 attempt=1 -->"
    return size


@pytest.mark.parametrize("names", ["ascii", "emoji", "cjk"])
def test_a_comment_of_over_a_thousand_rows_fits_both_caps_on_disk_and_in_comment_json(tmp_path, capsys, names):
    """comment.md and comment.json's body (what ``benchtrail post`` sends) are within MAX_COMMENT_CHARS code
    points and MAX_COMMENT_BYTES bytes; with these caps (a ratio of 4 bytes a code point) the code-point cap
    binds, even on names of 4-byte emoji; rows are cut by section priority and counted; full.md has all."""
    from benchtrail.compare.comment_size import MAX_COMMENT_BYTES
    from benchtrail.github.post import fit_body, load_comment

    comparison = _many_rows(1200, _NAMES[names])  # load_comparison takes about 1 ms a row
    out = tmp_path / "comment"
    code, _, err = run_cli(capsys, "comment", "--comparison", write_comparison(tmp_path, comparison),
                           "--output-dir", out, "--run-url", "gs://bucket/runs/123/1/")
    assert code == 0, err
    body, full = (out / "comment.md").read_text(encoding="utf-8"), (out / "full.md").read_text(encoding="utf-8")
    data = load_comment(out / "comment.json")
    assert data["body"] == body and len((out / "comment.md").read_bytes()) == len(body.encode("utf-8"))
    chars, size = _check_cut_comment(body, full, comparison, MAX_COMMENT_CHARS, MAX_COMMENT_BYTES)
    assert chars > MAX_COMMENT_CHARS - 400 and size < MAX_COMMENT_BYTES  # one more row would not fit
    assert "#### Confirmed regressions and improvements" in body and "… and " in body
    assert fit_body(data["body"], data["marker"]) == body  # the poster sends it as it is


@pytest.mark.parametrize("names", ["emoji", "cjk"])
def test_the_byte_cap_binds_on_multibyte_names_when_the_code_point_cap_is_lifted(names):
    """With the code-point cap raised to the byte cap (GitHub's byte reading alone), names of 4-byte emoji or
    3-byte CJK characters fill MAX_COMMENT_BYTES long before the code points run out."""
    from benchtrail.compare.comment_size import MAX_COMMENT_BYTES

    comparison = _many_rows(3000, _NAMES[names])
    body, full, data = render(Comparison.of(comparison), "gs://bucket/runs/123/1/", max_chars=MAX_COMMENT_BYTES)
    assert data["body"] == body
    chars, size = _check_cut_comment(body, full, comparison, MAX_COMMENT_BYTES, MAX_COMMENT_BYTES)
    assert size > MAX_COMMENT_BYTES - 1_000  # the byte cap is what stopped it ...
    assert MAX_COMMENT_CHARS < chars < MAX_COMMENT_BYTES * 0.7  # ... far from the code-point cap it was given


def test_ascii_rows_stop_at_the_code_point_cap_far_below_the_byte_cap():
    from benchtrail.compare.comment_size import MAX_COMMENT_BYTES

    comparison = _many_rows(3000, _NAMES["ascii"])
    body, full, _ = render(Comparison.of(comparison), max_bytes=MAX_COMMENT_BYTES)
    chars, size = _check_cut_comment(body, full, comparison, MAX_COMMENT_CHARS, MAX_COMMENT_BYTES)
    assert chars > MAX_COMMENT_CHARS - 400 and size < MAX_COMMENT_CHARS * 1.1


def test_a_body_that_fits_is_not_cut_and_says_nothing_is_left_out():
    comparison = _many_rows(200, _NAMES["emoji"])
    body, full, _ = render(Comparison.of(comparison))
    assert "<details><summary>Similar: 80 series</summary>" in body and "left out" not in body
    assert len(body) <= MAX_COMMENT_CHARS


def test_notes_too_long_for_the_comment_are_cut_but_the_count_and_marker_stay():
    """Top lines alone over the caps (80 notes of 1,000 emoji): every row is left out, the notes cut from the
    last, the footer kept; full.md keeps every note and row."""
    from benchtrail.compare.comment_size import MAX_COMMENT_BYTES

    comparison = _many_rows(50, _NAMES["emoji"])
    notes = [f"{i:02d} " + "🔥" * 990 for i in range(80)]
    body, full, data = render(Comparison.of(comparison), "gs://bucket/runs/123/1/", notes=notes)
    assert len(body) <= MAX_COMMENT_CHARS and len(body.encode("utf-8")) <= MAX_COMMENT_BYTES
    assert "50 of 50 rows left out to fit GitHub's comment size limit" in body
    assert "Lines above were cut as well." in body and "#### " not in body
    assert "Artifacts: `gcloud storage cp -r gs://bucket/runs/123/1/ .`" in body
    assert body.splitlines()[-1] == data["marker"]
    shown = [n for n in notes if note_line(n) in body.splitlines()]
    assert shown == notes[:len(shown)] and 40 < len(shown) < 80
    assert all(note_line(n) in full for n in notes) and full.count("| `") >= 50


def test_a_cut_comment_with_every_section_fits_its_cap():
    """Each section says its cut priority where it is made, so none is missing: a comparison with confirmed
    regressions that have profiles ("Why") and a compiler summary is cut within the cap like any other."""
    from benchtrail.compare.compiler_summary import compiler_summary, rows_to_json
    from benchtrail.compare.profile_diff import diff_profiles
    from tests.helpers.compiler_results import base_results, head_results
    from tests.helpers.profiles import worker_profile

    comparison = _many_rows(1200, _NAMES["ascii"])
    comparison["compiler_summary"] = rows_to_json(compiler_summary(head_results(), base_results()))
    diff = diff_profiles(worker_profile(10, {"aten::mm": 12000.0}), worker_profile(10, {"aten::mm": 24000.0}),
                         {"base": "profiles/x/base.trace.json", "head": "profiles/x/head.trace.json"}, top=3)
    for row in comparison["rows"]:
        if row["verdict"] == "regressed" and row["kind"] == "execution":
            row.update(mark="confirmed", profile=diff)
    body, full, _ = render(Comparison.of(comparison), "gs://bucket/runs/123/1/")
    assert "#### Compiler summary" in body and "Why it got slower (torch.profiler)" in body
    assert "[base](https://storage.cloud.google.com/bucket/runs/123/1/profiles/x/base.trace.json)" in body
    assert len(body) <= MAX_COMMENT_CHARS and "rows left out to fit GitHub's comment size limit" in body
    assert "#### Compiler summary" in full


def test_a_git_run_url_is_allowed_and_its_trace_links_open_on_github():
    from benchtrail.compare.comment import check_comment_options
    from benchtrail.compare.profile_diff import diff_profiles
    from tests.helpers.profiles import worker_profile

    run = "git:https://github.com/o/r.git#benchtrail-data/runs/123/1/"
    check_comment_options(run, "dashboard/index.html", None, ())
    comparison = _many_rows(40, _NAMES["ascii"])
    base, head = worker_profile(10, {"aten::mm": 12000.0}), worker_profile(10, {"aten::mm": 24000.0})
    diff = diff_profiles(base, head, {"base": "profiles/x/base.trace.json", "head": "profiles/x/head.trace.json"}, top=3)
    for row in comparison["rows"]:
        if row["verdict"] == "regressed" and row["kind"] == "execution":
            row.update(mark="confirmed", profile=diff)
    body, _, _ = render(Comparison.of(comparison), run)
    assert "[head](https://github.com/o/r/blob/benchtrail-data/runs/123/1/profiles/x/head.trace.json)" in body

