"""The CUDA path's CPU-side logic: timing plans, out-of-memory handling, device info, the cuda-smoke
preset. Tests that need a GPU skip on CPU-only machines with a reason."""

import dataclasses

import pytest
import torch

from benchmark_suites import configs, devices
from benchmark_suites.suite import CUDA_SMOKE, generate
from benchtrail.cli import main
from benchtrail.results.io import load_results
from benchtrail.runner.environment import parse_nvidia_smi
from benchtrail.worker.cuda_timing import (
    MIN_PAIR_US,
    REPORTED_TIMES,
    is_steady,
    launches_per_sample,
    parse_oom_bytes,
    plan_timing,
)
from tests.helpers.suites import FAST, bad_models_suite, write_execution_export

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA GPU (this machine has none)")


def test_cpu_cases_are_timed_on_the_host_clock_whatever_the_config_says():
    plan = plan_timing("cpu", None,
                       dataclasses.replace(configs.INFERENCE_BS1, reported_time="gpu", flush_l2=True))
    assert (plan.method, plan.launches, plan.reported, plan.flush_l2) == ("perf_counter", 1, "wall", False)


@pytest.mark.parametrize("per_iteration_us, graphs, method, launches", [
    (10.0, True, "cuda-graph", 5),  # 5 x 10 µs reaches the 50 µs an event pair needs
    (10.0, False, "cuda-events", 5),  # graphs off: the same launches between one event pair
    (0.3, True, "cuda-graph", 167),
    (49.9, True, "cuda-graph", 2),
    (50.0, True, "cuda-events", 1),  # long enough: one launch per pair, no graph
    (2000.0, True, "cuda-events", 1),
])
def test_gpu_plan_uses_graphs_or_several_launches_below_50_us(per_iteration_us, graphs, method, launches):
    policy = dataclasses.replace(configs.INFERENCE_BS1, cuda_graphs=graphs, reported_time="wall",
                                 flush_l2=True)
    plan = plan_timing("cuda", per_iteration_us, policy)
    assert (plan.method, plan.launches, plan.reported, plan.flush_l2) == (method, launches, "wall", True)
    assert plan.launches * per_iteration_us >= MIN_PAIR_US or plan.launches == 1


def test_bad_timing_inputs_are_refused_with_the_value():
    with pytest.raises(ValueError, match=r"reported_time 'cpu' is not one of gpu, wall"):
        plan_timing("cuda", 10.0, dataclasses.replace(configs.INFERENCE_BS1, reported_time="cpu"))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="must be positive and finite"):
            launches_per_sample(bad)


def test_warm_up_is_steady_when_the_last_five_times_are_within_5_percent():
    assert not is_steady([100.0] * 4)
    assert is_steady([900.0, 300.0, 104.0, 100.0, 98.0, 101.0, 103.0])
    assert not is_steady([100.0, 100.0, 100.0, 100.0, 106.0])
    assert not is_steady([0.0] * 5)


@pytest.mark.parametrize("message, expected", [
    ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB", 2 * 2**30),
    ("CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.78 GiB total capacity)", 512 * 2**20),
    ("CUDA out of memory. Tried to allocate 20 bytes.", 20),
    ("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory", None),
])
def test_requested_bytes_are_read_from_pytorchs_message(message, expected):
    assert parse_oom_bytes(message) == expected


def test_out_of_memory_is_status_oom_with_the_requested_bytes_and_the_next_case_runs(tmp_path):
    suite = bad_models_suite(("a-oom", "out_of_memory"), ("b-after", "tiny"))  # cases run in name order
    out = tmp_path / "r.json"
    assert main(["run", "--run-configs", str(write_execution_export(tmp_path, suite)),
                 "--device-name", "c2-standard-16", "--output", str(out)]) == 2
    oom, after = load_results(out).benchmarks
    assert (oom.name.split(".")[0], after.name.split(".")[0]) == ("a-oom", "b-after")
    assert oom.status == "oom" and oom.samples == ()
    assert oom.reason.startswith("out of memory (requested 2147483648 bytes): CUDA out of memory. Tried to allocate")
    assert oom.details["oom"] == {"requested_bytes": 2 * 2**30, "cache_emptied": torch.cuda.is_available()}
    assert after.status == "ok" and after.n == FAST.processes * FAST.min_samples


def test_cpu_results_record_the_timing_plan(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "--run-configs",
                 str(write_execution_export(tmp_path, bad_models_suite(("ok", "tiny")))), "--device-name",
                 "c2-standard-16", "--output", str(out)]) == 0
    (b,) = load_results(out).benchmarks
    assert b.details["timing"] == {"method": "perf_counter", "launches": 1, "reported": "wall",
                                   "flush_l2": False}
    assert "gpu_samples_us" not in b.details


def test_nvidia_smi_line_gives_driver_and_readable_clocks():
    assert parse_nvidia_smi("550.54.15, 1980, 2619, 1980, 2619\n") == {
        "driver_version": "550.54.15",
        "clocks_mhz": {"sm": 1980, "mem": 2619, "max_sm": 1980, "max_mem": 2619}}
    assert parse_nvidia_smi("535.104.05, [N/A], 1593, [Not Supported], 1593") == {
        "driver_version": "535.104.05", "clocks_mhz": {"mem": 1593, "max_mem": 1593}}
    assert parse_nvidia_smi("") == {}


def test_cuda_smoke_preset_is_three_cheap_gpu_cases_and_every_config_reports_a_known_time():
    suite = generate()
    cases = suite.select_run_configs((CUDA_SMOKE,))
    assert sorted(rc.name for rc in cases) == ["mlp.eager.inference-bs1.a2-highgpu-1g",
                                              "vrelu3.eager.inference-bs1.a2-highgpu-1g",
                                              "vrelu3.inductor.inference-bs1.a2-highgpu-1g"]
    assert {rc.target_device for rc in cases} == {devices.A2_HIGHGPU_1G}
    assert all(rc.execution_config.reported_time in REPORTED_TIMES for rc in suite.run_configs)


@needs_gpu
def test_cuda_event_time_of_a_calibrated_sleep_matches_the_host_clock():  # pragma: no cover - GPU only
    from benchtrail.worker.cuda_timing import measure_cuda

    cycles = 1_000_000
    policy = dataclasses.replace(configs.INFERENCE_BS1, min_samples=10, warmup_time_ms=50)
    m = measure_cuda(lambda: torch.cuda._sleep(cycles), policy)
    assert m.timing.method == "cuda-events" and len(m.gpu_samples_us) == len(m.wall_samples_us) == 10
    gpu, wall = sorted(m.gpu_samples_us)[5], sorted(m.wall_samples_us)[5]
    assert abs(gpu - wall) / wall < 0.10  # one long kernel: device time is nearly all of the wall time
