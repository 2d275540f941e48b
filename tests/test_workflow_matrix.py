"""The job matrix that build_tools/github_actions/matrix.jq makes of an execution export, as benchmark.yml's
execute job reads it."""

import re

import jq

from benchmark_suites.suite import generate
from benchtrail.suite.export import export_execution
from tests.helpers.workflow_checks import MATRIX_JQ, ROOT, WORKFLOWS


def test_matrix_jq_gives_every_field_the_execute_job_reads():
    """The execute job reads matrix.device_name, matrix.shard.index, matrix.runs_on and matrix.architecture
    (the torch build it installs)."""
    obj = export_execution(generate(), ("x86_64", "cuda"), shard_count=2)
    matrix = jq.compile((ROOT / MATRIX_JQ).read_text(), args={"labels": {}}).input_value(obj).first()
    assert sorted((m["device_name"], m["architecture"], m["shard"]["index"]) for m in matrix) == [
        ("a2-highgpu-1g", "cuda", 0), ("a2-highgpu-1g", "cuda", 1),
        ("c2-standard-16", "cpu", 0), ("c2-standard-16", "cpu", 1),
    ]
    text = (WORKFLOWS / "benchmark.yml").read_text()
    used = set(re.findall(r"(?<![.\w])matrix\.([a-z_]+)", text)) - {"jq"}
    assert used == {"architecture", "device_name", "shard", "runs_on"}
    assert used <= set(matrix[0])


def test_matrix_jq_gives_no_leg_for_an_empty_shard():
    """`smoke` and `cuda-smoke` hold 3 cases per device: with 4 shards, shard 3 of each device is empty and
    gets no leg (no self-hosted runner held for nothing); the legs' shards hold every case between them."""
    obj = export_execution(generate(), ("smoke", "cuda-smoke"), shard_count=4)
    shards = {(device, s["index"]): s["run_configs"]["root_obj"]
              for device, entry in obj["devices"].items() for s in entry["shards"]}
    assert sorted(len(ids) for ids in shards.values()) == [0, 0, 1, 1, 1, 1, 1, 1]
    matrix = jq.compile((ROOT / MATRIX_JQ).read_text(), args={"labels": {}}).input_value(obj).first()
    assert sorted((m["device_name"], m["shard"]["index"], m["shard"]["count"]) for m in matrix) == [
        (device, index, 4) for device in ("a2-highgpu-1g", "c2-standard-16") for index in range(3)]
    legs = [shards[m["device_name"], m["shard"]["index"]] for m in matrix]
    assert sorted(i for ids in legs for i in ids) == sorted(i for ids in shards.values() for i in ids)
