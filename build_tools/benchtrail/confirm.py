"""Re-check the changes a stored baseline suggests in a paired A/B run before calling them confirmed.

A row of ``comparison.json`` that is ``regressed`` and ``unconfirmed``, or ``improved`` (an execution
series compared with a stored baseline), is run again in :mod:`benchtrail.ab` against the baseline
commit on this machine. If the paired run gives the same verdict, the row is marked ``confirmed``;
otherwise the row takes the paired run's verdict (``confirmed`` when that is a change too) and its
reason says what the stored baseline suggested. A re-check that cannot run (a failing arm) leaves the row
``unconfirmed`` and says why. Every re-checked row gets an ``ab`` entry with the paired figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchtrail.ab import Arm, Policy, run_pairs
from benchtrail.compare import compare, count_rows
from benchtrail.environment import collect_environment
from benchtrail.results.schema import ResultsFile
from benchtrail.suite.definitions import RunConfig
from benchtrail.thresholds import Threshold


def suspects(comparison: dict[str, Any], device_name: str | None = None) -> list[dict[str, Any]]:
    """Rows to re-check: execution rows that are ``regressed`` and ``unconfirmed``, or ``improved`` and
    not re-checked yet (of ``device_name`` only, when given: a runner re-checks its own device's rows)."""
    return [r for r in comparison["rows"]
            if r["kind"] == "execution" and device_name in (None, r["device_name"])
            and ((r["verdict"] == "regressed" and r["mark"] == "unconfirmed")
                 or (r["verdict"] == "improved" and not r.get("ab")))]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def _summary(row: dict[str, Any], rounds: int | None) -> dict[str, Any]:
    keys = ("verdict", "reason", "change", "ci_low", "ci_high", "q_value", "base_median", "head_median",
            "base_n", "head_n", "outcome")
    return {**{k: row[k] for k in keys}, "rounds": rounds}


def apply(comparison: dict[str, Any], paired_rows: dict[str, dict[str, Any]], base: Arm, head: Arm,
          device_name: str | None = None) -> dict[str, Any]:
    """A copy of ``comparison`` with each suspect row (of ``device_name``, when given) updated from its
    paired row (by series id). Suspects without a paired row are left unconfirmed, with the reason saying so.
    """
    rows = []
    suspect_ids = {r["id"] for r in suspects(comparison, device_name)}
    for row in comparison["rows"]:
        if row["id"] not in suspect_ids:
            rows.append(row)
            continue
        paired = paired_rows.get(row["id"])
        if paired is None:
            rows.append({**row, "reason": "no paired A/B re-check: the head suite has no such run config"})
            continue
        rounds = (paired["head_details"].get("ab") or {}).get("rounds")
        ab = {**_summary(paired, rounds), "base_commit": base.commit, "head_commit": head.commit}
        if paired["verdict"] == row["verdict"]:
            rows.append({**row, "mark": "confirmed", "ab": ab})
        elif paired["verdict"] in ("regressed", "similar", "improved", "noisy"):
            ci = f"99% CI {_pct(paired['ci_low'])} to {_pct(paired['ci_high'])}"
            changed = paired["verdict"] in ("regressed", "improved")
            rows.append({**row, "verdict": paired["verdict"], "mark": "confirmed" if changed else None, "ab": ab,
                         "reason": f"not confirmed: the stored baseline gave {_pct(row['change'])}, a paired A/B "
                                   f"run on this machine {_pct(paired['change'])} ({ci}, {rounds} rounds)"})
        else:  # the paired run failed: say so, keep the suspicion
            rows.append({**row, "ab": ab, "reason": f"paired A/B re-check {paired['verdict']}: {paired['reason']}"})
    return {**comparison, "rows": rows, "counts": count_rows(rows)}


def recheck(comparison: dict[str, Any], run_configs: dict[str, RunConfig], base: Arm, head: Arm,
            thresholds: tuple[Threshold, ...], policy: Policy, torch_version: str,
            report: Callable[[str, str], None] = lambda name, status: None,
            keep: Path | None = None, device_name: str | None = None) -> dict[str, Any]:
    """Run every suspect row's run config (of ``device_name``, when given) in paired A/B mode and
    :func:`apply` the results.

    ``run_configs`` maps run config id to the head suite's run config. With ``keep``, the paired
    samples are also written there as ``ab-base.json`` and ``ab-head.json`` results files.
    """
    from benchtrail.results.io import write_results

    rcs = tuple(run_configs[r["id"]] for r in suspects(comparison, device_name) if r["id"] in run_configs)
    if not rcs:
        return apply(comparison, {}, base, head, device_name)
    base_records, head_records = run_pairs(rcs, (base, head), thresholds, policy, torch_version, report)
    env = collect_environment(rcs[0].target_device.threads)
    run = {"mode": "paired", "base_commit": base.commit, "head_commit": head.commit}
    files = [ResultsFile(arm.commit, False, run, env, tuple(records))
             for arm, records in ((base, base_records), (head, head_records))]
    if keep is not None:
        for name, f in zip(("ab-base.json", "ab-head.json"), files):
            write_results(keep / name, f)
    paired = {r.id: asdict(r) for r in compare([files[0]], [files[1]], thresholds)}
    return apply(comparison, paired, base, head, device_name)
