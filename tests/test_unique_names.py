"""Issue 39, item 1: run configs and modules are named uniquely like their ids. Parameter values whose text
coincides are shown with ``repr``; a collision that remains is refused at load, naming both benchmarks, before any
stage runs (it crashed the compile stage: "module_info.json already exists")."""

import json

import pytest

from benchtrail.cli import main

COINCIDING = {"n": [1, "1", 1.0, "1.0"], "v": [None, "None"]}


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_parameter_values_whose_text_coincides_get_names_of_their_own(project, capsys):
    (project / "pyproject.toml").write_text('[tool.benchtrail]\nbenchmarks = ["coinciding_bench"]\n')
    (project / "coinciding_bench.py").write_text(
        "import torch\nfrom benchtrail import Args, benchmark\n\n\n"
        f"@benchmark(inputs=lambda n, v, k: Args(torch.ones(4)), params={{**{COINCIDING!r}, 'k': [2, 3]}})\n"
        "def f(x):\n    return x + 1\n")
    assert main(["export", "execution", "--benchmark-presets", "default", "--output", "e.json"]) == 0
    from benchtrail.suite.export import load_execution

    (shards,) = load_execution(project / "e.json").values()
    names = sorted(rc.model.name for rcs in shards.values() for rc in rcs
                   for rc in [rc.module_generation_config])
    assert len(names) == len(set(names)) == 4 * 2 * 2
    assert "coinciding_bench.f[n=1,v=None,k=2]" in names and "coinciding_bench.f[n='1',v='None',k=2]" in names
    assert "coinciding_bench.f[n=1.0,v=None,k=3]" in names and "coinciding_bench.f[n='1.0',v=None,k=3]" in names
    assert json.loads((project / "e.json").read_text())["schema_version"] == 1


def test_two_run_configs_or_modules_of_one_name_are_refused_at_load_naming_both(project, capsys):
    (project / "pyproject.toml").write_text('[tool.benchtrail]\nsuite = "twin_suite:generate"\n')
    (project / "twin_suite.py").write_text(
        "from benchmark_suites import devices\n"
        "from benchtrail.suite.definitions import (CompileConfig, CompileMode, ExecutionConfig, Model,\n"
        "                                          ModuleGenerationConfig, RunConfig, Suite, Task)\n\n\n"
        "def generate():\n"
        "    ec = ExecutionConfig('exec', 'inference-bs1', Task.INFERENCE)\n"
        "    cc = CompileConfig('compile-eager', 'eager', CompileMode.EAGER)\n"
        "    gens = [ModuleGenerationConfig.build(Model(f'model-{i}', 'twin', ('t',), f'twin_{i}:model', ()), cc,\n"
        "                                         devices.C2_STANDARD_16.architecture) for i in (1, 2)]\n"
        "    rcs = tuple(RunConfig.build(g, ec, devices.C2_STANDARD_16, presets=('p',)) for g in gens)\n"
        "    return Suite(rcs, tuple(gens), ('p',), ())\n")
    for argv in (["export", "execution", "--benchmark-presets", "p", "--output", "e.json"],
                 ["pipeline", "--benchmark-presets", "p", "--store", str(project / "store")]):
        with pytest.raises(SystemExit) as exit_:  # the suite is loaded while the arguments are read
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 1 and ("twin_suite:generate': two run configs are both named "
                                          "'twin.eager.inference-bs1.c2-standard-16' (twin_1:model and twin_2:model); "
                                          "names must be unique like ids") in err, err
    assert not (project / "e.json").exists() and not (project / "store").exists()
