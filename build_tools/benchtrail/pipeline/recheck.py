"""The re-check stage: paired A/B runs of a comparison's suspected changes, on this machine.

It comes after the compare stage and before the comment: the compare stage writes ``comparison.json``
from the results alone; this stage runs the suspects (``benchtrail.runner.recheck.suspects``)
against the baseline commit in a base worktree and writes the comparison again with their marks,
``ab`` entries and reasons (``benchtrail.runner.recheck.apply``).
"""

from __future__ import annotations

import time
from pathlib import Path

from benchtrail import jsonio
from benchtrail.compare.document import Comparison, load_comparison
from benchtrail.compare.rules import Rules
from benchtrail.errors import UserError
from benchtrail.pipeline.measure import paired_arms
from benchtrail.pipeline.report import comment_stage
from benchtrail.progress import track
from benchtrail.results.io import load_results_paths
from benchtrail.runner.ab import Policy
from benchtrail.runner.environment import torch_version
from benchtrail.runner.recheck import recheck_suspects, suspects
from benchtrail.suite.definitions import Suite


def baseline_commit(comparison: Comparison, device_name: str | None = None) -> str | None:
    """The commit a re-check runs against: ``device_name``'s own baseline (``baseline.devices``, comparison
    version 6) when it has one, else the baseline's (or the base results') commit; None without one."""
    baseline = comparison.baseline or {}
    own = (baseline.get("devices") or {}).get(device_name)
    return (own or {}).get("commit") or baseline.get("commit") or (comparison.base or {}).get("commit")


def recheck_comparison(comparison: Comparison, repo: Path, suite: Suite, rules: Rules, policy: Policy,
                       keep: Path | None = None, base_ref: str | None = None, device_name: str | None = None,
                       run_dir: Path | None = None) -> Comparison:
    """``comparison`` with its suspected changes (of ``device_name`` only, when given) re-checked in paired
    A/B runs against ``base_ref`` (default: :func:`baseline_commit`), on this machine, largest change
    first; ``comparison`` itself when it has no suspect. ``policy.total_budget_s`` (seconds) counts from
    the start of the re-check, the base worktree's checkout included; a regression found now that a
    ``rules.accept`` glob matches is marked ``accepted`` (``benchtrail.runner.recheck.recheck_suspects``).
    With ``keep``, the paired samples are written there (``ab-base.json``, ``ab-head.json``). With ``run_dir``
    (and ``policy.profiling``), the first suspected regressions are profiled too: rows found regressed get
    ``profile`` and their traces are written to ``run_dir/profiles/<slug(name)>/{base,head}.trace.json``.

    Raises:
        UserError: no base commit to re-check against, an unknown ref or a failing ``git worktree``.
    """
    started = time.monotonic()
    found = suspects(comparison, device_name)
    if not found:
        return comparison
    ref = base_ref or baseline_commit(comparison, device_name)
    if not ref:
        raise UserError("the comparison has no base commit to re-check against; pass --base-ref")
    with paired_arms(repo, ref) as (base, head), track("re-check in paired A/B", len(found)) as report:
        return recheck_suspects(comparison, {rc.id: rc for rc in suite.run_configs}, base, head, rules,
                                policy, torch_version(), report, keep, device_name, started, run_dir)


def recheck_run(comparison: Path, repo: Path, suite: Suite, rules: Rules, policy: Policy,
                keep: Path | None = None) -> Path:
    """The pipeline's re-check stage: re-check the suspects of the run's ``comparison.json``
    (:func:`recheck_comparison`, profiling into the run directory, the comparison's folder) and write it again
    in place when any was re-checked; return its path.

    Raises:
        UserError: a bad comparison file, and as :func:`recheck_comparison`.
    """
    before = load_comparison(comparison)
    after = recheck_comparison(before, repo, suite, rules, policy, keep, run_dir=comparison.parent)
    if after is not before:
        jsonio.write_json(comparison, after.document)
    return comparison


def recheck_stage(comparison: Path, output_dir: Path, repo: Path, suite: Suite, rules: Rules, policy: Policy,
                  base_ref: str | None = None, device_name: str | None = None) -> tuple[Path, bool]:
    """``benchtrail ab --recheck``: re-check the suspected regressions of ``comparison`` (of ``device_name``
    only, when given; by ``rules``: :func:`recheck_comparison`); write the updated ``comparison.json``, the
    paired samples (``results/ab-base.json``, ``results/ab-head.json``, when a case ran), the profiles of
    suspected regressions (``profiles/``: :func:`recheck_comparison`) and ``comment/`` under ``output_dir``.

    Returns (comment.md, whether both arms of every paired case run now were ok: False when an arm
    of a re-check failed; True when there was nothing to re-check). Rows that were ``failed`` in
    ``comparison`` itself do not count.

    Raises:
        UserError: a bad comparison file, outputs that exist already, no base commit to re-check
            against, an unknown ref or a failing ``git worktree``.
    """
    obj = load_comparison(comparison)
    jsonio.check_new(output_dir / "comparison.json")
    updated = recheck_comparison(obj, repo, suite, rules, policy, output_dir / "results", base_ref,
                                 device_name, output_dir)
    path = jsonio.write_json(output_dir / "comparison.json", updated.document, exclusive=True)
    paired = [p for p in (output_dir / "results" / f"ab-{side}.json" for side in ("base", "head"))
              if p.exists()]
    ok = all(b.status == "ok" for f in load_results_paths(paired) for b in f.benchmarks)
    return comment_stage(path, output_dir / "comment"), ok
