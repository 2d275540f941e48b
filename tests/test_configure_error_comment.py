"""``benchtrail configure --error-comment``: an invalid benchmark selection becomes a PR comment."""

import json

import pytest

from benchtrail.cli import main
from tests.helpers.github_events import pr
from tests.helpers.schemas import errors


@pytest.fixture
def run_ids(monkeypatch):
    monkeypatch.setenv("GITHUB_RUN_ID", "123")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "1")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)


def test_bad_trailer_writes_a_comment_and_the_outputs_then_fails(gh, run_ids, tmp_path, capsys):
    from benchtrail.github.post import load_comment

    out = tmp_path / "selection-error"
    code, output, summary = gh("pull_request", pr("Text.\n\nbenchmarks: x86_64,comp-stat"), "--error-comment",
                               str(out))
    assert code == 1 and output == "has-benchmarks=false\nselection-error=true\n"
    err = capsys.readouterr().err
    assert "PR description: unknown benchmark preset 'comp-stat'" in err
    comment = load_comment(out / "comment.json")
    marker = "<!-- benchtrail:comment run=123 attempt=1 -->"
    assert {k: v for k, v in comment.items() if k not in ("body", "counts")} == {
        "schema_version": 2, "marker": marker, "notes": [],
        "verdict": "no benchmarks ran — the benchmark selection in the PR description is invalid",
        "head_commit": "a" * 40, "base_commit": None}
    assert set(comment["counts"].values()) == {0}
    assert errors("comment.schema.json", json.loads((out / "comment.json").read_text())) == []
    lines = comment["body"].splitlines()
    assert lines[0] == ("### benchtrail: no benchmarks ran — the benchmark selection in the PR description "
                        "is invalid")
    assert lines[2] == ("PR description: unknown benchmark preset 'comp-stat'; valid presets: comp-stats, "
                        "comp-stats-large, cuda, cuda-smoke, smoke, x86\\_64, x86\\_64-large, all, default. Did you mean "
                        "'comp-stats'?")
    assert "edit the `benchmarks:` line at the bottom of the PR description" in lines[4]
    assert "docs/trailers.md" in lines[4] and lines[-1] == marker
    assert (out / "comment.md").read_text() == comment["body"]
    assert comment["body"] in summary


def test_error_text_is_plain_markdown_and_mentions_are_escaped(gh, run_ids, tmp_path):
    out = tmp_path / "c"
    assert gh("pull_request", pr("Text.\n\nbenchmarks: **<b>@octocat"), "--error-comment", str(out))[0] == 1
    text = (out / "comment.md").read_text()
    assert "unknown benchmark preset '\\*\\*\\<b\\>\\@octocat'" in text
    assert "@octocat" not in text.replace("\\@octocat", "") and "<b>" not in text


@pytest.mark.parametrize("payload, env, named", [
    (pr("Text.\n\nbenchmarks: x86_64", labels=["benchmarks:cuda-smok"]), {},
     "PR labels (benchmarks:<preset>): unknown benchmark preset 'cuda-smok'"),
    (pr("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: a$(id)b"), {}, "benchmarks-accept item 'a$(id)b'"),
    (pr("Text."), {"PR_LABELS": "cuda"}, "PR_LABELS must be a JSON list of label names"),
])
def test_every_selection_error_of_a_pr_gets_a_comment(gh, run_ids, tmp_path, monkeypatch, capsys, payload,
                                                      env,
                                                      named):
    from benchtrail.compare.tables import plain as _plain

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, output, _ = gh("pull_request", payload, "--error-comment", str(tmp_path / "c"))
    assert (code, output) == (1, "has-benchmarks=false\nselection-error=true\n")
    assert named in capsys.readouterr().err and _plain(named) in (tmp_path / "c" / "comment.md").read_text()


def test_without_an_error_selection_error_is_false_and_no_comment_is_written(gh, run_ids, tmp_path):
    out = tmp_path / "c"
    code, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: smoke"), "--error-comment", str(out))
    assert (code, output) == (0, "benchmark-presets=smoke\nhas-benchmarks=true\nbenchmarks-accept=\n"
                                 "selection-error=false\n")
    assert not out.exists()


def test_dispatch_with_a_bad_preset_fails_without_a_comment(gh, run_ids, tmp_path, capsys):
    out = tmp_path / "c"
    code, output, _ = gh("workflow_dispatch", {"inputs": {"benchmark-presets": "smok"}}, "--error-comment",
                         str(out))
    assert (code, output) == (1, "") and not out.exists()
    assert "workflow_dispatch input: unknown benchmark preset 'smok'" in capsys.readouterr().err


def test_existing_comment_files_are_not_overwritten(gh, run_ids, tmp_path, capsys):
    out = tmp_path / "c"
    out.mkdir()
    (out / "comment.md").write_text("earlier")
    code, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: smok"), "--error-comment", str(out))
    assert (code, output) == (1, "") and (out / "comment.md").read_text() == "earlier"
    err = capsys.readouterr().err
    assert "unknown benchmark preset 'smok'" in err and "comment.md already exists" in err


def test_local_run_marker_defaults(gh, tmp_path, monkeypatch):
    for var in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    gh("pull_request", pr("Text.\n\nbenchmarks: smok"), "--error-comment", str(tmp_path / "c"))
    assert (tmp_path / "c" / "comment.md").read_text().endswith("\n<!-- benchtrail:comment run=local attempt=1 -->\n")


def test_error_comment_is_posted_then_edited_in_place_by_a_newer_valid_run(gh, github_server, run_ids,
                                                                           tmp_path,
                                                                            monkeypatch, capsys):
    from benchtrail.compare import comment as comment_stage
    from benchtrail.jsonio import write_json

    head = "a" * 40
    github_server.add_pull("octo/repo", 7, head)
    github_server.add_comment("octo/repo", 7, "LGTM")
    payload = pr("Text.\n\nbenchmarks: comp-stat")
    payload["pull_request"]["number"] = 7
    assert gh("pull_request", payload, "--error-comment", str(tmp_path / "c"))[0] == 1
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")
    post = ["post", "--repo", "octo/repo", "--pr", "7", "--head-sha", head, "--api-url", github_server.url]
    assert main([*post, "--comment", str(tmp_path / "c" / "comment.json")]) == 0
    comments = github_server.issue_comments("octo/repo", 7)
    assert [c["body"] for c in comments] == ["LGTM", (tmp_path / "c" / "comment.md").read_text()]
    assert "unknown benchmark preset 'comp-stat'" in comments[1]["body"]
    capsys.readouterr()

    marker = comment_stage.marker({"run": {"run_id": "124", "attempt": 1}})
    valid = {"schema_version": 1, "marker": marker, "verdict": "0 regressions", "counts": {},
             "head_commit": head,
             "base_commit": "9" * 40, "body": f"### benchtrail: 0 regressions\n\n{marker}\n"}
    assert main([*post, "--comment", str(write_json(tmp_path / "later" / "comment.json", valid))]) == 0
    assert capsys.readouterr().out.startswith(f"updated: updated comment {comments[1]['id']} on PR #7")
    assert [c["body"] for c in github_server.issue_comments("octo/repo", 7)] == ["LGTM", valid["body"]]

