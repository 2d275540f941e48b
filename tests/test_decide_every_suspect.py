"""Issue 38: every row is decided or says why not. Known answers from fixed samples, no timing: an
interval that crosses the threshold is ``inconclusive`` with the effect it could have detected, and a
selection whose samples can never reach alpha is refused (export) or marked (compare)."""

import dataclasses

import pytest

from benchtrail.compare.comment import render
from benchtrail.compare.document import Comparison, comparison_to_dict
from benchtrail.compare.notes import mark_regressions
from benchtrail.compare.rules import Rules, Threshold
from benchtrail.compare.terminal import render_table
from benchtrail.compare.verdicts import compare
from benchtrail.errors import UserError
from benchtrail.stats.inference import mann_whitney_p
from benchtrail.stats.power import check_sample_sizes, samples_needed, smallest_p
from tests.helpers.records import record, results, spread

RULE = (Threshold("execution/latency/*", "percent", 2.0),)


def _comparison(base, head, rules=RULE):
    files = [results(*base, commit="b" * 40)], [results(*head, commit="h" * 40)]
    return comparison_to_dict(mark_regressions(compare(*files, rules), Rules()), *files, "t.yaml")


def test_a_two_percent_change_on_a_two_percent_rule_is_inconclusive_with_its_mde_shown():
    base = [record("edge", spread(100.0, 30, 0.002))]
    head = [record("edge", spread(102.0, 30, 0.002))]
    (row,) = _comparison(base, head)["rows"]
    assert (row["verdict"], row["outcome"], row["noisy"]) == ("inconclusive", "UNKNOWN", False)
    assert row["ci_low"] < 2.0 < row["ci_high"] and row["change"] == pytest.approx(2.0)
    assert row["reason"] == "interval crosses the threshold: more samples would settle it"
    body = render(Comparison.of(_comparison(base, head)))[0]
    assert body.splitlines()[0] == "### benchtrail: 0 regressions, 0 improvements, 1 inconclusive"
    assert "<details><summary>Inconclusive: 1 series</summary>" in body
    assert f"| inconclusive · could detect ≥ {row['mde']:.1f}% (threshold 2%) [1] |" in body
    assert 1.0 < row["mde"] < 2.0  # it could tell a 2% change from none, not from the 2% rule
    table = render_table(Comparison.of(_comparison(base, head)), width=200).splitlines()
    assert table[-1] == f"inconclusive (1): edge.inference-bs1 +2.0% · could detect ≥ {row['mde']:.1f}% (threshold 2%): more " \
                        "samples or a quieter machine would settle them"


def test_similar_only_when_the_interval_lies_within_the_threshold():
    (row,) = _comparison([record("a", spread(100.0, 30, 0.0002))],
                         [record("a", spread(100.5, 30, 0.0002))])["rows"]
    assert (row["verdict"], row["outcome"]) == ("similar", "SAME")


def test_the_smallest_p_and_the_samples_a_selection_needs():
    assert smallest_p(5, 5) == pytest.approx(2 / 252) and smallest_p(8, 8) == pytest.approx(2 / 12870)
    # as scipy computes it, pure math here
    for nb, nh in ((2, 2), (5, 5), (3, 12), (9, 9), (10, 20), (30, 30)):
        assert smallest_p(nb, nh) == pytest.approx(mann_whitney_p([range(1, nb + 1)],
                                                                  [range(nb + 1, nb + nh + 1)])[0],
                                                   rel=1e-9)
    assert [samples_needed(m) for m in (1, 2, 20, 100)] == [5, 6, 8, 11]


def _rc(samples: int, processes: int = 1, name: str = "mlp"):
    from benchmark_suites.suite import generate

    rc = generate().run_configs[0]
    ec = dataclasses.replace(rc.execution_config, processes=processes, min_samples=samples)
    return dataclasses.replace(rc, execution_config=ec, id=f"{name}-{samples}", name=f"{name}{samples}.eager")


def test_a_selection_whose_samples_can_never_reach_alpha_is_refused_naming_what_is_needed():
    check_sample_sizes(tuple(_rc(8, name=f"m{i}-") for i in range(20)))  # 8 a side: enough for 20 series
    check_sample_sizes((_rc(5),))  # 5 a side for one series: p = 0.0079
    with pytest.raises(UserError) as alone:  # one run config: nothing to select fewer of
        check_sample_sizes((_rc(4),))
    assert str(alone.value).endswith("at least 5 samples a side are needed; raise min_samples or processes")
    with pytest.raises(UserError) as err:
        check_sample_sizes((*(_rc(7, name=f"m{i}-") for i in range(19)), _rc(3, processes=2)))
    assert str(err.value).startswith("20 of the 20 run configs selected take too few samples to ever show a "
                                     "change: m0-7.eager, m1-7.eager, m2-7.eager and 17 more (processes=1 × "
                                     "min_samples=7 = 7 a side). With 20 series compared, the smallest possible "
                                     "Mann–Whitney p times 20 must be below 0.01: at least 8 samples a side")


def test_compare_marks_rows_that_cannot_reach_alpha_insufficient_naming_the_samples_needed():
    """A +30% change with 5 samples a side (interval +27…+33%) beside an unchanged series: its smallest p (0.0079)
    times 2 is above 0.01, so alone it could never be regressed: insufficient-samples naming the 6 a side needed,
    not similar. Two such changes together reach q = p and are regressed; one series alone too."""
    steady = [record(k, spread(100.0, 5, 0.001)) for k in ("a", "b")]
    rows = _comparison(steady,
                       [record("a", spread(130.0, 5, 0.01)), record("b", spread(100.0, 5, 0.001))])["rows"]
    assert [(r["verdict"], r["reason"]) for r in rows] == [
        ("insufficient-samples",
         "5 and 5 samples cannot show a lone change among 2 series compared (smallest p × 2 "
                                 "is not below 0.01): 6 a side are needed"),
        ("similar", "interval within the threshold")]
    assert rows[0]["change"] == pytest.approx(30.0) and rows[0]["ci_low"] > 2.0
    both = _comparison(steady, [record(k, spread(130.0, 5, 0.01)) for k in ("a", "b")])["rows"]
    assert [r["verdict"] for r in both] == ["regressed", "regressed"]  # q = p = 0.0079 for each
    (alone,) = _comparison(steady[:1], [record("a", spread(130.0, 5, 0.01))])["rows"]
    assert alone["verdict"] == "regressed"  # one series: 0.0079 < 0.01


def test_export_and_pipeline_refuse_a_selection_that_can_never_reach_alpha(tmp_path, monkeypatch, capsys):
    from benchtrail.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pyproject.toml").write_text('[tool.benchtrail]\nbenchmarks = ["few_samples"]\n')
    (tmp_path / "few_samples.py").write_text(
        "import torch\nfrom benchtrail import Args, benchmark\n"
        + "".join(f"@benchmark(inputs=lambda: Args(torch.ones(4)), processes=1, min_samples=5)\n"
                  f"def f{i}(x):\n    return x + 1\n" for i in range(3)))
    for argv in (["export", "execution", "--benchmark-presets", "default", "--output", "e.json"],
                 ["pipeline", "--benchmark-presets", "default", "--store", str(tmp_path / "store")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "3 of the 3 run configs selected take too few samples to ever show a change" in err
        assert "at least 6 samples a side are needed" in err
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "store").exists()
