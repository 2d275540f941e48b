import json
import subprocess
import sys
from pathlib import Path

import jq
import pytest

from benchmark_suites.suite import generate
from benchtrail.cli import main
from benchtrail.errors import UserError
from benchtrail.suite.definitions import RunConfig
from benchtrail.suite.export import (
    export_compilation,
    export_execution,
    load_compilation,
    load_execution,
    load_presets,
)
from benchtrail.suite.serialization import serialize_and_pack, unpack_and_deserialize

ROOT = Path(__file__).resolve().parents[1]
SUITE = generate()


def test_execution_export_round_trips_to_equal_dataclasses(tmp_path):
    out = tmp_path / "execution.json"
    assert main(["export", "execution", "--benchmark-presets", "x86_64,cuda", "--output", str(out)]) == 0
    loaded = load_execution(out)
    assert set(loaded) == {"c2-standard-16", "a2-highgpu-1g"}
    expected = SUITE.select_run_configs(("x86_64", "cuda"))
    got = [rc for shards in loaded.values() for rcs in shards.values() for rc in rcs]
    assert sorted(got, key=lambda rc: rc.id) == sorted(expected, key=lambda rc: rc.id)


def test_compilation_export_round_trips_and_names_module_dirs(tmp_path):
    out = tmp_path / "compilation.json"
    assert main(["export", "compilation", "--benchmark-presets", "comp-stats", "--output", str(out)]) == 0
    gens, dirs, sampling, _ = load_compilation(out)
    assert gens == SUITE.select_generation_configs(("comp-stats",))
    assert {g.compile_config.name for g in gens} == {"inductor", "export", "aot-inductor"}
    assert set(sampling.values()) == {(1, 2)}
    assert dirs[gens[0].id] == f"modules/{gens[0].name}"


def test_exports_carry_their_resolved_presets_and_older_files_read_as_none(tmp_path):
    for kind in ("execution", "compilation"):
        out = tmp_path / f"{kind}.json"
        assert main(["export", kind, "--benchmark-presets", "x86_64 comp-stats", "--output", str(out)]) == 0
        assert load_presets(out) == ("x86_64", "comp-stats"), kind
    # An export from before the field, a seed-shaped one and run configs ({root_obj, keyed_obj_map}) have
    # none.
    old = json.loads((tmp_path / "execution.json").read_text())
    del old["presets"]
    for name, obj in (("old", old), ("seed", {"c2": {"run_configs": {}}}),
                      ("rc", {"root_obj": {}, "keyed_obj_map": {}})):
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
        assert load_presets(tmp_path / f"{name}.json") == (), name
    for bad in ("x86_64", [1], [""], None):
        (tmp_path / "bad.json").write_text(json.dumps({**old, "presets": bad}))
        with pytest.raises(UserError,
                           match=r"bad.json: field 'presets' is .*; allowed: a list of preset names"):
            load_presets(tmp_path / "bad.json")


def test_keyed_obj_map_holds_each_model_once():
    packed = serialize_and_pack(SUITE.select_run_configs(("x86_64",)))
    models = [v for v in packed["keyed_obj_map"].values() if "entry_point" in v]
    assert len(models) == 12  # eleven workloads and vrelu3 at 256 elements (Jacobian)
    assert unpack_and_deserialize(packed, RunConfig) == SUITE.select_run_configs(("x86_64",))


def test_unknown_field_in_export_is_an_error_naming_it():
    packed = serialize_and_pack(SUITE.select_run_configs(("smoke",)))
    model_id = next(k for k, v in packed["keyed_obj_map"].items() if "entry_point" in v)
    packed["keyed_obj_map"][model_id]["entry_pont"] = "x"
    with pytest.raises(UserError, match=r"unknown field\(s\) \['entry_pont'\]"):
        unpack_and_deserialize(packed, RunConfig)


def test_shards_split_run_configs_without_loss_or_overlap():
    obj = export_execution(SUITE, ("x86_64",), shard_count=3)
    shards = obj["devices"]["c2-standard-16"]["shards"]
    ids = [set(s["run_configs"]["root_obj"]) for s in shards]
    assert [s["index"] for s in shards] == [0, 1, 2] and all(s["count"] == 3 for s in shards)
    assert sum(len(i) for i in ids) == len(set().union(*ids)) == len(SUITE.select_run_configs(("x86_64",)))


def test_matrix_jq_gives_the_job_matrix_list():
    obj = export_execution(SUITE, ("x86_64", "cuda"), shard_count=2)
    program = (ROOT / "build_tools/github_actions/matrix.jq").read_text()
    matrix = jq.compile(program, args={"labels": {}}).input_value(obj).first()  # no project labels
    entry = lambda device, arch, index: {  # noqa: E731
        "device_name": device, "host_environment": "linux-x86_64", "architecture": arch,
        "shard": {"index": index, "count": 2}, "runs_on": ["self-hosted", arch, device]}
    assert matrix == [entry("a2-highgpu-1g", "cuda", 0), entry("a2-highgpu-1g", "cuda", 1),
                      entry("c2-standard-16", "cpu", 0), entry("c2-standard-16", "cpu", 1)]


def test_seed_compatible_export_script_writes_the_same_json(tmp_path):
    ours, seed = tmp_path / "ours.json", tmp_path / "seed.json"
    assert main(["export", "execution", "--benchmark-presets", "x86_64", "--output", str(ours)]) == 0
    subprocess.run([sys.executable, str(ROOT / "build_tools/benchmarks/export_benchmark_config.py"),
                    "execution",
                    "--benchmark_preset=x86_64", "--output", str(seed)], check=True, capture_output=True)
    assert json.loads(seed.read_text()) == json.loads(ours.read_text())


def test_export_to_stdout_writes_the_json_and_no_file_named_dash(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "execution", "--benchmark-presets", "smoke", "--output", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(export_execution(SUITE, ("smoke",))))
    assert list(tmp_path.iterdir()) == []
    # the default stays ./execution.json
    assert main(["export", "execution", "--benchmark-presets", "smoke"]) == 0
    assert capsys.readouterr().out == "execution.json\n" and load_execution(tmp_path / "execution.json")


#: The seed's jq filter, verbatim (tests/test_seed_commands.py runs it with the jq command too).
SEED_FILTER = ("flatten | map(.run_configs) | { root_obj:(map(.root_obj) | flatten), "
               "keyed_obj_map:(map(.keyed_obj_map) | add) }")


def test_seed_export_script_prints_the_seed_shape_that_the_seeds_jq_filter_merges(capsys):
    import importlib.util

    path = ROOT / "build_tools/benchmarks/export_benchmark_config.py"
    spec = importlib.util.spec_from_file_location("seed_export", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["execution", "--benchmark_preset=smoke,cuda-smoke"]) == 0
    printed = json.loads(capsys.readouterr().out)  # the JSON alone: no path after it
    assert set(printed) == {"c2-standard-16", "a2-highgpu-1g"}  # device objects only, no schema_version
    assert all(set(d) == {"host_environment", "architecture", "run_configs"} for d in printed.values())
    assert printed["a2-highgpu-1g"]["architecture"] == "cuda"
    merged = jq.compile(SEED_FILTER).input_value(printed).first()
    expected = SUITE.select_run_configs(("smoke", "cuda-smoke"))
    assert sorted(unpack_and_deserialize(merged, RunConfig), key=lambda rc: rc.id) == sorted(expected,
                                                                                            key=lambda rc: rc.id)
    with pytest.raises(SystemExit) as exc:  # shards need a file
        script.main(["execution", "--benchmark_preset=smoke", "--shard_count", "2"])
    assert exc.value.code == 1
    assert "export_benchmark_config.py: error: --shard_count needs --output" in capsys.readouterr().err


def test_export_with_unknown_preset_exits_1_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "e.json"
    with pytest.raises(SystemExit) as exc:
        main(["export", "execution", "--benchmark-presets", "x86_64,cuda,comp-stat", "--output", str(out)])
    assert exc.value.code == 1
    assert "unknown benchmark preset 'comp-stat'" in capsys.readouterr().err
    assert not out.exists()


def test_compilation_export_of_execution_presets_includes_needed_modules():
    obj = export_compilation(SUITE, ("smoke",))
    assert sorted(obj["module_dir_paths"].values()) == [
        "modules/mlp.eager.cpu", "modules/vrelu3.eager.cpu", "modules/vrelu3.inductor.cpu"]
