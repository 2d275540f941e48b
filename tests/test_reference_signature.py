"""A benchmark's reference that cannot take its arguments is an export error (issue 40), not a silent
``correctness: None`` in the worker: function benchmarks are checked in ``suite_of`` against the input
factory's arguments (made under the meta device), module benchmarks' reference factories at decoration."""

import pytest
import torch

from benchtrail.errors import UserError
from benchtrail.suite import functions


def _inputs(n):
    return functions.Args(torch.randn(n), offset=2.0)


def _named(fn, name):
    fn.__module__, fn.__qualname__ = "pkg.bench", name
    return fn


def _bench(reference, inputs=_inputs, params=None):
    def f(x, offset):
        return x + offset

    return functions.benchmark(_named(f, "f"), inputs=inputs, params=params or {"n": [4]},
                               reference=reference)


def test_a_reference_of_the_wrong_signature_is_an_export_error_naming_it():
    def ref(x):
        return x

    with pytest.raises(UserError) as exc:
        functions.suite_of([("pkg.bench:f", _bench(_named(ref, "ref")))])
    assert str(exc.value) == ("benchmark pkg.bench.f[n=4]: reference pkg.bench.ref(x) cannot take the "
                              "arguments of the input factory (1 positional, keywords offset): got an "
                              "unexpected keyword argument 'offset'; allowed: the reference takes the "
                              "benchmark's arguments")


def test_too_many_positional_arguments_are_refused_too():
    def ref():
        return 0

    with pytest.raises(UserError, match=r"reference pkg.bench.ref\(\) cannot take the arguments of the input "
                                        r"factory \(1 positional, keywords offset\): too many positional"):
        functions.suite_of([("pkg.bench:f", _bench(_named(ref, "ref")))])


@pytest.mark.parametrize("ref", [
    lambda x, offset: x + offset,
    lambda x, *, offset: x + offset,
    lambda *args, **kwargs: args[0],
    lambda x, **kwargs: x,
])
def test_a_fitting_reference_passes_and_the_suite_has_its_run_config(ref):
    calls = []

    def inputs(n):
        calls.append((n, torch.empty(0).device.type))
        return _inputs(n)

    suite = functions.suite_of([("pkg.bench:f", _bench(_named(ref, "ref"), inputs, {"n": [4, 8]}))])
    assert [rc.name for rc in suite.run_configs] == ["pkg.bench.f[n=4].eager.inference.cpu",
                                                     "pkg.bench.f[n=8].eager.inference.cpu"]
    assert suite.run_configs[0].module_generation_config.model.reference_entry_point == "pkg.bench:ref"
    assert calls == [(4, "meta"), (8, "meta")]  # each combination checked, with no tensor data made


def test_an_input_factory_that_fails_under_meta_is_not_checked_at_export():
    calls = []

    def inputs(n):
        calls.append(torch.empty(0).device.type)
        x = torch.randn(n)
        return functions.Args(x[x.nonzero()].reshape(-1), offset=float(x.sum()))  # real data only

    def ref(x):  # wrong, but the worker reports it: the factory cannot run at export
        return x

    suite = functions.suite_of([("pkg.bench:f", _bench(_named(ref, "ref"), inputs=_named(inputs, "inputs")))])
    assert len(suite.run_configs) == 1 and calls == ["meta"]  # called once, under meta, not again without


def test_a_module_benchmark_reference_factory_must_take_the_parameters():
    def model(n):
        return torch.nn.Linear(n, n)

    def ref():
        return torch.nn.Identity()

    with pytest.raises(UserError) as exc:
        functions.module_benchmark(_named(model, "model"), inputs=lambda n: torch.randn(n), params={"n": [4]},
                                   reference=_named(ref, "ref"))
    assert "@benchmark of pkg.bench.model" in str(exc.value)
    message = "the reference factory 'ref'() cannot take the parameters ['n'] as keyword arguments"
    assert message in str(exc.value)


def test_a_partial_or_callable_object_reference_is_accepted_and_checked():
    import functools

    def ref(x, offset, scale):
        return (x + offset) * scale

    ref.__module__ = "pkg.bench"
    suite = functions.suite_of([("pkg.bench:f", _bench(functools.partial(ref, scale=1.0)))])
    assert suite.run_configs[0].module_generation_config.model.reference_entry_point == "pkg.bench:partial"
    refused = r"reference functools.partial\(offset, \*, scale=2.0\) cannot take.*multiple"
    with pytest.raises(UserError, match=refused):
        functions.suite_of([("pkg.bench:f", _bench(functools.partial(ref, 1, scale=2.0)))])
