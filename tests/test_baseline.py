import subprocess
from pathlib import Path

import pytest

from benchtrail.baseline import MAX_ANCESTORS, candidate_commits, find_baseline
from benchtrail.errors import UserError
from benchtrail.store import open_store


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    for i in range(3):
        git(r, "commit", "-q", "--allow-empty", "-m", f"main {i}")
    return r


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def pointer(store, sha, run_id, devices=("c2-standard-16",), torch="2.13.0", created="2026-11-29T00:00:00"):
    store.run_dir(run_id, 1).mkdir(parents=True)
    store.write_pointer(sha, run_id, 1, {"devices": list(devices), "torch_version": torch, "created": created,
                                         "presets": ["smoke"], "dirty": False})


def test_pr_branch_uses_its_merge_base_with_main(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    base = git(repo, "rev-parse", "main")
    git(repo, "checkout", "-q", "-b", "feature")
    head = commit(repo, "feature work")
    pointer(store, base, "base-run")
    pointer(store, head, "older-head-run")
    found = find_baseline(store, repo, head, {"c2-standard-16"}, "2.13.0")
    assert (found.commit, found.reason, found.run_id) == (base, "merge base", "base-run")


def test_walks_first_parent_ancestors_skipping_other_devices_and_torch_versions(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    shas = git(repo, "rev-list", "--first-parent", "main").split()  # newest first
    pointer(store, shas[0], "gpu-only", devices=("a2-highgpu-1g",))
    pointer(store, shas[1], "old-torch", torch="2.12.0")
    pointer(store, shas[2], "good")
    found = find_baseline(store, repo, shas[0], {"c2-standard-16"}, "2.13.0", exclude=None)
    assert (found.commit, found.reason, found.run_id) == (shas[2], "merge base~2", "good")


def test_the_newest_run_of_a_commit_wins_and_the_current_run_is_excluded(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    head = git(repo, "rev-parse", "HEAD")
    pointer(store, head, "first", created="2026-11-29T01:00:00")
    pointer(store, head, "second", created="2026-11-29T02:00:00")
    found = find_baseline(store, repo, head, {"c2-standard-16"}, "2.13.0", exclude=("second", 1))
    assert found.run_id == "first"


def test_no_stored_run_gives_no_baseline(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    assert find_baseline(store, repo, git(repo, "rev-parse", "HEAD"), {"c2-standard-16"}, "2.13.0") is None


def test_explicit_base_commit_without_results_is_an_error(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    with pytest.raises(UserError, match="--base-commit main: the store .* has no run of"):
        find_baseline(store, repo, git(repo, "rev-parse", "HEAD"), {"c2-standard-16"}, "2.13.0", explicit="main")


def test_ancestors_are_limited(repo):
    for i in range(MAX_ANCESTORS + 5):
        commit(repo, f"more {i}")
    head = git(repo, "rev-parse", "HEAD")
    candidates = candidate_commits(repo, head)
    assert len(candidates) == MAX_ANCESTORS + 1
    assert candidates[0] == (head, "merge base")


def test_unwritable_store_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot be written"):
        open_store(str(blocker / "store"))


def test_store_accepts_file_urls_and_refuses_other_schemes(tmp_path):
    assert open_store((tmp_path / "s").as_uri()).root == tmp_path / "s"
    with pytest.raises(UserError, match="scheme 's3' is not supported"):
        open_store("s3://bucket/x")
