"""Workers forked from the pre-imported server (benchtrail.worker.server, benchtrail.runner.launch,
benchtrail.runner.server_pool): each job still gets a fresh process, the cases of one module share one, a
crash or a timeout costs only the case that caused it, and a checkout without the server falls back to
spawned workers."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_suites import devices
from benchtrail.runner import launch
from benchtrail.runner.run_cases import _order, run_module_cases
from benchtrail.runner.server_pool import ServerUnavailable, WorkerServer
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Task,
)
from benchtrail.worker.protocol import NO_CUDA_REASON, run_request

EAGER = CompileConfig("compile-eager", "eager", CompileMode.EAGER)


def _group(entry: str, tasks=(Task.INFERENCE, Task.FORWARD, Task.BACKWARD), processes=2, timeout_s=60.0):
    """Run configs of one module (``tests.benchmarks.bad_models:<entry>``), one per task."""
    model = Model(f"model-{entry}", entry, ("test",), f"tests.benchmarks.bad_models:{entry}", ("8xf32",))
    gen = ModuleGenerationConfig.build(model, EAGER, devices.C2_STANDARD_16.architecture)
    return [RunConfig.build(gen, ExecutionConfig(f"exec-{t.value}", f"{t.value}-bs1", t, processes=processes,
                                                 min_samples=5, warmup_time_ms=5, timeout_s=timeout_s),
                            devices.C2_STANDARD_16, presets=("test",)) for t in tasks]


@pytest.mark.parametrize("method, processes, builds", [("fork", 2, 2), ("spawn", 1, 3)])
def test_the_cases_of_one_module_share_each_fresh_process_which_builds_the_module_once(
        tmp_path, method, processes, builds, monkeypatch):
    """Forked: one process per process index builds the module once for its 3 cases. Spawned (as before
    the server): one process per case and process index."""
    monkeypatch.setenv("BENCHTRAIL_WORKER_START", method)
    log = tmp_path / "builds.txt"
    rcs = _group("counted", processes=processes)
    out = run_module_cases(rcs, env={"BENCHTRAIL_TEST_BUILDS": str(log)})
    pids = log.read_text().split()
    for rc in rcs:
        response = out[rc.id]
        assert response.status == "ok", response.reason
        assert len(response.samples) == 5 * processes and len(response.process_medians) == processes
        assert response.process_starts == processes
        assert response.timed_ms > 0 and response.warmup_ms > 0
        assert sum(response.phase_times_ms.values()) <= response.wall_time_ms
    assert len(pids) == builds and len(set(pids)) == builds
    assert str(os.getpid()) not in pids


def test_a_crash_fails_its_own_case_and_the_cases_after_it_run_in_a_fresh_process():
    rcs = _group("crashes_with_grad", tasks=(Task.INFERENCE, Task.FORWARD, Task.BACKWARD), processes=2)
    # The seeded order puts a crashing case (autograd on) before the inference case in some process.
    assert any(next(rc.execution_config.task for rc in _order(rcs,
                                                              p)) is not Task.INFERENCE for p in range(2))
    out = run_module_cases(rcs)
    by_task = {rc.execution_config.task: out[rc.id] for rc in rcs}
    for task in (Task.FORWARD, Task.BACKWARD):
        assert by_task[task].status == "failed"
        assert "exited with code 3" in by_task[task].reason
    inference = by_task[Task.INFERENCE]
    assert inference.status == "ok" and len(inference.samples) == 10 and inference.process_starts == 2


def test_the_order_of_a_process_is_a_seeded_shuffle():
    rcs = _group("tiny", tasks=tuple(Task)[:3], processes=6)
    orders = [[rc.id for rc in _order(rcs, p)] for p in range(6)]
    assert orders == [[rc.id for rc in _order(rcs, p)] for p in range(6)]  # the same on every run
    assert all(sorted(o) == sorted(rc.id for rc in rcs) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # not one fixed order


def test_a_hung_case_is_killed_and_the_server_serves_the_next_job():
    (hung,) = _group("hangs", tasks=(Task.INFERENCE,), processes=1, timeout_s=3)
    (fine,) = _group("tiny", tasks=(Task.INFERENCE,), processes=1)
    first = launch.run_in_worker(run_request(hung), 3, 1, method="fork")
    assert first.status == "timeout" and "3 s" in first.reason
    assert launch.run_in_worker(run_request(fine), 60, 1, method="fork").ok


def test_a_checkout_whose_worker_has_no_server_spawns(tmp_path):
    """A worker package from before the server answers ``--serve`` with an error exit; jobs then spawn."""
    old = tmp_path / "old" / "benchtrail" / "worker"
    old.mkdir(parents=True)
    (old.parent / "__init__.py").write_text("")
    (old / "__init__.py").write_text("")
    (old / "__main__.py").write_text("import sys\nrequest, response = sys.argv[1:]\n")  # the old argv rule
    env = {"PYTHONPATH": str(tmp_path / "old")}
    assert not launch.can_fork(env, tmp_path)
    assert launch.can_fork()


def test_the_start_method_is_checked():
    code = ("import os; os.environ['BENCHTRAIL_WORKER_START'] = 'vfork'\nfrom benchtrail.runner.server_pool "
            "import start_method\nstart_method()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1 and "BENCHTRAIL_WORKER_START='vfork'; allowed: fork, spawn" in out.stderr


def test_the_server_initialises_no_cuda_and_forks_with_one_python_thread():
    """A forked child inherits only the forking thread; CUDA cannot be used after a fork of a process that
    initialised it. The server imports torch, Dynamo and Inductor and must do neither."""
    code = ("import sys, threading, torch\nfrom benchtrail.worker.server import _preload, _preload_compilers\n"
            "_preload()\nprint('torch._dynamo' in sys.modules)\n_preload_compilers()\n"
            "print(torch.cuda.is_initialized(), threading.active_count(), 'torch._inductor.compile_fx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    # Dynamo and Inductor only for a job whose module is compiled (a server of eager jobs skips 4 s of
    # imports).
    assert out.stdout.split() == ["False", "False", "1", "True"]


def test_a_server_that_cannot_start_quotes_the_end_of_its_log(tmp_path, monkeypatch):
    """The error quotes the log's last lines (here Python's own fatal error, with PYTHONHOME pointing nowhere), read
    before the server is closed, and no file is left in the temporary folder."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ServerUnavailable, match=r"did not start a server \(.*(Python|python).*\)"):
        WorkerServer({"PATH": os.environ["PATH"], "PYTHONHOME": str(tmp_path / "nowhere")}, None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_a_cuda_request_that_reaches_a_worker_without_cuda_fails_there_never_runs_on_the_cpu():
    # The run stage records such cases without a worker (tests/test_run_stage.py); the worker keeps the guard.
    (case,) = _group("tiny", tasks=(Task.INFERENCE,), processes=1)
    gen = ModuleGenerationConfig.build(case.module_generation_config.model, EAGER,
                                       devices.A2_HIGHGPU_1G.architecture)
    cuda = RunConfig.build(gen, case.execution_config, devices.A2_HIGHGPU_1G, presets=("test",))
    response = launch.run_in_worker(run_request(cuda), 60, 1, method="fork")
    assert response.status == "failed" and response.reason == NO_CUDA_REASON and not response.samples


def _checkout(root: Path, value: int) -> dict[str, str]:
    """A checkout of a project that imports the installed benchtrail: ``arm.py``'s model records which checkout
    it was imported from (``$BENCHTRAIL_TEST_BUILDS``); its ``PYTHONPATH`` names the checkout alone."""
    root.mkdir(parents=True)
    (root / "arm.py").write_text(
        "import os\nimport torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        f"        return x + {value}\n\n\ndef model():\n    with open(os.environ['BENCHTRAIL_TEST_BUILDS'], 'a') as f:\n"
        "        f.write(__file__ + '\\n')\n    return M()\n")
    return {"PYTHONPATH": str(root)}


def _arm_request(log: Path):
    model = Model("model-arm", "arm", ("test",), "arm:model", ("8xf32",))
    gen = ModuleGenerationConfig.build(model, EAGER, devices.C2_STANDARD_16.architecture)
    rc = RunConfig.build(gen, ExecutionConfig("exec-arm", "inference-bs1", Task.INFERENCE, processes=1,
                                              min_samples=3,
                                              warmup_time_ms=5, timeout_s=60), devices.C2_STANDARD_16,
                         presets=("test",))
    return run_request(rc)


def test_checkouts_that_import_the_installed_benchtrail_share_one_server_each_worker_on_its_own_path(tmp_path):
    # The two arms of a paired run of an adopting project: each worker imports its own checkout's module.
    from benchtrail.runner import server_pool

    log = tmp_path / "imports.txt"
    a, b = _checkout(tmp_path / "a", 1), _checkout(tmp_path / "b", 2)
    for env in (a, b):
        response = launch.run_in_worker(_arm_request(log), 60, 1,
                                         env={**env, "BENCHTRAIL_TEST_BUILDS": str(log)},
                                         method="fork")
        assert response.ok, response.reason
    assert log.read_text().split() == [str(tmp_path / "a" / "arm.py"), str(tmp_path / "b" / "arm.py")]
    shared = [server_pool.server_for(launch._environments(1, env)[1], None) for env in (a, b)]
    assert shared[0] is shared[1] and "pythonpath" in shared[0].features and not shared[0].busy


def test_a_checkout_whose_path_provides_a_module_the_shared_server_imported_gets_a_server_of_its_own(tmp_path):
    # An entry holding its own `fnmatch.py` (a working copy of the standard library's, which the server
    # imported): a worker forked from the shared server could not import that entry's version, so the server
    # refuses the job and one is started for that PYTHONPATH, which imports the entry's copy as a fresh
    # interpreter would.
    import fnmatch
    import shutil

    from benchtrail.runner import server_pool
    from benchtrail.worker.server import refusal

    log = tmp_path / "imports.txt"
    env = _checkout(tmp_path / "c", 3)
    shutil.copy(fnmatch.__file__, tmp_path / "c" / "fnmatch.py")
    (tmp_path / "c" / "logging").mkdir()  # a folder of data, no package: it shadows nothing
    assert launch.run_in_worker(_arm_request(log), 60, 1, env=_checkout(tmp_path / "a", 1) | {
        "BENCHTRAIL_TEST_BUILDS": str(log)}, method="fork").ok  # a shared server is running
    response = launch.run_in_worker(_arm_request(log), 60, 1,
                                     env={**env, "BENCHTRAIL_TEST_BUILDS": str(log)},
                                     method="fork")
    assert response.ok, response.reason
    assert log.read_text().split()[-1] == str(tmp_path / "c" / "arm.py")
    key = (launch._environments(1, env)[1]["PYTHONPATH"], sys.executable)
    (own,) = [s for s in server_pool._SERVERS if s.key == key]
    assert key in server_pool._REFUSED and not own.shareable and "pythonpath" in own.features
    assert "(fnmatch)" in refusal([str(tmp_path / "c")]) and refusal(None) is None
    (tmp_path / "c" / "fnmatch.py").unlink()
    assert refusal([str(tmp_path / "c")]) is None  # `logging/` without __init__.py
    # a relative entry: the server's own folder
    assert not server_pool._shareable(f"{tmp_path / 'a'}{os.pathsep}lib")


def test_a_leased_server_is_never_handed_to_a_second_caller_until_released(tmp_path):
    # A duet runs both arms' jobs at once: sharing one server, the first arm's worker would wait at the
    # barrier for a worker the busy server never forks.
    from benchtrail.runner import server_pool

    a, b = (launch._environments(1, env)[1]
            for env in (_checkout(tmp_path / "a", 1), _checkout(tmp_path / "b", 2)))
    first = server_pool.server_for(a, None, lease=True)
    server_pool.release(first)
    assert server_pool.server_for(b, None, lease=True) is first  # shared: b has no server of its own
    second = server_pool.server_for(a, None, lease=True)  # a's own server is leased to b's job: another one
    assert second is not first and first.busy and second.busy
    server_pool.release(first)
    server_pool.release(second)
    third = server_pool.server_for(b, None, lease=True)
    server_pool.release(third)
    assert third in (first, second)  # no third one
