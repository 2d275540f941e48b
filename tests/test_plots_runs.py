"""Issue 43's history and plots, read from the figures' data: every run of a commit drawn (noisy and
unconfirmed ones marked) around the median of its runs (what ``track`` reads), the y-axis options, strip plots
in one unit with the verdict and change, showing the paired samples that decided, and compare-backends'
labels that fit."""

import itertools
import json

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection

from benchtrail.cli import main
from benchtrail.history.collect import collect_history, load_history, write_history
from benchtrail.history.plots import history_figures
from benchtrail.pipeline.report_stages import compare_stage, strip_figures
from benchtrail.results.io import write_results
from benchtrail.store import open_store
from tests.helpers.git import git
from tests.helpers.records import record, results, spread

#: IQR/median 0.44 (above the 25% noise limit), median 137.
NOISY = [60.0, 80.0, 100.0, 120.0, 137.0, 137.0, 150.0, 170.0, 190.0, 210.0]


@pytest.fixture
def runs(tmp_path):
    """Commits c0, c1, c2; c1 has three runs: ``a`` (median 100), ``b`` (102, an unconfirmed regression
    in its comparison.json) and ``c`` (137, noisy; the newest); c0 and c2 one each (100, 101)."""
    repo, store = tmp_path / "repo", open_store(str(tmp_path / "store"))
    git(tmp_path, "init", "-q", "-b", "main", str(repo), identity=True)
    shas = []
    for i, medians in enumerate(([100.0], [100.0, 102.0, None], [101.0])):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}", identity=True)
        shas.append(git(repo, "rev-parse", "HEAD", identity=True))
        for run_id, median in zip("abc", medians):
            run_id = f"{run_id}{i}"
            path = write_results(store.run_dir(run_id, 1) / "results" / "c2-standard-16-0.json",
                                 results(record("mlp", spread(median) if median else NOISY), commit=shas[-1]))
            if run_id == "b1":  # 102 against 80: regressed, not re-checked
                compare_stage([], [path], path.parent.parent / "comparison.json", None,
                              base_results=[results(record("mlp", spread(80.0)))])
            store.write_pointer(shas[-1], run_id, 1, {"devices": ["c2-standard-16"], "presets": ["x86_64"],
                                                      "torch_version": "2.13.0",
                                                      "created": "2026-01-01T00:00:00Z"})
    return repo, store, shas


def _axes(history, **options):
    (ax,
     ) = [a for a in history_figures(history, change_points={},
                                     **options)["x86_64.png"].axes if a.get_visible()]
    return ax


def _dots(ax):
    """``{label: [(x, y), ...]}`` of the axes' scatter dots (the runs)."""
    return {c.get_label(): [tuple(map(float, xy)) for xy in c.get_offsets()]
            for c in ax.collections if isinstance(c, PathCollection)}


def test_a_commit_with_three_runs_draws_all_three_around_the_median_of_runs(runs, tmp_path):
    repo, store, shas = runs
    history = collect_history(store, repo)
    (series,) = history.series
    c0, c1, c2 = series.points
    assert [(r.run_id, round(r.median, 6), r.noisy, r.mark) for r in c1.runs] == [
        ("c1", 137.0, True, None), ("b1", 102.0, False, "unconfirmed"), ("a1", 100.0, False, None)]
    # the newest run; the median of runs
    assert (c1.run_id, c1.median, round(c1.value, 6)) == ("c1", 137.0, 102.0)
    assert [len(p.runs) for p in (c0, c2)] == [1, 1]
    ax = _axes(history)
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "inference-bs1.c2-standard-16"]
    assert [round(v, 6) for v in line.get_ydata()] == [100.0, 102.0, 101.0]
    dots = _dots(ax)
    noisy, unconfirmed = dots.pop("noisy run (IQR/median > 25%)"), dots.pop("unconfirmed regression")
    (plain,) = dots.values()
    assert sorted((x, round(y, 6)) for x, y in plain + noisy + unconfirmed if x == 1) == [
        (1, 100.0), (1, 102.0), (1, 137.0)]  # three points at the commit of three runs
    assert [round(y, 6) for _, y in noisy] == [137.0] and [round(y, 6) for _, y in unconfirmed] == [102.0]
    styles = {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}
    assert len(styles["noisy run (IQR/median > 25%)"].get_facecolor()) == 0  # hollow
    assert "unconfirmed regression" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.get_text() for t in ax.get_xticklabels()] == [shas[0][:7], f"{shas[1][:7]} ×3", shas[2][:7]]
    # history.json keeps every run; a file of schema 1 (one run per commit) still loads.
    assert load_history(write_history(tmp_path / "h.json", history)) == history
    old = json.loads((tmp_path / "h.json").read_text())
    old["schema_version"] = 1
    for s in old["series"].values():
        for p in s["points"]:
            del p["runs"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    (loaded,) = load_history(tmp_path / "old.json").series
    assert [(p.runs, p.value) for p in loaded.points][1] == ((), 137.0)


def test_the_y_axis_starts_at_zero_or_shows_the_ratio_to_the_baseline(runs, tmp_path, capsys):
    repo, store, shas = runs
    history = collect_history(store, repo)
    assert _axes(history, y_axis="zero").get_ylim()[0] == 0
    ax = _axes(history, y_axis="ratio", baseline=shas[2])
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "inference-bs1.c2-standard-16"]
    assert [round(v, 6) for v in line.get_ydata()] == [round(100 / 101, 6), round(102 / 101, 6), 1.0]
    assert ax.get_ylabel() == f"ratio to baseline {shas[2][:7]} (×)"
    write_history(tmp_path / "h.json", history)
    code = main(["plot", "--history", str(tmp_path / "h.json"), "--output-dir", str(tmp_path / "out"),
                 "--repo", str(repo), "--y-axis", "ratio"])
    assert code == 0 and (tmp_path / "out" / "x86_64.png").is_file(), capsys.readouterr().err


def test_strip_plots_show_the_paired_samples_that_decided_in_one_unit_with_verdict_and_change(tmp_path):
    from benchtrail.runner.ab import Arm
    from tests.helpers.records import apply_recheck

    run = tmp_path / "run"
    base = results(record("mlp", spread(100.0)), record("big", spread(2000.0)))
    head = results(record("mlp", spread(130.0)), record("big", spread(2600.0)))
    head_path = write_results(run / "results" / "c2-standard-16-0.json", head)
    comparison = compare_stage([], [head_path], run / "comparison.json", None, base_results=[base])
    ab = [write_results(run / "ab" / f"ab-{side}.json", results(record("mlp", spread(m, n=20))))
          for side, m in (("base", 101.0), ("head", 125.0))]
    paired = compare_stage(ab[:1], ab[1:], tmp_path / "paired.json", None, paired=True)
    checked = apply_recheck(json.loads(comparison.read_text()),
                            {"mlp": json.loads(paired.read_text())["rows"][0]},
                            Arm("base", "b" * 40, None), Arm("head", "h" * 40, None))
    comparison.write_text(json.dumps(checked))
    figures = strip_figures(comparison, [base], [head_path])
    titles = {name: fig.get_suptitle() for name, fig in figures.items()}
    assert titles["mlp.inference-bs1.c2-standard-16.png"].startswith("regressed +23.8% (")
    assert titles["mlp.inference-bs1.c2-standard-16.png"].endswith(", paired\npaired A/B samples")
    assert titles["big.inference-bs1.c2-standard-16.png"].startswith("regressed +30.0% (")
    assert titles["big.inference-bs1.c2-standard-16.png"].endswith("\nstored samples")
    (mlp,) = figures["mlp.inference-bs1.c2-standard-16.png"].axes
    (big,) = figures["big.inference-bs1.c2-standard-16.png"].axes
    assert mlp.get_ylabel() == big.get_ylabel() == "time per iteration (ms)"  # one unit for all of them
    head_dots = mlp.collections[2].get_offsets()  # scatter, median bar, scatter, median bar
    assert sorted(round(y * 1e3, 6) for _, y in head_dots) == sorted(round(v, 6) for v in spread(125.0, n=20))


def test_compare_backends_labels_fit_without_overlapping():
    from benchtrail.interop.backends import BackendRow, RunInfo, speedups_figure

    def rows(models, devices):
        return [BackendRow(f"resnet_variant_{m:02d}", "inference-bs1", d, c, "ok", None, 100.0, 1.0, 10,
                           1.0 if c == "eager" else 1.5, "n") for m in range(models) for d in devices
                for c in ("eager", "inductor")]

    for many, rotation in ((rows(3, ["c2-standard-16"]), 0),
                           (rows(9, ["c2-standard-16", "n2-standard-32"]), 45)):
        fig = speedups_figure(many, RunInfo("a" * 40, "1", "1"))
        FigureCanvasAgg(fig)
        fig.draw_without_rendering()
        labels = fig.axes[0].get_xticklabels()
        boxes = [t.get_window_extent() for t in labels]
        assert len(boxes) == len({(r.model, r.device_name) for r in many})
        assert {t.get_rotation() for t in labels} == {rotation}
        # inside
        assert all(fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 and b.y0 >= fig.bbox.y0 for b in boxes)
        # parallel lines at 45°: apart by their anchors' distance × sin 45°, more than a line's height
        if rotation:
            gaps = {round(b.x1 - a.x1) for a, b in itertools.pairwise(boxes)}
            assert min(gaps) * 0.707 > 1.2 * labels[0].get_fontsize() * fig.dpi / 72
        else:  # lines of model, task: side by side
            assert "\n" in labels[0].get_text()
            assert not any(a.overlaps(b) for a, b in itertools.pairwise(boxes))
