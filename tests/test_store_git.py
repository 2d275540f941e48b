"""The ``git:`` store (``benchtrail.store.git_branch``) against a real bare repository standing in for the
remote (no mock of git)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from benchtrail.errors import StoreError, UserError
from benchtrail.store import browser_link, fetch_command, is_local, open_store, remote, split_run_url
from benchtrail.store.git_branch import GitStore
from benchtrail.store.git_url import github_repo, parse_url, resolve_remote, said, shown_remote
from tests.helpers.git import git
from tests.helpers.store_trees import RUN, read_tree, write_tree

SHA = "a" * 40


@pytest.fixture
def bare(tmp_path):
    path = tmp_path / "remote.git"
    git(None, "init", "--quiet", "--bare", str(path))
    return path


def opened(bare, tmp_path, name, branch="data"):
    return open_store(f"git:{bare}#{branch}", staging=tmp_path / name)


def branch_files(bare, branch="data"):
    return set(git(None, "--git-dir", str(bare), "ls-tree", "-r", "--name-only", branch).split())


def test_a_run_and_its_pointer_written_by_one_store_are_read_by_another(bare, tmp_path):
    writer = opened(bare, tmp_path, "one")
    assert writer.tip() is None  # the branch is created by the first write
    run_dir = writer.create_run_dir("123", 1)
    write_tree(run_dir, {k: v for k, v in RUN.items() if not k.startswith("modules/")})
    assert writer.upload_run(run_dir, "123", 1) == len(RUN) - 3
    info = {"devices": ["cpu"], "results": ["results/c2-standard-16-0.json"]}
    url = writer.write_pointer(SHA, "123", 1, info)
    assert url == f"git:{bare}#data/commits/{SHA}/123-1.json"

    reader = opened(bare, tmp_path, "two")
    assert isinstance(reader, GitStore) and reader.cache != writer.cache
    (pointer,) = reader.pointers(SHA)
    assert (pointer["run_id"], pointer["attempt"], pointer["devices"]) == ("123", 1, ["cpu"])
    assert reader.run_files("123", 1) == sorted(k for k in RUN if not k.startswith("modules/"))
    fetched = reader.fetch_run("123", 1, tmp_path / "fetched", ("results/*.json", "run-configs/*"))
    wanted = ("results/c2", "run-configs/")
    assert read_tree(fetched) == {k: v for k, v in RUN.items() if k.startswith(wanted)}
    assert reader.fetch_run("123", 1) == reader.run_dir("123", 1)  # the staging folder by default
    assert reader.incomplete_runs() == []
    with pytest.raises(UserError, match="already holds files"):
        reader.create_run_dir("123", 1)
    with pytest.raises(UserError, match="no run 9/1"):
        reader.fetch_run("9", 1)
    log = git(None, "--git-dir", str(bare), "log", "--format=%an <%ae> %s", "data").splitlines()
    who = "benchtrail <benchtrail@users.noreply.github.com>"
    assert log == [f"{who} benchtrail: pointer of run 123/1 to {SHA[:12]}",
                   f"{who} benchtrail: run 123/1, 6 file(s)"]


def test_a_stored_file_is_never_overwritten_and_a_refused_write_commits_nothing(bare, tmp_path):
    store = opened(bare, tmp_path, "one")
    local = write_tree(tmp_path / "run", {"results/x.json": b"1\n", "comparison.json": b"{}\n"})
    store.upload_run(local, "7", 1)
    assert store.upload_run(local, "7", 1) == 2  # the same bytes again: fine, nothing committed
    (local / "results/x.json").write_bytes(b"2\n")
    (local / "timings.json").write_bytes(b"{}\n")
    with pytest.raises(UserError, match=r"1 file\(s\) already exist.*runs/7/1/results/x\.json.*never "
                                        r"overwritten"):
        opened(bare, tmp_path, "two").upload_run(local, "7", 1)
    assert git(None, "--git-dir", str(bare), "show", "data:runs/7/1/results/x.json", strip=False) == "1\n"
    assert "runs/7/1/timings.json" not in branch_files(bare)
    log = git(None, "--git-dir", str(bare), "log", "--format=%s", "data").splitlines()
    assert log == ["benchtrail: run 7/1, 2 file(s)"]
    (local / "results/x.json").write_bytes(b"1\n")  # the same bytes again: timings.json alone is added
    assert store.upload_run(local, "7", 1) == 3
    assert git(None, "--git-dir", str(bare), "log", "-1", "--format=%s", "data", strip=False) == \
        "benchtrail: run 7/1, 1 file(s)\n"
    store.write_pointer(SHA, "7", 1, {"devices": ["a"]})
    with pytest.raises(UserError, match="never overwritten"):
        store.write_pointer(SHA, "7", 1, {"devices": ["b"]})
    assert [p["devices"] for p in store.pointers(SHA)] == [["a"]]


def test_modules_and_the_dashboard_never_enter_the_branch_and_a_note_says_where(bare, tmp_path, monkeypatch):
    dashboard = {"dashboard/index.html": b"<html>", "dashboard/smoke.png": b"png"}
    local = write_tree(tmp_path / "run", {**RUN, **dashboard})
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("BENCHTRAIL_ARTIFACT_NAME", "benchtrail-run")
    monkeypatch.setenv("BENCHTRAIL_ARTIFACT_RETENTION_DAYS", "30")
    store = opened(bare, tmp_path, "one")
    assert store.upload_run(local, "5", 2) == len(RUN) - 3
    stored = branch_files(bare)
    assert not [n for n in stored if "/modules/" in n or "/dashboard/" in n]
    note = git(None, "--git-dir", str(bare), "show", "data:runs/5/2/not-stored/benchtrail-run.md")
    assert "`modules/` | 3 |" in note and "`dashboard/` | 2 |" in note
    assert "artifact `benchtrail-run` of workflow run 4242 (https://github.com/o/r/actions/runs/4242)" in note
    assert "(30 days after this upload)" in note
    monkeypatch.setenv("GITHUB_ACTIONS", "")
    store.upload_run(local, "6", 1, patterns=("modules/**",))  # only left-out files: the note alone
    assert "not kept" in git(None, "--git-dir", str(bare), "show", "data:runs/6/1/not-stored/local.md")
    assert {n for n in branch_files(bare) if n.startswith("runs/6/")} == {"runs/6/1/not-stored/local.md"}
    asset = store.write_asset("plotly-1.0.0.min.js", b"js")  # for the staged pages only: never committed
    assert asset == store.staging / "assets/plotly-1.0.0.min.js" and asset.read_bytes() == b"js"
    assert not [n for n in branch_files(bare) if n.startswith("assets/")]


def _write_run(store, run_id, start):
    local = write_tree(store.staging / "local" / run_id, {"results/x.json": run_id.encode()})
    start.wait()
    store.upload_run(local, run_id, 1)
    store.write_pointer(SHA, run_id, 1, {"devices": [run_id]})


def test_two_writers_pushing_at_once_both_land_without_force(bare, tmp_path):
    writers = [opened(bare, tmp_path, f"w{i}") for i in range(3)]
    start, errors = threading.Barrier(len(writers)), []

    def write(store, run_id):
        try:
            _write_run(store, run_id, start)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, f"r{i}")) for i, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    stored = branch_files(bare)
    assert {f"runs/r{i}/1/results/x.json" for i in range(3)} <= stored
    assert {f"commits/{SHA}/r{i}-1.json" for i in range(3)} <= stored
    subjects = git(None, "--git-dir", str(bare), "log", "--format=%s", "data").splitlines()
    assert len(subjects) == 6 and len(set(subjects)) == 6  # every write one commit, none lost
    # a history without a force-push: each commit the first parent of the one after it
    assert len(git(None, "--git-dir", str(bare), "rev-list", "--first-parent", "data").split()) == 6
    assert len(opened(bare, tmp_path, "reader").pointers(SHA)) == 3


_SHARED_WRITER = """
import sys
from pathlib import Path
from benchtrail.store import open_store
bare, staging, run_id = sys.argv[1:]
store = open_store(f"git:{bare}#data", staging=Path(staging))
local = Path(staging) / "local" / run_id
(local / "results").mkdir(parents=True)
(local / "results" / "x.json").write_text(run_id)
store.upload_run(local, run_id, 1)
store.write_pointer("a" * 40, run_id, 1, {"devices": [run_id]})
"""


def test_processes_sharing_one_staging_folder_all_land(bare, tmp_path):
    """One cache for all: created once (in a temporary folder, renamed), fetches and writes under its lock."""
    command = [sys.executable, "-c", _SHARED_WRITER, str(bare), str(tmp_path / "s")]
    writers = [subprocess.Popen([*command, f"p{i}"], stderr=subprocess.PIPE, text=True) for i in range(4)]
    said = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0] * 4, said
    assert {f"commits/{SHA}/p{i}-1.json" for i in range(4)} <= branch_files(bare)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["cache.git", "local"]


def test_git_url_parsing_and_defaults(tmp_path):
    assert parse_url("git:") == ("origin", "benchtrail-data")
    assert parse_url("git:origin") == ("origin", "benchtrail-data")
    assert parse_url("git:/path/to/bare.git#data") == ("/path/to/bare.git", "data")
    assert parse_url("git:https://github.com/o/r.git#benchtrail-data") == ("https://github.com/o/r.git",
                                                                            "benchtrail-data")
    for bad in ("git:/x#a b", "git:/x#a..b", "git:/x#feature/runs", "git:/x#-x"):
        with pytest.raises(UserError, match="not a branch name"):
            parse_url(bad)
    assert github_repo("git@github.com:o/r.git") == github_repo("https://x:tok@github.com/o/r") == \
        "https://github.com/o/r"
    assert github_repo("/srv/r.git") is None


def test_a_token_in_the_remote_url_is_refused_and_never_shown():
    for url in ("git:https://user:token@github.com/o/r.git#data", "git:HTTPS://token@github.com/o/r",
                "git:ssh://git:p@ss@host/r.git"):
        with pytest.raises(UserError, match="credential helper") as caught:
            parse_url(url)
        assert "token@" not in str(caught.value) and "p@ss" not in str(caught.value)
    assert parse_url("git:ssh://git@github.com/o/r.git#d") == ("ssh://git@github.com/o/r.git", "d")
    assert shown_remote("HTTPS://user:p@ss@host/r.git") == "https://host/r.git"
    assert shown_remote("git:https://x:tok@h/r#data/runs/1/1/") == "git:https://h/r#data/runs/1/1/"
    assert shown_remote("ssh://git@github.com/o/r") == "ssh://git@github.com/o/r"


def test_branch_names_are_those_git_takes_as_they_are():
    for bad in ("HEAD", "@", "@{-1}", "a@{b", "x.lock", "a/.b", "-x"):
        with pytest.raises(UserError, match="not a branch name"):
            parse_url(f"git:/x#{bad}")
    assert parse_url("git:/x#perf/data-1.0") == ("/x", "perf/data-1.0")


def test_scp_remotes_are_remotes_as_git_reads_them(tmp_path):
    for scp in ("myhost:repo.git", "github.com:o/r.git", "git@github.com:o/r.git", "host:/abs/r.git"):
        assert resolve_remote(scp, tmp_path) == (scp, ())
    assert resolve_remote("./a:b", tmp_path)[0] == str(tmp_path / "a:b")
    assert resolve_remote("sub/x:y", tmp_path)[0] == str(tmp_path / "sub/x:y")
    assert github_repo("github.com:o/r.git") == "https://github.com/o/r"
    assert github_repo("github.com/o/r") is None  # a relative path


def test_the_default_remote_is_origin_of_the_working_repository(bare, tmp_path):
    work = tmp_path / "work"
    git(None, "init", "--quiet", str(work))
    with pytest.raises(UserError, match=r"git store git:origin#benchtrail-data: 'origin' is not a remote of "
                                        r"the repository in .*work .*git:URL#benchtrail-data"):
        open_store("git:", staging=tmp_path / "s", cwd=work)
    git(work, "remote", "add", "origin", str(bare))
    store = open_store("git:", staging=tmp_path / "s", cwd=work)
    assert store.url == f"git:{bare}#benchtrail-data"
    git(work, "config", "core.sshCommand", "ssh -i /k/id -o IdentitiesOnly=yes")  # checkout's ssh-key
    git(work, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic x")
    assert {("http.https://github.com/.extraheader", "AUTHORIZATION: basic x"),
            ("core.sshcommand", "ssh -i /k/id -o IdentitiesOnly=yes")} <= \
        set(resolve_remote("origin", work)[1])


def test_a_branch_not_there_yet_counts_as_fetched_and_git_messages_skip_blank_lines(bare, tmp_path):
    store = opened(bare, tmp_path, "one")
    assert store.tip() is None and len(store.fetched_at) == 1
    fetched = store.fetched_at[0]
    assert store.pointers(SHA) == [] and store.fetched_at == [fetched]  # a history walk: no fetch a commit
    proc = subprocess.run(["sh", "-c", "printf 'one\\n\\n  \\ntwo\\n\\n' >&2; exit 3"], capture_output=True)
    assert said(proc) == "git said: one / two"


def test_a_remote_that_cannot_be_read_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match=r"cannot fetch branch 'data' from remote .*nowhere\.git.*"
                                         r"git said: "):
        open_store(f"git:{tmp_path / 'nowhere.git'}#data", staging=tmp_path / "s")


def test_a_push_git_refuses_names_the_remote_and_what_git_said(bare, tmp_path):
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes here' >&2\nexit 1\n")
    hook.chmod(0o755)
    store = opened(bare, tmp_path, "one")
    with pytest.raises(StoreError, match=r"push to branch 'data' of remote .*remote\.git refused.*"
                                         r"no pushes here"):
        store.upload_run(write_tree(tmp_path / "run", {"a.json": b"{}"}), "1", 1)


def test_open_store_and_the_url_helpers_know_git_urls(bare, tmp_path):
    store = opened(bare, tmp_path, "one")
    run = store.run_url("12", 3)
    assert run == f"git:{bare}#data/runs/12/3/" and split_run_url(run) == (store.url, "12", 3)
    assert remote(run) is not None and not is_local(run) and not is_local("git:") and is_local(str(tmp_path))
    store.upload_run(write_tree(tmp_path / "run", {"results/x.json": b"1"}), "12", 3)
    line = fetch_command(run, str(tmp_path / "dest"))
    assert line.startswith("git clone ")
    assert f"file://{bare} " in line  # a path as a file:// URL, so that --depth holds
    store.upload_run(write_tree(tmp_path / "other", {"results/y.json": b"2"}), "13", 1)
    subprocess.run(line, shell=True, check=True, capture_output=True)
    cloned = tmp_path / "dest/benchtrail-12-3"
    assert (cloned / "runs/12/3/results/x.json").read_bytes() == b"1"
    assert not (cloned / "runs/13").exists()  # the run alone is checked out
    assert git(None, "-C", str(cloned), "rev-parse", "--is-shallow-repository", strip=False) == "true\n"
    gh = "git:https://github.com/o/r.git#benchtrail-data"
    assert split_run_url(f"{gh}/runs/12/3/") == (gh, "12", 3)
    assert browser_link(f"{gh}/runs/12/3/comparison.json") == \
        "https://github.com/o/r/blob/benchtrail-data/runs/12/3/comparison.json"
    assert browser_link(f"{gh}/runs/12/3/dashboard/index.html") == \
        "https://github.com/o/r/tree/benchtrail-data/runs/12/3/not-stored"
    elsewhere = f"git:{bare}#data/runs/12/3/comparison.json"
    assert browser_link(elsewhere) == elsewhere
    assert fetch_command(f"{gh}/runs/12/3/") == (
        "git clone --quiet --depth 1 --filter=blob:none --sparse --branch benchtrail-data "
        "https://github.com/o/r.git ./benchtrail-12-3 && git -C ./benchtrail-12-3 sparse-checkout set "
        "--no-cone /runs/12/3/")
    with pytest.raises(UserError, match="scheme 'svn' is not supported; use .*git:REMOTE#BRANCH"):
        open_store("svn://x/y")
