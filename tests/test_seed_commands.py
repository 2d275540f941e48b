"""The seed's two commands, copied verbatim, work: export piped through the seed's jq filter, then the
runner on its output. They run in a temporary adopting project whose ``[tool.benchtrail]`` suite has tiny
``x86_64`` and ``cuda`` presets (one CPU case of one process and 3 samples, a torch.export module whose
artifact the runner compiles first; two CUDA cases, which this CPU machine skips), so the pair takes seconds:
mostly the start-up of the two scripts and of two worker processes (compile, run).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

#: Copied verbatim from the seed (issue 16, part 8).
EXPORT = ("build_tools/benchmarks/export_benchmark_config.py execution --benchmark_preset=x86_64,cuda | jq 'flatten | "
          "map(.run_configs) | { root_obj:(map(.root_obj) | flatten), keyed_obj_map:(map(.keyed_obj_map) | add) }' "
          "> run_configs.json")
RUN = ("build_tools/benchmarks/run_benchmarks_on_linux.py --output=./results.json --verbose "
       "--run_config=./run_configs.json")

PYPROJECT = """\
[project]
name = "seed-project"
version = "0.1.0"

[tool.benchtrail]
suite = "seed_suite:generate"
"""

SUITE = """\
import torch

from benchtrail.suite.definitions import (Architecture, CompileConfig, CompileMode, DeviceSpec, ExecutionConfig,
                                          Model, ModuleGenerationConfig, RunConfig, Suite, Task)

BOX = DeviceSpec("device-box", "box", "linux-x86_64", Architecture.CPU, "x86_64", threads=1)
GPU_BOX = DeviceSpec("device-gpu-box", "gpu-box", "linux-x86_64", Architecture.CUDA, "sm_80", threads=1)
EAGER = CompileConfig("compile-eager", "eager", CompileMode.EAGER)
EXPORT = CompileConfig("compile-export", "export", CompileMode.EXPORT)
QUICK = ExecutionConfig("execution-quick", "inference-quick", Task.INFERENCE, processes=1, min_samples=7,
                        min_sample_time_ms=10, warmup_time_ms=5, timeout_s=60)


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Shift(torch.nn.Module):
    def forward(self, x):
        return x + 1


def scale():
    return Scale()


def shift():
    return Shift()


def generate():
    cases, modules = [], []
    for name, mode, device, preset in (("scale", EXPORT, BOX, "x86_64"), ("scale", EAGER, GPU_BOX, "cuda"),
                                       ("shift", EAGER, GPU_BOX, "cuda")):
        model = Model(f"model-{name}", name, ("seed",), f"seed_suite:{name}", ("8xf32",))
        module = ModuleGenerationConfig.build(model, mode, device.architecture)
        modules.append(module)
        cases.append(RunConfig.build(module, QUICK, device, presets=(preset,)))
    return Suite(tuple(cases), tuple(modules), ("x86_64", "cuda"), ())
"""


def _project(folder: Path) -> Path:
    """An adopting project with the seed scripts where the seed's commands name them."""
    folder.mkdir()
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "seed_suite.py").write_text(SUITE)
    (folder / "build_tools").mkdir()
    (folder / "build_tools" / "benchmarks").symlink_to(ROOT / "build_tools" / "benchmarks")
    return folder


@pytest.mark.skipif(shutil.which("jq") is None,
                    reason="the jq command-line tool is not installed: the seed's "
                                                       "export command pipes through it")
@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="on a CUDA machine both devices run, so nothing is skipped")
def test_the_seeds_export_and_run_commands_work_verbatim(tmp_path):
    project = _project(tmp_path / "project")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BENCHTRAIL_"))}
    # the venv, as if activated
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{EXPORT}\n{RUN}\n"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]

    merged = json.loads((project / "run_configs.json").read_text())
    # both devices' cases
    assert set(merged) == {"root_obj", "keyed_obj_map"} and len(merged["root_obj"]) == 3
    results = json.loads((project / "results.json").read_text())
    # the x86_64 run config, run
    assert [(b["name"], b["status"], b["n"]) for b in results["benchmarks"]] == [
        # from the artifact compiled first
        ("scale.export.inference-quick.box", "ok", 7)]
    assert "compile [1/1] ok      scale.export.cpu" in done.stderr
    assert results["run"]["device_name"] == "box"
    assert done.stdout.strip().splitlines()[-1] == "results.json"  # the main output, printed last

    skipped = [line for line in done.stderr.splitlines() if "skipping" in line]
    assert skipped == [
        "run_benchmarks_on_linux.py: skipping 2 run config(s) this machine cannot run (it runs cpu only; torch "
        "sees no CUDA GPU): device gpu-box needs cuda: scale.eager.inference-quick.gpu-box, "
        "shift.eager.inference-quick.gpu-box"]
