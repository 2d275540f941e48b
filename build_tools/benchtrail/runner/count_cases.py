"""The counting pass: instructions per call of a shard's eager and export CPU cases, as series
``<run config id>-instructions``.

One callgrind process per shard counts the cases in turn; a failing case is recorded ``failed``, a process
that dies or passes ``CASE_TIMEOUT_S`` on a case is replaced for the rest. ``details.counter`` is the
counter key (counts under different keys are never compared); ``details.callgrind`` the last repeat's
callgrind file, relative to the run directory. Method: docs/statistics.md, "Instruction counts".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchtrail.errors import UserError
from benchtrail.results.schema import BenchmarkRecord
from benchtrail.runner.launch import MALLOC_TUNABLES, worker_pythonpath
from benchtrail.runner.run_cases import (
    Progress,
    cache_env,
    case_fields,
    compiled_dir,
    countable,
    module_problem,
)
from benchtrail.runner.server_pool import kill_group, tail
from benchtrail.suite.definitions import RunConfig
from benchtrail.suite.names import slug
from benchtrail.worker.protocol import ProtocolError, Response, count_requests, read_response, run_request

#: Repeats counted of each case (one sample each).
REPEATS = 5
#: Seconds one case may take under callgrind (build, warm-up and repeats) before its process is replaced.
CASE_TIMEOUT_S = 900.0
#: valgrind's arguments (before ``--callgrind-out-file``): nothing instrumented or collected until the
#: counting worker asks.
VALGRIND_ARGS = ("--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no", "--dump-instr=no", "-q")
#: The counting process's kernels: no FMA, which valgrind emulates slowly (a 512² matmul: 16 s with MKL's
#: AVX2 kernels, 0.1 s with AVX). The ISA torch dispatched on is in the counter key.
NO_FMA = {"MKL_ENABLE_INSTRUCTIONS": "AVX", "ONEDNN_MAX_CPU_ISA": "AVX", "ATEN_CPU_CAPABILITY": "default"}
INSTALL = "install valgrind (Debian/Ubuntu: sudo apt-get install valgrind; Fedora: sudo dnf install valgrind)"


def valgrind_version(otherwise: str = "or measure --metrics latency only") -> str:
    """valgrind's version, e.g. ``3.19.0``; UserError when valgrind or vgdb is not on ``PATH``, its install
    advice followed by ``otherwise``."""
    for tool in ("valgrind", "vgdb"):
        if shutil.which(tool) is None:
            raise UserError(
                f"the instructions metric counts with callgrind, and {tool} is not on PATH: "
                f"{INSTALL}, {otherwise}"
            )
    return (
        subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
        .stdout.strip()
        .removeprefix("valgrind-")
    )


def counting_env(extra: dict[str, str]) -> dict[str, str]:
    """Ours, :data:`NO_FMA`, ``PYTHONHASHSEED=0``, one OpenMP thread, the workers' ``PYTHONPATH`` and malloc
    tunables, ``PYTHONMALLOC=malloc`` (Python's arenas made counts depend on history: docs/statistics.md),
    then ``extra``."""
    return {
        **os.environ,
        **NO_FMA,
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "PYTHONMALLOC": "malloc",
        "PYTHONPATH": worker_pythonpath(),
        "GLIBC_TUNABLES": ":".join(filter(None, (os.environ.get("GLIBC_TUNABLES"), MALLOC_TUNABLES))),
        **extra,
    }


def cpu_vendor() -> str:
    """The CPU vendor (``vendor_id`` of ``/proc/cpuinfo``, e.g. ``GenuineIntel``), ``unknown`` elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _process(
    todo: list[RunConfig], folder: Path, modules_dir: Path | None, env: dict[str, str], report: Progress
) -> dict[str, Response]:
    """Count ``todo`` in one callgrind process: its answers, in order, and ``failed``/``timeout`` for the case
    it died or timed out on (the rest are left for a new process); dead before its first case, all fail."""
    requests = [run_request(rc, compiled_dir(rc, modules_dir)) for rc in todo]
    with tempfile.TemporaryDirectory(prefix="benchtrail-count-") as tmp:
        spec, journal, log = Path(tmp) / "requests.json", Path(tmp) / "journal.jsonl", Path(tmp) / "log"
        spec.write_text(json.dumps(count_requests(requests, REPEATS, folder)), encoding="utf-8")
        journal.touch()
        command = [
            "valgrind",
            *VALGRIND_ARGS,
            f"--callgrind-out-file={folder}/callgrind.out.%p",
            sys.executable,
            "-m",
            "benchtrail.worker.counting",
            str(spec),
            str(journal),
        ]
        answers = {}

        def got(response: Response) -> None:
            rc = todo[len(answers)]
            answers[rc.id] = response
            report(rc.name, response.status)

        started, lines, began = time.monotonic(), 0, False
        with log.open("wb") as out:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                while True:
                    code = proc.poll()
                    text = journal.read_text(encoding="utf-8")
                    for line in text[: text.rfind("\n") + 1].splitlines()[lines:]:  # whole lines only
                        lines += 1
                        try:
                            data = json.loads(line)
                            if "start" in data:
                                started, began = time.monotonic(), True
                                continue
                            data.pop("case", None)  # cases are answered in order
                            got(read_response(data))
                        except (ValueError, ProtocolError) as exc:  # JSONDecodeError is a ValueError
                            got(Response("failed", f"counting process: unreadable answer: {exc}"))
                    if len(answers) == len(todo):
                        try:
                            proc.wait(timeout=60)
                        except subprocess.TimeoutExpired:  # a hang at exit: the counts are in
                            kill_group(proc.pid)
                        return answers
                    if code is not None:
                        why = (
                            f"the counting process exited with code {code}: "
                            f"{tail(log.read_text(errors='replace'))}"
                        )
                        for _ in range(1 if began else len(todo) - len(answers)):  # dead at start: all
                            got(Response("failed", why))
                        return answers
                    if time.monotonic() - started > CASE_TIMEOUT_S:
                        kill_group(proc.pid)
                        proc.wait()
                        got(Response("timeout", f"not counted within {CASE_TIMEOUT_S:g} s under callgrind"))
                        return answers
                    time.sleep(0.2)
            except BaseException:  # Ctrl-C or SIGTERM: never leave valgrind behind
                kill_group(proc.pid)
                proc.wait()
                raise


def count_cases(
    run_configs: tuple[RunConfig, ...],
    torch_version: str,
    results_dir: Path,
    modules_dir: Path | None,
    report: Progress,
) -> list[BenchmarkRecord]:
    """The ``instructions`` records of ``run_configs``' countable cases, in order; callgrind files under
    ``<results_dir>/callgrind/<slug(name)>.out``. Raises UserError without valgrind."""
    counter = {"counter": "callgrind", "valgrind": valgrind_version(), "cpu": cpu_vendor()}
    cpu = [rc for rc in run_configs if countable(rc)]
    problems = {rc.id: modules_dir and module_problem(rc, modules_dir) for rc in cpu}
    env = counting_env(cache_env(modules_dir))
    folder = results_dir / "callgrind"
    folder.mkdir(parents=True, exist_ok=True)
    todo, answers = [rc for rc in cpu if not problems[rc.id]], {}
    with tempfile.TemporaryDirectory(prefix="benchtrail-callgrind-") as dumps:
        while todo:
            answers.update(_process(todo, Path(dumps), modules_dir, env, report))
            todo = [rc for rc in todo if rc.id not in answers]
        records = []
        for rc in cpu:
            answer = answers.get(rc.id) or Response("failed", problems[rc.id])
            records.append(instruction_record(rc, answer, torch_version, counter, folder))
            if problems[rc.id]:
                report(rc.name, answer.status)
    return records


def instruction_record(
    rc: RunConfig, answer: Response, torch_version: str, counter: dict[str, str], folder: Path
) -> BenchmarkRecord:
    """A counting answer's series; ``counter`` is its key less the answer's ISA; its callgrind file is moved
    into ``folder`` (``<results dir>/callgrind``; ``details.callgrind`` relative to two levels up)."""
    details = {
        k: getattr(answer, k)
        for k in ("iterations_per_sample", "warmup_iterations", "overhead", "threads")
        if getattr(answer, k) is not None
    }
    if answer.ok:
        details["counter"] = {**counter, "cpu": f"{counter['cpu']} {answer.cpu_capability}"}
        if answer.callgrind:
            kept = folder / f"{slug(rc.name)}.out"
            shutil.move(answer.callgrind, kept)
            details["callgrind"] = kept.relative_to(folder.parent.parent).as_posix()
    return BenchmarkRecord.of(
        "instructions",
        tuple(answer.instructions or ()) if answer.ok else (),
        id=f"{rc.id}-instructions",
        name=f"{rc.name}.instructions",
        status=answer.status,
        reason=answer.reason,
        details=details,
        **case_fields(rc, torch_version),
    )
