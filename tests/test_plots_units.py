"""The matplotlib Figures of ``benchtrail.history.plots`` on small fixed histories: units on every value
axis, integer ticks for counts, a bounded number of panels per figure, bars for a single run, the
baseline, change points and regressions marked; and the base-vs-head strip plots of
``benchtrail.history.comparison_figures``."""

import math

import pytest
from matplotlib.container import BarContainer
from matplotlib.ticker import MaxNLocator

from benchtrail.history.comparison_figures import Samples, distribution_figures, samples_of
from benchtrail.history.plots import (
    MAX_PANELS,
    AxisUnit,
    axis_unit,
    history_figures,
    model_of,
    panels,
    plot_history_png,
    variant_of,
)
from benchtrail.history.series import CommitRun, History, Point, Series
from tests.helpers.records import record, results, spread

COMMITS = [f"{i:x}" * 40 for i in range(1, 13)]  # 12 fake 40-hex shas: 111…, 222…, …, ccc…


def _point(commit: str, median: float | None, status: str = "ok") -> Point:
    if median is None:
        return Point(commit, f"r-{commit[:3]}", 1, None, None, None, None, 0, status)
    return Point(commit, f"r-{commit[:3]}", 1, median, median * 0.02, median * 0.97, median * 1.03, 10,
                 status,
                 p25=median * 0.99, p75=median * 1.01)


def _series(name: str, metric: str, unit: str, medians: list[float | None], *, kind: str = "execution",
            compile_config: str = "eager", commits=COMMITS) -> Series:
    points = tuple(_point(c, m) for c, m in zip(commits, medians))
    return Series(id=f"id-{name}", name=name, kind=kind, metric=metric, unit=unit,
                  device_name="c2-standard-16",
                  presets=("smoke",) if kind == "execution" else (), compile_config=compile_config,
                  task="inference" if kind == "execution" else None, points=points)


def _history(series: list[Series], commits=COMMITS) -> History:
    used = {p.commit: p for s in series for p in s.points}
    return History(ref="main", head=commits[-1], store="store",
                   commits=tuple(CommitRun(c, used[c].run_id,
                                           1) if c in used else CommitRun(c) for c in commits),
                   series=tuple(series))


def _axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


@pytest.mark.parametrize("unit,values,want", [
    ("us", [140000.0, 150000.0], AxisUnit("ms", 1e3)),  # "140000 µs" reads 140 ms
    ("us", [2.5e6], AxisUnit("s", 1e6)),
    ("us", [12.0, 900.0], AxisUnit("µs", 1.0)),
    ("ms", [0.4], AxisUnit("µs", 1e-3)),
    ("ms", [1500.0, None, math.nan], AxisUnit("s", 1e3)),
    ("bytes", [1e8], AxisUnit("MiB", 2.0 ** 20)),  # "1e8 bytes" reads 95.4 MiB
    ("bytes", [3 * 2.0 ** 30], AxisUnit("GiB", 2.0 ** 30)),
    ("bytes", [512.0], AxisUnit("B", 1.0)),
    ("count", [3.0], AxisUnit("count", 1.0)),
])
def test_axis_unit_is_chosen_from_the_largest_value(unit, values, want):
    assert axis_unit(unit, values) == want


def _latency_history(n: int = 3) -> History:
    return _history([_series("mlp.eager.inference-bs1.c2-standard-16", "latency", "us",
                             [140000.0, 145000.0, 150000.0][:n]),
                     _series("mlp.inductor.inference-bs1.c2-standard-16", "latency", "us",
                             [70000.0, 71000.0, 69000.0][:n], compile_config="inductor"),
                     _series("mlp.eager.x86_64.graph_breaks", "graph_breaks", "count", [2.0, 3.0, 2.0][:n],
                             kind="compilation"),
                     _series("mlp.eager.x86_64.peak_rss_bytes", "peak_rss_bytes", "bytes",
                             [1e8, 1.1e8, 1.2e8][:n],
                             kind="compilation")], COMMITS[:n])


def test_a_panel_is_one_model_and_metric_with_a_line_per_variant_in_ms():
    figures = history_figures(_latency_history(), change_points={})
    assert list(figures) == ["smoke.png", "compilation.png"]
    (ax,) = _axes(figures["smoke.png"])
    assert ax.get_title() == "mlp · latency"
    assert ax.get_ylabel() == "time per iteration (ms)"
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    assert lines == {"eager.inference-bs1.c2-standard-16": [140.0, 145.0, 150.0],
                     "inductor.inference-bs1.c2-standard-16": [70.0, 71.0, 69.0]}
    assert ax.yaxis.get_major_formatter()(140.0, 0) == "140"
    assert [t.get_text() for t in ax.get_xticklabels()] == [c[:7] for c in COMMITS[:3]]


def test_counts_get_integer_ticks_and_bytes_binary_units():
    fig = history_figures(_latency_history(), change_points={})["compilation.png"]
    by_title = {ax.get_title(): ax for ax in _axes(fig)}
    counts, memory = by_title["mlp · graph_breaks"], by_title["mlp · peak_rss_bytes"]
    assert counts.get_ylabel() == "graph breaks (count)"
    assert isinstance(counts.yaxis.get_major_locator(), MaxNLocator)
    ticks = counts.get_yticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
    assert memory.get_ylabel() == "peak RSS (MiB)"
    (line,) = [ln for ln in memory.get_lines() if not ln.get_label().startswith("_")]
    assert [round(v, 2) for v in line.get_ydata()] == [95.37, 104.9, 114.44]


def test_a_page_of_many_models_is_split_into_figures_of_at_most_max_panels():
    series = [_series(f"model{i:02d}.eager.inference-bs1.c2-standard-16", "latency", "us",
                      [100.0, 110.0, 120.0])
              for i in range(2 * MAX_PANELS + 5)]
    figures = history_figures(_history(series, COMMITS[:3]), change_points={})
    assert list(figures) == ["smoke.png", "smoke~2.png", "smoke~3.png"]
    shown = [len(_axes(f)) for f in figures.values()]
    assert shown == [MAX_PANELS, MAX_PANELS, 5]
    assert figures["smoke~3.png"].get_suptitle().endswith("· part 3 of 3")
    assert [ax.get_title() for f in figures.values() for ax in _axes(f)] == [
        f"model{i:02d} · latency" for i in range(2 * MAX_PANELS + 5)]


def test_a_history_with_a_single_run_is_drawn_as_bars_not_one_point_lines():
    fig = history_figures(_latency_history(n=1), change_points={})["smoke.png"]
    (ax,) = _axes(fig)
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [round(p.get_height(), 6) for p in bars.patches] == [140.0, 70.0]
    assert ax.get_ylabel() == "time per iteration (ms)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["eager.inference-bs1.c2-standard-16",
                                                            "inductor.inference-bs1.c2-standard-16"]
    assert not [ln for ln in ax.get_lines() if ln.get_marker() == "o"]  # no one-point median lines


def test_the_baseline_and_a_regression_are_marked():
    history = _latency_history()
    regressed = history.series[0].id
    fig = history_figures(history, baseline=COMMITS[1], change_points={},
                          regressions={regressed})["smoke.png"]
    (ax,) = _axes(fig)
    labels = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(labels[f"baseline {COMMITS[1][:7]}"].get_xdata()) == [1, 1]
    ring = labels["regression"]
    assert (list(ring.get_xdata()), list(ring.get_ydata())) == ([2], [150.0])
    assert ring.get_markeredgecolor() == "tab:red"


def test_tracks_change_points_are_shaded_red_for_a_regression():
    medians = [100.0 * (1 + 0.003 * ((i * 7) % 5 - 2)) for i in range(6)] + [
        130.0 * (1 + 0.003 * ((i * 3) % 5 - 2)) for i in range(6)]
    history = _history([_series("mlp.eager.inference-bs1.c2-standard-16", "latency", "us", medians)])
    (ax,) = _axes(history_figures(history)["smoke.png"])  # change points from `track` itself
    spans = [p for p in ax.patches if p.get_facecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=1e-3)]
    assert len(spans) == 1  # tab:red, one step between the 6th and 7th commits
    x0, x1 = spans[0].get_x(), spans[0].get_x() + spans[0].get_width()
    assert (x0, x1) == (5, 6)
    assert ax.get_ylabel() == "time per iteration (µs)"


def test_model_and_variant_come_from_the_series_name():
    s = _series("resnet.inductor.x86_64.compile_time_cold_ms", "compile_time_cold_ms", "ms", [1.0],
                kind="compilation", compile_config="inductor")
    assert (model_of(s), variant_of(s, "resnet")) == ("resnet", "inductor.x86_64")
    assert [p.title for p in panels([s])] == ["resnet · compile_time_cold_ms"]
    counts = [_series(f"resnet.{cc}.x86_64.{m}", m, "count", [1.0], kind="compilation", compile_config=cc)
              for m in ("graph_breaks", "graph_count") for cc in ("inductor", "eager")]
    (panel,) = panels([*counts, _series("mlp.eager.x86_64.graph_count", "graph_count", "count", [1.0],
                                        kind="compilation")])[1:]  # mlp's panel first: models sorted
    assert (panel.title, panel.quantity) == ("resnet · counts", "count")
    assert [panel.label(s) for s in panel.series] == ["graph_count · eager.x86_64",
                                                      "graph_count · inductor.x86_64",
                                                      "graph_breaks · eager.x86_64",
                                                      "graph_breaks · inductor.x86_64"]


def test_the_pngs_are_bounded_in_size(tmp_path):
    import matplotlib.image

    series = [_series(f"model{i:02d}.eager.x86_64.graph_count", "graph_count", "count", [1.0, 2.0, 1.0],
                      kind="compilation") for i in range(MAX_PANELS + 1)]
    paths = plot_history_png(_history(series, COMMITS[:3]), tmp_path, change_points={})
    assert [p.name for p in paths] == ["compilation.png", "compilation~2.png"]
    height, width = matplotlib.image.imread(paths[0]).shape[:2]
    assert (width, height) == (1500, 1340)  # 3 columns × 4 rows, not one tall image


def test_distribution_figures_show_base_and_head_samples_per_benchmark():
    base = results(record("rc1", spread(2160.0, n=20), name="mlp.eager.inference-bs1.dev"),
                   record("rc2", spread(50.0), name="tiny.eager.inference-bs1.dev"), commit="b" * 40)
    head = results(record("rc1", spread(514.0, n=20), name="mlp.eager.inference-bs1.dev"),
                   record("rc2", spread(55.0), name="tiny.eager.inference-bs1.dev"),
                   record("rc3", spread(9.0), name="new.eager.inference-bs1.dev"), commit="c" * 40)
    sets = samples_of([base], [head])
    assert [s.name for s in sets] == ["mlp.eager.inference-bs1.dev", "tiny.eager.inference-bs1.dev"]
    (fig,) = distribution_figures(sets)
    mlp, tiny = _axes(fig)
    assert mlp.get_title() == "mlp.eager.inference-bs1.dev" and mlp.get_ylabel() == "time per iteration (ms)"
    assert tiny.get_ylabel() == "time per iteration (ms)"  # one unit per figure
    base_dots, head_dots = mlp.collections[0], mlp.collections[2]  # scatter, median bar, scatter, median bar
    assert len(base_dots.get_offsets()) == 20 and len(head_dots.get_offsets()) == 20
    assert sorted(round(y, 6) for _,
                  y in base_dots.get_offsets()) == sorted(round(v / 1e3, 6) for v in spread(2160.0, n=20))
    assert [t.get_text() for t in mlp.get_xticklabels()] == ["base (n=20)", "head (n=20)"]
    many = distribution_figures([Samples(f"b{i}", "us", "latency", (1.0, 2.0),
                                         (2.0, 3.0)) for i in range(13)])
    assert [len(_axes(f)) for f in many] == [MAX_PANELS, 1]


def test_the_pipeline_draws_each_changed_series_samples_base_against_head(tmp_path):
    """pipeline.report_stages.distribution_stage: one strip plot per regressed, improved or noisy series, none for
    a similar one; a second call never overwrites them."""
    from benchtrail.pipeline.report_stages import compare_stage, distribution_stage
    from benchtrail.results.io import write_results
    from tests.helpers.records import record, results, spread

    base = results(record("slow"), record("same"), record("fast"), commit="b" * 40)
    head = results(record("slow", spread(130.0)), record("same"), record("fast", spread(70.0)))
    head_path = write_results(tmp_path / "head" / "results" / "c2-standard-16-0.json", head)
    comparison = compare_stage([], [head_path], tmp_path / "comparison.json", None, base_results=[base])
    written = distribution_stage(comparison, [base], [head_path], tmp_path / "distributions")
    assert sorted(p.name for p in written) == ["fast.inference-bs1.c2-standard-16.png",
                                               "slow.inference-bs1.c2-standard-16.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
    assert distribution_stage(comparison, [base], [head_path], tmp_path / "distributions") == []  # kept, said
    # no baseline: nothing to draw
    assert distribution_stage(comparison, [], [head_path], tmp_path / "none") == []


def test_the_title_names_the_head_commit_once_when_the_ref_is_its_sha():
    import dataclasses

    series = [_series("mlp.eager.inference-bs1.c2-standard-16", "latency", "us", [100.0, 110.0, 120.0])]
    by_branch = _history(series, COMMITS[:3])
    # the pipeline draws the history of its commit
    by_sha = dataclasses.replace(by_branch, ref=by_branch.head)
    hex_branch = dataclasses.replace(by_branch, ref=by_branch.head[:4])  # a branch named like "cafe"
    titles = [history_figures(h, change_points={})["smoke.png"].get_suptitle() for h in (by_branch, by_sha,
                                                                                         hex_branch)]
    assert titles == [f"smoke · median and IQR by commit (first parent) · main ({COMMITS[2][:7]})",
                      f"smoke · median and IQR by commit (first parent) · {COMMITS[2][:7]}",
                      f"smoke · median and IQR by commit (first parent) · {COMMITS[2][:4]} ({COMMITS[2][:7]})"]
