"""``benchtrail bisect-range``: the first-parent commits after A up to B, and its refusals."""

import pytest

from benchtrail.cli import main
from benchtrail.errors import UserError
from benchtrail.history.track import bisect_range
from tests.helpers.git import git


@pytest.fixture
def merge_repo(tmp_path):
    """``c0 - c1 - m (merges side s1, branched from c0) - c3`` on main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    shas = {}

    def commit(name):
        (repo / f"{name}.txt").write_text(name)
        git(repo, "add", f"{name}.txt", isolated=True)
        git(repo, "commit", "-q", "-m", f"subject of {name}", isolated=True)
        shas[name] = git(repo, "rev-parse", "HEAD", isolated=True)

    commit("c0")
    commit("c1")
    git(repo, "checkout", "-q", "-b", "side", shas["c0"], isolated=True)
    commit("s1")
    git(repo, "checkout", "-q", "main", isolated=True)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side", isolated=True)
    shas["m"] = git(repo, "rev-parse", "HEAD", isolated=True)
    commit("c3")
    return repo, shas


def test_bisect_range_lists_first_parent_commits_after_a_up_to_b(merge_repo, capsys):
    repo, shas = merge_repo
    assert bisect_range(repo, shas["c0"], "main") == [
        (shas["c1"], "subject of c1"), (shas["m"], "merge side"), (shas["c3"], "subject of c3")]
    assert main(["bisect-range", shas["c1"][:10], "HEAD", "--repo", str(repo)]) == 0
    out, _err = capsys.readouterr()
    assert out == f"{shas['m']} merge side\n{shas['c3']} subject of c3\n"
    assert bisect_range(repo, "main", "main") == []


def test_bisect_range_refuses_unknown_refs_and_reversed_builds(merge_repo, capsys, tmp_path):
    repo, shas = merge_repo
    with pytest.raises(UserError, match=r"A 'nope': git cannot resolve it"):
        bisect_range(repo, "nope", "main")
    with pytest.raises(UserError, match=r"B 'nope': git cannot resolve it"):
        bisect_range(repo, "main", "nope")
    with pytest.raises(UserError, match=r"is not an ancestor of B"):
        bisect_range(repo, shas["c3"], shas["c1"])
    with pytest.raises(UserError, match=r"is not an ancestor of B"):
        bisect_range(repo, shas["s1"], shas["c1"])
    assert main(["bisect-range", "HEAD", "HEAD~2", "--repo", str(repo)]) == 1
    assert "is not an ancestor" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match=r"is not a git repository"):
        bisect_range(tmp_path / "plain", "a", "b")

