"""`benchtrail doctor`: each runner check on an injected machine state (a fake root directory with
/proc and /sys files), real busy processes, and a failed check travelling from a real run's results
file through compare into the comment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.compare.comment_header import runner_checks_line
from benchtrail.compare.document import Comparison
from benchtrail.errors import UserError
from benchtrail.results.io import load_results
from benchtrail.runner import doctor
from tests.helpers.suites import bad_models_suite, write_execution_export

CPUS = os.cpu_count() or 1


def _machine(root: Path, files: dict[str, str]) -> Path:
    """A fake machine: ``files`` (paths under ``root``, as on Linux) with their contents."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _governors(*names: str) -> dict[str, str]:
    return {f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor": f"{g}\n" for i, g in enumerate(names)}


PSI = "some avg10={} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
MEMINFO = "MemTotal:       {} kB\nMemFree:         1000 kB\nMemAvailable:   {} kB\n"
TUNED = {**_governors("performance", "performance"), "sys/devices/system/cpu/intel_pstate/no_turbo": "1\n",
         "proc/loadavg": "0.00 0.01 0.05 1/100 42\n", "proc/pressure/memory": PSI.format("0.00"),
         "proc/meminfo": MEMINFO.format(64 * 2**20, 60 * 2**20)}


# -- each check on injected inputs ------------------------------------------------------------------


def test_powersave_governor_fails_with_the_value_and_advice(tmp_path):
    c = doctor.check_governor(_machine(tmp_path, _governors("powersave", "powersave")))
    assert (c["name"], c["status"], c["value"], c["expected"]) == ("cpu governor", "fail", "powersave",
                                                                   "performance")
    assert "cpupower frequency-set -g performance" in c["advice"] and "pyperf system tune" in c["advice"]


def test_mixed_governors_name_each_and_all_performance_passes(tmp_path):
    mixed = doctor.check_governor(_machine(tmp_path / "a",
                                           _governors("performance", "powersave", "powersave")))
    assert (mixed["status"], mixed["value"]) == ("fail", "performance on 1 CPU, powersave on 2 CPUs")
    tuned = doctor.check_governor(_machine(tmp_path / "b", _governors("performance", "performance")))
    assert (tuned["status"], tuned["value"], tuned["advice"]) == ("ok", "performance", "")


def test_no_cpufreq_as_on_a_vm_is_unknown_with_the_reason(tmp_path):
    c = doctor.check_governor(tmp_path)
    assert c["status"] == "unknown" and "no cpufreq" in c["value"]


@pytest.mark.parametrize("rel, text, status, value", [
    ("sys/devices/system/cpu/intel_pstate/no_turbo", "0", "warn", "enabled (no_turbo=0)"),
    ("sys/devices/system/cpu/intel_pstate/no_turbo", "1", "ok", "disabled (no_turbo=1)"),
    ("sys/devices/system/cpu/cpufreq/boost", "1", "warn", "enabled (boost=1)"),
    ("sys/devices/system/cpu/cpufreq/boost", "0", "ok", "disabled (boost=0)"),
])
def test_turbo_enabled_warns_and_disabled_passes(tmp_path, rel, text, status, value):
    c = doctor.check_turbo(_machine(tmp_path, {rel: text + "\n"}))
    assert (c["status"], c["value"]) == (status, value)
    assert ("pyperf system tune" in c["advice"]) == (status == "warn")


def test_no_turbo_control_is_unknown(tmp_path):
    assert doctor.check_turbo(tmp_path)["status"] == "unknown"


@pytest.mark.parametrize("per_cpu, status", [(1.5, "fail"), (0.75, "warn"), (0.0, "ok")])
def test_load_average_above_the_cpu_count_fails(tmp_path, per_cpu, status):
    load = per_cpu * CPUS
    c = doctor.check_load(_machine(tmp_path, {"proc/loadavg": f"{load:.2f} 1.00 1.00 3/200 999\n"}))
    assert (c["status"], c["value"]) == (status, f"{load:.2f} over 1 min on {CPUS} CPUs")
    assert c["expected"] == f"at most {CPUS / 2:g}, half the CPUs"


@pytest.mark.parametrize("avg10, status", [("25.00", "fail"), ("4.50", "warn"), ("0.00", "ok")])
def test_memory_pressure_psi_some_avg10_warns_then_fails(tmp_path, avg10, status):
    c = doctor.check_memory_pressure(_machine(tmp_path, {"proc/pressure/memory": PSI.format(avg10)}))
    assert (c["status"], c["value"], c["expected"]) == (status, f"PSI some avg10 {avg10}%", "at most 1%")


@pytest.mark.parametrize("available, status", [(5, "fail"), (15, "warn"), (50, "ok")])
def test_memory_available_below_a_tenth_fails(tmp_path, available, status):
    total = 32 * 2**20  # kB: 32 GiB
    c = doctor.check_memory_available(_machine(tmp_path,
                                               {"proc/meminfo": MEMINFO.format(total,
                                                                               total * available // 100)}))
    assert c["status"] == status and c["value"].endswith(f"of 32.0 GiB ({available}%)")


def test_unreadable_or_malformed_files_are_unknown_not_errors(tmp_path):
    # A directory where a file should be cannot be read even as root (chmod 000 can).
    for rel in ("proc/loadavg", "proc/pressure/memory", "proc/meminfo",
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "sys/devices/system/cpu/intel_pstate/no_turbo"):
        (tmp_path / "dirs" / rel).mkdir(parents=True)
    garbled = _machine(tmp_path / "garbled", {"proc/loadavg": "high\n",
                                              "proc/pressure/memory": "full avg10=1\n",
                                              "proc/meminfo": "MemTotal: lots\n"})
    for root in (tmp_path / "dirs", garbled, tmp_path / "empty"):
        checks = [doctor.check_governor(root), doctor.check_turbo(root), doctor.check_load(root),
                  doctor.check_processes(root, sample_s=0.01), doctor.check_memory_pressure(root),
                  doctor.check_memory_available(root)]
        for c in checks:
            assert c["status"] == "unknown" and c["value"], (root.name, c)


def test_gpu_clocks_fail_on_thermal_slowdown_and_pass_when_idle():
    idle = doctor.parse_gpu_clocks("345, 1980, 1593, 2619, 0x0000000000000001\n")
    assert (idle["status"], idle["value"]) == ("ok", "GPU 0: sm 345/1980 MHz, mem 1593/2619 MHz")
    hot = doctor.parse_gpu_clocks("1200, 1980, 2619, 2619, 0x0000000000000040\n1980, 1980, 2619, 2619, 0x0\n")
    assert hot["status"] == "fail" and hot["value"].endswith("GPU 1: sm 1980/1980 MHz, mem 2619/2619 MHz; hw thermal slowdown")
    capped = doctor.parse_gpu_clocks("1700, 1980, 2619, 2619, 0x0000000000000004\n")
    assert (capped["status"], capped["value"].rsplit("; ", 1)[1]) == ("warn", "sw power cap")
    assert doctor.parse_gpu_clocks("")["status"] == "unknown"


def test_other_gpu_compute_processes_fail_and_ours_do_not():
    text = "4242, /usr/bin/python3, 1024 MiB\n77, /opt/train, 30000 MiB\n"
    other = doctor.parse_gpu_processes(text, exclude={77})
    assert (other["status"], other["value"]) == ("fail", "python3 (pid 4242, 1024 MiB)")
    assert doctor.parse_gpu_processes(text, exclude={77, 4242})["status"] == "ok"
    assert doctor.parse_gpu_processes("", exclude=set())["value"] == "none"


# -- busy processes: real ones ------------------------------------------------------------------------

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def test_a_busy_process_outside_our_tree_is_listed_and_our_own_child_is_not():
    ours = subprocess.Popen([sys.executable, "-c", SPIN])
    # `sh` starts the spinner in the background and exits: the spinner leaves our process tree.
    started = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', SPIN],
                             capture_output=True, text=True, check=True)
    other = int(started.stdout)
    try:
        root = Path("/")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until both spin (Python started), on a possibly busy machine
            snapshot = doctor.process_snapshot(root)
            if all(snapshot.get(pid, ("", 0, 0, 0))[3] >= 10 for pid in (ours.pid, other)):
                break
            time.sleep(0.05)
        before = doctor.process_snapshot(root)
        time.sleep(1.0)
        after = doctor.process_snapshot(root)
        assert ours.pid in doctor.own_tree(after) and other not in doctor.own_tree(after)
        busy = {pid: percent for percent, pid,
                _ in doctor.busy_processes(before, after, 1.0, doctor.own_tree(after))}
        assert ours.pid not in busy
        assert busy[other] > doctor.BUSY_PROCESS_PERCENT  # a spinning loop, even on a shared 2-CPU machine
        c = doctor.check_processes(root)
        assert c["status"] in ("warn", "fail") and f"(pid {ours.pid})" not in c["value"]
    finally:
        ours.kill()
        ours.wait()
        os.kill(other, signal.SIGKILL)


# -- the report, the CLI and the results file ------------------------------------------------------


def test_every_check_has_a_status_on_this_machine_and_it_is_cheap():
    import torch  # collect_environment has imported it already

    assert torch.__version__
    start = time.monotonic()
    report = doctor.run_checks(Path("/"))
    assert time.monotonic() - start < 1.0  # collect_environment runs it once per results file
    assert [c["name"] for c in report["checks"]] == list(doctor.CHECK_NAMES)
    assert all(c["status"] in doctor.STATUSES and c["value"] for c in report["checks"])
    assert report["failed"] == [c["name"] for c in report["checks"] if c["status"] == "fail"]
    assert report["warned"] == [c["name"] for c in report["checks"] if c["status"] == "warn"]
    assert "root" not in report


def _doctor_cli(tmp_path: Path, root: Path | None, name: str) -> tuple[subprocess.CompletedProcess, Path]:
    env = {k: v for k, v in os.environ.items() if k != doctor.ROOT_ENV}
    if root is not None:
        env[doctor.ROOT_ENV] = str(root)
    out = tmp_path / name
    proc = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", "doctor", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc, out


@pytest.mark.parametrize("files, code", [(TUNED, 0), ({**TUNED, **_governors("powersave")}, 4)])
def test_doctor_json_round_trips_and_the_exit_code_says_whether_a_check_failed(tmp_path, files, code):
    root = _machine(tmp_path / "machine", files)
    proc, out = _doctor_cli(tmp_path, root, "doctor.json")
    assert proc.returncode == code, proc.stderr
    report = doctor.load_report(out)
    assert report == doctor.run_checks(root)  # the injected machine reads the same in this process
    assert report["failed"] == ([] if code == 0 else ["cpu governor"]) and report["root"] == str(root)
    assert json.loads(out.read_text())["schema_version"] == doctor.SCHEMA_VERSION
    lines = proc.stdout.splitlines()
    assert lines[-1] == str(out)  # the output path last
    assert any("cpu governor" in line and ("fail" if code else "ok") in line for line in lines)
    assert lines[-2] == ("1 check(s) failed: cpu governor" if code else "no check failed")


def test_doctor_on_this_machine_exits_4_exactly_when_a_check_failed(tmp_path):
    proc, out = _doctor_cli(tmp_path, None, "real.json")
    report = doctor.load_report(out)
    assert [c["name"] for c in report["checks"]] == list(doctor.CHECK_NAMES)
    assert proc.returncode == (4 if report["failed"] else 0), proc.stderr
    again, _ = _doctor_cli(tmp_path, None, "real.json")
    assert again.returncode == 1 and "already exists" in again.stderr


def test_a_report_with_an_unknown_field_is_refused(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"schema_version": 1, "checks": [], "failed": [], "warned": [], "extra": 1}))
    with pytest.raises(UserError, match="extra"):
        doctor.load_report(path)


def test_an_injected_failing_check_reaches_the_results_file_and_the_comment(tmp_path, monkeypatch):
    root = _machine(tmp_path / "machine",
                    {**_governors("powersave"), "proc/loadavg": f"{CPUS * 3:.2f} 1 1 1/1 1\n"})
    monkeypatch.setenv(doctor.ROOT_ENV, str(root))  # the run stage runs in this process
    results = tmp_path / "results" / "c2-standard-16-0.json"
    results.parent.mkdir()
    assert main(["run", "--run-configs",
                 str(write_execution_export(tmp_path, bad_models_suite(("ok", "tiny")))), "--device-name",
                 "c2-standard-16", "--output", str(results)]) == 0
    env = load_results(results).environment
    assert env["doctor"]["failed"] == ["cpu governor", "load average"] and env["doctor"]["root"] == str(root)
    assert {c["name"]: c["status"] for c in env["doctor"]["checks"]}["memory pressure"] == "unknown"

    comparison, comment = tmp_path / "comparison.json", tmp_path / "comment"
    assert main(["compare", "--base", str(results), "--head", str(results), "--output", str(comparison)]) == 0
    head = json.loads(comparison.read_text())["head"]
    load = f"{CPUS * 3:.2f} over 1 min on {CPUS} CPUs"
    assert head["runner_checks"] == [{"device": "c2-standard-16", "failed": [
        {"name": "cpu governor", "value": "powersave", "expected": "performance"},
        {"name": "load average", "value": load, "expected": f"at most {CPUS / 2:g}, half the CPUs"}]}]
    assert main(["comment", "--comparison", str(comparison), "--output-dir", str(comment)]) == 0
    lines = (comment / "comment.md").read_text().splitlines()
    assert lines[2] == (f"⚠ runner checks failed on c2-standard-16: cpu governor is powersave (expected performance); "
                        f"load average {CPUS * 3:.2f} \\> {CPUS / 2:g}. These results may "
                        # the check and its figure
                        "be disturbed: see `benchtrail doctor` in docs/runners.md.")


def test_the_comment_line_escapes_process_names_and_is_absent_when_all_passed():
    comparison = {"head": {"runner_checks": [{"device": "c2-standard-16", "failed": [
        {"name": "busy processes", "value": "`evil` @someone <b> (pid 7) 99%", "expected": "none"}]}]}}
    line = runner_checks_line(Comparison(comparison, ()))
    assert "busy processes is \\`evil\\` \\@someone \\<b\\> 99% (expected none)" in line and "pid" not in line
    assert runner_checks_line(Comparison({"head": {"runner_checks": []}}, ())) is None
    assert runner_checks_line(Comparison({"head": {"commit": "a" * 40}}, ())) is None  # from before doctor


def test_a_compilation_file_without_series_counts_under_its_hosts_device_not_its_hostname():
    """An eager-only run's compilation file names no device; its checks are those of the runner whose run
    file (same host) names one, so the comment says the device once (not also the host name)."""
    from benchtrail.compare.document import failed_by_device
    from benchtrail.results.schema import ResultsFile

    def report(load):
        return {"checks": [{"name": "load average", "value": load, "expected": "at most 1"}],
                "failed": ["load average"]}

    def file(host, load, run=None):
        return ResultsFile("a" * 40, False, run or {}, {"hostname": host, "doctor": report(load)}, ())

    files = [file("vm", "2.03"), file("vm", "1.50", {"device_name": "cpu"}), file("laptop", "3.00")]
    assert failed_by_device(files) == [
        {"device": "cpu", "failed": [{"name": "load average", "value": "2.03", "expected": "at most 1"}]},
        {"device": "laptop", "failed": [{"name": "load average", "value": "3.00", "expected": "at most 1"}]}]
    # A host that ran two devices: under both; a file without a host name borrows no other file's device.
    files = [file("gpu-box", "2.00"), file("gpu-box", "1.0", {"device_name": "cuda"}),
             file("gpu-box", "1.0", {"device_name": "cpu"}), file(None, "4.00")]
    assert [(e["device"], e["failed"][0]["value"]) for e in failed_by_device(files)] == [
        ("?", "4.00"), ("cpu", "1.0"), ("cpu, cuda", "2.00"), ("cuda", "1.0")]
