"""``build_tools/benchmarks/gpu_check.sh``: the one-command check of the GPU path.

On a machine without a CUDA device (CI) the script must exit 2 with ``not a GPU``, having imported
everything it needs first and none of PyGithub, google-cloud-storage or jq. The calibration
arithmetic, the detector tallies and the tables are checked here with fixed numbers; the cuda-smoke
stage runs for real and, without a GPU, every case fails loudly with its reason. The tests marked
"needs a CUDA GPU" run the check itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark_suites import suite as suite_module
from benchtrail.runner.run_cases import CaseResult, case_record
from benchtrail.worker.protocol import Response

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "build_tools" / "benchmarks" / "gpu_check.py"
WRAPPER = REPO / "build_tools" / "benchmarks" / "gpu_check.sh"
BLOCKED = ("github", "google.cloud.storage", "jq")

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check runs in full")


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gpu_check = _load()


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHON=sys.executable)


@needs_no_gpu
def test_gpu_check_sh_on_a_machine_without_gpu_exits_2_saying_not_a_gpu(tmp_path):
    done = subprocess.run(["bash", str(WRAPPER)], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "gpu_check: not a GPU: " in done.stderr
    assert f"torch {torch.__version__}" in done.stdout  # the device section was printed first
    assert "Traceback" not in done.stderr


@needs_no_gpu
def test_gpu_check_imports_none_of_pygithub_gcs_or_jq(tmp_path):
    # Any import of a blocked module raises ImportError, which the script reports as exit 1
    # ("cannot import ..."); reaching the GPU check (exit 2) shows nothing it imports pulls them in.
    code = "\n".join([
        "import runpy, sys",
        f"for m in {BLOCKED!r}:",
        "    sys.modules[m] = None",
        f"for m in {BLOCKED!r}:",
        "    try:",
        "        __import__(m)",
        "    except ImportError:",
        "        pass",
        "    else:",
        "        raise SystemExit(f'{m} is not blocked')",
        f"sys.argv = [{str(SCRIPT)!r}]",
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "not a GPU" in done.stderr
    assert "cannot import" not in done.stderr and "ImportError" not in done.stderr


@needs_no_gpu
def test_cuda_smoke_stage_without_gpu_fails_every_case_with_its_reason_importing_no_pygithub_gcs_or_jq(tmp_path):
    # The steps after the GPU check import some modules lazily (e.g. the run stage's environment
    # record), so run what a CPU can of them with the three modules blocked: the cuda-smoke stage
    # for real (every case must fail loudly, never run on the CPU) and the detector's tally.
    code = "\n".join([
        "import importlib.util, json, sys",
        "from pathlib import Path",
        f"for m in {BLOCKED!r}:",
        "    sys.modules[m] = None",
        f"spec = importlib.util.spec_from_file_location('gpu_check', {str(SCRIPT)!r})",
        "g = importlib.util.module_from_spec(spec); sys.modules['gpu_check'] = g; spec.loader.exec_module(g)",
        f"rows, path = g.run_smoke(Path({str(tmp_path)!r}))",
        "base = [100.0 + 0.1 * (j % 7) for j in range(30)]",
        "detector = g.detector_rows([(0.0, *g.judge_trial(base, base))])",
        "print(json.dumps({'rows': rows, 'path': str(path), 'table': g.format_smoke(rows), 'detector': detector,",
        "                  'imported': sorted(m for m in sys.modules",
        "                                     if m.split('.')[0] in ('github', 'jq') or m.startswith('google.cloud'))}))",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["imported"] == ["github", "google.cloud.storage", "jq"]  # still only the blocking entries
    rows = out["rows"]
    names = sorted(rc.name for rc in suite_module.generate().select_run_configs(("cuda-smoke",)))
    assert sorted(r["name"] for r in rows) == names
    assert all(r["status"] == "failed" and "CUDA" in r["reason"] and r["n"] == 0 for r in rows)
    assert len(json.loads(Path(out["path"]).read_text())["benchmarks"]) == 3
    assert out["table"].count("    reason: ") == 3 and rows[0]["reason"] in out["table"]
    assert out["detector"][0]["verdicts"] == {"similar": 1}


def test_gpu_check_bad_usage_exits_1_not_2(tmp_path):
    done = subprocess.run(["bash", str(WRAPPER), "--trials", "0"], capture_output=True, text=True, env=_env(),
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 1
    assert "--trials must be at least 1, got 0" in done.stderr


def test_gpu_check_sh_without_the_named_python_exits_1(tmp_path):
    env = dict(os.environ, PYTHON=str(tmp_path / "no-such-python"))
    done = subprocess.run(["bash", str(WRAPPER)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert "no Python interpreter" in done.stderr


def test_calibration_arithmetic_and_the_10_percent_verdict():
    rate = gpu_check.cycles_per_second(300_000_000, 0.2)
    assert rate == 1.5e9
    expected = gpu_check.expected_ms(3_000_000, rate)
    assert expected == pytest.approx(2.0)
    assert gpu_check.relative_error(2.19, expected) == pytest.approx(0.095)
    assert gpu_check.within_tolerance(2.19, expected)  # +9.5%
    assert gpu_check.within_tolerance(1.81, expected)  # -9.5%
    assert not gpu_check.within_tolerance(2.21, expected)  # +10.5%
    assert not gpu_check.within_tolerance(1.79, expected)  # -10.5%
    assert not gpu_check.within_tolerance(4.0, expected)  # events twice the clock's time
    cal = gpu_check.Calibration(rate=1.5e9, long_cycles=300_000_000, long_seconds=(0.2, 0.2, 0.2),
                                check_cycles=3_000_000, check_ms=(2.3, 2.25, 2.2))
    assert cal.measured_ms == 2.25 and cal.error == pytest.approx(0.125) and not cal.ok
    assert "off by +12.50% (limit ±10%): FAILED" in gpu_check.format_calibration(cal)
    good = gpu_check.Calibration(1.5e9, 300_000_000, (0.2,), 3_000_000, (2.01, 2.02, 1.99))
    assert good.ok and "off by +0.50% (limit ±10%): ok" in gpu_check.format_calibration(good)


@pytest.mark.parametrize("call", [lambda g: g.cycles_per_second(0, 0.2),
                                  lambda g: g.cycles_per_second(10, 0.0),
                                  lambda g: g.expected_ms(10, 0.0), lambda g: g.relative_error(1.0, 0.0)])
def test_calibration_arithmetic_refuses_zero(call):
    with pytest.raises(ValueError):
        call(gpu_check)


def test_detector_tally_counts_aa_alerts_both_ways_and_detections_as_regressed():
    trials = ([(0.0, "similar", 1.0)] * 17 + [(0.0, "improved", 0.98), (0.0, "regressed", 1.02),
                                              (0.0, "noisy", 1.0)]
              + [(2.0, "regressed", 1.02)] * 18 + [(2.0, "similar", 1.011), (2.0, "improved", 0.97)])
    aa, delta = gpu_check.detector_rows(trials)
    assert (aa["delta_pct"], aa["trials"], aa["alerts"], aa["rate"]) == (0.0, 20, 2, 0.1)
    assert aa["ci_low"] == pytest.approx(0.0123485, abs=1e-6) and aa["ci_high"] == pytest.approx(0.3169827,
                                                                                                 abs=1e-6)
    assert aa["verdicts"] == {"improved": 1, "noisy": 1, "regressed": 1, "similar": 17}
    assert (delta["delta_pct"], delta["trials"], delta["alerts"], delta["rate"]) == (2.0, 20, 18, 0.9)
    assert delta["median_ratio"] == pytest.approx(1.02)
    assert not gpu_check.aa_broken([aa, delta])
    five = gpu_check.detector_rows([(0.0, "regressed", 1.02)] * 5 + [(0.0, "similar", 1.0)] * 15)
    assert five[0]["rate"] == 0.25 and gpu_check.aa_broken(five)
    table = gpu_check.format_detector([aa, delta])
    assert "A/A" in table and "δ = 2%" in table and "1.2% - 31.7%" in table


def test_paired_judgement_of_trials_with_a_2_percent_slowdown_and_without():
    rng = np.random.default_rng(7)
    base = 100.0 * (1 + 0.003 * rng.standard_normal(30))
    same = 100.0 * (1 + 0.003 * rng.standard_normal(30))
    assert gpu_check.judge_trial(base, same)[0] == "similar"
    verdict, ratio = gpu_check.judge_trial(base, same * 1.02)
    assert verdict == "regressed" and ratio == pytest.approx(1.02, abs=0.003)


def test_cuda_smoke_sampling_is_reduced_only_for_the_preset():
    full = suite_module.generate()
    reduced = gpu_check.smoke_suite(full_sampling=False)
    assert gpu_check.smoke_suite(full_sampling=True) is full
    smoke = reduced.select_run_configs(("cuda-smoke",))
    assert len(smoke) == 3
    for rc in smoke:
        assert rc.target_device.name == gpu_check.DEVICE_NAME
        assert rc.execution_config.processes == 1 and rc.execution_config.timeout_s == 120.0
    others = [rc for rc in reduced.run_configs if "cuda-smoke" not in rc.presets]
    assert others == [rc for rc in full.run_configs if "cuda-smoke" not in rc.presets]


def test_smoke_table_reads_the_gpu_fields_that_case_record_writes():
    rc = suite_module.generate().select_run_configs(("cuda-smoke",))[0]
    response = Response(status="ok", samples=[10.0, 11.0, 12.0, 13.0],
                        timing={"method": "cuda-graph", "launches": 5, "reported": "gpu", "flush_l2": False},
                        gpu_samples_us=[10.0, 11.0, 12.0, 13.0], wall_samples_us=[20.0, 22.0, 24.0, 26.0],
                        memory={"max_memory_allocated_bytes": 3 * 2**20,
                                "max_memory_reserved_bytes": 20 * 2**20})
    record = case_record(rc, CaseResult.of(response), torch.__version__)
    (row,) = gpu_check.smoke_rows([record])
    assert row["median_us"] == 11.5 and row["n"] == 4
    assert (row["method"], row["launches"], row["reported"]) == ("cuda-graph", 5, "gpu")
    assert (row["gpu_median_us"], row["wall_median_us"]) == (11.5, 23.0)
    assert (row["max_memory_allocated_bytes"], row["max_memory_reserved_bytes"]) == (3 * 2**20, 20 * 2**20)
    line = gpu_check.format_smoke([row]).splitlines()[1].split()
    assert line[:2] == [rc.name, "ok"] and line[-7:] == ["cuda-graph", "5", "gpu", "11.50", "23.00", "3.0",
                                                         "20.0"]


@needs_gpu
def test_sleep_calibration_agrees_with_cuda_events_on_a_gpu():
    cal = gpu_check.calibrate_sleep()
    assert cal.rate > 1e8 and cal.ok, gpu_check.format_calibration(cal)


@needs_gpu
def test_gpu_check_passes_on_a_gpu(tmp_path):
    done = subprocess.run(["bash", str(WRAPPER), "--output-dir", str(tmp_path)], capture_output=True,
                          text=True,
                          env=_env(), timeout=330)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (report_path,) = tmp_path.glob("gpu-check-*/gpu-check.json")
    report = json.loads(report_path.read_text())
    assert report["calibration"]["ok"] and report["elapsed_s"] < 300
    for row in report["smoke"]["rows"]:
        assert row["status"] == "ok" and row["method"] in ("cuda-events", "cuda-graph")
        assert row["gpu_median_us"] > 0 and row["wall_median_us"] > 0 and row["max_memory_allocated_bytes"] > 0
    aa, delta = report["detector"]["rows"]
    assert aa["rate"] <= 0.2 and delta["rate"] >= 0.9 and 1.01 < delta["median_ratio"] < 1.03
