"""Issue 39, item 6: a run made with ``--filter`` is compared only over what the filter selected; the
baseline's other series are left out, not ``removed``. Real exports of the built-in suite, hand-made results."""

import dataclasses

from benchmark_suites.suite import generate
from benchtrail import jsonio
from benchtrail.pipeline.measure_stages import write_export
from benchtrail.pipeline.report_stages import compare_stage
from benchtrail.results.io import write_results
from benchtrail.results.schema import ResultsFile
from benchtrail.suite.filters import compile_filter, filter_suite
from tests.helpers.records import record, spread


def _file(records, commit: str, **run) -> ResultsFile:
    return ResultsFile(commit, False, {"run_id": "r", "attempt": 1, "presets": ["smoke"], **run},
                       {"torch_version": "2.13.0"}, tuple(records))


def _records(rcs):
    return [dataclasses.replace(record(rc.id, spread(100.0, 30), name=rc.name), presets=("smoke",),
                                device_name=rc.target_device.name) for rc in rcs]


def test_a_filtered_run_leaves_the_baselines_other_series_out_and_a_plain_one_calls_them_removed(tmp_path):
    suite = generate()
    smoke = suite.select_run_configs(("smoke",))
    base = write_results(tmp_path / "base.json", _file(_records(smoke), "b" * 40))
    wanted = [rc for rc in smoke if rc.name.startswith("mlp.")]
    assert wanted and len(wanted) < len(smoke)
    verdicts = {}
    for name, text in (("filtered", "^mlp\\."), ("plain", None)):
        head = tmp_path / name
        narrowed = filter_suite(suite, compile_filter(text)) if text else suite
        write_export(narrowed, "execution", ("smoke",), head / "run-configs" / "execution.json",
                     name_filter=text)
        device = wanted[0].target_device.name
        write_results(head / "results" / f"{device}-0.json",
                      _file(_records(wanted), "c" * 40, device_name=device, shard_index=0))
        out = compare_stage([base], [head], tmp_path / f"{name}.json", None)
        verdicts[name] = {r["name"]: r["verdict"] for r in jsonio.read_json(out, kind="comparison",
                                                                            supported=8)["rows"]}
    assert jsonio.read_json(tmp_path / "filtered" / "run-configs" / "execution.json", kind="export",
                            supported=1)["filter"] == "^mlp\\."
    assert verdicts["filtered"] == {rc.name: "similar" for rc in wanted}  # nothing else, nothing removed
    others = {rc.name for rc in smoke} - {rc.name for rc in wanted}
    assert {n: v for n, v in verdicts["plain"].items() if n in others} == dict.fromkeys(others, "failed")
