"""The trailer grammar table of docs/trailers.md, row by row, and the setup job's configure step."""

import shutil
import subprocess

import pytest

from benchtrail.github.trailers import benchmark_presets, parse_trailers, pr_message
from tests.helpers.git import git
from tests.helpers.github_events import pr

# (row name in docs/trailers.md, title, body, expected presets or None for "no trailer")
GRAMMAR = [
    ("trailer after prose", "Faster matmul", "Speeds up matmul.\n\nbenchmarks: x86_64,cuda",
     ["x86_64", "cuda"]),
    ("key is case-insensitive", "t", "Text.\n\nBenchmarks: x86_64", ["x86_64"]),
    ("commas, spaces, case, trailing comma", "t", "Text.\n\nbenchmarks: X86_64 cuda, comp-stats,",
     ["x86_64", "cuda", "comp-stats"]),
    ("several trailers are united", "t", "Text.\n\nbenchmarks: x86_64\nbenchmarks: cuda x86_64",
     ["x86_64", "cuda"]),
    ("among other trailers", "t", "Text.\n\nFixes: #12\nbenchmarks: cuda\nSigned-off-by: A <a@b.c>",
     ["cuda"]),
    ("folded continuation line", "t", "Text.\n\nbenchmarks: x86_64,\n  cuda", ["x86_64", "cuda"]),
    ("trailing comment lines are skipped", "t", "Text.\n\nbenchmarks: cuda\n# a note for reviewers",
     ["cuda"]),
    ("25% rule with a git-generated trailer", "t",
     "Text.\n\nWorks on my machine\nSigned-off-by: A <a@b.c>\nbenchmarks: cuda", ["cuda"]),
    ("CRLF line endings", "t", "Text.\r\n\r\nbenchmarks: cuda\r\n", ["cuda"]),
    ("empty value", "t", "Text.\n\nbenchmarks:", []),
    ("inside a prose paragraph", "t", "Some text\nbenchmarks: cuda\nmore text", None),
    ("not the last paragraph", "t", "benchmarks: cuda\n\nThanks for reviewing!", None),
    ("only a Notes: line", "t", "Text.\n\nNotes: see the issue", None),
    ("key=value is not a trailer", "t", "Text.\n\nbenchmarks=cuda", None),
    ("fenced code block", "t", "Text.\n\n```\nbenchmarks: cuda\n```", None),
    ("title is never a trailer", "benchmarks: cuda", "", None),
    ("null body", "t", None, None),
]


@pytest.mark.parametrize("name,title,body,expected", GRAMMAR, ids=[g[0] for g in GRAMMAR])
def test_trailer_grammar_row(name, title, body, expected):
    assert benchmark_presets(title, body) == expected
    if shutil.which("git"):  # and git agrees on the key/value pairs
        # git, run directly: bytes in and out (text mode would read its lone CRs as line ends)
        out = subprocess.run(["git", "interpret-trailers", "--parse", "--no-divider"], check=True,
                             input=f"{title}\n\n{body or ''}".encode(), capture_output=True).stdout.decode()
        theirs = [tuple(p.strip() for p in line.replace("\r", "").partition(":")[::2])
                  for line in out.split("\n")[:-1]]
        assert [(k, v.replace("\r", "")) for k, v in parse_trailers(pr_message(title, body))] == theirs


def test_pr_trailer_writes_outputs_and_summary(gh):
    code, output, summary = gh("pull_request", pr("Text.\n\nbenchmarks: x86_64,comp-stats"))
    assert code == 0
    assert output == "benchmark-presets=x86_64,comp-stats\nhas-benchmarks=true\nbenchmarks-accept=\n"
    assert "| `x86_64` | trailer |" in summary and "| `comp-stats` | trailer |" in summary


def test_label_adds_a_preset(gh):
    _code, output, summary = gh("pull_request",
                                pr("Text.\n\nbenchmarks: x86_64", labels=["benchmarks:cuda", "bug"]))
    assert output.startswith("benchmark-presets=x86_64,cuda\n")
    assert "| `cuda` | label |" in summary


def test_meta_preset_default_expands(gh):
    _, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: default"))
    assert output.startswith("benchmark-presets=x86_64,cuda,comp-stats\n")


def test_unknown_preset_fails_naming_it_listing_valid_ones_and_suggesting(gh, capsys):
    code, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: x86_64,cuda,comp-stat"))
    assert code == 1 and output == ""
    err = capsys.readouterr().err
    assert "PR description: unknown benchmark preset 'comp-stat'" in err
    assert ("valid presets: comp-stats, comp-stats-large, cuda, cuda-smoke, smoke, x86_64, x86_64-large, "
            "all, default") in err
    assert "Did you mean 'comp-stats'?" in err


def test_shell_metacharacters_are_data_never_executed(gh, capsys, tmp_path):
    marker = tmp_path / "pwned"
    code, _, _ = gh("pull_request", pr(f"Text.\n\nbenchmarks: $(touch {marker}) `touch {marker}`"))
    assert code == 1 and not marker.exists()
    assert "unknown benchmark preset '$(touch" in capsys.readouterr().err


def test_trailer_in_prose_selects_nothing_and_the_summary_says_so(gh):
    code, output, summary = gh("pull_request", pr("Please run\nbenchmarks: cuda\non this."))
    assert code == 0 and output == "benchmark-presets=\nhas-benchmarks=false\nbenchmarks-accept=\n"
    assert "no `benchmarks:` trailer in the last paragraph" in summary


def test_edit_that_keeps_the_selection_skips_benchmarks(gh):
    payload = pr("New words.\n\nbenchmarks: cuda", action="edited",
                 changes={"body": {"from": "Old words.\n\nBenchmarks: CUDA"}})
    payload["action"] = "edited"
    _, output, summary = gh("pull_request", payload)
    assert output == "benchmark-presets=cuda\nhas-benchmarks=false\nbenchmarks-accept=\n"
    assert "the edit did not change the benchmark selection" in summary


def test_edit_that_changes_the_selection_runs(gh):
    payload = pr("Text.\n\nbenchmarks: cuda,x86_64", changes={"body": {"from": "Text.\n\nbenchmarks: cuda"}})
    payload["action"] = "edited"
    _, output, _ = gh("pull_request", payload)
    assert output == "benchmark-presets=cuda,x86_64\nhas-benchmarks=true\nbenchmarks-accept=\n"


def test_push_to_default_or_release_branch_selects_default_and_other_pushes_nothing(gh, monkeypatch):
    repo = {"repository": {"default_branch": "main"}}
    postsubmit = ("benchmark-presets=x86_64,cuda,comp-stats\nhas-benchmarks=true\nbenchmarks-"
                  "accept=\npostsubmit=true\n")
    for ref in ("refs/heads/main", "refs/heads/release-1.2"):
        assert gh("push", {"ref": ref, **repo})[1].endswith(postsubmit)
    _, output, summary = gh("push", {"ref": "refs/heads/topic", **repo})
    assert output.endswith("has-benchmarks=false\nbenchmarks-accept=\n")
    assert "neither the default branch nor a release branch (BENCHTRAIL_RELEASE_BRANCHES: release-*)" in summary
    monkeypatch.setenv("BENCHTRAIL_RELEASE_BRANCHES", "stable/*, v[0-9]*")
    assert gh("push", {"ref": "refs/heads/stable/2", **repo})[1].endswith(postsubmit)
    assert gh("push",
              {"ref": "refs/heads/release-1.2",
               **repo})[1].endswith("has-benchmarks=false\nbenchmarks-accept=\n")
    # A manual run is postsubmit on those branches only (its ref is GITHUB_REF).
    monkeypatch.setenv("GITHUB_REF", "refs/heads/v2")
    assert gh("workflow_dispatch",
              {"inputs": {"benchmark-presets": "smoke"}, **repo})[1].endswith("postsubmit=true\n")
    monkeypatch.setenv("GITHUB_REF", "refs/heads/topic")
    assert gh("workflow_dispatch",
              {"inputs": {"benchmark-presets": "smoke"}, **repo})[1].endswith("accept=\n")


def test_workflow_dispatch_takes_presets_from_its_input(gh):
    _, output, _ = gh("workflow_dispatch", {"inputs": {"benchmark-presets": "smoke"}})
    assert output == "benchmark-presets=smoke\nhas-benchmarks=true\nbenchmarks-accept=\n"


def test_env_overrides_the_payload(gh, monkeypatch):
    monkeypatch.setenv("PR_BODY", "Text.\n\nbenchmarks: comp-stats")
    monkeypatch.setenv("PR_LABELS", '["benchmarks:smoke"]')
    _, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: cuda"))
    assert output.startswith("benchmark-presets=comp-stats,smoke\n")


def test_bad_pr_labels_is_a_clear_error(gh, monkeypatch, capsys):
    monkeypatch.setenv("PR_LABELS", "cuda")
    assert gh("pull_request", pr("x"))[0] == 1
    assert "PR_LABELS must be a JSON list of label names, got 'cuda'" in capsys.readouterr().err


def test_one_megabyte_body_from_the_event_file(gh):
    body = ("lorem ipsum " * 90_000) + "\n\nbenchmarks: x86_64"
    assert len(body) > 1_000_000
    _, output, _ = gh("pull_request", pr(body))
    assert output.startswith("benchmark-presets=x86_64\n")


def test_without_github_output_the_outputs_go_to_stdout(gh, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_OUTPUT")
    code, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: smoke"))
    assert code == 0 and output == ""
    assert capsys.readouterr().out == "benchmark-presets=smoke\nhas-benchmarks=true\nbenchmarks-accept=\n"


def test_rerun_reads_the_current_body_through_the_api(gh, github_server, monkeypatch):
    github_server.add_pull("octo/repo", 7, "a" * 40, title="Title", body="Edited.\n\nbenchmarks: comp-stats",
                           labels=("benchmarks:smoke",))
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/repo")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    payload = pr("Stale.\n\nbenchmarks: cuda")
    payload["pull_request"]["number"] = 7
    code, output, _summary = gh("pull_request", payload)
    assert code == 0
    assert output == "benchmark-presets=comp-stats,smoke\nhas-benchmarks=true\nbenchmarks-accept=\n"
    assert any(r.method == "GET" and r.path.endswith("/pulls/7") for r in github_server.requests)


def test_benchmarks_accept_trailer_is_an_output(gh):
    body = ("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: resnet18.*, "
            "mlp.eager.inference-bs1.c2-standard-16")
    _, output, summary = gh("pull_request", pr(body))
    assert output.endswith("benchmarks-accept=resnet18.*,mlp.eager.inference-bs1.c2-standard-16\n")
    assert "Accepted regressions" in summary


def test_benchmarks_accept_with_unsafe_characters_is_rejected(gh, capsys):
    code, output, _ = gh("pull_request", pr("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: a$(id)b"))
    assert code == 1 and output == ""
    assert "benchmarks-accept item 'a$(id)b'" in capsys.readouterr().err


def test_an_adopters_push_to_main_runs_the_presets_of_its_project(gh, tmp_path, monkeypatch):
    from pathlib import Path

    repo = tmp_path / "adopter"
    shutil.copytree(Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting-classes", repo)
    git(None, "init", "-q", str(repo))
    monkeypatch.chdir(repo)  # its suite has no 'default' meta-preset; [tool.benchtrail] presets = "smoke"
    code, output, _ = gh("push", {"ref": "refs/heads/main", "repository": {"default_branch": "main"}})
    assert code == 0 and output == ("benchmark-presets=smoke\nhas-benchmarks=true\nbenchmarks-"
                                    "accept=\npostsubmit=true\n")
    (repo / "pyproject.toml").write_text('[tool.benchtrail]\nsuite = "my_benchmarks.suite:generate"\n')
    code, output, summary = gh("push", {"ref": "refs/heads/main", "repository": {"default_branch": "main"}})
    assert code == 0 and output.endswith(  # appended
        "benchmark-presets=\nhas-benchmarks=false\nbenchmarks-accept=\npostsubmit=true\n")
    assert "no 'default' meta-preset and [tool.benchtrail] sets no presets" in summary


# -- edited events: the selection before the edit ---------------------------------------------------


def edited(body, changes, title="Title", labels=()):
    payload = pr(body, labels=labels, title=title, changes=changes)
    payload["action"] = "edited"
    return payload


def test_title_only_edit_selects_nothing(gh):
    payload = edited("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: mlp.*",
                     {"title": {"from": "Old title"}},
                     title="New title")
    code, output, summary = gh("pull_request", payload)
    assert code == 0
    assert output == "benchmark-presets=x86_64\nhas-benchmarks=false\nbenchmarks-accept=mlp.*\n"
    assert "No benchmarks run: the edit did not change the benchmark selection." in summary


def test_edit_of_title_and_body_compares_both_previous_texts(gh):
    same = edited("Reworded.\n\nbenchmarks: comp-stats x86_64",
                  {"title": {"from": "Old"}, "body": {"from": "Text.\n\nbenchmarks: x86_64,comp-stats"}})
    assert gh("pull_request", same)[1] == ("benchmark-presets=comp-stats,x86_64\nhas-benchmarks=false\n"
                                           "benchmarks-accept=\n")
    changed = edited("Text.\n\nbenchmarks: x86_64", {"title": {"from": "Old"}, "body": {"from": "Text."}})
    assert gh("pull_request", changed)[1].endswith("\nbenchmark-presets=x86_64\nhas-benchmarks=true\n"
                                                   "benchmarks-accept=\n")  # appended to the first


@pytest.mark.parametrize("before, after, runs", [
    # accept added: the gate status gates the last comparison again; accept removed: measure again
    ("Text.\n\nbenchmarks: x86_64", "Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: mlp.*", False),
    ("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: mlp.*", "Text.\n\nbenchmarks: x86_64", True),
    ("Text.\n\nbenchmarks: x86_64\nbenchmarks-accept: a.*, b.*",
     "New.\n\nbenchmarks: x86_64\nbenchmarks-accept: b.*, a.*", False),
    ("Text.\n\nbenchmarks: x86_64,comp-stat", "Text.\n\nbenchmarks: x86_64,comp-stats", True),  # was invalid
    (None, "Text.", False),  # no trailer before or after
])
def test_edited_body_runs_only_when_presets_or_accept_items_change(gh, before, after, runs):
    output = gh("pull_request", edited(after, {"body": {"from": before}}))[1]
    assert f"has-benchmarks={'true' if runs else 'false'}\n" in output


def test_edit_that_moves_the_base_branch_runs(gh):
    payload = edited("Text.\n\nbenchmarks: x86_64",
                     {"base": {"ref": {"from": "release"}, "sha": {"from": "b" * 40}}})
    assert gh("pull_request",
              payload)[1] == "benchmark-presets=x86_64\nhas-benchmarks=true\nbenchmarks-accept=\n"


def test_edit_with_malformed_changes_is_a_payload_error(gh, capsys):
    assert gh("pull_request", edited("Text.", {"title": "Old"}))[0] == 1
    assert "event payload" in capsys.readouterr().err


@pytest.fixture
def rerun(monkeypatch, github_server):
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/repo")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    payload = pr("Stale.\n\nbenchmarks: cuda")
    payload["pull_request"]["number"] = 7
    return payload


def test_rerun_of_a_title_edit_compares_with_the_current_pr(gh, github_server, rerun):
    github_server.add_pull("octo/repo", 7, "a" * 40, title="Newest", body="Text.\n\nbenchmarks: x86_64")
    payload = edited("Text.\n\nbenchmarks: x86_64", {"title": {"from": "Old"}})
    payload["pull_request"]["number"] = 7
    assert gh("pull_request",
              payload)[1] == "benchmark-presets=x86_64\nhas-benchmarks=false\nbenchmarks-accept=\n"
    # edited since the event
    github_server.pulls[("octo/repo", 7)]["body"] = "Text.\n\nbenchmarks: comp-stats"
    assert gh("pull_request", payload)[1].endswith("benchmark-presets=comp-stats\nhas-benchmarks=true\n"
                                                   "benchmarks-accept=\n")


@pytest.mark.parametrize("setup, expected", [
    (lambda server: None,
     r"cannot re-read PR octo/repo#7 for this re-run \(attempt 2\) from http://127\.0\.0\.1:\d+: "
                          r"HTTP 404: Not Found \(check GITHUB_REPOSITORY, the PR number"),
    (lambda server: (server.add_pull("octo/repo", 7, "a" * 40), server.fail("GET", "/repos/octo/repo/pulls/7",
                                                                             "read-only")),
     r"HTTP 403: Resource not accessible by integration \(GITHUB_TOKEN may not read it: give the job "
     r"`pull-requests: read`\)"),
    (lambda server: (server.add_pull("octo/repo", 7, "a" * 40), server.fail("GET", "/repos/octo/repo/pulls/7",
                                                                             "unavailable", times=3)),
     r"HTTP 503: Service Unavailable \(GitHub failed to answer; re-run the job later\)"),
], ids=["404-no-such-pr", "403-no-permission", "503-unavailable"])
def test_rerun_that_cannot_read_the_pr_is_a_clear_error(gh, github_server, rerun, capsys, setup, expected):
    import re

    github_server.add_repo("octo/repo")
    setup(github_server)
    code, output, _ = gh("pull_request", rerun, "--error-comment", "unused")
    assert (code, output) == (1, "")  # not the author's mistake: no outputs, no comment
    assert re.search(expected, capsys.readouterr().err)


def test_rerun_against_an_unreachable_api_or_bad_repository_is_a_clear_error(gh, rerun, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")
    assert gh("pull_request", rerun)[0] == 1
    err = capsys.readouterr().err
    assert ("cannot re-read PR octo/repo#7 for this re-run (attempt 2) from http://127.0.0.1:9: "
            "ConnectionError") in err
    assert "check GITHUB_API_URL" in err
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo")
    assert gh("pull_request", rerun)[0] == 1
    assert "GITHUB_REPOSITORY='octo': a re-run re-reads the PR and needs OWNER/NAME" in capsys.readouterr().err
