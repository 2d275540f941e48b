"""The store contract, run against both backends: a folder (file://) and GCS (the real emulator).

The gs:// store goes through ``FaultProxy`` with no fault injected, only so that ``ifGenerationMatch=0``
is enforced (the emulator ignores preconditions).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from benchtrail.errors import UserError
from benchtrail.store import LocalStore, open_store
from benchtrail.store.base import compile_patterns, select, unsafe_reason
from tests.helpers.store_trees import RUN, read_tree, write_tree


def test_uploaded_run_fetches_back_byte_identical(store, tmp_path):
    local = write_tree(tmp_path / "local-run", RUN)
    assert store.upload_run(local, "123", 1, deadline_s=20) == len(RUN)
    fetched = store.fetch_run("123", 1, tmp_path / "fetched")
    assert fetched == tmp_path / "fetched"
    assert read_tree(fetched) == RUN


def test_fetch_selects_files_by_glob_relative_to_the_run_dir(store, tmp_path):
    store.upload_run(write_tree(tmp_path / "local-run", RUN), "123", 1, deadline_s=20)
    fetched = store.fetch_run("123", 1, tmp_path / "fetched",
                              ("results/*.json", "run-configs/*", "modules/resnet18-inductor/**"))
    assert sorted(read_tree(fetched)) == [
        "modules/resnet18-inductor/code/kernel.py",
        "modules/resnet18-inductor/module_info.json",
        "results/c2-standard-16-0.json",
        "run-configs/compilation.json",
        "run-configs/execution.json",
    ]


def test_a_stored_file_is_never_overwritten_with_other_bytes(store, tmp_path):
    local = write_tree(tmp_path / "local-run", RUN)
    store.upload_run(local, "123", 1, deadline_s=20)
    (local / "results/c2-standard-16-0.json").write_bytes(b'{"schema_version": 1, "tampered": true}\n')
    with pytest.raises(UserError, match=r"1 (file|object)\(s\) already exist.*c2-standard-16-0\.json.*"
                                        r"never overwritten"):
        store.upload_run(local, "123", 1, deadline_s=20)
    assert read_tree(store.fetch_run("123", 1, tmp_path / "fetched")) == RUN


def test_uploading_the_same_bytes_again_is_not_an_error(store, tmp_path):
    local = write_tree(tmp_path / "local-run", RUN)
    store.upload_run(local, "123", 1, deadline_s=20)
    assert store.upload_run(local, "123", 1, deadline_s=20) == len(RUN)


def test_a_run_with_files_cannot_be_created_again(store, tmp_path):
    store.create_run_dir("123", 1)
    store.upload_run(write_tree(tmp_path / "local-run", RUN), "123", 1, deadline_s=20)
    with pytest.raises(UserError, match=r"never overwritten .use a new attempt"):
        store.create_run_dir("123", 1)
    assert store.create_run_dir("123", 2).is_dir()


def test_commit_pointers_are_create_only_and_listed_in_the_order_the_store_created_them(store):
    """Not by the writer's own ``created`` (a forger would pick the newest), nor its ``stored_at``."""
    sha = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
    store.write_pointer(sha, "200", 1, {"created": "2026-11-29T02:00:00", "devices": ["c2-standard-16"]})
    time.sleep(0.01)
    store.write_pointer(sha, "100", 2, {"created": "2026-11-29T01:00:00", "devices": ["c2-standard-16"],
                                        "stored_at": "1999-01-01T00:00:00.000000Z"})
    found = store.pointers(sha)
    assert [(p["run_id"], p["attempt"], p["commit"], p["schema_version"]) for p in found] == [
        ("200", 1, sha, 2), ("100", 2, sha, 2)]
    first, second = (p["stored_at"] for p in found)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", second) and "2026" <= first < second
    with pytest.raises(UserError, match="already exist"):
        store.write_pointer(sha, "200", 1, {"created": "2026-11-29T03:00:00", "devices": []})
    assert store.pointers(sha)[0]["created"] == "2026-11-29T02:00:00"
    assert store.pointers("0" * 40) == []


def test_a_copied_local_store_orders_a_commits_runs_as_before(tmp_path):
    """Issue 39: ``cp -r`` (or a checkout, an archive) gives every file a new time; a local store orders a
    commit's runs by the UTC time written into each pointer when it was created (run id, then attempt, break a
    tie), not by the file's time, so the newest run, the baseline, stays the same. A pointer without a valid
    ``created`` (older ones) falls back to its file's time."""
    import shutil

    from benchtrail.store import open_store

    sha = "ab" * 20
    store = open_store(str(tmp_path / "store"))
    for run_id, created in (("9", "2026-12-01T10:00:00+00:00"), ("10", "2026-12-02T10:00:00+00:00"),
                            ("11", "2026-12-02T10:00:00+00:00"), ("12", "2026-12-03T09:00:00+01:00")):
        store.write_pointer(sha, run_id, 1, {"created": created, "devices": ["c2-standard-16"]})
    store.write_pointer(sha, "old", 1, {"created": "not a time", "devices": ["c2-standard-16"]})
    folder = tmp_path / "store" / "commits" / sha
    os.utime(folder / "old-1.json", (1_700_000_000, 1_700_000_000))  # 2023: older than every created time
    order = ["old", "9", "10", "11", "12"]
    assert [p["run_id"] for p in store.pointers(sha)] == order
    shutil.copytree(tmp_path / "store", tmp_path / "copy", copy_function=shutil.copy)  # new file times ...
    for i, name in enumerate(["12-1.json", "11-1.json", "10-1.json", "9-1.json"]):  # ... in reverse order
        os.utime(tmp_path / "copy" / "commits" / sha / name, (2_000_000_000 - i, 2_000_000_000 - i))
    copied = [p["run_id"] for p in open_store(str(tmp_path / "copy")).pointers(sha)]
    assert copied == [*order[1:], "old"]  # "old" has only its file's time, which the copy made the newest
    assert store.pointers(sha)[-1]["stored_at"] == "2026-12-03T08:00:00.000000Z"  # in UTC


def test_unsafe_local_file_names_are_refused_before_anything_is_stored(store, tmp_path):
    local = write_tree(tmp_path / "local-run", {"results/ok.json": b"{}", "results/a[1].json": b"{}"})
    with pytest.raises(UserError, match=r"'results/a\[1\].json' is refused because it contains a gcloud "
                                        r"wildcard character \(\[\]\)"):
        store.upload_run(local, "123", 1, deadline_s=20)
    with pytest.raises(UserError, match="no run 123/1 in store"):
        store.fetch_run("123", 1, tmp_path / "fetched")


@pytest.mark.parametrize("bad", ["../x", "/etc", "a/../../b", ""])
def test_patterns_must_stay_inside_the_run_dir(store, tmp_path, bad):
    store.upload_run(write_tree(tmp_path / "local-run", RUN), "123", 1, deadline_s=20)
    with pytest.raises(UserError, match="must be relative to the run directory"):
        store.fetch_run("123", 1, tmp_path / "fetched", (bad,))


@pytest.mark.parametrize("run_id", ["../123", "a/b", "12*", "", "x?"])
def test_run_ids_must_be_path_and_gcloud_safe(store, run_id):
    with pytest.raises(UserError, match="not path-safe"):
        store.run_url(run_id, 1)


def test_fetch_refuses_a_destination_file_with_other_bytes(store, tmp_path):
    store.upload_run(write_tree(tmp_path / "local-run", RUN), "123", 1, deadline_s=20)
    dest = write_tree(tmp_path / "fetched", {"comparison.json": b"mine"})
    with pytest.raises(UserError, match=r"1 file\(s\) already exist in .*fetched with other content "
                                        r"\(comparison.json\); remove them or fetch into another folder"):
        store.fetch_run("123", 1, dest)
    assert (dest / "comparison.json").read_bytes() == b"mine"


# -- local store specifics ---------------------------------------------------------------------

def test_local_upload_from_the_run_dir_itself_copies_nothing(tmp_path):
    store = open_store(str(tmp_path / "store"))
    run_dir = write_tree(store.create_run_dir("local-1", 1), RUN)
    assert store.upload_run(run_dir, "local-1", 1) == len(RUN)
    assert read_tree(run_dir) == RUN
    assert store.run_url("local-1", 1) == str(run_dir.resolve())


def test_local_fetch_without_dest_is_the_run_dir_itself(tmp_path):
    store = open_store(str(tmp_path / "store"))
    run_dir = write_tree(store.create_run_dir("local-1", 1), RUN)
    assert store.fetch_run("local-1", 1, None, ("results/*.json",)) == run_dir
    with pytest.raises(UserError, match="no run local-2/1 in store"):
        store.fetch_run("local-2", 1)


def test_local_store_is_a_folder_with_the_documented_layout(tmp_path):
    store = open_store((tmp_path / "s").as_uri())
    assert isinstance(store, LocalStore)
    store.upload_run(write_tree(tmp_path / "local-run", {"results/x.json": b"{}"}), "7", 3)
    store.write_pointer("abc123", "7", 3, {"created": "t"})
    assert sorted(p.relative_to(tmp_path / "s").as_posix() for p in (tmp_path / "s").rglob("*")
                  if p.is_file() and not p.name.startswith(".")) == [
        "commits/abc123/7-3.json", "runs/7/3/results/x.json"]
    assert not [n for n in os.listdir(tmp_path / "s" / "runs" / "7" / "3" / "results") if n.endswith(".tmp")]


# -- names and patterns -----------------------------------------------------------------------

@pytest.mark.parametrize(("name", "reason"), [
    ("results/x.json", None),
    ("modules/m-1_a.b/code/k.py", None),
    ("../x", "it has a '..' path segment"),
    ("a/./b", "it has a '.' path segment"),
    ("/etc/passwd", "it is absolute"),
    ("a//b", "it has an empty path segment"),
    ("a\\b", "it contains a backslash"),
    ("a\nb", "it contains a control character"),
    ("r/x*.json", "it contains a gcloud wildcard character (*)"),
    ("r/x?.json", "it contains a gcloud wildcard character (?)"),
    ("r/[x].json", "it contains a gcloud wildcard character ([])"),
])
def test_unsafe_names_are_named_with_the_reason(name, reason):
    assert unsafe_reason(name) == reason


def test_glob_patterns_follow_gitignore_like_segments():
    names = ["results/a.json", "results/docs/b.json", "run-configs/execution.json", "modules/m1/x/y.so",
             "modules/m2/z", "comparison.json"]
    assert select(names, ["results/*.json"]) == ["results/a.json"]
    assert select(names, ["modules/m1/**"]) == ["modules/m1/x/y.so"]
    assert select(names, ["**/*.json"]) == ["comparison.json", "results/a.json", "results/docs/b.json",
                                            "run-configs/execution.json"]
    assert select(names, ["modules/m[!1]/*", "run-configs/?xecution.json"]) == ["modules/m2/z",
                                                                                "run-configs/execution.json"]
    assert select(names, ["**"]) == sorted(names)
    assert not compile_patterns(["results/*"]).match("results/docs/b.json")


def test_a_read_only_open_of_a_missing_folder_says_no_such_store_and_creates_nothing(tmp_path):
    missing = tmp_path / "mistyped" / "store"
    for url in (str(missing), missing.as_uri()):
        with pytest.raises(UserError, match=f"^no such store: {missing} does not exist"):
            open_store(url, read_only=True)
    assert list(tmp_path.iterdir()) == []
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(UserError, match="is not a folder"):
        open_store(str(afile), read_only=True)
    with pytest.raises(UserError, match="store URL is empty"):
        open_store("", read_only=True)


def test_a_read_only_open_writes_nothing_into_the_folder(tmp_path):
    root = write_tree(tmp_path / "store", {"commits/" + "a" * 40 + "/r1-1.json": b'{"schema_version": 1}\n'})
    os.utime(root, ns=(1_000_000_000, 1_000_000_000))
    store = open_store(str(root), read_only=True)
    assert store == LocalStore(root)
    assert root.stat().st_mtime_ns == 1_000_000_000  # no write-check file was created and removed
    open_store(str(root))  # the pipeline's way still checks that it can write
    assert root.stat().st_mtime_ns != 1_000_000_000


def test_pointers_tell_why_an_unreadable_pointer_was_skipped(tmp_path):
    store = open_store(str(tmp_path / "store"))
    good = store.write_pointer("b" * 40, "r1", 1, {"created": "2026-01-01T00:00:00Z"})
    bad = good.parent / "r2-1.json"
    bad.write_text('{"trunc')
    pointers = store.pointers("b" * 40)
    assert [(p["run_id"], p["attempt"]) for p in pointers] == [("r1", 1)]
    assert pointers.unreadable == (f"commit pointer {bad} is not valid JSON (truncated or corrupt?): "
                                   "Unterminated string starting at line 1 column 2",)
