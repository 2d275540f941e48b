"""Re-check the changes a stored baseline suggests in a paired A/B run before calling them confirmed.

Suspect execution rows run again against the baseline commit on this machine, largest ``|change|`` first;
the paired run decides each (its verdict and figures, the stored ones kept in ``stored``), unless it
failed or an arm measured something else (:func:`guard`). Rows are rewritten key for key, so an older
comparison keeps its keys. Method: docs/statistics.md, "Paired A/B runs" (re-check).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.compare.document import INCONCLUSIVE, Comparison, Row, count_rows, upgraded
from benchtrail.compare.notes import count_note, regression_mark
from benchtrail.compare.profile_diff import diff_profiles
from benchtrail.compare.rules import Rules
from benchtrail.compare.tables import level_text
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError
from benchtrail.progress import progress_bar
from benchtrail.runner.ab import Arm, Policy, paired_arms, run_pairs, write_paired
from benchtrail.runner.environment import torch_version
from benchtrail.suite.definitions import Suite
from benchtrail.suite.names import slug

#: An ``inconclusive`` row is re-checked when its point estimate is beyond its percent threshold and its
#: Mann–Whitney p is below this; drift between stored runs makes p small, so the time budget bounds the cost.
SCREEN_P = 0.1
#: A paired arm whose median is further than this factor (or 3 × the noise, when larger) from the stored run
#: of its own commit measured something else: its pair is reported, not used.
GUARD_FACTOR = 1.5


def suspects(comparison: Comparison, device_name: str | None = None) -> list[Row]:
    """Execution rows (of ``device_name`` when given) that are ``regressed`` and ``unconfirmed``, or not yet
    re-checked and ``improved`` or screened ``inconclusive``; never instruction rows, nor the ungated wall
    time of a device that gates on instructions."""
    return [
        r
        for r in comparison.rows
        if r.kind == "execution"
        and r.metric != "instructions"
        and device_name in (None, r.device_name)
        and not (r.quarantined and r.head_details.get("gate") == "instructions")
        and (
            (r.verdict == "regressed" and r.mark == "unconfirmed")
            or (not r.ab and (r.verdict == "improved" or (r.verdict in INCONCLUSIVE and _screened(r))))
        )
    ]


def _screened(row: Row) -> bool:
    """The change is beyond the row's percent threshold with p < SCREEN_P."""
    rule = row.threshold or {}
    return (
        rule.get("unit") == "percent"
        and abs(row.change or 0) > rule.get("threshold", 0)
        and row.p_value is not None
        and row.p_value < SCREEN_P
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def _ci(row: Row, level: float | None = None) -> str:
    if row.ci_low is None or row.ci_high is None:
        return _pct(row.change)
    return f"{_pct(row.change)} ({level_text(level)} CI {_pct(row.ci_low)} to {_pct(row.ci_high)})"


#: The figures the paired run replaces when it decides a row; the stored ones go to ``stored``.
DECIDING = ("change", "ci_low", "ci_high", "q_value", "p_value", "mde", "outcome", "noisy")


def _summary(row: Row, run: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "verdict",
        "reason",
        "change",
        "ci_low",
        "ci_high",
        "q_value",
        "base_median",
        "head_median",
        "base_n",
        "head_n",
        "outcome",
        "mde",
        "noisy",
    )
    return {
        **{k: getattr(row, k) for k in keys},
        "rounds": run.get("rounds"),
        **{k: run[k] for k in ("level", "stop") if run.get(k) is not None},
    }


def guard(row: Row, paired: Row) -> dict[str, Any] | None:
    """``{arm, paired_median, stored_median, allowed_factor}`` of the first paired arm whose median departs
    from its own commit's stored median by more than :data:`GUARD_FACTOR`, or 3 × either's IQR/median if
    larger; None when both agree."""
    for arm in ("base", "head"):
        stored, now = getattr(row, f"{arm}_median"), getattr(paired, f"{arm}_median")
        if min(stored or 0, now or 0) <= 0:
            continue
        noise = max((getattr(row, f"{arm}_iqr") or 0) / stored, (getattr(paired, f"{arm}_iqr") or 0) / now)
        allowed = max(GUARD_FACTOR, 1.0 + 3.0 * noise)
        if max(now / stored, stored / now) > allowed:
            return {
                "arm": arm,
                "paired_median": now,
                "stored_median": stored,
                "allowed_factor": round(allowed, 3),
            }
    return None


def _also(reason: str, before: str | None) -> str:
    """``reason``, then ``before`` when there is one."""
    return f"{reason}; {before}" if before and not before.startswith(reason) else reason


_STOPS = {"decided": "decided", "budget": "its time budget spent", "max-rounds": "its rounds spent"}


def _decided(
    row: Row, plain: dict[str, Any], paired: Row, ab: dict[str, Any], accept: Sequence[str]
) -> dict[str, Any]:
    """``plain`` with the paired verdict and figures, the stored ones in ``stored``; the reason gives both."""
    verdict = paired.verdict
    changed = verdict in ("regressed", "improved")
    how = (
        ("confirmed" if verdict == row.verdict else f"found {verdict}")
        if changed
        else "cleared"
        if verdict == "similar"
        else "not decided"
    )
    stop = _STOPS.get(ab.get("stop"), ab.get("stop"))
    noisy = " (noisy)" if row.noisy or row.verdict == "noisy" else ""
    reason = (
        f"{how} by a paired A/B run on this machine: {_ci(paired, ab.get('level'))} after "
        f"{ab.get('rounds')} rounds{f' ({stop})' if stop else ''}; the stored baseline gave "
        f"{_ci(row)}{noisy}"
    )
    if how == "not decided" and paired.reason:
        reason += f"; {paired.reason}"
    return {
        **plain,
        **{k: getattr(paired, k) for k in DECIDING},
        "verdict": verdict,
        "stored": {k: getattr(row, k) for k in ("verdict", *DECIDING)},
        "ab": ab,
        "mark": (
            regression_mark(row, accept) if verdict == "regressed" else "confirmed" if changed else None
        ),
        "reason": reason,
    }


def apply(
    comparison: Comparison,
    paired_rows: Mapping[str, Row],
    base: Arm,
    head: Arm,
    device_name: str | None = None,
    not_reached: dict[str, float] | None = None,
    accept: Sequence[str] = (),
) -> Comparison:
    """A copy of ``comparison`` with each suspect row (of ``device_name`` when given) updated from its paired
    row (by series id); suspects without one stay unconfirmed.

    A found regression is marked ``quarantined``, ``accepted`` (an ``accept`` glob matches its name or id)
    or ``confirmed``. An arm far from its stored run (:func:`guard`) is named in ``ab.guard``, and a change
    found with it is not used. ``not_reached``: suspect id → the total budget (s) that ran out; those rows
    keep their verdict and get ``recheck: "not-reached"``.
    """
    suspect_ids = {r.id for r in suspects(comparison, device_name)}
    commits = {"base_commit": base.commit, "head_commit": head.commit}
    rows = [
        _rechecked(row, plain, paired_rows.get(row.id), commits, (not_reached or {}).get(row.id), accept)
        if row.id in suspect_ids
        else plain
        for row, plain in zip(comparison.rows, comparison.document["rows"])
    ]
    counts = {r.id: r for r in comparison.rows if r.metric == "instructions"}
    for r in rows:  # a suspect's new reason says again what its instructions did
        if r["id"] in suspect_ids and (note := count_note(Row.of(r), counts)):
            r["reason"] = "; ".join(filter(None, (r.get("reason"), note)))
    version = comparison.document.get("schema_version", 1)
    updated = {**comparison.document, "rows": rows, "counts": count_rows([Row.of(r) for r in rows], version)}
    if not_reached or any(r.get("stored") for r in rows):  # keys older comparisons lack: now of this version
        updated = upgraded(updated)
    return Comparison.of(updated)


def _rechecked(
    row: Row,
    plain: dict[str, Any],
    paired: Row | None,
    commits: dict[str, str],
    not_reached_s: float | None,
    accept: Sequence[str],
) -> dict[str, Any]:
    """The suspect's JSON object after its re-check."""
    if not_reached_s is not None:
        reason = f"not re-checked: the re-check's time budget of {not_reached_s:g} s ran out"
        return {**plain, "recheck": "not-reached", "reason": _also(reason, row.reason)}
    if row.recheck:  # re-checked now: the mark of an earlier, time-bounded re-check no longer holds
        plain = {**plain, "recheck": None}
    if paired is None:
        return {
            **plain,
            "reason": _also("no paired A/B re-check: the head suite has no such run config", row.reason),
        }
    ab = {**_summary(paired, paired.head_details.get("ab") or {}), **commits}
    if paired.verdict not in ("regressed", "similar", "improved", "inconclusive"):
        # the paired run failed or measured too little: say so, keep the suspicion
        return {**plain, "ab": ab, "reason": f"paired A/B re-check {paired.verdict}: {paired.reason}"}
    if far := guard(row, paired):
        ab["guard"] = far
    if far and paired.verdict in ("regressed", "improved"):  # never confirmed by such an arm
        now, stored = far["paired_median"], far["stored_median"]
        return {
            **plain,
            "ab": ab,
            "reason": (
                f"paired A/B run not used: its {far['arm']} arm's median {now:.4g} {row.unit} is "
                f"{max(now, stored) / min(now, stored):.1f}x the stored {far['arm']} run's {stored:.4g} "
                f"{row.unit}, more than its noise allows (the arm measured something else); the stored "
                f"baseline gave {_ci(row)}"
            ),
        }
    return _decided(row, plain, paired, ab, accept)


def by_size(rows: Sequence[Row]) -> list[Row]:
    """``rows`` largest ``|change|`` first, ties in order."""
    return sorted(rows, key=lambda r: -abs(r.change or 0))


def baseline_commit(comparison: Comparison, device_name: str | None = None) -> str | None:
    """``device_name``'s own baseline commit (``baseline.devices``), else the baseline's or the base
    results'; None without one."""
    baseline = comparison.baseline or {}
    own = (baseline.get("devices") or {}).get(device_name)
    return (own or {}).get("commit") or baseline.get("commit") or (comparison.base or {}).get("commit")


def recheck(
    comparison: Comparison,
    repo: Path,
    suite: Suite,
    rules: Rules,
    policy: Policy,
    keep: Path,
    run_dir: Path,
    base_ref: str | None = None,
    device_name: str | None = None,
) -> Comparison:
    """``comparison`` with its suspects (of ``device_name`` when given) re-checked in paired A/B runs of the
    head suite against ``base_ref`` (default: :func:`baseline_commit`); itself when it has none.

    The paired samples go to ``keep/ab-{base,head}.json``; ``policy.total_budget_s`` counts from the start,
    checkout included. Profiled rows found regressed get ``profile``, traces in
    ``run_dir/profiles/<slug(name)>/{base,head}.trace.json``.

    Raises:
        UserError: no base commit to re-check against, an unknown ref or a failing ``git worktree``.
    """
    started = time.monotonic()
    rows = by_size(suspects(comparison, device_name))
    if not rows:
        return comparison
    ref = base_ref or baseline_commit(comparison, device_name)
    if not ref:
        raise UserError("the comparison has no base commit to re-check against; pass --base-ref")
    run_configs = {rc.id: rc for rc in suite.run_configs}
    rcs = tuple(run_configs[r.id] for r in rows if r.id in run_configs)
    regressed = {r.id for r in rows if r.verdict == "regressed"}
    base_records, head_records = [], []
    not_reached = {}
    profiles = {}
    plan = policy.profiling
    with (
        paired_arms(repo, ref) as arms,
        progress_bar("re-check in paired A/B", len(rows)) as report,
        tempfile.TemporaryDirectory(prefix="benchtrail-profiles-") as tmp,
    ):
        traces = Path(tmp)  # the profiled cases' traces, until _with_profiles keeps those of regressed rows
        for rc in rcs:
            case = policy
            if policy.total_budget_s is not None:
                left = policy.total_budget_s - (time.monotonic() - started)
                if left <= 0:
                    not_reached[rc.id] = policy.total_budget_s
                    report(rc.name, "not reached")
                    continue
                case = replace(policy, budget_s=min(policy.budget_s, left))
            spent_s = sum(
                ((p or {}).get("wall_ms") or 0.0) / 1e3 for pair in profiles.values() for p in pair.values()
            )
            profile = (
                plan is not None
                and rc.id in regressed
                and len(profiles) < plan.cases
                and spent_s < plan.total_s
            )
            b, h = run_pairs(
                (rc,),
                arms,
                rules.thresholds,
                case,
                torch_version(),
                report,
                {rc.id: traces / rc.id} if profile else None,
                profiles,
            )
            base_records += b
            head_records += h
        files = (
            write_paired(
                [keep / "ab-base.json", keep / "ab-head.json"],
                arms,
                (base_records, head_records),
                rcs[0].target_device.threads,
            )
            if base_records
            else []
        )
        paired = {r.id: r for r in compare(files[:1], files[1:], rules.thresholds)} if files else {}
        return _with_profiles(
            apply(comparison, paired, *arms, device_name, not_reached, rules.accept),
            profiles,
            traces,
            run_dir,
        )


def _with_profiles(
    comparison: Comparison, profiles: Mapping[str, Mapping[str, Any]], traces: Path, run_dir: Path
) -> Comparison:
    """``comparison`` with a ``profile`` on each profiled row found regressed, its traces copied from
    ``traces/<rc id>/`` into ``run_dir/profiles/<slug(name)>/``."""
    rows = []
    for row, plain in zip(comparison.rows, comparison.document["rows"]):
        arms = profiles.get(row.id)
        if arms is None or row.verdict != "regressed" or row.mark == "unconfirmed":
            rows.append(plain)
            continue
        kept = dict.fromkeys(("base", "head"))
        for arm in kept:
            source = traces / row.id / f"{arm}.trace.json"
            if arms.get(arm) and "error" not in arms[arm] and source.is_file():
                kept[arm] = f"profiles/{slug(row.name)}/{arm}.trace.json"
                jsonio.write_bytes_atomic(run_dir / kept[arm], source.read_bytes())
        diff = diff_profiles(arms.get("base"), arms.get("head"), kept)
        rows.append({**plain, "profile": diff} if diff else plain)
    return Comparison.of({**comparison.document, "rows": rows})
