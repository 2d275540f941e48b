"""Issue 39, item 7: a case whose code raises in one of its worker processes keeps the good processes' samples,
is ``failed`` with "1 of 3 processes raised: …", and is never compared as if its samples were whole."""

import dataclasses

from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.runner.run_cases import case_record, run_case
from benchtrail.suite import functions
from benchtrail.suite.definitions import RunConfig
from tests.helpers.records import record, results, spread


def test_a_case_that_raises_in_one_of_three_processes_keeps_the_other_two(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHTRAIL_TEST_RAISE_ONCE", str(tmp_path / "raised"))
    suite = functions.suite_of(functions.discover(["tests.benchmarks.raising_once"]))
    (rc,) = [rc for rc in suite.run_configs if rc.execution_config.task.value == "inference"]
    execution = dataclasses.replace(rc.execution_config, processes=3, min_samples=4, warmup_time_ms=5,
                                    min_sample_time_ms=0.2, timeout_s=120)
    rc = RunConfig.build(rc.module_generation_config, execution, rc.target_device)
    response = run_case(rc)
    assert response.status == "failed" and (tmp_path / "raised").exists()
    assert response.reason.startswith("1 of 3 processes raised: ")
    assert "flaky: the first process" in response.reason
    assert len(response.samples) == 8 and len(response.process_medians) == 2  # processes 2 and 3
    head = case_record(rc, response, "2.13.0")
    assert (head.status, head.n) == ("failed", 8)
    base = dataclasses.replace(record(rc.id, spread(float(head.median), 12), name=rc.name),
                               content_hash=head.content_hash)
    (row,) = compare([results(base)], [results(head, commit="c" * 40)], load_thresholds())
    assert (row.verdict, row.change) == ("failed", None)  # the partial samples are not compared
    assert row.reason == f"head failed: {response.reason}"
