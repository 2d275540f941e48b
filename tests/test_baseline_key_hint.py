"""A device without a baseline says when stored runs exist but were measured under another key."""


import pytest

from benchtrail.compare.baseline import ORIGIN_HINT, find_baselines
from benchtrail.compare.document import Comparison
from benchtrail.results.baseline_key import BaselineKey
from benchtrail.store import open_store
from tests.helpers.git import git

HINT = "measure it under another key"
DEPTH = "at the merge base, its 10 first-parent ancestors or HEAD"


@pytest.fixture
def world(tmp_path):
    """A repo whose PR branch forks from main, the fork point, the PR head and a local store."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "main", isolated=True)
    base = git(repo, "rev-parse", "HEAD", isolated=True)
    git(repo, "checkout", "-q", "-b", "pr", isolated=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "pr", isolated=True)
    return repo, base, git(repo, "rev-parse", "HEAD", isolated=True), open_store(str(tmp_path / "store"))


def _key(method: int, ci: bool | None = False) -> BaselineKey:
    return BaselineKey("cpu", None, "2.13.0", method, ci)


def _store_run(store, sha: str, run_id: str, key: BaselineKey) -> None:
    store.run_dir(run_id, 1).mkdir(parents=True)
    store.write_pointer(sha, run_id, 1, {"devices": ["cpu"], "torch_version": "2.13.0", "presets": ["smoke"],
                                         "created": "2026-11-29T00:00:00Z", "dirty": False,
                                         "baseline_keys": [key.to_dict()]})


def test_a_method_version_bump_says_the_stored_runs_use_another_key(world):
    repo, base, head, store = world
    _store_run(store, base, "local-old", _key(3))
    found = find_baselines(store, repo, head, {"cpu": {_key(4)}})
    assert found.runs == ()
    assert found.lacking["cpu"] == (
        "no stored run with this device's baseline key (device cpu, no GPU, torch 2.13.0, method version 4, "
        f"run outside CI) {DEPTH}; stored runs of {base[:12]} {HINT}: "
        "method version 3 (baseline) vs 4 (this run)")


def test_a_matching_key_finds_the_run_and_nothing_is_lacking(world):
    repo, base, head, store = world
    _store_run(store, base, "local-new", _key(4))
    _store_run(store, base, "local-old", _key(3))  # newer, so scanned first, but of another key
    found = find_baselines(store, repo, head, {"cpu": {_key(4)}})
    assert [(b.commit, b.run_id, b.devices) for b in found.runs] == [(base, "local-new", ("cpu",))]
    assert found.lacking == {}
    gpu = BaselineKey("gpu", "NVIDIA H100 80GB HBM3", "2.13.0", 4, False)
    found = find_baselines(store, repo, head, {"cpu": {_key(3)}, "gpu": {gpu}})
    assert [(b.run_id, b.devices) for b in found.runs] == [("local-old", ("cpu",))]
    assert list(found.lacking) == ["gpu"] and HINT not in found.lacking["gpu"]  # no stored run has the device
    found = find_baselines(store, repo, head, {"cpu": {_key(5)}})
    assert found.lacking["cpu"].endswith(f"{DEPTH}; stored runs of {base[:12]} {HINT}: "
                                         "method version 3 (baseline) vs 5 (this run)")


def test_an_origin_only_difference_keeps_the_origin_hint_alone(world):
    repo, base, head, store = world
    _store_run(store, base, "local-old", _key(3, ci=False))
    found = find_baselines(store, repo, head, {"cpu": {_key(4, ci=True)}})
    assert found.lacking["cpu"].endswith(f"{HINT}: method version 3 (baseline) vs 4 (this run); "
                                         "origin local (baseline) vs CI (this run)")
    _store_run(store, base, "local-same", _key(4, ci=False))  # differs in its origin only
    found = find_baselines(store, repo, head, {"cpu": {_key(4, ci=True)}})
    assert found.runs == () and found.lacking["cpu"].endswith(f"run in CI) {DEPTH}; {ORIGIN_HINT}")
    assert HINT not in found.lacking["cpu"]


def test_a_comment_without_any_baseline_says_the_stored_runs_use_another_key(world):
    from benchtrail.compare.comment import render
    from benchtrail.compare.document import comparison_to_dict
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.verdicts import compare
    from tests.helpers.records import record, results, spread
    from tests.helpers.schemas import errors

    repo, base, head, store = world
    _store_run(store, base, "local-old", _key(3))
    baseline = find_baselines(store, repo, head, {"cpu": {_key(4)}}).to_dict()
    assert baseline["reason"] == "no stored run under this run's baseline key" and baseline["ignored"] == []
    files = [results(record("a", spread(100.0, 20)), commit=head)]
    comparison = comparison_to_dict(compare([], files, load_thresholds()), [], files, "thresholds.yaml",
                                    baseline)
    assert errors("comparison.schema.json", comparison) == []
    line = render(Comparison.of(comparison))[0].splitlines()[1]
    assert f" · no baseline found: every series is new (cpu: stored runs of {base[:12]} {HINT}: method version " \
           "3 (baseline) vs 4 (this run))" in line
