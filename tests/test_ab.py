"""Paired A/B runs and the re-check of suspected regressions, on a real git repository of two commits.

The model's code lives in the temporary repository (``slowmod.py``), so each arm's workers import
that arm's version of it: the base commit sleeps 10 ms and adds 1 to a tensor, the head commit sleeps 40 ms.
"""

import json
from dataclasses import asdict, replace

import pytest

from benchmark_suites import devices
from benchtrail.cli import main
from benchtrail.compare.document import SCHEMA_VERSION, Comparison, Row, count_rows
from benchtrail.compare.rules import Rules
from benchtrail.errors import UserError
from benchtrail.pipeline.measure_stages import ab_stage, recheck_stage
from benchtrail.runner.ab import Arm, Policy, base_worktree, resolve_ref
from benchtrail.runner.duet import duet_cpus
from benchtrail.runner.recheck import suspects
from benchtrail.stats.sequential import look_alphas
from benchtrail.suite.definitions import (
    CompileConfig,
    CompileMode,
    ExecutionConfig,
    Model,
    ModuleGenerationConfig,
    RunConfig,
    Suite,
    Task,
)
from tests.helpers.git import git, two_commit_repo
from tests.helpers.records import apply_recheck

#: Both arms sleep, so their times vary little between worker processes: a bare ``x + 1`` (5 µs)
#: differed by up to 50% between processes on a shared VM, enough to make a row ``noisy``. Sleeps of
#: 10 ms, not 1 ms: under the full test suite's load on 2 cores a wake-up came late by up to a few ms,
#: which made a 1 ms arm's IQR/median pass 25% (``noisy``) in one run of several.
FAST = ("import time\n\nimport torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        time.sleep(0.010)\n        return x + 1\n\n\ndef model():\n    return M()\n")
SLOW = FAST.replace("time.sleep(0.010)", "time.sleep(0.040)")
#: 10 samples: a first look of one round can then decide under sequential sampling (``Policy.sequential``):
#: with ``--max-rounds 2`` it has alpha 0.0062, and the smallest Wilcoxon p of 8 pairs is 2/2^8 = 0.0078, of
#: 10 pairs 0.002.
EXEC = ExecutionConfig("exec-ab", "inference-bs1", Task.INFERENCE, processes=1, min_samples=10,
                       min_sample_time_ms=5.0, warmup_time_ms=5, timeout_s=60)
#: A loose rule, so that only the 30 ms sleep counts on a loaded 2-core machine.
LOOSE = ("schema_version: 1\nthresholds:\n  - {match: '*', unit: percent, threshold: 50, direction: "
         "lower-is-better}\n")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose HEAD~1 has the fast model and HEAD the slow one, importable here as the
    head suite's models are (the content hash reads the model's source)."""
    root = two_commit_repo(tmp_path / "repo", "slowmod.py", FAST, SLOW)
    (tmp_path / "thresholds.yaml").write_text(LOOSE)
    monkeypatch.syspath_prepend(str(root))
    return root


def _rc(device=devices.C2_STANDARD_16) -> RunConfig:
    model = Model("model-slowmod", "slowmod", ("test",), "slowmod:model", ("8xf32",))
    gen = ModuleGenerationConfig.build(model, CompileConfig("compile-eager", "eager", CompileMode.EAGER),
                                       device.architecture)
    return RunConfig.build(gen, EXEC, device, presets=("test",))


def test_paired_run_confirms_the_slowdown_of_the_head_commit(repo, tmp_path):
    # In duet (issue 21): a 1-thread case, so each arm gets one CPU of this 2-CPU machine. The other tests run
    # paired mode, which ``--duet auto`` chooses on fewer than 4 CPUs.
    out = tmp_path / "ab"
    comment = ab_stage(repo, "HEAD~1", (_rc(replace(devices.C2_STANDARD_16, threads=1)),), out,
                       Rules.load(tmp_path / "thresholds.yaml"),
                       Policy(min_rounds=2, max_rounds=2, seed=3, duet="on"))
    comparison = json.loads((out / "comparison.json").read_text())
    (row,) = comparison["rows"]
    assert (row["verdict"], row["mark"], row["outcome"]) == ("regressed", "confirmed", "DIFFERENT")
    assert row["base_n"] == row["head_n"] == 20  # 2 rounds × 1 worker × 10 samples per arm
    assert row["head_median"] - row["base_median"] > 29000  # µs: the 30 ms more sleep that only the head has
    ab = row["head_details"]["ab"]
    assert ab["rounds"] == 2 and all(sorted(order) == ["base", "head"] for order in ab["orders"])
    assert ab["level"] == pytest.approx(0.99)  # min_rounds = max_rounds: one look, which spends all of alpha
    # Both arms at once, each on its own CPU, swapping CPUs between the rounds.
    first, second = duet_cpus(1)
    assert ab["mode"] == "duet" and ab["cpus"] == [[list(first), list(second)],
                                                   [list(second), list(first)]], ab
    assert comparison["base"]["commit"] == git(repo, "rev-parse", "HEAD~1")
    assert comparison["head"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert "1 regression (1 confirmed)" in comment.read_text()
    assert git(repo, "worktree", "list").count("\n") == 0  # the base worktree is gone


def _suspect(rc: RunConfig, base_commit: str, verdict: str = "regressed") -> dict:
    row = Row(id=rc.id, name=rc.name, kind="execution", metric="latency", unit="us",
              device_name="c2-standard-16",
              module_name="slowmod", compile_config="eager", verdict=verdict, reason=None, base_median=None,
              head_median=None, base_iqr=None, head_iqr=None, base_n=30, head_n=30,
              change=100.0 if verdict == "regressed" else -50.0, change_unit="%",
              p_value=1e-6, threshold=None, head_details={}, base_details={}, ci_low=90.0, ci_high=110.0,
              q_value=1e-6, mde=1.0, outcome="DIFFERENT",
              mark="unconfirmed" if verdict == "regressed" else None)
    return {"schema_version": 3, "head": {"commit": "h" * 40}, "base": {"commit": base_commit},
            "baseline": None,
            "thresholds_source": "x", "counts": count_rows([row]), "rows": [asdict(row)]}


@pytest.mark.parametrize("base_ref, claimed, verdict, mark", [
    ("HEAD~1", "regressed", "regressed", "confirmed"),
    ("HEAD", "regressed", "similar", None),
    ("HEAD~1", "improved", "regressed", "confirmed"),  # a claimed improvement that is a real slowdown
])
def test_recheck_confirms_a_real_regression_and_clears_a_false_one(repo, tmp_path, monkeypatch, base_ref,
                                                                   claimed,
                                                                    verdict, mark):
    rc = _rc()
    (tmp_path / "comparison.json").write_text(json.dumps(_suspect(rc, git(repo, "rev-parse", base_ref),
                                                                  claimed)))
    suite = Suite((rc,), (rc.module_generation_config,), ("test",), ())
    out = tmp_path / "checked"
    recheck_stage(tmp_path / "comparison.json", out, repo, suite, Rules.load(tmp_path / "thresholds.yaml"),
                  Policy(min_rounds=1, max_rounds=2))
    checked = json.loads((out / "comparison.json").read_text())
    (row,) = checked["rows"]
    assert (row["verdict"], row["mark"]) == (verdict, mark)
    assert row["ab"]["base_commit"] == git(repo, "rev-parse", base_ref) and row["ab"]["base_n"] >= 8
    assert checked["counts"]["confirmed"] == (mark == "confirmed") and checked["counts"]["regressed"] == (mark == "confirmed")
    if claimed != verdict:
        how = "cleared" if verdict == "similar" else f"found {verdict}"
        change = "+100.0%" if claimed == "regressed" else "-50.0%"
        assert row["reason"].startswith(f"{how} by a paired A/B run on this machine: ")
        assert row["stored"]["change"] == float(change[:-1]) and row["change"] == row["ab"]["change"]
    assert sorted(p.name for p in (out / "results").iterdir()) == ["ab-base.json", "ab-head.json"]


def test_apply_leaves_a_row_unconfirmed_without_a_paired_row_and_keeps_other_rows():
    rc = _rc()
    comparison = _suspect(rc, "b" * 40)
    similar = {**comparison["rows"][0], "id": "other", "verdict": "similar", "mark": None}
    comparison["rows"].append(similar)
    updated = apply_recheck(comparison, {}, Arm("base", "b" * 40, None), Arm("head", "h" * 40, None))
    assert updated["rows"][0]["mark"] == "unconfirmed" and "no paired A/B re-check" in updated["rows"][0]["reason"]
    assert updated["rows"][1] == similar
    assert [r.id for r in suspects(Comparison.of(updated))] == [rc.id]


def test_unknown_base_ref_is_a_user_error(repo):
    with pytest.raises(UserError,
                       match=r"'no-such-ref' is not a commit.*git fetch --depth=1 origin no-such-ref"):
        resolve_ref(repo, "no-such-ref")


def test_worktree_holds_the_base_files_and_is_removed(repo):
    with base_worktree(repo, resolve_ref(repo, "HEAD~1")) as root:
        assert (root / "slowmod.py").read_text() == FAST
    assert not root.exists()


@pytest.mark.parametrize("argv, message", [
    (["--benchmark-presets", "smoke"], "--base-ref is required"),
    (["--benchmark-presets", "smoke", "--base-ref", "HEAD", "--min-rounds", "5", "--max-rounds", "2"],
     "--min-rounds 5 is more than --max-rounds 2"),
    (["--benchmark-presets", "smoke", "--base-ref", "HEAD", "--benchmark-id", "nope"],
     "--benchmark-id nope: not a run config"),
    (["--benchmark-presets", "smoke", "--base-ref", "HEAD", "--budget-s", "0"],
     "must be a finite number of seconds > 0"),
])
def test_ab_bad_arguments(tmp_path, capsys, argv, message):
    try:
        code = main(["ab", *argv, "--output-dir", str(tmp_path / "o")])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_an_export_case_is_compiled_once_per_arm_and_loaded_from_its_artifact(repo, tmp_path):
    rc = _rc()
    gen = ModuleGenerationConfig.build(rc.module_generation_config.model,
                                       CompileConfig("compile-export", "export", CompileMode.EXPORT),
                                       devices.C2_STANDARD_16.architecture)
    export_rc = RunConfig.build(gen, EXEC, devices.C2_STANDARD_16, presets=("test",))
    out = tmp_path / "ab"
    ab_stage(repo, "HEAD~1", (export_rc,), out, Rules.load(tmp_path / "thresholds.yaml"),
             Policy(min_rounds=1, max_rounds=1))
    (row,) = json.loads((out / "comparison.json").read_text())["rows"]
    # Both arms compiled their own .pt2 and ran from it (without module_info.json it failed to load).
    assert row["verdict"] != "failed" and row["base_n"] == row["head_n"] == 10, row["reason"]


EXEC_BS2 = ExecutionConfig("exec-ab-bs2", "inference-bs2", Task.INFERENCE, batch_size=2, processes=1,
                           min_samples=10,
                           min_sample_time_ms=5.0, warmup_time_ms=5, timeout_s=60)


def _rc_bs2() -> RunConfig:
    rc = _rc()
    return RunConfig.build(rc.module_generation_config, EXEC_BS2, devices.C2_STANDARD_16, presets=("test",))


def two_case_suite() -> Suite:
    """The suite of the temporary repository's ``pyproject.toml`` (``[tool.benchtrail] suite``): the slowmod
    model at batch sizes 1 and 2, so that ``benchtrail ab --recheck`` finds both suspects' run configs."""
    rcs = (_rc(), _rc_bs2())
    return Suite(rcs, (rcs[0].module_generation_config,), ("test",), ())


def _comparison_of(rows: list[dict], base_commit: str, extra: list[dict] = ()) -> dict:
    rows = rows + list(extra)
    return {"schema_version": 4, "head": {"commit": "h" * 40}, "base": {"commit": base_commit},
            "baseline": None,
            "thresholds_source": "x", "counts": count_rows(list(map(Row.of, rows))), "rows": rows}


def _ab_cli(repo, tmp_path, monkeypatch, capsys, comparison: dict, *flags) -> tuple[int, str, str]:
    """``benchtrail ab --recheck`` run as the CLI in ``repo`` (whose pyproject.toml names two_case_suite)."""
    (repo / "pyproject.toml").write_text('[tool.benchtrail]\nsuite = "tests.test_ab:two_case_suite"\n')
    (tmp_path / "comparison.json").write_text(json.dumps(comparison))
    monkeypatch.chdir(repo)
    code = main(["ab", "--recheck", str(tmp_path / "comparison.json"), "--output-dir",
                 str(tmp_path / "checked"),
                 "--thresholds", str(tmp_path / "thresholds.yaml"), "--min-rounds", "1", "--max-rounds", "2",
                 *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_recheck_with_nothing_to_recheck_exits_0_though_the_comparison_has_a_failed_row(repo, tmp_path,
                                                                                        monkeypatch,
                                                                                        capsys):
    failed = {**_suspect(_rc(), "b" * 40)["rows"][0], "verdict": "failed", "mark": None, "change": None,
              "reason": "head failed: boom"}
    code, out, err = _ab_cli(repo, tmp_path, monkeypatch, capsys, _comparison_of([failed], "b" * 40))
    assert code == 0, err
    checked = json.loads((tmp_path / "checked" / "comparison.json").read_text())
    assert checked["rows"] == [failed] and checked["counts"]["failed"] == 1
    assert out.strip().splitlines()[-1] == str(tmp_path / "checked" / "comment" / "comment.md")
    assert (tmp_path / "checked" / "comment" / "comment.md").is_file()
    assert not (tmp_path / "checked" / "results").exists()  # no paired run


def test_total_budget_rechecks_the_largest_change_first_and_marks_the_rest_not_reached(repo, tmp_path,
                                                                                       monkeypatch,
                                                                                      capsys):
    base = git(repo, "rev-parse", "HEAD~1")
    # listed first, smaller |change|
    small = {**_suspect(_rc_bs2(), base, "improved")["rows"][0], "change": -50.0}
    big = _suspect(_rc(), base)["rows"][0]  # +100%
    # One round starts two worker processes (each imports torch, over 2 s here), so after the first case
    # more than the 1 s budget has passed, while the base worktree is checked out in well under 1 s.
    code, _out, err = _ab_cli(repo, tmp_path, monkeypatch, capsys, _comparison_of([small, big], base),
                             "--total-budget-s", "1")
    assert code == 0, err
    checked = json.loads((tmp_path / "checked" / "comparison.json").read_text())
    assert checked["schema_version"] == SCHEMA_VERSION
    rows = {r["id"]: r for r in checked["rows"]}
    reached, missed = rows[big["id"]], rows[small["id"]]
    assert (reached["verdict"], reached["mark"], reached.get("recheck")) == ("regressed", "confirmed", None)
    assert reached["ab"]["rounds"] == 1 and reached["ab"]["head_median"] - reached["ab"]["base_median"] > 29000
    # Sequential sampling (--min-rounds 1 --max-rounds 2: two looks): the run stopped at its first look, whose
    # share of the 1% false-alarm rate is 0.0062; the row's paired figures are at that level.
    assert reached["ab"]["level"] == pytest.approx(1 - look_alphas(2, 0.01)[0], abs=1e-12)
    assert (missed["verdict"], missed["mark"], missed["recheck"], missed["ab"]) == ("improved", None,
                                                                                    "not-reached",
                                                                                  None)
    assert missed["reason"] == "not re-checked: the re-check's time budget of 1 s ran out"
    head = json.loads((tmp_path / "checked" / "results" / "ab-head.json").read_text())
    assert [b["id"] for b in head["benchmarks"]] == [big["id"]]  # the second case never started
    comment = (tmp_path / "checked" / "comment" / "comment.md").read_text()
    assert ("Paired A/B re-check of 1 suspected change against the baseline commit on this runner: 1 confirmed, "
            "0 cleared. 1 more suspected change not re-checked: the re-check's time budget ran out first "
            f"(`{small['name'].removesuffix('.c2-standard-16')}`); it stays unconfirmed.") in comment


def test_recheck_exits_2_when_an_arm_of_a_paired_run_fails(repo, tmp_path, monkeypatch, capsys):
    git(repo, "checkout", "-q", "-b", "broken", "HEAD~1")
    (repo / "slowmod.py").write_text(FAST.replace("return x + 1", "raise RuntimeError('broken base')"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "broken")
    broken = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-")
    row = _suspect(_rc(), broken)["rows"][0]
    code, out, err = _ab_cli(repo, tmp_path, monkeypatch, capsys, _comparison_of([row], broken))
    assert code == 2, err
    (checked,) = json.loads((tmp_path / "checked" / "comparison.json").read_text())["rows"]
    assert (checked["verdict"], checked["mark"]) == ("regressed", "unconfirmed")
    assert checked["ab"]["verdict"] == "failed" and "broken base" in checked["reason"]
    assert out.strip().splitlines()[-1] == str(tmp_path / "checked" / "comment" / "comment.md")


def test_total_budget_s_is_refused_without_recheck(tmp_path, capsys):
    code = main(["ab", "--benchmark-presets", "smoke", "--base-ref", "HEAD", "--total-budget-s", "60",
                 "--output-dir", str(tmp_path / "o")])
    assert code == 1
    assert "--total-budget-s bounds a --recheck" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("quarantined, accept, mark", [
    (None, (), "confirmed"),
    ("flaky on c2", (), "quarantined"),
    (None, ("slowmod*",), "accepted"),  # a benchmarks-accept: glob over the series name
])
def test_a_suspected_improvement_the_paired_run_finds_regressed_is_marked_like_any_regression(quarantined,
                                                                                              accept,
                                                                                              mark):
    rc = _rc()
    comparison = _suspect(rc, "b" * 40, "improved")
    comparison["rows"][0]["quarantined"] = quarantined
    paired = {rc.id: {**comparison["rows"][0], "verdict": "regressed", "change": 300.0, "ci_low": 290.0,
                      "ci_high": 310.0, "base_median": 10.0, "head_median": 40.0,
                      "head_details": {"ab": {"rounds": 2}}}}
    checked = apply_recheck(comparison, paired, Arm("base", "b" * 40, None), Arm("head", "h" * 40, None),
                            accept=accept)
    (row,) = checked["rows"]
    assert (row["verdict"], row["mark"]) == ("regressed", mark)
    assert row["reason"].startswith("found regressed by a paired A/B run on this machine: +300.0% (99% CI +290.0% "
                                    "to +310.0%) after 2 rounds; the stored baseline gave -50.0%")
    # The paired figures everywhere: comparison.json, the comment, the terminal and the gate's line.
    assert (row["change"], row["ci_low"], row["ci_high"], row["stored"]["change"]) == (300.0, 290.0, 310.0,
                                                                                       -50.0)
    if mark != "confirmed":
        return
    from benchtrail.compare.comment import render
    from benchtrail.compare.document import Comparison
    from benchtrail.compare.gate import check, failing_line
    from benchtrail.compare.terminal import render_table

    typed = Comparison.of(checked)
    assert "| +300.0% (+290.0…+310.0%), paired | regressed · confirmed" in render(typed)[0]
    assert "regressed +300.0% +290.0…+310.0% 10.0 µs — 40.0 µs —" in " ".join(render_table(typed,
                                                                                           width=200).split())
    assert failing_line(check(typed.rows, []).failing[0]).endswith(": +300.0% (99% CI +290.0…+310.0%), median "
                                                              "10.0 µs → 40.0 µs")
    assert "-50.0%" not in render_table(typed, width=200)


def test_a_paired_run_that_spends_its_budget_undecided_leaves_the_row_inconclusive_and_says_so():
    rc = _rc()
    comparison = _suspect(rc, "b" * 40, "regressed")
    paired = {rc.id: {**comparison["rows"][0], "verdict": "inconclusive", "change": 117.4, "ci_low": -8.7,
                      "ci_high": 268.9, "mde": 90.0, "noisy": True,
                      "reason": "interval crosses the threshold",
                      "head_details": {"ab": {"rounds": 31, "level": 0.9964, "stop": "budget"}}}}
    (row,) = apply_recheck(comparison, paired, Arm("base", "b" * 40, None),
                           Arm("head", "h" * 40, None))["rows"]
    assert (row["verdict"], row["mark"], row["noisy"], row["mde"], row["ab"]["stop"]) == (
        "inconclusive", None, True, 90.0, "budget")
    stored = comparison["rows"][0]
    assert row["reason"] == ("not decided by a paired A/B run on this machine: +117.4% (99.64% CI -8.7% to +268.9%) "
                             f"after 31 rounds (its time budget spent); the stored baseline gave {stored['change']:+.1f}%"
                             " (99% CI +90.0% to +110.0%); interval crosses the threshold")


def test_noise_never_hides_a_change_in_the_stored_comparison_nor_in_the_paired_one():
    """Known answers, no timing: samples with 40% IQR/median on both sides. Stored: +50% is `regressed`
    (a suspect), +15% `inconclusive` and noisy but beyond its 5% rule with p < 0.1 (a suspect too), +10% with
    p = 0.15 `inconclusive` and not screened in. Paired: the same +50% decides however noisy, so the re-check
    confirms both suspects and they gate."""
    import numpy as np

    from benchtrail.compare.document import comparison_to_dict
    from benchtrail.compare.gate import check
    from benchtrail.compare.notes import mark_regressions
    from benchtrail.compare.rules import load_thresholds
    from benchtrail.compare.verdicts import compare
    from tests.helpers.records import record, results

    wild = list(np.linspace(60.0, 140.0, 31))
    factors = {"big": 1.5, "small": 1.15, "tiny": 1.1}
    base = [record(k, wild) for k in factors]
    head = [record(k, [x * f for x in wild]) for k, f in factors.items()]
    files = [results(*base, commit="b" * 40)], [results(*head, commit="h" * 40)]
    rows = mark_regressions(compare(*files, load_thresholds()), Rules())
    comparison = comparison_to_dict(rows, *files, "t.yaml")
    verdicts = {r["id"]: (r["verdict"], r["mark"], r["noisy"]) for r in comparison["rows"]}
    assert verdicts == {"big": ("regressed", "unconfirmed", True), "small": ("inconclusive", None, True),
                        "tiny": ("inconclusive", None, True)}
    assert {r.id for r in suspects(Comparison.of(comparison))} == {"big", "small"}
    paired = {r.id: r for r in compare([results(*(record(k, wild) for k in factors), commit="b" * 40)],
                                       [results(*(record(k, [x * 1.5 for x in wild]) for k in factors),
                                                commit="h" * 40)], load_thresholds())}
    checked = apply_recheck(comparison, paired, Arm("base", "b" * 40, None), Arm("head", "h" * 40, None))
    rows = {r["id"]: r for r in checked["rows"]}
    assert (rows["big"]["verdict"], rows["big"]["mark"], rows["big"]["noisy"]) == ("regressed", "confirmed",
                                                                                   True)
    assert (rows["small"]["verdict"], rows["small"]["mark"]) == ("regressed", "confirmed")
    assert rows["small"]["reason"].startswith("found regressed by a paired A/B run on this machine: +50.0% (99% CI")
    assert rows["small"]["reason"].endswith(f"the stored baseline gave +15.0% (99% CI {rows['small']['stored']['ci_low']:+.1f}% "
                                            f"to {rows['small']['stored']['ci_high']:+.1f}%) (noisy)")
    assert rows["tiny"] == {r["id"]: r for r in comparison["rows"]}["tiny"]
    assert sorted(r.id for r in check(Comparison.of(checked).rows, []).failing) == ["big", "small"]


def test_a_paired_arm_far_from_its_own_stored_run_is_reported_and_not_used():
    """The 3x head arm of issue 38: stored head 500 µs, a paired head arm at 1,450 µs (base 461 µs in both).
    The pair's +214% would confirm a regression; the guard keeps the stored verdict and says why. A pair with such
    an arm may clear a row, never confirm one."""
    from benchtrail.compare.gate import check

    rc = _rc()
    comparison = _suspect(rc, "b" * 40, "regressed")
    stored = comparison["rows"][0]
    stored.update(base_median=461.0, head_median=500.0, base_iqr=9.2, head_iqr=10.0, change=8.5)
    paired = {rc.id: {**stored, "verdict": "regressed", "change": 214.5, "ci_low": 200.0, "ci_high": 230.0,
                      "base_median": 461.0, "head_median": 1450.0, "base_iqr": 9.0, "head_iqr": 29.0,
                      "head_details": {"ab": {"rounds": 3, "stop": "decided"}}}}
    (row,) = apply_recheck(comparison, paired, Arm("base", "b" * 40, None),
                           Arm("head", "h" * 40, None))["rows"]
    assert (row["verdict"], row["mark"], row["change"]) == ("regressed", "unconfirmed", 8.5)
    assert row["ab"]["guard"] == {"arm": "head", "paired_median": 1450.0, "stored_median": 500.0,
                                  "allowed_factor": 1.5}
    assert row["reason"].startswith("paired A/B run not used: its head arm's median 1450 us is 2.9x the stored head "
                                    "run's 500 us, more than its noise allows")
    assert check([Row.of(row)], []).failing == ()  # not confirmed by an arm that measured something else
    # A pair that clears the row with such an arm is used: the stored run may be the one that was off.
    cleared = {rc.id: {**paired[rc.id], "verdict": "similar", "change": 0.4, "ci_low": -1.0, "ci_high": 1.8}}
    (row,) = apply_recheck(comparison, cleared, Arm("base", "b" * 40, None),
                           Arm("head", "h" * 40, None))["rows"]
    assert (row["verdict"], row["mark"], row["ab"]["guard"]["arm"]) == ("similar", None, "head")
    near = {rc.id: {**paired[rc.id], "head_median": 560.0}}  # 12% from its stored run: used
    (row,) = apply_recheck(comparison, near, Arm("base", "b" * 40, None), Arm("head", "h" * 40, None))["rows"]
    assert (row["mark"], row["change"], "guard" in row["ab"]) == ("confirmed", 214.5, False)
