"""Benchmarks as functions (benchtrail.suite.functions): the suite they make, and their value, gradient
and Jacobian checked against the reference in real worker processes."""

import dataclasses

import pytest

from benchtrail.errors import UserError
from benchtrail.runner.run_cases import run_case
from benchtrail.suite import functions
from benchtrail.suite.definitions import RunConfig, Task
from benchtrail.suite.export import export_execution
from benchtrail.suite.serialization import serialize_and_pack, unpack_and_deserialize
from benchtrail.worker import tasks

MODULE = "tests.benchmarks.functions"


@pytest.fixture(scope="module")
def suite():
    return functions.suite_of(functions.discover([MODULE]))


def _cheap(rc: RunConfig) -> RunConfig:
    execution = dataclasses.replace(rc.execution_config, processes=1, min_samples=3, warmup_time_ms=10,
                                    min_sample_time_ms=0.2, timeout_s=300)
    return RunConfig.build(rc.module_generation_config, execution, rc.target_device)


def _case(suite, name: str) -> RunConfig:
    (rc,) = [rc for rc in suite.run_configs if rc.name == name]
    return _cheap(rc)


def test_names_ids_and_the_grid_come_from_the_function_and_its_parameters(suite):
    names = sorted(rc.name for rc in suite.run_configs)
    # four vrelu3 variants x 3 tasks; gather_masked: 2 sizes x 2 compiles x 3
    assert len(names) == 4 * 3 + 2 * 2 * 3
    assert "tests.benchmarks.functions.gather_masked[n=12,dtype=float32].inductor.backward.cpu" in names
    assert "tests.benchmarks.functions.vrelu3[n=16].eager.jacobian.cpu" in names
    model = next(rc.module_generation_config.model for rc in suite.run_configs
                 if rc.name.startswith("tests.benchmarks.functions.gather_masked[n=8"))
    assert model.id == functions.model_id("tests.benchmarks.functions.gather_masked",
                                          {"n": 8, "dtype": "float32"})
    assert model.id == functions.model_id("tests.benchmarks.functions.gather_masked",
                                          {"dtype": "float32", "n": 8})
    assert model.params == (("n", 8), ("dtype", "float32")) and model.input_specs == ()
    assert model.entry_point == "tests.benchmarks.functions:gather_masked"
    assert model.reference_entry_point == "tests.benchmarks.functions:gather_masked_reference"
    assert suite.presets == ("default",)
    # the same suite again (a second discovery) has the same ids: nothing depends on order or time
    again = functions.suite_of(reversed(functions.discover([MODULE])))
    assert sorted(rc.id for rc in again.run_configs) == sorted(rc.id for rc in suite.run_configs)


def test_the_export_round_trips_and_omits_params_for_class_api_models(suite):
    packed = serialize_and_pack(suite.run_configs)
    assert unpack_and_deserialize(packed, RunConfig) == suite.run_configs
    from benchmark_suites.suite import generate

    own = serialize_and_pack(generate().run_configs[:3])
    assert all("params" not in obj for obj in own["keyed_obj_map"].values())  # older workers read these
    assert export_execution(suite, ("default",))  # the export stage takes the suite as it is


def test_a_rename_keeps_the_id_only_when_said():
    def f(x):
        return x

    f.__module__, f.__qualname__ = "pkg.new", "f"
    renamed = functions.benchmark(f, inputs=lambda: (1,), renamed_from="pkg.old.f")
    plain = functions.benchmark(f, inputs=lambda: (1,))
    ids = [functions.suite_of([(e, b)]).run_configs[0].module_generation_config.model.id
           for e, b in (("pkg.new:f", renamed), ("pkg.new:f", plain))]
    assert ids[0] == functions.model_id("pkg.old.f", {}) and ids[1] == functions.model_id("pkg.new.f", {})


@pytest.mark.parametrize("kwargs, message", [
    ({"tasks": ["inference", "hessian"]},
     "tasks=['inference', 'hessian']: unknown 'hessian'; allowed: inference, "
                                          "forward, backward, jacobian"),
    ({"compile": []}, "compile=[]: empty; allowed: eager, inductor"),
    ({"params": {"n": [object]}}, "params['n'] value <class 'object'> (type) is refused"),
    ({"params": {"n": []}}, "params['n'] is empty"),
    ({"processes": 0}, "processes=0; allowed: a number above 0"),
    ({"presets": ["a b"]}, "presets=['a b']: refused 'a b'"),
    ({"params": {"size": [1]}}, "() cannot take the parameters ['size'] as keyword arguments"),
])
def test_bad_arguments_name_the_benchmark_the_argument_and_what_is_allowed(kwargs, message):
    with pytest.raises(UserError) as exc:
        functions.benchmark(lambda x: x, inputs=lambda: (), **kwargs)
    assert "@benchmark of tests.test_function_benchmarks." in str(exc.value) and message in str(exc.value)
    assert f"({__file__}:" in str(exc.value)  # the file and line of the decorated function


def test_a_module_without_benchmarks_is_refused_with_the_way_to_add_one():
    with pytest.raises(UserError,
                       match=r"no @benchmark function found in tests.benchmarks.bad_models; decorate"):
        functions.discover(["tests.benchmarks.bad_models"])
    with pytest.raises(UserError, match=r"'tests.no_such_module' cannot be imported: ModuleNotFoundError"):
        functions.discover(["tests.no_such_module"])


def test_value_gradient_and_jacobian_are_checked_against_the_reference(suite):
    quantities = set()
    for task in ("inference", "backward", "jacobian"):
        for name in (f"tests.benchmarks.functions.vrelu3[n=16].eager.{task}.cpu",
                     f"tests.benchmarks.functions.gather_masked[n=12,dtype=float32].inductor.{task}.cpu"):
            response = run_case(_case(suite, name))
            assert response.status == "ok", (name, response.reason)
            c = response.answer.correctness
            assert c["ok"] and c["against"] == "reference" and c["max_abs_err"] <= c["atol"], name
            quantities.add((name.split("[")[0], c["quantity"]))
    assert quantities == {(f"tests.benchmarks.functions.{f}", q) for f in ("vrelu3", "gather_masked")
                          for q in ("value", "gradient", "jacobian")}


@pytest.mark.parametrize("function, wrong", [("vrelu3_wrong_value", Task.INFERENCE),
                                             ("vrelu3_wrong_gradient", Task.BACKWARD),
                                             ("vrelu3_wrong_jacobian", Task.JACOBIAN)])
def test_a_wrong_function_is_caught_by_the_check_of_the_quantity_it_gets_wrong(suite, function, wrong):
    for task in (Task.INFERENCE, Task.BACKWARD, Task.JACOBIAN):
        response = run_case(_case(suite,
                                  f"tests.benchmarks.functions.{function}[n=16].eager.{task.value}.cpu"))
        c = response.answer.correctness
        assert c["quantity"] == tasks.QUANTITY[task] and c["against"] == "reference"
        if task is wrong:
            assert response.status == "mismatch" and not c["ok"], (function, task)
        else:
            assert response.status == "ok" and c["ok"], (function, task, c)


def test_a_refused_decorator_is_reported_as_itself_by_the_cli(tmp_path, monkeypatch, capsys):
    """Not as a presets problem, nor as a module that cannot be imported: the function, its file and
    line, the argument and what is allowed."""
    from benchtrail.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.benchtrail]\nbenchmarks = ["refused_bench"]\npresets = "default"\n')
    (tmp_path / "refused_bench.py").write_text(
        "from benchtrail import benchmark\n\n\n@benchmark(inputs=lambda: (1,), tasks=['inferance'])\n"
        "def relu(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["export", "execution", "--output", "-"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"benchtrail: error: {tmp_path / 'pyproject.toml'}: [tool.benchtrail] benchmarks = "
                          f"['refused_bench']: @benchmark of refused_bench.relu ({tmp_path / 'refused_bench.py'}:4): "
                          "tasks=['inferance']: unknown 'inferance'; allowed: inference, forward, backward, jacobian")
    assert "presets:" not in err and "cannot be imported" not in err


BENCHES = '''import functools

import torch
from benchtrail import benchmark

SCALE = 2.0  # a module constant{extra}


def _inputs(n):
    return (torch.ones(n),)


@benchmark(inputs=_inputs, params={{"n": [4{more_n}]}}, reference=torch.relu)
def double(x):
    return x * SCALE{body_comment}


@benchmark(inputs=lambda: (torch.ones(3),))
def square(x):
    return {square}


@benchmark(inputs=functools.partial(_inputs, 5))
def negate(x):
    return -x
'''


def test_an_edit_changes_the_content_hash_of_the_benchmark_it_touches_only(tmp_path, monkeypatch):
    """A function benchmark's hash covers its function, input factory and reference, not the whole benchmarks
    module: a new benchmark or an edit elsewhere in the file leaves the others comparable."""
    import importlib
    import json
    import subprocess
    import sys

    from benchtrail.suite.content_hash import content_hash

    monkeypatch.syspath_prepend(str(tmp_path))
    source = tmp_path / "edited_benches.py"

    def hashes(extra: str = "", square: str = "x * x", more_n: str = "", body_comment: str = "") -> dict[str,
                                                                                                         str]:
        source.write_text(BENCHES.format(extra=extra, square=square, more_n=more_n,
                                         body_comment=body_comment))
        sys.modules.pop("edited_benches", None)
        importlib.invalidate_caches()
        suite = functions.suite_of(functions.discover(["edited_benches"]))
        return {rc.name: content_hash(rc, "2.13.0") for rc in suite.run_configs}

    before = hashes()
    double, square = "edited_benches.double[n=4].eager.inference.cpu", ("edited_benches.square.eager."
                                                                        "inference.cpu")
    negate = "edited_benches.negate.eager.inference.cpu"
    assert sorted(before) == [double, negate, square]
    after_new = hashes(extra="\n\n\n@benchmark(inputs=lambda: (torch.ones(2),))\ndef added(x):\n    return "
                       "-x\n")
    # A functools.partial input factory has no source of its own: its benchmark hashes the whole file.
    assert len(after_new) == 4 and (after_new[double], after_new[square]) == (before[double], before[square])
    assert after_new[negate] != before[negate]
    commented = hashes(extra="  # a comment edited")  # an edit outside every benchmark
    assert commented[double] == before[double] and commented[square] == before[square]
    # The decorator's arguments are the config's (a new parameter value is a new case, not a changed one), and
    # a comment or layout inside the function is no change; a builtin reference counts by its name.
    more = hashes(more_n=", 8", body_comment="  # a comment")
    assert more[double] == before[double] and len(more) == 4
    edited = hashes(square="x * x * 1.0")
    assert edited[double] == before[double] and edited[square] != before[square]  # the edited benchmark
    # The same in another process (no memory address or other per-process text in what is hashed).
    script = ("import edited_benches, json; from benchtrail.suite import functions;"
              "from benchtrail.suite.content_hash import content_hash;"
              "s = functions.suite_of(functions.discover(['edited_benches']));"
              "print(json.dumps({rc.name: content_hash(rc, '2.13.0') for rc in s.run_configs}))")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == edited
    sys.modules.pop("edited_benches", None)


def _double(x):
    return 2 * x


def _triple(x):
    return 3 * x


def _wrap(f):  # a decorator without functools.wraps: every wrapper has the same source
    def wrapper(*args):
        return f(*args)
    return wrapper


def test_a_wrapped_function_counts_by_what_it_wraps():
    import functools
    import sys

    from benchtrail.suite.content_hash import _source

    module = sys.modules[__name__]
    assert _source(_wrap(_double), module) != _source(_wrap(_triple), module)
    assert "2 * x" in _source(_wrap(_double), module) and "3 * x" in _source(functools.wraps(_triple)(_wrap(_triple)),
                                                                            module)


def _yielding_inputs():
    yield 1.0


@functions.benchmark(inputs=_yielding_inputs)
def yields_inputs(x):
    return x


def test_an_input_factory_that_returns_an_iterator_is_refused_naming_it():
    from benchtrail.suite.entry_points import ModuleError
    from benchtrail.worker.functions import inputs

    suite = functions.suite_of([(f"{__name__}:yields_inputs", yields_inputs)])
    model = suite.run_configs[0].module_generation_config.model
    with pytest.raises(ModuleError,
                       match=r"yields_inputs: the input factory _yielding_inputs returned generator, an "
                                          r"iterator; return Args\(\*args, \*\*kwargs\) or a tuple of the "
                       r"arguments"):
        inputs(model, "cpu", 0)
