"""Runner hygiene checks behind ``benchtrail doctor``, after ``pyperf system show``: is this machine fit to
measure on?

Each check returns ``{name, status, value, expected, advice}``: ``status`` is ``ok``, ``warn``, ``fail`` or
``unknown`` (not readable here; ``value`` says why), and ``"<name> is <value> (expected <expected>)"``
reads as a sentence. Every file a check reads lies under ``/``, or under ``$BENCHTRAIL_DOCTOR_ROOT`` in
tests (a file missing there is ``unknown``). The checks, their sources and fixes: docs/runners.md.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchtrail.store.base import shown

#: Version history of the ``benchtrail doctor --json`` file:
#:   1 — first version.
SCHEMA_VERSION = 1
ROOT_ENV = "BENCHTRAIL_DOCTOR_ROOT"
STATUSES = ("ok", "warn", "fail", "unknown")

#: The governor pyperf's ``system tune`` sets (``CPUGovernorIntelPstate.BENCHMARK_GOVERNOR``); another
#: governor moves the frequency with load.
EXPECTED_GOVERNOR = "performance"
#: 1-minute load average per CPU: a run queue longer than the CPU count is CPU saturation (Gregg, "The
#: USE Method: Linux Performance Checklist"): fail; above half: warn. Our own recent workers count too.
LOAD_WARN_PER_CPU, LOAD_FAIL_PER_CPU = 0.5, 1.0
CPUS = os.cpu_count() or 1  # the CPUs the load average is judged against
#: Busy processes: CPU time over a sample of /proc/<pid>/stat (psutil is not pinned in constraints.txt).
#: Another process above 20% of one CPU warns; others together using a whole CPU fail. Our choice.
PROCESS_SAMPLE_S = 0.25
BUSY_PROCESS_PERCENT, BUSY_TOTAL_FAIL_PERCENT = 20.0, 100.0
BUSY_PROCESSES_SHOWN = 5
#: PSI ``some avg10`` of /proc/pressure/memory, the share of the last 10 s in which some task stalled on
#: memory (kernel Documentation/accounting/psi.rst); systemd-oomd acts only at 60% (oomd.conf(5)), long
#: after a timed sample suffers.
MEMORY_PSI_WARN_PERCENT, MEMORY_PSI_FAIL_PERCENT = 1.0, 10.0
#: MemAvailable / MemTotal of /proc/meminfo (memory for new work without swapping, kernel
#: Documentation/filesystems/proc.rst): warn below 20%, fail below 10%. Our choice.
MEM_AVAILABLE_WARN, MEM_AVAILABLE_FAIL = 0.20, 0.10
#: nvidia-smi clock event (throttle) reason bits (NVML ``nvmlClocksEventReasons``): these slow the
#: GPU below its clocks whatever the work, so fail; a software power cap warns.
GPU_SLOWDOWN_FAIL = {
    0x8: "hw slowdown",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake",
}
GPU_SLOWDOWN_WARN = {0x4: "sw power cap"}
GPU_CLOCK_FIELDS = ("clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem")
TUNE = "`python -m pyperf system tune` (as root) applies this and the other pyperf tunings"

#: One check's result: ``{name, status, value, expected, advice}``.
Check = dict[str, Any]
#: ``{pid: (name, ppid, start time, utime + stime in clock ticks)}`` (:func:`process_snapshot`).
Snapshot = dict[int, tuple[str, int, int, int]]
#: What :func:`run_checks` returns: a ``benchtrail doctor --json`` file less its ``schema_version``.
Report = dict[str, Any]

#: Each check's ``expected``, in the order :func:`run_checks` runs them.
EXPECTED = {
    "cpu governor": EXPECTED_GOVERNOR,
    "turbo boost": "disabled",
    "load average": f"at most {LOAD_WARN_PER_CPU * CPUS:g}, half the CPUs",
    "busy processes": f"none above {BUSY_PROCESS_PERCENT:g}% of a CPU",
    "memory pressure": f"at most {MEMORY_PSI_WARN_PERCENT:g}%",
    "memory available": f"at least {MEM_AVAILABLE_WARN:.0%} of memory",
    "gpu clocks": "no slowdown (thermal, power brake, power cap)",
    "gpu processes": "none but ours",
}
CHECK_NAMES = tuple(EXPECTED)


def check(name: str, value: str, advice: str = "", *, fail: bool = False, warn: bool = False) -> Check:
    """One check's result, ``expected`` from :data:`EXPECTED`; ``advice`` only when it warns or fails."""
    status = "fail" if fail else "warn" if warn else "ok"
    return {
        "name": name,
        "status": status,
        "value": value,
        "expected": EXPECTED[name],
        "advice": "" if status == "ok" else advice,
    }


def _unreadable(name: str, why: str) -> Check:
    return check(name, why) | {"status": "unknown"}


def _read(root: Path, rel: str) -> str:
    """The stripped text of ``root/rel``; raises OSError when it cannot be read."""
    return (root / rel).read_text().strip()


# -- CPU ---------------------------------------------------------------------------------------------


def check_governor(root: Path) -> Check:
    """Every CPU's ``cpufreq/scaling_governor`` is ``performance``, else fail; unknown without cpufreq."""
    name = "cpu governor"
    paths = sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    if not paths:
        return _unreadable(name, "no cpufreq in /sys (a VM: the hypervisor sets the frequency)")
    try:
        counts = Counter(p.read_text().strip() or "empty" for p in paths)
    except OSError as exc:
        return _unreadable(name, f"cannot read {Path(exc.filename).relative_to(root)}: {exc.strerror}")
    return check(
        name,
        ", ".join(
            g if len(counts) == 1 else f"{g} on {n} CPU{'s' * (n != 1)}" for g, n in sorted(counts.items())
        ),
        f"`sudo cpupower frequency-set -g {EXPECTED_GOVERNOR}`; {TUNE}",
        fail=set(counts) != {EXPECTED_GOVERNOR},
    )


def check_turbo(root: Path) -> Check:
    """``intel_pstate/no_turbo`` 1 or ``cpufreq/boost`` 0, else warn; unknown when neither exists."""
    name = "turbo boost"
    controls = (
        ("sys/devices/system/cpu/intel_pstate/no_turbo", "1"),
        ("sys/devices/system/cpu/cpufreq/boost", "0"),
    )
    for rel, off in controls:
        try:
            text = _read(root, rel)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return _unreadable(name, f"cannot read {rel}: {exc.strerror}")
        return check(
            name,
            f"{'disabled' if text == off else 'enabled'} ({rel.rsplit('/', 1)[1]}={text})",
            f"`echo {off} | sudo tee /{rel}`: turbo frequency depends on temperature and on how "
            f"many cores are busy; {TUNE}",
            warn=text != off,
        )
    return _unreadable(name, "no intel_pstate/no_turbo or cpufreq/boost in /sys (a VM?)")


def check_load(root: Path) -> Check:
    """1-minute load average of ``/proc/loadavg`` (or ``os.getloadavg()`` under ``/``) per CPU."""
    name = "load average"
    try:
        load = float(_read(root, "proc/loadavg").split()[0])
    except (OSError, ValueError, IndexError) as exc:
        if root != Path("/") or not hasattr(os, "getloadavg"):
            return _unreadable(name, f"cannot read proc/loadavg: {getattr(exc, 'strerror', None) or exc}")
        load = os.getloadavg()[0]
    return check(
        name,
        f"{load:.2f} over 1 min on {CPUS} CPUs",
        "wait for, or stop, the other work here (see busy processes); a runner should run one job at a time",
        fail=load > LOAD_FAIL_PER_CPU * CPUS,
        warn=load > LOAD_WARN_PER_CPU * CPUS,
    )


def process_snapshot(root: Path) -> Snapshot:
    """The snapshot of ``root/proc/<pid>/stat`` (proc(5))."""
    snapshot = {}
    for entry in (root / "proc").glob("[0-9]*"):
        try:
            text = (entry / "stat").read_text()
            left, right = text.find("("), text.rfind(")")
            fields = text[right + 2 :].split()
            snapshot[int(entry.name)] = (
                text[left + 1 : right],
                int(fields[1]),
                int(fields[19]),
                int(fields[11]) + int(fields[12]),
            )
        except (OSError, ValueError, IndexError):
            continue  # the process ended, is not ours to read, or its stat is malformed
    return snapshot


def own_tree(snapshot: Snapshot) -> set[int]:
    """This process and its descendants in ``snapshot``."""
    tree = {os.getpid()}
    while children := {p for p, (_, ppid, _, _) in snapshot.items() if ppid in tree} - tree:
        tree |= children
    return tree


def busy_processes(
    before: Snapshot, after: Snapshot, seconds: float, exclude: set[int]
) -> list[tuple[float, int, str]]:
    """``[(percent of one CPU, pid, name)]``, busiest first, of processes in both snapshots, not excluded."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out = [
        (100.0 * (ticks - before[pid][3]) / tick / seconds, pid, name)
        for pid, (name, _, start, ticks) in after.items()
        if pid not in exclude and pid in before and before[pid][2] == start
    ]
    return sorted((o for o in out if o[0] > 0), reverse=True)


def check_processes(root: Path, sample_s: float = PROCESS_SAMPLE_S) -> Check:
    """CPU use over ``sample_s`` seconds of processes other than this one and its descendants."""
    name = "busy processes"
    start, before = time.monotonic(), process_snapshot(root)
    if not before:
        return _unreadable(name, "no readable proc/<pid>/stat")
    time.sleep(sample_s)
    after = process_snapshot(root)
    others = busy_processes(before, after, time.monotonic() - start, own_tree(after) | own_tree(before))
    busy = [f"{n} (pid {p}) {c:.0f}%" for c, p, n in others if c > BUSY_PROCESS_PERCENT]
    return check(
        name,
        shown(busy, BUSY_PROCESSES_SHOWN) or "none",
        "stop them, or keep them off the benchmark CPUs (isolcpus=, cpusets, `taskset`)",
        warn=bool(busy),
        fail=bool(busy) and sum(c for c, _, _ in others) >= BUSY_TOTAL_FAIL_PERCENT,
    )


# -- memory ------------------------------------------------------------------------------------------


def check_memory_pressure(root: Path) -> Check:
    """PSI ``some avg10`` of ``/proc/pressure/memory``; unknown without PSI."""
    name = "memory pressure"
    try:
        line = next(x for x in _read(root, "proc/pressure/memory").splitlines() if x.startswith("some "))
        avg10 = float(dict(kv.split("=", 1) for kv in line.split()[1:])["avg10"])
    except OSError as exc:
        return _unreadable(
            name,
            f"cannot read proc/pressure/memory ({exc.strerror}: a kernel before 4.20 or booted with psi=0)",
        )
    except (StopIteration, KeyError, ValueError):
        return _unreadable(name, "proc/pressure/memory has no 'some avg10=' field")
    return check(
        name,
        f"PSI some avg10 {avg10:.2f}%",
        "free memory: stop other work, or use a runner with more memory (see memory available)",
        fail=avg10 > MEMORY_PSI_FAIL_PERCENT,
        warn=avg10 > MEMORY_PSI_WARN_PERCENT,
    )


def check_memory_available(root: Path) -> Check:
    """MemAvailable / MemTotal of ``/proc/meminfo``."""
    name = "memory available"
    try:
        fields = dict(line.split(":", 1) for line in _read(root, "proc/meminfo").splitlines() if ":" in line)
        total, available = (int(fields[k].split()[0]) * 1024 for k in ("MemTotal", "MemAvailable"))
    except OSError as exc:
        return _unreadable(name, f"cannot read proc/meminfo: {exc.strerror}")
    except (KeyError, ValueError, IndexError):
        return _unreadable(name, "proc/meminfo lacks MemTotal or MemAvailable")
    share = available / total if total else 0.0
    return check(
        name,
        f"{available / 2**30:.1f} GiB of {total / 2**30:.1f} GiB ({share:.0%})",
        "stop what holds the memory (`ps aux --sort=-rss | head`), or use a runner with more memory",
        fail=share < MEM_AVAILABLE_FAIL,
        warn=share < MEM_AVAILABLE_WARN,
    )


# -- GPU ---------------------------------------------------------------------------------------------


def nvidia_smi(*args: str) -> tuple[str | None, str]:
    """``(stdout, "")`` of ``nvidia-smi ARGS``, or ``(None, why)`` when it is absent or fails."""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvidia-smi: {exc}"
    if done.returncode != 0:
        said = " ".join((done.stdout + done.stderr).split())[:200]
        return None, f"nvidia-smi exited {done.returncode}: {said}"
    return done.stdout, ""


def parse_gpu_clocks(text: str) -> Check:
    """Judge ``nvidia-smi --query-gpu=<GPU_CLOCK_FIELDS>,clocks_event_reasons.active
    --format=csv,noheader,nounits``, a line per GPU, by slowdown reasons only (an idle GPU clocks down)."""
    name = "gpu clocks"
    parts, reasons_seen = [], []
    for i, line in enumerate(x for x in text.strip().splitlines() if x.strip()):
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(GPU_CLOCK_FIELDS) + 1:
            return _unreadable(name, f"unexpected nvidia-smi line {line!r}")
        sm, max_sm, mem, max_mem, active = values
        try:
            mask = int(active, 16)
        except ValueError:
            mask = 0
        reasons_seen += [
            label for bit, label in (GPU_SLOWDOWN_FAIL | GPU_SLOWDOWN_WARN).items() if mask & bit
        ]
        parts.append(f"GPU {i}: sm {sm}/{max_sm} MHz, mem {mem}/{max_mem} MHz")
    if not parts:
        return _unreadable(name, "nvidia-smi listed no GPU")
    return check(
        name,
        "; ".join(parts) + (f"; {', '.join(reasons_seen)}" if reasons_seen else ""),
        "check cooling and power (`nvidia-smi -q -d PERFORMANCE`); lock clocks "
        "with `sudo nvidia-smi -lgc <min>,<max>` below the throttling point",
        warn=bool(reasons_seen),
        fail=bool(set(reasons_seen) & set(GPU_SLOWDOWN_FAIL.values())),
    )


def parse_gpu_processes(text: str, exclude: set[int]) -> Check:
    """Judge ``nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader``:
    any compute process outside ``exclude`` fails."""
    others = []
    for line in text.strip().splitlines():
        fields = [v.strip() for v in line.split(",")]
        if len(fields) >= 3 and fields[0].isdigit() and int(fields[0]) not in exclude:
            others.append(f"{os.path.basename(fields[1])} (pid {fields[0]}, {fields[2]})")
    return check(
        "gpu processes",
        ", ".join(others[:BUSY_PROCESSES_SHOWN]) or "none",
        "stop them: they share the GPU's SMs, memory bandwidth and clocks",
        fail=bool(others),
    )


def gpu_checks(root: Path) -> list[Check]:
    """ "gpu clocks" and "gpu processes" from nvidia-smi when torch sees a CUDA GPU, else both unknown."""
    import torch

    if not torch.cuda.is_available():
        return [
            _unreadable(name, "no CUDA GPU (torch.cuda.is_available() is False)")
            for name in ("gpu clocks", "gpu processes")
        ]
    for reasons in ("clocks_event_reasons", "clocks_throttle_reasons"):  # the latter: drivers before R535
        out, why = nvidia_smi(
            f"--query-gpu={','.join(GPU_CLOCK_FIELDS)},{reasons}.active", "--format=csv,noheader,nounits"
        )
        if out is not None:
            break
    clocks = parse_gpu_clocks(out) if out is not None else _unreadable("gpu clocks", why)
    out, why = nvidia_smi("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")
    processes = (
        parse_gpu_processes(out, own_tree(process_snapshot(root)))
        if out is not None
        else _unreadable("gpu processes", why)
    )
    return [clocks, processes]


# -- report ------------------------------------------------------------------------------------------


def run_checks(root: Path | None = None) -> Report:
    """Run every check on the machine under ``root`` (default ``$BENCHTRAIL_DOCTOR_ROOT``, else ``/``).

    ``{"checks": [...] (in CHECK_NAMES order), "failed": [names], "warned": [names]}``, plus ``"root"`` when
    not ``/``. Takes about ``PROCESS_SAMPLE_S`` s, plus nvidia-smi's time; an unreadable state is ``unknown``.
    """
    root = Path(root or os.environ.get(ROOT_ENV) or "/")
    checks = [
        check_governor(root),
        check_turbo(root),
        check_load(root),
        check_processes(root),
        check_memory_pressure(root),
        check_memory_available(root),
        *gpu_checks(root),
    ]
    report = {
        "checks": checks,
        "failed": [c["name"] for c in checks if c["status"] == "fail"],
        "warned": [c["name"] for c in checks if c["status"] == "warn"],
    }
    if root != Path("/"):
        report["root"] = str(root)
    return report


def format_report(report: Report) -> str:
    """A table of the checks, advice for those not ok, then a verdict line."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="benchtrail doctor: runner checks", title_justify="left")
    for column in ("check", "status", "value", "expected"):
        table.add_column(column, overflow="fold")
    for c in report["checks"]:  # the values as plain text, never read as rich markup
        table.add_row(c["name"], c["status"], Text(c["value"]), Text(c["expected"]))
    console = Console(file=io.StringIO(), width=120, color_system=None, highlight=False)
    console.print(table)
    advice = [f"- {c['name']}: {c['advice']}" for c in report["checks"] if c["advice"]]
    if advice:
        console.print("Advice:", *advice, sep="\n", markup=False)
    failed, warned = report["failed"], report["warned"]
    console.print(
        f"{len(failed)} check(s) failed: {', '.join(failed)}"
        if failed
        else "no check failed" + (f" ({len(warned)} warning(s))" if warned else ""),
        markup=False,
    )
    return console.file.getvalue()


def load_report(path: Path) -> Report:
    """A ``benchtrail doctor --json`` file less its ``schema_version``.

    Raises:
        UserError: unreadable, newer, an unknown or missing field, or a status outside ``STATUSES``.
    """
    from benchtrail import jsonio
    from benchtrail.errors import UserError

    obj = jsonio.read_json(path, kind="doctor report", supported=SCHEMA_VERSION)
    allowed = {"schema_version", "checks", "failed", "warned", "root"}
    if set(obj) - allowed or not {"checks", "failed", "warned"} <= set(obj):
        raise UserError(
            f"doctor report {path}: fields {sorted(obj)}; allowed: {sorted(allowed)} "
            "(checks, failed, warned required)"
        )
    for i, c in enumerate(obj["checks"]):
        if not isinstance(c, dict) or set(c) != {"name", "status", "value", "expected", "advice"}:
            raise UserError(
                f"doctor report {path}: checks[{i}] must have exactly the fields name, status, "
                "value, expected, advice"
            )
        if c["status"] not in STATUSES:
            raise UserError(
                f"doctor report {path}: checks[{i}] has status {c['status']!r}; "
                f"allowed: {', '.join(STATUSES)}"
            )
    del obj["schema_version"]  # read_json checked it
    return obj
