import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_suites.suite import generate
from benchtrail.cli import main
from benchtrail.pipeline.measure_stages import write_export
from benchtrail.results.io import load_results

ROOT = Path(__file__).resolve().parents[1]
SUITE = generate()


@pytest.fixture
def run_dir(tmp_path):
    for kind in ("execution", "compilation"):
        write_export(SUITE, kind, ("smoke",), tmp_path / "run" / "run-configs" / f"{kind}.json")
    return tmp_path / "run"


def _mlp():
    return next(rc for rc in SUITE.select_run_configs(("smoke",)) if rc.name.startswith("mlp.eager"))


def test_explain_prints_model_compile_run_flags_device_and_command(run_dir, capsys):
    rc = _mlp()
    assert main(["explain", rc.id[:10], "--run", str(run_dir)]) == 0
    out = capsys.readouterr().out
    for text in (f"benchmark    {rc.name}", f"id           {rc.id}",
                 "model        mlp (id model-mlp-784-512-512-10-f32)",
                 "tags       model, mlp", "source     benchmark_suites.models.mlp:mlp",
                 "inputs     32x784xf32", "compile    eager: mode eager, dtype f32, flags: none",
                 "run flags    task inference, batch size 1, 3 processes × 10 samples",
                 "device       c2-standard-16 (linux-x86_64, cpu, x86_64-cascadelake, 2 threads)",
                 f"--benchmark-id {rc.id}"):
        assert text in out, text


def test_the_printed_command_reproduces_the_case(run_dir, capsys, tmp_path, monkeypatch):
    rc = _mlp()
    assert main(["explain", rc.name, "--run", str(run_dir)]) == 0
    command = capsys.readouterr().out.strip().splitlines()[-1].strip()
    args = shlex.split(command)
    assert args[:2] == ["benchtrail", "run"]
    monkeypatch.chdir(tmp_path)
    assert main(args[1:]) == 0
    (record,) = load_results(tmp_path / "repro" / f"{rc.name}.json").benchmarks
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro", "run"]  # the run directory and repro/ only
    assert (record.id, record.status, record.n) == (rc.id, "ok", 30)


def test_unknown_id_lists_near_matches(run_dir, capsys):
    assert main(["explain", "mlp.eagr.inference-bs1.c2-standard-16", "--run", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "no benchmark 'mlp.eagr.inference-bs1.c2-standard-16' in this run" in err
    assert "Near matches: mlp.eager.inference-bs1.c2-standard-16" in err


def test_compilation_series_id_explains_its_module(run_dir, capsys):
    gen = next(g for g in SUITE.select_generation_configs(("smoke",)) if g.compile_config.name == "inductor")
    assert main(["explain", f"{gen.id}-graph_breaks", "--run", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "kind         compilation (graph_breaks)" in out and f"--module-id {gen.id}" in out


def test_dump_cmds_lists_every_run_config_and_module(run_dir, capsys):
    assert main(["dump-cmds", "--run", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("\nbenchtrail run ") + out.startswith("benchtrail run ") == 3
    assert out.count("benchtrail compile ") == 3


def test_not_a_run_directory_is_a_clear_error(tmp_path, capsys):
    assert main(["explain", "abc", "--run", str(tmp_path)]) == 1
    assert "is not a run directory" in capsys.readouterr().err


def test_seed_compatible_user_tool(run_dir):
    rc = _mlp()
    proc = subprocess.run([sys.executable, str(ROOT / "build_tools/benchmarks/benchmark_user_tool.py"),
                           "explain",
                           "--gcs_url", str(run_dir), "--benchmark_id", rc.id], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"benchmark    {rc.name}" in proc.stdout


def test_a_function_benchmark_is_explained_by_its_factory_and_parameters_without_a_batch_size(tmp_path,
                                                                                              capsys):
    from benchtrail.suite import functions

    suite = functions.suite_of(functions.discover(["tests.benchmarks.functions"]))
    write_export(suite, "execution", suite.presets, tmp_path / "run" / "run-configs" / "execution.json")
    rc = next(rc for rc in suite.run_configs if rc.target_device.name == "cpu")
    assert main(["explain", rc.name, "--run", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert f"  inputs     the input factory of {rc.module_generation_config.model.entry_point}, parameters " in out
    assert f"run flags    task {rc.execution_config.task.value}, {rc.execution_config.processes} processes × " in out
    assert "batch size" not in out and "(linux-x86_64, cpu, x86_64, 1 thread)" in out
