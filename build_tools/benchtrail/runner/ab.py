"""Paired A/B runs: base and head run cases interleaved on one machine, each arm in its own workers.

The base commit is checked out in a temporary ``git worktree``; each arm's workers import that arm's
checkout, with the head's run config. Sample j of a round's base worker pairs with sample j of its head
worker (rounds are clusters); rounds are added while inconclusive, within a time budget per case. In duet
mode both arms' workers run at once, each on its own CPUs. Method: docs/statistics.md, "Paired A/B runs".
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchtrail import jsonio
from benchtrail.compare.rules import Threshold, find_threshold
from benchtrail.errors import UserError
from benchtrail.git import add_worktree, remove_worktree, resolve_commit, state, toplevel
from benchtrail.results.io import write_results
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.runner import environment
from benchtrail.runner.adaptive import sample_until_settled
from benchtrail.runner.compile_modules import module_info
from benchtrail.runner.duet import applies, barrier, duet_cpus
from benchtrail.runner.launch import can_fork, features_of, pythonpath, run_in_worker
from benchtrail.runner.run_cases import CaseResult, Progress, case_record, compiled_dir
from benchtrail.runner.server_pool import kill_live_workers
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.definitions import Architecture, RunConfig
from benchtrail.suite.entry_points import ARTIFACTS
from benchtrail.worker.protocol import Response, compile_request, duet_spec, profile_spec, run_request


@dataclass(frozen=True)
class Arm:
    """One side of a paired run: ``name`` is ``base`` or ``head``; ``root`` its checkout."""

    name: str
    commit: str
    root: Path

    def env(self) -> dict[str, str]:
        """``PYTHONPATH``: this checkout's project folder, its ``build_tools`` and top level, then the
        inherited one; ahead of site-packages, so each arm imports its own commit's code even if installed."""
        from benchtrail.project import import_root

        top, root, ours = toplevel(self.root) or self.root, import_root(), toplevel(Path("."))
        try:  # none outside a project or a git repository
            first = str(top / root.resolve().relative_to(Path(ours).resolve())) if root and ours else ""
        except ValueError:
            first = ""
        return {"PYTHONPATH": pythonpath(first, str(top / "build_tools"), str(top))}


@dataclass(frozen=True)
class Profiling:
    """How much a re-check profiles: at most ``cases`` suspected regressions, largest change first, within
    ``total_s`` s in all; each arm at most ``iterations`` iterations, fewer past ``arm_budget_ms`` ms at its
    median sample time."""

    cases: int = 2
    total_s: float = 20.0
    iterations: int = 20
    arm_budget_ms: float = 2000.0


@dataclass(frozen=True)
class Policy:
    """How long a paired case may run.

    Attributes:
        min_rounds: rounds always run (default: the run config's ``processes``).
        max_rounds: rounds at most, one worker per arm each; None: until decided or ``budget_s`` is spent.
        budget_s: no new round starts after this many seconds of a case.
        seed: seeds each round's arm order and the bootstrap.
        total_budget_s: a re-check starts no case after this many seconds and gives each at most the seconds
            left; None: unbounded.
        profiling: how a re-check profiles suspected regressions; None: not at all.
        sequential: each look spends its share of the 1% false-alarm rate (Lan–DeMets, Pocock type, over
            the time budget or ``max_rounds``); False: every look at 99% (needs ``max_rounds``).
        duet: ``auto`` (4 CPUs or more), ``on`` or ``off``: both arms' workers at once, each on its own CPUs,
            swapped every round, where that applies; else one arm after the other.
    """

    min_rounds: int | None = None
    max_rounds: int | None = None
    budget_s: float = 60.0
    seed: int = 0
    total_budget_s: float | None = None
    profiling: Profiling | None = Profiling()
    sequential: bool = True
    duet: str = "auto"


def resolve_ref(repo: Path, ref: str) -> str:
    """The full commit sha of ``ref``; raises UserError when git lacks it (e.g. a shallow clone)."""
    if commit := resolve_commit(repo, ref):
        return commit
    raise UserError(
        f"--base-ref {ref!r} is not a commit in {repo.resolve()}; in a shallow clone fetch "
        f"it first: git fetch --depth=1 origin {ref}"
    )


@contextlib.contextmanager
def base_worktree(repo: Path, commit: str) -> Iterator[Path]:
    """``commit`` in a temporary ``git worktree``, removed afterwards; UserError if git cannot add it."""
    with tempfile.TemporaryDirectory(prefix="benchtrail-ab-") as tmp:
        path = Path(tmp, "base")
        if not add_worktree(repo, path, commit):
            raise UserError(f"git worktree add {path} {commit[:12]} failed in {repo.resolve()}")
        try:
            yield path
        finally:
            remove_worktree(repo, path)


@contextlib.contextmanager
def paired_arms(repo: Path, base_ref: str) -> Iterator[tuple[Arm, Arm]]:
    """(base, head): ``base_ref``'s commit in a temporary worktree, and ``repo``'s working tree; raises
    UserError for an unknown ref or a failing ``git worktree``."""
    head = Arm("head", state(repo)[0], repo.resolve())
    commit = resolve_ref(repo, base_ref)
    with base_worktree(repo, commit) as root:
        yield Arm("base", commit, root), head


def write_paired(
    paths: list[Path],
    arms: tuple[Arm, Arm],
    records: tuple[list[BenchmarkRecord], ...],
    threads: int,
    head_dirty: bool = False,
) -> list[ResultsFile]:
    """Write the (base, head) results files of a paired run's ``records`` to ``paths``."""
    run = {"mode": "paired", "base_commit": arms[0].commit, "head_commit": arms[1].commit}
    env = environment.collect_environment(threads)
    files = [
        ResultsFile(arm.commit, arm.name == "head" and head_dirty, run, env, tuple(recs))
        for arm, recs in zip(arms, records)
    ]
    for path, results in zip(paths, files):
        write_results(path, results)
    return files


def start_method_of(arms: tuple[Arm, Arm]) -> str:
    """``fork`` when both arms' checkouts have a worker server, else ``spawn`` for both, so neither arm's
    samples carry a start-up cost the other's lack."""
    return "fork" if all(can_fork(arm.env(), arm.root) for arm in arms) else "spawn"


class _ArmFailed(Exception):
    """args: (arm name, its result, why); the other arm's result is skipped ``the <arm> arm <why>``."""


def _compile_artifacts(
    rc: RunConfig, arms: tuple[Arm, Arm], work: Path, method: str
) -> dict[str, Path | None]:
    """Compile export/AOTInductor modules once per arm: ``{arm name: module dir}``; raises _ArmFailed."""
    gen = rc.module_generation_config
    dirs = dict.fromkeys(arm.name for arm in arms)
    if gen.compile_config.mode not in ARTIFACTS:
        return dirs
    version = environment.torch_version()
    for arm in arms:
        module_dir = compiled_dir(rc, work / arm.name)
        module_dir.mkdir(parents=True, exist_ok=True)
        response = run_in_worker(
            compile_request(gen, module_dir, explain=False),
            rc.execution_config.timeout_s * 4,
            rc.target_device.threads,
            arm.env(),
            arm.root,
            method,
        )
        if not response.ok:
            raise _ArmFailed(
                arm.name, CaseResult(response.status, f"compiling: {response.reason}"), "failed to compile"
            )
        # load_artifact reads the module's mode from module_info.json, as the compile stage writes it.
        jsonio.write_json(
            module_dir / "module_info.json", module_info(gen, content_hash(gen, version), version)
        )
        dirs[arm.name] = module_dir
    return dirs


def run_pair(
    rc: RunConfig,
    arms: tuple[Arm, Arm],
    threshold: Threshold,
    policy: Policy,
    work: Path,
    method: str,
    profile_dir: Path | None,
) -> tuple[CaseResult, CaseResult]:
    """Run one case in both arms, interleaved, until settled: the (base, head) results.

    Each holds its arm's samples (µs per iteration), ``process_medians``, the last answer and ``ab`` (rounds,
    arm orders, outcome, the last look's ``level``). A failing arm's result carries the failure, the other's
    is ``skipped``; a failing case raises nothing. With ``profile_dir``, each arm's first-round worker
    profiles after its samples into ``<profile_dir>/<arm name>.trace.json``; ``profile`` is None from a
    worker that predates profiling.
    """
    rng = np.random.default_rng([policy.seed, int(rc.id[:8], 16)])
    results = {arm.name: CaseResult("ok", process_medians=[]) for arm in arms}
    orders = []
    plan = policy.profiling or Profiling()
    specs = (
        {
            arm.name: profile_spec(
                profile_dir / f"{arm.name}.trace.json", plan.iterations, plan.arm_budget_ms
            )
            for arm in arms
        }
        if profile_dir is not None
        else {}
    )  # cleared after the first round
    threads = rc.target_device.threads
    pins = (
        duet_cpus(threads)
        if applies(
            policy.duet,
            threads,
            rc.target_device.architecture is Architecture.CPU,
            method == "fork" and all("duet" in features_of(arm.env(), arm.root) for arm in arms),
        )
        else None
    )
    cpus = []  # per duet round: [base CPUs, head CPUs]

    def one(arm: Arm, barrier_path: str | None = None) -> Response:
        duet = duet_spec(barrier_path, cpus[-1][arm.name == "head"]) if barrier_path else None
        return run_in_worker(
            run_request(rc, dirs[arm.name], specs.get(arm.name), duet),
            rc.execution_config.timeout_s,
            threads,
            arm.env(),
            arm.root,
            method,
        )

    def draw() -> tuple[list[float], list[float]]:
        order = [arms[i] for i in rng.permutation(2)]
        orders.append([arm.name for arm in order])
        if pins is None:
            answers = {arm.name: one(arm) for arm in order}
        else:  # both at once; the arms swap CPUs every round
            swap = len(orders) % 2 == 0
            cpus.append([list(pins[swap]), list(pins[not swap])])
            answers = _at_once(order, one)
        for arm in order:
            response, result = answers[arm.name], results[arm.name]
            synced = (response.duet or {}).get("synced")
            if response.ok and pins is not None and synced != len(response.samples or ()):
                response = replace(
                    response,
                    status="failed",
                    reason=(
                        f"duet: the worker started {synced or 0} of its "
                        f"{len(response.samples or ())} samples at the barrier"
                    ),
                )
            if not response.ok:
                raise _ArmFailed(arm.name, CaseResult.of(response), f"failed: {response.reason}")
            if arm.name in specs:
                result.profile = response.profile
            result.take(response)
        specs.clear()  # only the first round's workers profile
        return list(answers["base"].samples or ()), list(answers["head"].samples or ())

    try:
        dirs = _compile_artifacts(rc, arms, work, method)
        settled = sample_until_settled(
            draw,
            threshold_pct=threshold.threshold,
            lower_is_better=threshold.lower_is_better,
            min_rounds=policy.min_rounds or rc.execution_config.processes,
            max_rounds=policy.max_rounds,
            budget_s=policy.budget_s,
            seed=policy.seed,
            paired=True,
            cluster_rounds=True,
            sequential=policy.sequential,
        )
    except _ArmFailed as exc:
        arm, failed, why = exc.args
        skipped = CaseResult("skipped", f"the {arm} arm {why}")
        return (failed, skipped) if arm == "base" else (skipped, failed)
    info = {
        "rounds": settled.rounds,
        "orders": orders,
        "outcome": settled.outcome,
        "stop": settled.stop,
        "elapsed_s": round(settled.elapsed_s, 3),
        "start_method": method,
        "level": settled.level,
        **({"mode": "paired"} if pins is None else {"mode": "duet", "cpus": cpus}),
    }
    for result in results.values():
        result.ab = info
    return results["base"], results["head"]


def _at_once(order: list[Arm], job: Callable[[Arm, str], Any]) -> dict[str, Any]:
    """``{arm name: job(arm, barrier path)}``, both at once in threads sharing one duet barrier; a job's
    exception is raised here."""
    results, errors = {}, []
    with barrier() as b:

        def run(arm: Arm) -> None:
            try:
                results[arm.name] = job(arm, b.path)
            except BaseException as exc:
                errors.append(exc)
            finally:
                b.leave()  # the other arm's worker no longer waits for this one

        workers = [
            threading.Thread(target=run, args=(arm,), name=f"benchtrail-duet-{arm.name}", daemon=True)
            for arm in order
        ]
        for w in workers:
            w.start()
        try:
            for w in workers:
                w.join()
        except BaseException:  # Ctrl-C or SIGTERM reach only this thread: the threads cannot kill them
            kill_live_workers()
            raise
    if errors:
        raise errors[0]
    return results


def run_pairs(
    run_configs: tuple[RunConfig, ...],
    arms: tuple[Arm, Arm],
    thresholds: tuple[Threshold, ...],
    policy: Policy,
    torch_version: str,
    report: Progress,
    profile_dirs: dict[str, Path] | None = None,
    profiles: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[BenchmarkRecord], ...]:
    """(base records, head records), one per case, of paired runs in order.

    Cases in ``profile_dirs`` are profiled into that folder; ``profiles``, when given, receives
    ``{rc id: {"base": profile or None, "head": profile or None}}`` of those whose arms both ran.
    """
    records = ([], [])
    method = start_method_of(arms) if run_configs else "spawn"
    with tempfile.TemporaryDirectory(prefix="benchtrail-ab-modules-") as work:
        for rc in run_configs:
            profile_dir = (profile_dirs or {}).get(rc.id)
            b, h = run_pair(
                rc,
                arms,
                find_threshold(thresholds, "execution", "latency", rc.name),
                policy,
                Path(work),
                method,
                profile_dir,
            )
            if profiles is not None and profile_dir is not None and b.ok and h.ok:  # both arms ran
                profiles[rc.id] = {"base": b.profile, "head": h.profile}
            for arm_records, result in zip(records, (b, h)):
                arm_records.append(case_record(rc, result, torch_version))
            report(rc.name, h.status)
    return records
