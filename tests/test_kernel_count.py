"""Inductor modules of function benchmarks that generate no kernel record ``kernel_count`` 0 and why
(``kernel_count_reason``): an extern call of a library kernel, a graph that computes nothing, or no graph
(issue 39: a function benchmark recorded 0 and nothing said why)."""

import json

import pytest

from benchtrail.runner.compile_modules import compile_one, compile_records
from benchtrail.suite import functions
from benchtrail.worker.build import compile_module
from benchtrail.worker.inputs import model_inputs

MODULE = "tests.benchmarks.no_kernels"
EXTERN = ("Inductor generated no kernel: the graph's 1 operation(s) are extern calls of library kernels "
          "(such as aten.mm), which it calls instead")


@pytest.fixture(scope="module")
def gens():
    suite = functions.suite_of(functions.discover([MODULE]))
    return {g.model.name.split(".")[-1].split("[")[0]: g for g in suite.generation_configs
            if g.compile_config.name == "inductor"}


def test_a_matrix_product_records_zero_kernels_and_its_extern_call_in_the_compile_stage(gens, tmp_path):
    # the compile stage's real path: a worker process with an empty Inductor cache, compile-stats.json,
    # the kernel_count series
    gen = gens["matmul"]
    stats, digest = compile_one(gen, tmp_path / "module", "2.x")
    assert stats.answer.ok, stats.answer.reason
    assert (stats.answer.kernel_count, stats.answer.kernel_count_reason) == (0, EXTERN)
    assert json.loads((tmp_path / "module/compile-stats.json").read_text())["kernel_count_reason"] == EXTERN
    records = compile_records(gen, stats, digest, "c2-standard-16")
    (record,) = [r for r in records if r.metric == "kernel_count"]
    assert (record.samples, record.median, record.details) == ((0.0,), 0.0, {"kernel_count_reason": EXTERN})


def test_each_reason_for_no_kernel_is_told_apart(gens, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-cache"))  # empty: no cache hit

    def stats(name):
        gen = gens[name]
        return compile_module(gen, model_inputs(gen.model, "cpu"), "cpu").stats

    assert stats("transpose")["kernel_count_reason"] == (
        "Inductor generated no kernel: the graph computes nothing (it returns its inputs or views of them)")
    assert stats("passthrough")["kernel_count_reason"] == (
        "Dynamo captured no graph, so Inductor compiled nothing: the code ran eagerly "
        "(graph_count and break_reasons say why)")
    # the second from the FX graph cache the first filled, which replays extern calls with the kernel count
    first, again = stats("matmul"), stats("matmul")
    assert (first["kernel_count"], first["fxgraph_cache_miss"], first["kernel_count_reason"]) == (0, 1,
                                                                                                 EXTERN)
    assert (again["kernel_count"], again["fxgraph_cache_hit"], again["kernel_count_reason"]) == (0, 1,
                                                                                                EXTERN)
