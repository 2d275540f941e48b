"""The gs:// store against the real gcp-storage-emulator, the real client, the `gcloud` CLI and injected faults."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import time

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from benchtrail.cli.store import add_fetch_parser, add_upload_parser
from benchtrail.errors import UserError
from benchtrail.store import open_store
from benchtrail.store.gcs import GcsStore, make_client
from tests.helpers.gcs_fixtures import FAST_RETRY
from tests.helpers.store_trees import RUN, read_tree, write_tree

BIG = bytes(range(256)) * (9 * 4096 + 17)  # 9 MiB + a bit: over the 8 MiB limit of one multipart request


def objects(bucket: str, prefix: str = "") -> dict[str, bytes]:
    """Every object under ``prefix`` with its bytes, read with a plain client."""
    client = storage.Client(project="test")
    return {b.name: b.download_as_bytes() for b in client.list_blobs(bucket, prefix=prefix)}


def test_run_objects_follow_the_documented_layout(gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci/main", retry=FAST_RETRY)
    assert isinstance(store, GcsStore)
    assert store.url == f"gs://{gcs_bucket}/ci/main"
    assert store.run_url("123", 1) == f"gs://{gcs_bucket}/ci/main/runs/123/1/"
    store.upload_run(write_tree(tmp_path / "run", {"results/x.json": b"{}\n", "comment/comment.md": b"hi\n"}),
                     "123", 1)
    store.write_pointer("abc123", "123", 1, {"created": "t"})
    assert sorted(objects(gcs_bucket)) == ["ci/main/commits/abc123/123-1.json",
                                           "ci/main/runs/123/1/comment/comment.md",
                                           "ci/main/runs/123/1/results/x.json"]


def test_large_file_goes_through_a_resumable_upload_and_back(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "run", {"modules/m/model.so": BIG, "results/r.json": b"{}"}), "7",
                     1)
    uploads = [p for _, p, _ in fault_proxy.log if p.startswith("/upload/")]
    assert any("uploadType=resumable" in p for p in uploads)
    assert any("uploadType=multipart" in p for p in uploads)
    assert all("ifGenerationMatch=0" in p for p in uploads if "upload_id" not in p)
    assert read_tree(store.fetch_run("7", 1, tmp_path / "back")) == {"modules/m/model.so": BIG,
                                                                     "results/r.json": b"{}"}


def test_fetch_without_dest_fills_the_staging_run_dir(gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "run", RUN), "123", 1)
    local = store.fetch_run("123", 1, None, ("results/*.json",))
    assert local == store.run_dir("123", 1) == tmp_path / "staging" / gcs_bucket / "ci" / "runs" / "123" / "1"
    assert read_tree(local) == {"results/c2-standard-16-0.json": RUN["results/c2-standard-16-0.json"]}


def test_gcloud_storage_cp_fetches_an_uploaded_run_byte_identical(gcs_bucket, gcs_emulator, tmp_path):
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        pytest.skip("the gcloud CLI is not installed (https://cloud.google.com/sdk/docs/install)")
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "run", RUN), "123", 1)
    dest = tmp_path / "gcloud"
    dest.mkdir()
    env = dict(os.environ, CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=gcs_emulator.url + "/",
               CLOUDSDK_AUTH_DISABLE_CREDENTIALS="true", CLOUDSDK_CORE_PROJECT="test",
               CLOUDSDK_CONFIG=str(tmp_path / "gcloud-config"), CLOUDSDK_CORE_DISABLE_PROMPTS="1")
    # The line the PR comment shows, run as a user would.
    proc = subprocess.run([gcloud, "storage", "cp", "-r", store.run_url("123", 1), "."], cwd=dest, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert read_tree(dest / "1") == RUN


def test_503s_are_retried_until_the_upload_succeeds(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    fault_proxy.add("status", status=503, times=3)
    assert store.upload_run(write_tree(tmp_path / "run", RUN), "123", 1, deadline_s=20) == len(RUN)
    outcomes = fault_proxy.outcomes()
    assert outcomes.count(503) == 3 and outcomes.count(200) == len(RUN)
    assert read_tree(store.fetch_run("123", 1, tmp_path / "back")) == RUN


def test_dropped_connections_are_retried(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    fault_proxy.add("drop", times=4)
    fault_proxy.add("drop", times=2, path_prefix="/download/", methods=("GET",))
    store.upload_run(write_tree(tmp_path / "run", RUN), "123", 1, deadline_s=20)
    assert read_tree(store.fetch_run("123", 1, tmp_path / "back")) == RUN
    assert fault_proxy.outcomes().count("dropped") == 4
    assert fault_proxy.outcomes("/download/").count("dropped") == 2


def test_a_429_storm_fails_clearly_within_the_deadline(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    fault_proxy.add("status", status=429)
    deadline = 2.0
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        store.upload_run(write_tree(tmp_path / "run", RUN), "123", 1, deadline_s=deadline)
    elapsed = time.monotonic() - start
    # Ended by the 2 s deadline, not by the retry's own (120 s): the last request may start just before it
    # and, with the rest of the suite loading both cores, end over a second later (1.15 s once).
    assert deadline - 0.5 < elapsed < deadline + 3.0
    message = str(caught.value)
    assert message.startswith(f"upload of {len(RUN)} of {len(RUN)} file(s) from ")
    assert f"to bucket {gcs_bucket!r} failed: gs://{gcs_bucket}/ci/runs/123/1/" in message
    assert "still failing when the 2 s retry deadline ran out; last error: 429 " in message
    assert fault_proxy.outcomes().count(429) > 2 * len(RUN)  # it did retry, with backoff
    assert objects(gcs_bucket) == {}


def test_a_lost_response_is_retried_and_the_412_finds_our_own_object(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    fault_proxy.add("drop-response", times=1)
    local = write_tree(tmp_path / "run", {"results/r.json": b'{"n": 1}\n'})
    assert store.upload_run(local, "123", 1, deadline_s=20) == 1
    assert fault_proxy.outcomes() == ["dropped", 412]  # stored, answer lost; the retry meets itself
    assert objects(gcs_bucket) == {"ci/runs/123/1/results/r.json": b'{"n": 1}\n'}


def test_412_on_an_existing_object_is_a_clear_error_and_keeps_the_old_bytes(fault_proxy, gcs_bucket,
                                                                            tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "a", {"results/r.json": b"first\n", "results/s.json": b"s\n"}),
                     "1", 1)
    local = write_tree(tmp_path / "b", {"results/r.json": b"second\n", "results/t.json": b"t\n"})
    with pytest.raises(UserError) as caught:
        store.upload_run(local, "1", 1)
    assert str(caught.value) == (f"1 object(s) already exist with other content: gs://{gcs_bucket}/ci/runs/1/1/"
                                 "results/r.json; never overwritten (upload the run under a new attempt)")
    assert fault_proxy.outcomes()[-2:].count(412) == 1
    assert objects(gcs_bucket) == {"ci/runs/1/1/results/r.json": b"first\n",
                                   "ci/runs/1/1/results/s.json": b"s\n",
                                   "ci/runs/1/1/results/t.json": b"t\n"}


def test_an_upload_cut_mid_body_leaves_no_object_under_the_final_name(fault_proxy, gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    payload = os.urandom(256 * 1024)
    local = write_tree(tmp_path / "run", {"modules/m/weights.bin": payload})
    fault_proxy.add("drop-mid-body")
    with pytest.raises(UserError, match=f"failed: gs://{gcs_bucket}/ci/runs/1/1/modules/m/weights.bin: "
                                        "still failing when the 1.5 s retry deadline ran out"):
        store.upload_run(local, "1", 1, deadline_s=1.5)
    # The emulator received half bodies; the crc32c sent with each upload made it refuse them.
    answers = fault_proxy.upstream_answers_to_partial_bodies
    assert answers and all(a.startswith("HTTP/1.0 400") and "t match calculated CRC32C" in a for a in answers)
    assert objects(gcs_bucket) == {}
    fault_proxy.clear()
    store.upload_run(local, "1", 1, deadline_s=20)  # nothing half-written blocks the create-only upload
    assert objects(gcs_bucket) == {"ci/runs/1/1/modules/m/weights.bin": payload}


def test_a_missing_bucket_is_an_error_naming_it(gcs_env):
    expected = ("cannot list gs://no-such-bucket-4f1e/ci/: bucket 'no-such-bucket-4f1e' does not exist; "
                "create it or fix the store URL")
    with pytest.raises(UserError, match=re.escape(expected)):
        open_store("gs://no-such-bucket-4f1e/ci", retry=FAST_RETRY)


def test_no_permission_is_an_error_naming_the_bucket(fault_proxy, gcs_bucket):
    fault_proxy.add("status", status=403, path_prefix=f"/storage/v1/b/{gcs_bucket}/o", methods=("GET",))
    with pytest.raises(UserError,
                       match=re.escape(f"cannot list gs://{gcs_bucket}/ci/: no permission (403 GET ")
                       + ".*" + re.escape(": injected 403); the store needs roles/storage.objectViewer and "
                                          f"roles/storage.objectCreator on bucket {gcs_bucket!r}")):
        open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)


@pytest.mark.parametrize(("url", "message"), [
    ("gs://", "'' is not a valid bucket name"),
    ("gs://Upper/x", "'Upper' is not a valid bucket name"),
    ("gs://bucket/a/../b", r"'a/../b' is refused because it has a '\.\.' path segment"),
    ("gs://bucket/a*", "wildcard"),
])
def test_malformed_gs_urls_are_refused(gcs_env, url, message):
    with pytest.raises(UserError, match=message):
        open_store(url)


@pytest.mark.parametrize("bad",
                         ["../../../escape.json", "results/../../x.json", "/abs.json", "results/./x.json"])
def test_fetch_refuses_listed_object_names_that_are_not_path_safe(fault_proxy, gcs_bucket, tmp_path, bad):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "run", {"results/ok.json": b"{}"}), "9", 1)
    name = f"ci/runs/9/1/{bad}"  # the emulator refuses to store such names; a listing can still hold them
    fault_proxy.add("list-item", path_prefix=f"/storage/v1/b/{gcs_bucket}/o", methods=("GET",),
                    item={"kind": "storage#object", "bucket": gcs_bucket, "name": name, "size": "4",
                          "generation": "1", "crc32c": "AAAAAA=="})
    dest = tmp_path / "deep" / "fetched"
    with pytest.raises(UserError,
                       match=re.escape(f"gs://{gcs_bucket}/{name}: name {bad!r} is refused because it")):
        store.fetch_run("9", 1, dest)
    assert not dest.exists()
    assert [p for p in fault_proxy.log if "alt=media" in p[1]] == []  # refused before any download


def test_fetch_refuses_a_stored_object_with_a_wildcard_in_its_name(gcs_bucket, tmp_path):
    store = open_store(f"gs://{gcs_bucket}/ci", retry=FAST_RETRY)
    store.upload_run(write_tree(tmp_path / "run", {"results/ok.json": b"{}"}), "9", 1)
    storage.Client(project="test").bucket(gcs_bucket).blob("ci/runs/9/1/results/a*.json").upload_from_string(b"{}")
    with pytest.raises(UserError, match=re.escape("runs/9/1/results/a*.json: name 'results/a*.json' is refused "
                                                  "because it contains a gcloud wildcard character (*)")):
        store.fetch_run("9", 1, tmp_path / "fetched", ("results/ok.json",))
    assert not (tmp_path / "fetched").exists()


def test_the_client_is_anonymous_under_the_emulator(gcs_env):
    assert isinstance(make_client()._credentials, AnonymousCredentials)


def test_upload_and_fetch_commands_print_their_output_last(gcs_bucket, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_upload_parser(sub)
    add_fetch_parser(sub)
    store_url = f"gs://{gcs_bucket}/ci"
    local = write_tree(tmp_path / "run", RUN)
    args = parser.parse_args(["upload", "--run-dir", str(local), "--store", store_url, "--run-id", "55",
                              "--attempt", "2", "--deadline", "30"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{len(RUN)} file(s) of {local} stored in run 55/2, which holds {len(RUN)}",
        f"{store_url}/runs/55/2/"]
    args = parser.parse_args(["fetch", "--store", store_url, "--run-id", "55", "--attempt", "2", "--pattern",
                              "results/**", "--pattern", "comparison.json", "--dest", str(tmp_path / "f")])
    assert args.func(args) == 0
    assert capsys.readouterr().out.splitlines()[-1] == str(tmp_path / "f")
    assert sorted(read_tree(tmp_path / "f")) == ["comparison.json", "results/c2-standard-16-0.json",
                                                 "results/docs/bench_resnet18_20261129T000000Z_0123abcd.json"]
    # Issue 39: a job that adds one file prints its own count and the run's total (docs/store.md).
    shard = write_tree(tmp_path / "shard", {"results/c2-standard-16-1.json": b"{}"})
    for store in (store_url, str(tmp_path / "local-store")):
        for run_dir in ((local, shard) if store != store_url else (shard,)):
            args = parser.parse_args(["upload", "--run-dir", str(run_dir), "--store", store, "--run-id", "55",
                                      "--attempt", "2"])
            assert args.func(args) == 0
        assert capsys.readouterr().out.splitlines()[-2] == (
            f"1 file(s) of {shard} stored in run 55/2, which holds {len(RUN) + 1}")
    with pytest.raises(SystemExit):
        parser.parse_args(["fetch", "--store", store_url, "--run-id", "../x", "--attempt", "1", "--dest",
                           "d"])


ALL_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")


def test_store_deadline_env_caps_every_operation_against_a_server_answering_503(fault_proxy, gcs_bucket,
                                                                                tmp_path,
                                                                                 monkeypatch):
    """BENCHTRAIL_STORE_DEADLINE_S=2 caps the 60 s listing deadline and the 600 s upload default."""
    store = open_store(f"gs://{gcs_bucket}/ci")  # the library's own retry policy (backoff from 1 s)
    monkeypatch.setenv("BENCHTRAIL_STORE_DEADLINE_S", "2")
    fault_proxy.add("status", status=503, path_prefix="/", methods=ALL_METHODS)
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        open_store(f"gs://{gcs_bucket}/ci")
    assert time.monotonic() - start < 4.0
    assert str(caught.value).startswith(f"cannot list gs://{gcs_bucket}/ci/: still failing when the 2 s retry "
                                        "deadline ran out; last error: 503 GET ")
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        store.upload_run(write_tree(tmp_path / "run", {"results/x.json": b"{}\n"}), "1", 1)  # deadline_s=600
    assert time.monotonic() - start < 4.0
    assert f"to bucket {gcs_bucket!r} failed: " in str(caught.value)
    assert "still failing when the 2 s retry deadline ran out; last error: 503 " in str(caught.value)
    assert fault_proxy.outcomes("/").count(503) >= 4  # retried, not given up at once
    fault_proxy.clear()
    assert objects(gcs_bucket) == {}


def test_store_deadline_env_caps_a_store_whose_port_has_no_server(gcs_env, monkeypatch):
    from benchtrail.store.emulator import free_port

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("BENCHTRAIL_STORE_DEADLINE_S", "2")
    start = time.monotonic()
    with pytest.raises(UserError, match=re.escape("cannot list gs://bt-nowhere/ci/: still failing when the 2 s retry "
                                                  "deadline ran out; last error: ConnectionError: ")):
        open_store("gs://bt-nowhere/ci")
    assert time.monotonic() - start < 4.0


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_a_bad_store_deadline_is_an_error_naming_the_variable_and_value(gcs_bucket, monkeypatch, value):
    monkeypatch.setenv("BENCHTRAIL_STORE_DEADLINE_S", value)
    with pytest.raises(UserError, match=re.escape(f"BENCHTRAIL_STORE_DEADLINE_S={value!r} is not allowed: give the "
                                                  "seconds that every GCS store operation may spend retrying, a "
                                                  "number above 0")):
        open_store(f"gs://{gcs_bucket}/ci")
