"""The compile stage on tiny models through every compile config, in real worker processes."""

import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchmark_suites import configs, devices
from benchtrail import jsonio
from benchtrail.cli import main
from benchtrail.compare.comment import render
from benchtrail.compare.document import Comparison, comparison_to_dict
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.results.io import load_results
from benchtrail.suite.definitions import Architecture, Model, ModuleGenerationConfig, RunConfig, Suite
from benchtrail.suite.export import export_compilation, export_execution
from benchtrail.worker.build import compile_module
from benchtrail.worker.inputs import model_inputs
from tests.helpers.records import results

ROOT = Path(__file__).resolve().parents[1]
COMPILED = (configs.INDUCTOR, configs.EXPORT, configs.AOT_INDUCTOR)
#: The run stage's cases here: two processes (enough to show each fresh process loads the cache) and a short
#: warm-up; what they check is correctness and where graphs come from, not timing.
INFERENCE = dataclasses.replace(configs.INFERENCE_BS1, processes=2, warmup_time_ms=20.0)
BACKWARD = dataclasses.replace(configs.BACKWARD_BS1, processes=2, warmup_time_ms=20.0)


def _model(entry: str, name: str | None = None, model_id: str | None = None,
           fullgraph: bool = False) -> Model:
    return Model(model_id or f"model-{entry}", name or entry.replace("_", "-"), ("test",),
                 f"tests.benchmarks.bad_models:{entry}", ("2x8xf32",), fullgraph=fullgraph)


def _suite(models, compile_configs=COMPILED, sampling=(1, 1), backward: bool = False) -> Suite:
    """Modules of ``models`` × ``compile_configs``, each with an inference case; with ``backward``, Inductor
    modules also with a backward case (whose graphs the compile stage puts in modules/inductor-cache)."""
    gens = tuple(ModuleGenerationConfig.build(m, c, Architecture.CPU, presets=("test",))
                 for m in models for c in compile_configs)
    rcs = tuple(RunConfig.build(g, INFERENCE, devices.C2_STANDARD_16, presets=("test",)) for g in gens)
    rcs += tuple(RunConfig.build(g, BACKWARD, devices.C2_STANDARD_16, presets=("test",)) for g in gens
                 if backward and g.compile_config is configs.INDUCTOR)
    return Suite(rcs, gens, ("test",), (), (("test", *sampling),))


def _compile(tmp_path: Path, suite: Suite, name: str = "run", expected_exit: int = 0,
             cold_only: tuple[str, ...] = ()) -> tuple[Path, dict]:
    """Compile ``suite``'s ``test`` modules into ``tmp_path / name``; modules of the compile configs named in
    ``cold_only`` get no warm sample (set in the export, as a user may edit it)."""
    run_dir = tmp_path / name
    export = export_compilation(suite, ("test",))
    for gen in suite.generation_configs:
        if gen.compile_config.name in cold_only:
            export["sampling"][gen.id]["warm"] = 0
    path = jsonio.write_json(run_dir / "run-configs" / "compilation.json", export)
    assert main(["compile", "--run-configs", str(path), "--output-dir", str(run_dir),
                 "--device-name", "c2-standard-16"]) == expected_exit
    results = load_results(run_dir / "results" / "compilation-c2-standard-16.json")
    assert results.run["presets"] == ["test"]  # the export's presets: CI's compile jobs record them
    return run_dir, {(b.module_name.split(".")[1], b.metric): b for b in results.benchmarks}


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    # No warm sample for the AOTInductor module: it would be a whole compile again (its C++ build gains
    # nothing from a warm cache), the dearest step of this module (issue 19: the suite's time). The export
    # module's warm sample takes the same path (a sample's artifact in a temporary folder:
    # worker.build._save_and_load).
    return _compile(tmp_path_factory.mktemp("compile"), _suite([_model("linear")], backward=True),
                    cold_only=("aot-inductor",))


def test_every_compile_config_records_counts_kernels_and_bytes(linear_run):
    run_dir, series = linear_run
    for config in ("inductor", "export", "aot-inductor"):
        assert series[(config, "graph_count")].median == 1, config
        assert series[(config, "graph_breaks")].median == 0, config
        assert series[(config, "artifact_bytes")].median > 0, config
        assert series[(config, "compile_time_cold_ms")].n == 1, config
        assert series[(config, "peak_rss_bytes")].median > 50e6, config
    assert series[("inductor", "compile_time_warm_ms")].n == series[("export", "compile_time_warm_ms")].n == 1
    assert ("aot-inductor", "compile_time_warm_ms") not in series
    assert series[("inductor", "kernel_count")].median > 0
    assert series[("aot-inductor", "kernel_count")].median > 0
    assert series[("inductor", "recompiles")].median == 0
    assert ("export", "kernel_count") not in series
    assert (run_dir / "modules/linear.aot-inductor.cpu/aoti_package.pt2").stat().st_size == \
        series[("aot-inductor", "artifact_bytes")].median
    info = json.loads((run_dir / "modules/linear.export.cpu/module_info.json").read_text())
    assert info["artifact"] == "exported_program.pt2" and info["model"]["input_specs"] == ["2x8xf32"]


def test_export_and_aoti_modules_run_from_their_artifacts_without_the_model_code(linear_run):
    run_dir, _ = linear_run
    script = """
import sys
sys.modules["benchmark_suites"] = None  # the model code cannot be imported
sys.modules["tests"] = None
import torch
from benchtrail.worker.build import load_artifact
from pathlib import Path
x = torch.ones(2, 8)
for name in ("linear.export.cpu", "linear.aot-inductor.cpu"):
    out = load_artifact(Path(sys.argv[1], "modules", name))(x)
    print(name, tuple(out.shape), bool((out >= 0).all()))
"""
    proc = subprocess.run([sys.executable, "-c", script, str(run_dir)], capture_output=True, text=True,
                          cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["linear.export.cpu (2, 4) True",
                                           "linear.aot-inductor.cpu (2, 4) True"]


def test_runner_loads_artifacts_and_checks_them_against_eager(linear_run, tmp_path, monkeypatch):
    run_dir, _ = linear_run
    suite = _suite([_model("linear")], backward=True)
    execution = jsonio.write_json(tmp_path / "execution.json", export_execution(suite, ("test",)))
    out = tmp_path / "results.json"
    # only the run's cache is warm
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "empty-cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the AOTInductor loader unpacks its package
    assert main(["run", "--run-configs", str(execution), "--device-name", "c2-standard-16",
                 "--modules-dir", str(run_dir), "--output", str(out)]) == 0
    by_name = {b.name: b for b in load_results(out).benchmarks}
    assert len(by_name) == 4
    for b in by_name.values():
        assert b.status == "ok" and b.details["correctness"]["ok"] is True, b.name
        assert b.details["correctness"]["max_abs_err"] < 1e-5
    # The compile stage compiled the inference and backward graphs into modules/inductor-cache; the run
    # stage's workers, in both processes, load them from there and compile none. (Both cases share each
    # process, and the module is built, its inference graph loaded, by whichever case a process runs first.)
    cases = [by_name[f"linear.inductor.{task}-bs1.c2-standard-16"].details for task in ("inference",
                                                                                        "backward")]
    assert [d["fxgraph_cache_miss"] for d in cases] == [0, 0], cases
    assert sum(d["fxgraph_cache_hit"] for d in cases) >= 2 * 2, cases  # at least the 2 graphs in each process
    assert not (tmp_path / "empty-cache").exists()
    # Each forked worker that loaded the AOTInductor package removed the folder its loader unpacked it into
    # (the loader's destructor does; a forked worker ends by os._exit, so it releases the module first).
    assert not list((tmp_path / "tmp").glob("aotinductor_*"))
    # Without that cache the first process compiles the graphs (misses) into the cache Inductor is given.
    out = tmp_path / "no-cache.json"
    assert main(["run", "--run-configs", str(execution), "--device-name", "c2-standard-16",
                 "--filter", "inductor.backward", "--output", str(out)]) == 0
    (record,) = load_results(out).benchmarks
    assert record.details["fxgraph_cache_miss"] >= 1 and (tmp_path / "empty-cache").is_dir()


def test_corrupt_artifact_is_a_clear_failure(linear_run, tmp_path):
    run_dir, _ = linear_run
    broken = tmp_path / "modules" / "linear.aot-inductor.cpu"
    broken.mkdir(parents=True)
    for f in (run_dir / "modules/linear.aot-inductor.cpu").iterdir():
        broken.joinpath(f.name).write_bytes(f.read_bytes()[:1000])
    suite = _suite([_model("linear")], compile_configs=(configs.AOT_INDUCTOR,))
    execution = jsonio.write_json(tmp_path / "execution.json", export_execution(suite, ("test",)))
    out = tmp_path / "results.json"
    assert main(["run", "--run-configs", str(execution), "--device-name", "c2-standard-16",
                 "--modules-dir", str(tmp_path), "--output", str(out)]) == 2
    (b,) = load_results(out).benchmarks
    assert b.status == "failed" and "cannot be loaded (corrupt or truncated artifact?)" in b.reason


def test_graph_break_is_counted_with_its_reason_and_its_removal_is_shown(tmp_path):
    same_id = {"name": "net", "model_id": "model-net"}
    _, before = _compile(tmp_path, _suite([_model("graph_break", **same_id)], (configs.INDUCTOR,), (1, 0)),
                         "before")
    _, after = _compile(tmp_path, _suite([_model("linear", **same_id)], (configs.INDUCTOR,), (1, 0)), "after")
    source = (ROOT / "tests/benchmarks/bad_models.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "a deliberate graph break" in text)
    breaks = before[("inductor", "graph_breaks")]
    assert breaks.median == 1 and before[("inductor", "graph_count")].median == 2
    (reason,) = breaks.details["break_reasons"]
    assert reason["location"] == f"bad_models.py:{line}" and reason["count"] == 1
    assert after[("inductor", "graph_breaks")].median == 0
    base, head = results(*before.values()), results(*after.values())
    comparison = comparison_to_dict(compare([base], [head], load_thresholds()), [base], [head], "t")
    body, _, _ = render(Comparison.of(comparison))
    assert "graph break removed: `" in body and f"at bad_models.py:{line}`" in body


def test_unexportable_and_fullgraph_failures_do_not_stop_other_modules(tmp_path):
    strict = _model("graph_break", name="strict", model_id="m-strict", fullgraph=True)
    gens = (ModuleGenerationConfig.build(_model("data_dependent"), configs.EXPORT, Architecture.CPU,
                                         ("test",)),
            ModuleGenerationConfig.build(strict, configs.INDUCTOR, Architecture.CPU, ("test",)),
            ModuleGenerationConfig.build(_model("linear"), configs.EXPORT, Architecture.CPU, ("test",)))
    run_dir, _ = _compile(tmp_path, Suite((), gens, ("test",), (), (("test", 1, 0),)), expected_exit=2)
    stats = {g.name: json.loads((run_dir / "modules" / g.name / "compile-stats.json").read_text())
             for g in gens}
    assert stats["data-dependent.export.cpu"]["status"] == "failed"
    assert "data-dependent" in stats["data-dependent.export.cpu"]["reason"].lower()
    assert not (run_dir / "modules/data-dependent.export.cpu/exported_program.pt2").exists()
    assert stats["strict.inductor.cpu"]["status"] == "failed"
    assert stats["linear.export.cpu"]["status"] == "ok"


def test_counts_are_identical_across_three_runs(tmp_path, linear_run):
    suite = _suite([_model("linear")], sampling=(1, 0))
    runs = [linear_run[1]] + [_compile(tmp_path, suite, f"run{i}")[1] for i in range(2)]
    counts = [{k: b.median for k, b in run.items() if k[1] in ("graph_count", "graph_breaks", "kernel_count",
                                                               "recompiles")} for run in runs]
    assert counts[0] == counts[1] == counts[2] and len(counts[0]) == 9


def test_a_compile_time_sample_leaves_no_artifact_folder(tmp_path, monkeypatch):
    # A sample without a module folder (the cold samples after the first, and warm ones) writes its artifact
    # to a temporary folder; a forked worker ends by os._exit, so the folder must go before compile_module
    # returns.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gen = ModuleGenerationConfig.build(_model("linear"), configs.EXPORT, Architecture.CPU, ("test",))
    inputs = model_inputs(gen.model, "cpu")
    compiled = compile_module(gen, inputs, "cpu")
    assert tuple(compiled.fn(*inputs).shape) == (2, 4) and compiled.stats["recompiles"] == 0
    assert not list(tmp_path.glob("benchtrail-module-*")), list(tmp_path.iterdir())
