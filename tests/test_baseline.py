import json

import pytest

from benchtrail.compare.baseline import MAX_ANCESTORS, candidate_commits, find_baselines
from benchtrail.errors import UserError
from benchtrail.results.baseline_key import BaselineKey
from benchtrail.store import open_store
from tests.helpers.git import commit, git

CPU = "c2-standard-16"
GPU = "a2-highgpu-1g"


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main", isolated=True)
    for i in range(3):
        git(r, "commit", "-q", "--allow-empty", "-m", f"main {i}", isolated=True)
    return r


def key(device=CPU, gpu=None, torch="2.13.0", method=1) -> BaselineKey:
    return BaselineKey(device, gpu, torch, method)


def wants(*keys: BaselineKey) -> dict[str, set[BaselineKey]]:
    return {k.device: {k} for k in keys}


def pointer(store, sha, run_id, keys=(key(),), torch="2.13.0", version2=True):
    """A stored run of ``sha`` for ``keys`` (a version-1 pointer lists devices and torch only)."""
    store.run_dir(run_id, 1).mkdir(parents=True)
    info = {"devices": sorted({k.device for k in keys}), "torch_version": torch,
            "created": "2026-11-29T00:00:00Z",
            "presets": ["smoke"], "dirty": False}
    if version2:
        info["baseline_keys"] = [k.to_dict() for k in keys]
    store.write_pointer(sha, run_id, 1, info)


def test_pr_branch_uses_its_merge_base_with_main(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    base = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "feature", isolated=True)
    head = commit(repo, "feature work")
    pointer(store, base, "base-run")
    pointer(store, head, "older-head-run")
    found = find_baselines(store, repo, head, wants(key())).primary
    assert (found.commit, found.reason, found.run_id) == (base, "merge base", "base-run")


def test_walks_first_parent_ancestors_skipping_other_devices_torch_versions_and_gpus(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    shas = git(repo, "rev-list", "--first-parent", "main", isolated=True).split()  # newest first
    pointer(store, shas[0], "gpu-only", keys=(key(GPU, "NVIDIA A100-SXM4-80GB"),))
    pointer(store, shas[1], "old-torch", keys=(key(torch="2.12.0"),))
    pointer(store, shas[2], "good")
    found = find_baselines(store, repo, shas[0], wants(key()))
    assert (found.primary.commit, found.primary.reason, found.primary.run_id) == (shas[2], "merge base~2",
                                                                                  "good")
    assert found.lacking == {} and found.ignored == ()


def test_a_version_1_pointer_serves_cpu_devices_only(repo, tmp_path):
    """It recorded no GPU model, so it cannot promise an H100 baseline for an H100 run."""
    store = open_store(str(tmp_path / "store"))
    head = git(repo, "rev-parse", "HEAD", isolated=True)
    pointer(store, head, "old", keys=(key(), key(GPU)), version2=False)
    found = find_baselines(store, repo, head, wants(key(), key(GPU, "NVIDIA H100 80GB HBM3")))
    assert [(b.run_id, b.devices) for b in found.runs] == [("old", (CPU,))]
    assert "GPU NVIDIA H100 80GB HBM3" in found.lacking[GPU]


def test_each_device_finds_its_own_nearest_baseline(repo, tmp_path):
    """Two-device history: main~2 ran both devices, main ran the CPU only, so the PR's CUDA rows
    compare with main~2 instead of being new, and the comparison names both baselines."""
    store = open_store(str(tmp_path / "store"))
    shas = git(repo, "rev-list", "--first-parent", "main", isolated=True).split()
    h100 = key(GPU, "NVIDIA H100 80GB HBM3")
    pointer(store, shas[2], "both", keys=(key(), h100))
    pointer(store, shas[0], "cpu-only")
    git(repo, "checkout", "-q", "-b", "feature", isolated=True)
    head = commit(repo, "feature work")
    found = find_baselines(store, repo, head, wants(key(), h100))
    assert [(b.run_id, b.commit, b.reason, b.devices) for b in found.runs] == [
        ("cpu-only", shas[0], "merge base", (CPU,)), ("both", shas[2], "merge base~2", (GPU,))]
    assert found.to_dict()["devices"] == {
        CPU: {"commit": shas[0], "reason": "merge base", "run_id": "cpu-only", "attempt": 1},
        GPU: {"commit": shas[2], "reason": "merge base~2", "run_id": "both", "attempt": 1}}


def test_an_a100_run_is_not_the_baseline_of_an_h100_run(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    head = git(repo, "rev-parse", "HEAD", isolated=True)
    pointer(store, head, "a100", keys=(key(GPU, "NVIDIA A100-SXM4-80GB"),))
    found = find_baselines(store, repo, head, wants(key(GPU, "NVIDIA H100 80GB HBM3")))
    assert found.runs == () and found.to_dict()["reason"] == "no stored run under this run's baseline key"
    assert found.lacking == {GPU: "no stored run with this device's baseline key (device a2-highgpu-1g, GPU "
                             "NVIDIA "
                                  "H100 80GB HBM3, torch 2.13.0, method version 1) at the merge base, its 10 "
                                  f"first-parent ancestors or HEAD; stored runs of {head[:12]} measure it "
                             "under "
                                  "another key: GPU NVIDIA A100-SXM4-80GB (baseline) vs NVIDIA H100 80GB "
                             "HBM3 "
                                  "(this run)"}


def test_a_release_branch_pr_uses_the_merge_base_with_its_own_base_branch(repo, tmp_path):
    """main moved on after release-1 was cut; a PR into release-1 compares with release-1's commit,
    not with the older fork point that its merge base with main would give."""
    store = open_store(str(tmp_path / "store"))
    fork_point = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "release-1", isolated=True)
    release_tip = commit(repo, "release fix")
    git(repo, "checkout", "-q", "main", isolated=True)
    main_tip = commit(repo, "main work")
    git(repo, "checkout", "-q", "-b", "pr", "release-1", isolated=True)
    head = commit(repo, "backport")
    for sha, run_id in ((fork_point, "fork"), (release_tip, "release"), (main_tip, "main")):
        pointer(store, sha, run_id)
    assert find_baselines(store, repo, head, wants(key())).primary.run_id == "fork"
    found = find_baselines(store, repo, head, wants(key()), base_branch="release-1").primary
    assert (found.run_id, found.commit, found.reason) == ("release", release_tip, "merge base")
    with pytest.raises(UserError, match="--base-branch 'nope': neither origin/nope nor nope is a branch"):
        find_baselines(store, repo, head, wants(key()), base_branch="nope")


def test_the_newest_stored_run_of_a_commit_wins_and_the_current_run_is_excluded(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    head = git(repo, "rev-parse", "HEAD", isolated=True)
    pointer(store, head, "first")
    pointer(store, head, "second")
    assert find_baselines(store, repo, head, wants(key())).primary.run_id == "second"
    assert find_baselines(store, repo, head, wants(key()), exclude=("second", 1)).primary.run_id == "first"


def test_no_stored_run_gives_no_baseline(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    found = find_baselines(store, repo, git(repo, "rev-parse", "HEAD", isolated=True), wants(key()))
    assert found.primary is None and found.to_dict() is None and set(found.lacking) == {CPU}


def test_explicit_base_commit_without_results_is_an_error(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    with pytest.raises(UserError, match=r"--base-commit main: the store .* has no run of"):
        find_baselines(store, repo, git(repo, "rev-parse", "HEAD", isolated=True), wants(key()), explicit="main")


def test_ancestors_are_limited(repo):
    for i in range(MAX_ANCESTORS + 5):
        commit(repo, f"more {i}")
    head = git(repo, "rev-parse", "HEAD", isolated=True)
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


def test_a_pointer_naming_no_run_is_ignored_with_the_reason(repo, tmp_path):
    store = open_store(str(tmp_path / "store"))
    head = git(repo, "rev-parse", "HEAD", isolated=True)
    pointer(store, head, "good")
    bad = tmp_path / "store" / "commits" / head / "bad-1.json"
    bad.write_text(f'{{"schema_version": 2, "commit": "{head}", "run_id": "../x", "attempt": "one", "devices": ["{CPU}"], '
                   f'"torch_version": "2.13.0", "baseline_keys": [{json.dumps(key().to_dict())}]}}')
    found = find_baselines(store, repo, head, wants(key()))
    assert found.primary.run_id == "good"
    (ignored,) = found.ignored
    assert ignored.reason == (f"commit pointer {bad}: run_id '../x' is not a run id (letters, digits, '.', '_', "
                              "'-', at most 64)")


def test_results_problem_names_files_this_benchtrail_cannot_load(tmp_path):
    from benchtrail.compare.baseline import results_problem
    from benchtrail.results.schema import SCHEMA_VERSION

    where = "run 1/1: results file results/d-0.json"
    cases = {
        "future.json": (json.dumps({"schema_version": SCHEMA_VERSION + 5}),
                        f"baseline incompatible: schema {SCHEMA_VERSION + 5} ({where}; this benchtrail reads results "
                        f"schemas 1..{SCHEMA_VERSION}: upgrade benchtrail to compare with it)"),
        "deep.json": ("[" * 100_000 + "]" * 100_000,
                      f"baseline unreadable: {where} is not JSON benchtrail can read "
                                                     "(RecursionError)"),
        "empty.json": ("",
                       f"baseline unreadable: {where} is not valid JSON (truncated or corrupt?): Expecting value "
                           "at line 1 column 1"),
        "cut.json": ('{"schema_version": 1, "commit": "ab', f"baseline unreadable: {where} is not valid JSON "
                                                           "(truncated or corrupt?): Unterminated string "
                     "starting "
                                                           "at line 1 column 33"),
        # For the loader to name: no version, an older or the current version, a version of the wrong type.
        "current.json": (json.dumps({"schema_version": SCHEMA_VERSION}), None),
        "v1.json": (json.dumps({"schema_version": 1, "benchmarks": []}), None),
        "text.json": (json.dumps({"schema_version": str(SCHEMA_VERSION + 1)}), None),
        "list.json": ("[]", None),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert results_problem(tmp_path / name, where) == expected, name
    (tmp_path / "bytes.json").write_bytes(b'{"schema_version": 1, "x": "\xff"}')
    assert results_problem(tmp_path / "bytes.json",
                           where) == f"baseline unreadable: {where} is not UTF-8 text (byte 28)"
    (tmp_path / "folder.json").mkdir()
    assert results_problem(tmp_path / "folder.json",
                           where) == f"baseline unreadable: {where} cannot be read: Is a directory"
    assert results_problem(tmp_path / "absent.json", where) == (f"baseline unreadable: {where} cannot be read: "
                                                                "No such file or directory")


def test_unusable_picks_the_devices_whose_baseline_run_cannot_be_read():
    from benchtrail.compare.baseline import unusable

    lacking = {"a": "baseline incompatible: schema 9 (run 1/1: …)", "b": "baseline unreadable: run 2/1: …",
               "c": "no run of the merge base has its baseline key (…)", "d": "baseline incompatible schema"}
    assert unusable({"lacking": lacking}) == {"a": lacking["a"], "b": lacking["b"]}
    assert unusable(None) == unusable({"reason": "the store could not be read: x"}) == unusable({"lacking": []}) == {}
