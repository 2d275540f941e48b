"""Duet measurement in paired A/B runs (issue 21): the runner's barrier and CPU choice, and the worker's side.

A real paired run in duet mode is tests/test_ab.py::test_paired_run_confirms_the_slowdown_of_the_head_commit;
a base whose worker predates duet falls back to paired mode in tests/test_worker_protocol.py.
"""

import os
import threading
import time

import pytest

from benchtrail.runner.duet import AUTO_MIN_CPUS, applies, barrier, duet_cpus
from benchtrail.worker.duet import Duet, DuetError
from benchtrail.worker.protocol import ProtocolError, RunRequest, duet_spec, read_request


def test_the_barrier_starts_each_sample_of_both_workers_together():
    """Worker "slow" spends 50 ms before each of its 5 samples, "fast" none: neither's k-th sample starts before
    the other reached its k-th barrier (times only bound from below: no chance involved)."""
    arrived: dict[str, list[float]] = {"slow": [], "fast": []}
    starts: dict[str, list[float]] = {"slow": [], "fast": []}
    with barrier() as b:
        def worker(name: str, pause_s: float) -> None:
            pair = Duet({"socket": b.path, "cpus": sorted(os.sched_getaffinity(0))})
            for _ in range(5):
                time.sleep(pause_s)
                arrived[name].append(time.monotonic())
                pair.wait()
                starts[name].append(time.monotonic())
            assert pair.close()["synced"] == 5
            b.leave()

        threads = [threading.Thread(target=worker, args=("slow", 0.05)), threading.Thread(target=worker,
                                                                                         args=("fast", 0.0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.released == 5
    for k in range(5):
        assert starts["fast"][k] >= arrived["slow"][k] and starts["slow"][k] >= arrived["fast"][k], k
    assert starts["fast"][4] - starts["fast"][0] >= 4 * 0.05  # held back by slow's pauses


def test_a_worker_alone_is_not_held_once_the_other_arm_left():
    with barrier() as b:
        b.leave()  # the other arm's job ended without reaching the barrier
        pair = Duet({"socket": b.path, "cpus": sorted(os.sched_getaffinity(0))})
        start = time.monotonic()
        for _ in range(3):
            pair.wait()
        assert pair.close() == {"cpus": sorted(os.sched_getaffinity(0)), "synced": 3}
        assert time.monotonic() - start < 5.0


def test_a_worker_that_cannot_reach_the_barrier_or_pin_fails_naming_why(tmp_path):
    with pytest.raises(DuetError, match=r"cannot reach the barrier at .*nothing.sock"):
        Duet({"socket": str(tmp_path / "nothing.sock"), "cpus": sorted(os.sched_getaffinity(0))})
    with pytest.raises(DuetError, match=r"cannot pin to CPUs \[4096\]"):
        Duet({"socket": str(tmp_path / "nothing.sock"), "cpus": [4096]})


def test_where_duet_applies():
    cpus = len(os.sched_getaffinity(0))
    # no room for both arms' threads
    assert duet_cpus(cpus + 1) is None and not applies("on", cpus, True, True)
    assert applies("on", 1, True, True) == (cpus >= 2)
    assert applies("auto", 1, True, True) == (cpus >= AUTO_MIN_CPUS)
    assert not applies("on", 1, False, True)  # a GPU case
    assert not applies("on", 1, True, False)  # an arm's worker predates duet
    assert not applies("off", 1, True, True)
    with pytest.raises(ValueError, match="duet mode 'yes'; allowed: auto, on, off"):
        applies("yes", 1, True, True)


def test_the_duet_field_round_trips_and_bad_values_are_refused_by_name():
    spec = duet_spec("/tmp/x.sock", (0,))
    request = RunRequest({"x": 1}, 1, duet=spec)
    assert read_request(request.to_json()).duet == {"socket": "/tmp/x.sock", "cpus": [0]}
    assert "duet" not in RunRequest({"x": 1}, 1).to_json()  # absent unless asked: what an older worker reads
    for bad in ({"socket": "", "cpus": [0]}, {"socket": "s", "cpus": []}, {"socket": "s", "cpus": [0, 0]},
                {"socket": "s", "cpus": [True]}, "s"):
        with pytest.raises(ProtocolError, match="field 'duet'"):
            read_request({**request.to_json(), "duet": bad})
