"""The main job (``benchtrail pipeline``): export → compile → run → compare → re-check → dashboard →
comment → upload, into one run directory of a store. The commit pointer is written last, so a run that
stopped half-way is never chosen as a baseline."""

from __future__ import annotations

import contextlib
import datetime
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from benchtrail import git, jsonio
from benchtrail.compare.baseline import fetch_baselines, find_baselines
from benchtrail.compare.rules import Rules
from benchtrail.errors import UserError
from benchtrail.github.trust import trust_from_options
from benchtrail.markup import rich_text
from benchtrail.pipeline.measure_stages import (
    compile_stage,
    count_stage,
    counting_devices,
    recheck_run,
    run_stage,
    write_export,
)
from benchtrail.pipeline.report_stages import (
    comment_stage,
    compare_stage,
    dashboard_stage,
    distribution_stage,
    report_baselines,
)
from benchtrail.progress import console
from benchtrail.results.baseline_key import keys_of_results
from benchtrail.results.io import load_results_paths
from benchtrail.runner.ab import Policy
from benchtrail.runner.run_cases import noise_rerun_enabled
from benchtrail.stats.power import check_sample_sizes
from benchtrail.store import open_store
from benchtrail.store.pointer import pointer_info
from benchtrail.suite.definitions import Architecture, Suite
from benchtrail.suite.export import load_execution
from benchtrail.suite.names import slug


@dataclass(frozen=True)
class PipelineResult:
    """Where the main job wrote its outputs, whether every case was ok and whether the re-check stage ran."""

    run_dir: Path
    comment_md: Path
    all_ok: bool
    rechecked: bool


class StageClock:
    """Wall time of each stage of the main job (s), written to the run directory's ``timings.json``
    (docs/schemas/timings.schema.json); a stage timed twice (a run stage per shard) adds up."""

    #: Version history of timings.json: 1 — first version.
    SCHEMA_VERSION = 1

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start

    def write(self, path: Path) -> None:
        jsonio.write_json(
            path,
            {
                "schema_version": self.SCHEMA_VERSION,
                "stages_s": {k: round(v, 3) for k, v in self.seconds.items()},
                "total_s": round(time.perf_counter() - self.started, 3),
            },
        )


#: The main job's re-check: each suspect's paired run until its interval decides, at most 10 s, all of them
#: at most 20 s (CI's ``ab --recheck`` takes 60 s a case: benchmark.yml). On a 2-vCPU VM a sub-millisecond
#: case draws about 13 rounds in 10 s, enough to decide a 5% change against a 2% rule but not to tell a 2%
#: rule from no change (about a minute): an A/A row may end ``inconclusive`` (docs/statistics.md, "Re-check").
RECHECK = Policy(budget_s=10.0, total_budget_s=20.0)


def new_run_id() -> tuple[str, int]:
    """``(GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT)`` in Actions, else ``(local-<yyyymmddThhmmssZ>-<uuid8>, 1)``
    (UTC). Raises UserError for a bad ``GITHUB_RUN_ATTEMPT``."""
    if os.environ.get("GITHUB_RUN_ID"):
        attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
        if not attempt.isdigit() or int(attempt) < 1:
            raise UserError(f"GITHUB_RUN_ATTEMPT must be a whole number >= 1, got {attempt!r}")
        return os.environ["GITHUB_RUN_ID"], int(attempt)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"local-{stamp}-{uuid.uuid4().hex[:8]}", 1


def available_architectures() -> set[Architecture]:
    """CPU always; CUDA when torch sees a GPU."""
    return {Architecture.CPU} | ({Architecture.CUDA} if torch.cuda.is_available() else set())


def run_pipeline(
    suite: Suite,
    presets: tuple[str, ...],
    store_url: str,
    base_commit: str | None = None,
    rules: Rules | None = None,
    repo: Path = Path("."),
    recheck: bool = True,
    any_origin: bool = False,
    name_filter: str | None = None,
    metrics: tuple[str, ...] = ("latency",),
    gate_metric: str = "latency",
) -> PipelineResult:
    """Run the main job; ``name_filter`` is the ``--filter`` that narrowed ``suite``. With ``recheck``,
    regressions are run again in paired A/B mode against the baseline commit when it is in ``repo``.
    ``any_origin`` (``--baseline-any-origin``): a CI run may be the baseline of a local one and the reverse.
    ``metrics`` with ``instructions`` counts each shard's CPU cases after they ran; ``gate_metric``
    ``instructions``: countable cases gate on their counts.

    Raises: UserError for bad presets, run configs with too few samples to show a change, an unwritable
    store, a ``base_commit`` with no stored run, or a bad ``BENCHTRAIL_NOISE_RERUN``.
    """
    # Bad input fails now, not after the benchmarks have run.
    rules = rules or Rules.load()
    noise_rerun_enabled()  # BENCHTRAIL_NOISE_RERUN, read again by the run stage
    selected = suite.select_run_configs(presets)
    check_sample_sizes(selected)  # again by the export, which must not fail
    # no valgrind: refused before the run directory
    counted = counting_devices(selected, metrics, gate_metric=gate_metric)
    here = available_architectures()
    if not any(g.target_architecture in here for g in suite.select_generation_configs(presets)):
        raise UserError(
            f"presets {', '.join(presets)} select nothing this machine can compile or run "
            f"(it has {', '.join(sorted(a.value for a in here))})"
        )
    store = open_store(store_url)
    if base_commit and not store.pointers(git.resolve_commit(repo, base_commit) or base_commit):
        raise UserError(f"--base-commit {base_commit}: the store {store.url} holds no run of that commit")
    run_id, attempt = new_run_id()
    run_dir = store.create_run_dir(run_id, attempt)
    run = {"run_id": run_id, "attempt": attempt, "presets": list(presets)}
    console.print(
        f"[bold]benchtrail[/] run {run_id}/{attempt} · presets {rich_text(', '.join(presets))} · "
        f"{rich_text(run_dir)}",
        soft_wrap=True,
    )  # one line: the terminal wraps a long path

    clock = StageClock()
    configs = run_dir / "run-configs"
    with clock("export"):
        execution = write_export(
            suite, "execution", presets, configs / "execution.json", name_filter=name_filter
        )
        compilation = write_export(suite, "compilation", presets, configs / "compilation.json")

    device_of = {rc.target_device.architecture: rc.target_device.name for rc in reversed(suite.run_configs)}
    all_ok, rechecked = True, False
    with clock("compile"):
        for arch in sorted(here, key=lambda a: a.value):
            all_ok &= compile_stage(compilation, run_dir, device_of[arch], arch, run, repo=repo)[1]

    skipped = []  # devices not run here on purpose: compare must not call their shards unreported
    for device, shards in load_execution(execution).items():
        arch = next(rc.target_device.architecture for rcs in shards.values() for rc in rcs)
        if arch not in here:
            console.print(
                f"[yellow]skipping device {rich_text(device)}[/]: it needs {arch.value}, "
                "which this machine lacks"
            )
            skipped.append(device)
            continue
        for index in sorted(shards):
            output = run_dir / "results" / f"{slug(device)}-{index}.json"
            with clock("run"):
                all_ok &= run_stage(
                    execution,
                    device,
                    index,
                    output,
                    run,
                    modules_dir=run_dir,
                    repo=repo,
                    gate_metric=gate_metric,
                )[1]
            if device in counted:
                with clock("count"):
                    all_ok &= count_stage(
                        execution, device, index, output, run, modules_dir=run_dir, repo=repo
                    )[1]

    commit = git.state(repo)[0]
    trust = trust_from_options("auto", store_url)
    with clock("compare"):
        found = find_baselines(
            store,
            repo,
            commit,
            keys_of_results(load_results_paths([run_dir])),
            trust,
            explicit=base_commit,
            exclude=(run_id, attempt),
            any_origin=any_origin,
        )
        base_results, found = fetch_baselines(store, found)
        report_baselines(found)
        baseline = found.primary
        comparison = compare_stage(
            [],
            [run_dir],
            run_dir / "comparison.json",
            rules,
            found.to_dict(),
            skipped_devices=tuple(skipped),
            base_results=base_results,
            any_origin=any_origin,
            store=store,
        )
    if baseline and recheck:
        if git.resolve_commit(repo, baseline.commit) is None:
            console.print(
                f"[yellow]baseline commit {baseline.commit[:12]} is not in this clone[/]: "
                "regressions stay unconfirmed"
            )
        else:
            with clock("recheck"):
                recheck_run(comparison, repo, suite, rules, RECHECK)
            rechecked = True
    with clock("report"):
        distribution_stage(comparison, base_results, [run_dir], run_dir / "distributions")
        dashboard = dashboard_stage(store, repo, commit, run_id, attempt, run_dir, trust=trust)
        comment_md = comment_stage(
            comparison,
            run_dir / "comment",
            run_url=store.run_url(run_id, attempt),
            dashboard=dashboard.relative_to(run_dir).as_posix() if dashboard else None,
        )
    clock.write(run_dir / "timings.json")
    store.upload_run(run_dir, run_id, attempt)  # nothing to do for a local store
    info = pointer_info(run_dir)
    store.write_pointer(info.pop("commit"), run_id, attempt, info | {"presets": list(presets)})
    return PipelineResult(run_dir, comment_md, all_ok, rechecked)
