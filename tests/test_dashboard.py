"""``benchtrail plot``: PNGs and the offline plotly dashboard of a real history (``history_store``), the
dashboard rendered by headless Chromium."""

import html
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.results.io import load_results_paths
from tests.helpers.cli import run_cli
from tests.helpers.dashboards import rendered
from tests.helpers.git import git_repo
from tests.helpers.stores import small_run


@pytest.fixture(scope="module")
def plotted(history_store, tmp_path_factory):
    """``(history dict, output dir, printed lines)`` of ``history`` then ``plot`` on the store."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("dashboard")
    history_file, out_dir = root / "history.json", root / "dash"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["history", "--store", str(history_store["store"]), "--repo", str(history_store["repo"]),
                     "--ref", "main", "--output", str(history_file)]) == 0
        assert main(["plot", "--history", str(history_file), "--output-dir", str(out_dir)]) == 0
    return json.loads(history_file.read_text()), out_dir, stdout.getvalue().strip().splitlines()


def _names(history: dict, kind: str) -> set[str]:
    return {s["name"] for s in history["series"].values() if s["kind"] == kind}


@pytest.mark.e2e
def test_plot_writes_a_png_per_preset_and_for_compilation_and_prints_index_last(plotted):
    import matplotlib.image

    history, out_dir, lines = plotted
    assert lines[-1] == str(out_dir / "index.html")
    assert sorted(p.name for p in out_dir.glob("*.png")) == ["compilation.png", "smoke.png"]
    for name in ("smoke.png", "compilation.png"):
        image = matplotlib.image.imread(out_dir / name)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100, name
        assert image[..., :3].std() > 0.01  # something is drawn, not a blank canvas
    index = (out_dir / "index.html").read_text()
    for link in ("smoke.html", "compilation.html", "smoke.png", "compilation.png"):
        assert f'href="{link}"' in index
    for commit in history["commits"]:
        assert commit["commit"][:7] in index and commit["run_id"] in index


@pytest.mark.e2e
@pytest.mark.parametrize("page,kind", [("smoke", "execution"), ("compilation", "compilation")])
def test_dashboard_page_renders_every_series_offline_in_headless_chromium(plotted, page, kind):
    history, out_dir, _ = plotted
    dom = rendered(out_dir / f"{page}.html")
    assert 'class="main-svg"' in dom  # plotly.js (from plotly.min.js beside the page) ran and drew
    legend = [html.unescape(t) for t in re.findall(r'<text class="legendtext"[^>]*>([^<]*)</text>', dom)]
    assert sorted(legend) == sorted(_names(history, kind))
    medians = sum(p["median"] is not None for s in history["series"].values() if s["kind"] == kind
                  for p in s["points"])
    assert medians == 3 * len(legend)  # c1, c2, c3 for every series
    runs = sum(r["median"] is not None for s in history["series"].values() if s["kind"] == kind
               for p in s["points"] for r in p["runs"])
    assert len(re.findall(r'<path class="point[ "]', dom)) == medians + runs  # the line's and each run's


@pytest.mark.e2e
def test_dashboard_carries_the_stored_medians(plotted, history_store):
    _history, out_dir, _ = plotted
    page = (out_dir / "smoke.html").read_text()
    assert "cdn.plot.ly" not in page and '<script charset="utf-8" src="plotly.min.js">' in page
    assert (out_dir / "plotly.min.js").stat().st_size > 1_000_000
    start = re.search(r'Plotly\.newPlot\(\s*"benchtrail-smoke",\s*', page).end()
    figure, _ = json.JSONDecoder().raw_decode(page, start)  # the traces, as plotly.js gets them
    traces = {t["name"]: t["y"] for t in figure if t.get("showlegend", True) is not False and "name" in t}
    want = {}
    for name in ("c1", "c2", "c3"):
        for f in load_results_paths([history_store["run_dirs"][name]]):
            for b in f.benchmarks:
                if b.kind == "execution":
                    want.setdefault(b.name, []).append(b.median)
    assert traces == want


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,message", [
    ('{"schema_version": 99, "series": {}}',
     "has schema_version 99, but this benchtrail reads versions 1..2; "
                                             "upgrade benchtrail"),
    ('{"schema_version": "1"}', "missing or non-integer 'schema_version'"),
    ('{"schema_version": 1, "series": {', "is not valid JSON"),
    ('{"schema_version": 1, "ref": "HEAD", "head": "a", "store": "s", "commits": [], "series": {}, "colour": 1}',
     "unknown field(s) ['colour']"),
    ('{"schema_version": 1, "ref": "HEAD", "head": "a", "store": "s", "commits": [], '
     '"series": {"x": {"name": "n"}}}', "series 'x': Series lacks field"),
])
def test_plot_refuses_a_bad_history_file_naming_it_and_writes_nothing(tmp_path, capsys, text, message):
    history = _write(tmp_path / "history.json", text)
    out_dir = tmp_path / "dash"
    code, _out, err = run_cli(capsys, "plot", "--history", history, "--output-dir", out_dir)
    assert code == 1
    assert str(history) in err and message in err
    assert not out_dir.exists() and not list(tmp_path.glob(".dash*"))


@pytest.mark.e2e
def test_plot_never_writes_into_a_folder_that_holds_files(plotted, tmp_path, capsys):
    history, out_dir, _ = plotted
    history_file = _write(tmp_path / "history.json", json.dumps(history))
    code, _out, err = run_cli(capsys, "plot", "--history", history_file, "--output-dir", out_dir)
    assert code == 1 and "exists and is not an empty folder" in err


def _edited(history: dict, edit) -> dict:
    """A deep copy of ``history`` changed by ``edit(copy, first execution series)``."""
    copy = json.loads(json.dumps(history))
    edit(copy, next(s for s in copy["series"].values() if s["kind"] == "execution"))
    return copy


def _plot_refused(history: dict, tmp_path: Path, capsys) -> str:
    # json writes NaN and Infinity as such
    history_file = _write(tmp_path / "history.json", json.dumps(history))
    before = set(tmp_path.rglob("*"))
    out_dir = tmp_path / "a" / "b" / "dash"
    code, out, err = run_cli(capsys, "plot", "--history", history_file, "--output-dir", out_dir)
    assert code == 1 and out == ""
    assert set(tmp_path.rglob("*")) == before  # nothing written, inside --output-dir or out of it
    assert err.startswith(f"benchtrail: error: history file {history_file}: ")
    return err


@pytest.mark.e2e
@pytest.mark.parametrize("preset,why", [
    ("../../evil2",
     "cannot name a dashboard page (<preset>.png, <preset>.html); allowed: letters, digits, '.', "
                    "'_' and '-', starting with a letter or digit, without '..'"),
    ("smoke ✓ <b>x</b>",
     "cannot name a dashboard page (<preset>.png, <preset>.html); allowed: letters, digits"),
    ("a..b", "cannot name a dashboard page"),
    ("compilation", "has the name of a page the dashboard writes itself (compilation.html); reserved: "
                    "compilation, index, no-preset; rename the preset"),
    ("index", "has the name of a page the dashboard writes itself (index.html)"),
])
def test_plot_refuses_a_preset_that_cannot_name_a_page_naming_series_and_preset(plotted, tmp_path, capsys,
                                                                                preset, why):
    history, _, _ = plotted
    edited = _edited(history, lambda h, s: s.update(presets=[preset]))
    sid, series = next((i, s) for i, s in edited["series"].items() if s["presets"] == [preset])
    err = _plot_refused(edited, tmp_path, capsys)
    assert f": series {sid!r} ({series['name']}): preset {preset!r} {why}" in err


@pytest.mark.e2e
def test_an_execution_series_of_no_preset_gets_the_no_preset_page(plotted, tmp_path, capsys):
    history, _, _ = plotted
    edited = _edited(history, lambda h, s: s.update(presets=[]))
    name = next(s["name"] for s in edited["series"].values() if s["kind"] == "execution" and not s["presets"])
    out_dir = tmp_path / "dash"
    code, _out, err = run_cli(capsys, "plot", "--history", _write(tmp_path / "h.json", json.dumps(edited)),
                          "--output-dir", out_dir)
    assert code == 0, err
    assert sorted(p.name for p in out_dir.glob("*.png")) == ["compilation.png", "no-preset.png", "smoke.png"]
    page = (out_dir / "no-preset.html").read_text()
    assert "execution series of no preset" in page and f'"name":"{name}"' in page.replace(": ", ":")
    assert f'"name":"{name}"' not in (out_dir / "smoke.html").read_text().replace(": ", ":")
    assert 'href="no-preset.html"' in (out_dir / "index.html").read_text()


def _point(h: dict, s: dict, **changes) -> None:
    s["points"][0].update(changes)


@pytest.mark.e2e
@pytest.mark.parametrize("edit,message", [
    (lambda h, s: _point(h, s, median=math.nan),
     "points[0]: field 'median' is nan; allowed: a finite number or null"),
    (lambda h, s: _point(h, s, p75=math.inf),
     "points[0]: field 'p75' is inf; allowed: a finite number or null"),
    (lambda h, s: _point(h, s, status="great"),
     "points[0]: field 'status' is 'great'; allowed: ok, failed, timeout, oom, mismatch, skipped"),
    (lambda h, s: s.update(kind="weird"), "field 'kind' is 'weird'; allowed: execution, compilation"),
    (lambda h, s: _point(h, s, commit="f" * 40),
     f"points[0]: commit {'f' * 40!r} is not in 'commits'; allowed: a commit listed there"),
    (lambda h, s: s["points"].append(s["points"][0]), "points[3]: a second point at commit "),
    (lambda h, s: s["points"].reverse(), "points[1]: commit "),
    (lambda h, s: h.update(commits=[]), "field 'commits' is empty; allowed: the first-parent commits walked"),
    (lambda h, s: h["commits"].append(h["commits"][0]), "commits[3]: commit "),
    (lambda h, s: _point(h, s, n=-1), "points[0]: field 'n' is -1; allowed: a whole number from 0"),
])
def test_plot_refuses_values_a_history_cannot_hold_naming_field_value_and_what_is_allowed(plotted, tmp_path,
                                                                                          capsys,
                                                                                          edit, message):
    history, _, _ = plotted
    err = _plot_refused(_edited(history, edit), tmp_path, capsys)
    assert message in err


@pytest.mark.e2e
def test_plot_names_an_output_dir_that_is_a_file(plotted, tmp_path, capsys):
    history, _, _ = plotted
    afile = _write(tmp_path / "afile", "x\n")
    code, _out, err = run_cli(capsys, "plot", "--history", _write(tmp_path / "h.json", json.dumps(history)),
                          "--output-dir", afile)
    assert code == 1 and f"--output-dir {afile} is a file" in err


# -- benchtrail dashboard: a run directory's history, drawn into it
# -------------------------------------------


def _dashboard(capsys, *args):
    return run_cli(capsys, "dashboard", *args)


@pytest.mark.e2e
def test_dashboard_command_draws_the_runs_first_parent_history_with_the_run_newest(history_store, tmp_path,
                                                                                   capsys,
                                                                                  monkeypatch):
    commits = history_store["commits"]
    run_dir = tmp_path / "runs" / "9001" / "2"  # the c3 run's results, downloaded into a CI run directory
    shutil.copytree(history_store["run_dirs"]["c3"] / "results", run_dir / "results")
    monkeypatch.chdir(history_store["repo"])
    code, out, err = _dashboard(capsys, "--store", history_store["store"], "--run-dir", run_dir, "--run-id",
                                "9001",
                                "--attempt", 2)
    assert code == 0, err
    index = run_dir / "dashboard" / "index.html"
    assert out.strip().splitlines()[-1] == str(index)
    assert sorted(p.name for p in index.parent.glob("*.png")) == ["compilation.png", "smoke.png"]
    assert (index.parent / "plotly.min.js").is_file()  # a plain folder, not the store's run: plotly.js beside
    page = index.read_text()
    stored = {name: history_store["run_dirs"][name].parent.name for name in ("c1", "c2", "c3")}
    for name in ("c1", "c2", "c3"):
        assert commits[name][:7] in page
    assert stored["c1"] in page and stored["c2"] in page and "9001" in page
    assert stored["c3"] not in page  # this run, not the stored run of c3, is c3's point
    assert commits["s1"][:7] not in page  # first parents only
    smoke = (index.parent / "smoke.html").read_text()
    assert '"9001/2"' in smoke or "9001" in smoke
    # The pipeline's own dashboard (made with the test's working directory elsewhere) names the commits'
    # subjects from the repository it was given.
    piped = (history_store["run_dirs"]["c2"] / "dashboard" / "index.html").read_text()
    assert "<td>c1</td>" in piped and "<td>c2</td>" in piped

    # --max-commits 1: this run alone; a dashboard that exists already is never overwritten
    again = tmp_path / "again"
    shutil.copytree(run_dir / "results", again / "results")
    code, out, err = _dashboard(capsys, "--store", history_store["store"], "--run-dir", again, "--run-id",
                                "9001",
                                "--attempt", 3, "--max-commits", 1)
    assert code == 0, err
    page = (again / "dashboard" / "index.html").read_text()
    assert commits["c3"][:7] in page and commits["c2"][:7] not in page
    code, out, err = _dashboard(capsys, "--store", history_store["store"], "--run-dir", again, "--run-id",
                                "9001",
                                "--attempt", 3)
    assert code == 1 and f"--run-dir {again} holds dashboard/ already" in err


def test_dashboard_command_with_an_empty_store_draws_the_run_alone(tmp_path, capsys, monkeypatch):
    (tmp_path / "repo").mkdir()
    commit = git_repo(tmp_path / "repo")
    run_dir = small_run(tmp_path / "run", commit)
    (tmp_path / "store").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    code, out, err = _dashboard(capsys, "--store", tmp_path / "store", "--run-dir", run_dir, "--run-id",
                                "local-1",
                                "--attempt", 1)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == str(run_dir / "dashboard" / "index.html")
    page = (run_dir / "dashboard" / "index.html").read_text()
    assert commit[:7] in page and "local-1" in page
    assert list((tmp_path / "store").iterdir()) == []  # the store is only read


@pytest.mark.parametrize("where, store, message", [
    ("plain", "store",
     "is not a git repository; run `benchtrail dashboard` in the repository's working tree"),
    ("other-repo", "store", "the run's commit"),
    ("repo", "no-such-store", "no such store"),
])
def test_dashboard_command_without_history_to_draw_says_why_and_exits_0(tmp_path, capsys, monkeypatch, where,
                                                                        store,
                                                                        message):
    for name in ("repo", "other-repo", "plain", "store"):
        (tmp_path / name).mkdir()
    run_dir = small_run(tmp_path / "run", git_repo(tmp_path / "repo"))
    git_repo(tmp_path / "other-repo")
    monkeypatch.chdir(tmp_path / where)
    code, out, err = _dashboard(capsys, "--store", tmp_path / store, "--run-dir", run_dir, "--run-id",
                                "local-1",
                                "--attempt", 1)
    assert code == 0 and out == ""
    assert "no dashboard: " in err and message in " ".join(err.split())
    assert not (run_dir / "dashboard").exists() and not (tmp_path / "no-such-store").exists()


@pytest.mark.parametrize("argv, message", [
    (["--run-id", "../x", "--attempt", "1"], "--run-id '../x' is not path-safe"),
    (["--run-id", "r", "--attempt", "0"], "expected a whole number from 1 (GITHUB_RUN_ATTEMPT), got '0'"),
])
def test_dashboard_command_refuses_a_bad_run_id_or_attempt(tmp_path, capsys, argv, message):
    run_dir = small_run(tmp_path / "run", "a" * 40)
    try:
        code = main(["dashboard", "--store", str(tmp_path), "--run-dir", str(run_dir), *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 1 and message in capsys.readouterr().err


def test_dashboard_command_refuses_a_run_dir_without_results_or_of_two_commits(tmp_path, capsys):
    code, _, err = _dashboard(capsys, "--store", tmp_path, "--run-dir", tmp_path / "missing", "--run-id", "r",
                              "--attempt", 1)
    assert code == 1 and f"cannot read results file {tmp_path / 'missing'}" in err
    run_dir = small_run(tmp_path / "run", "a" * 40, "b" * 40)
    code, _, err = _dashboard(capsys, "--store", tmp_path, "--run-dir", run_dir, "--run-id", "r", "--attempt",
                              1)
    assert code == 1
    assert f"--run-dir {run_dir}: its results files come from 2 commits (aaaaaaaaaaaa, bbbbbbbbbbbb)" in err


def test_the_dashboard_figure_dict_is_a_valid_plotly_figure_with_each_series_on_its_own_axes():
    """The page's figure is written unvalidated (plotly.io.to_html(validate=False)); here plotly validates it,
    and each series' median trace sits on the subplot whose title is its name, with its unit on the y axis."""
    import plotly.graph_objects as go

    from benchtrail.history.dashboard import _figure
    from benchtrail.history.series import Point, Series

    commits = ["a" * 40, "b" * 40]
    units = ("us", "bytes", "count")  # 3 series in 2 columns: the grid's fourth cell stays empty
    series = [Series(f"id-{k}", f"s{k}.eager", "execution", "latency", unit, "laptop", ("p",), "eager", None,
                     tuple(Point(c, "r", 1, 10.0 + k, 1.0, 9.0, 12.0, 5, "ok", 9.5, 10.5) for c in commits))
              for k, unit in enumerate(units)]
    figure = go.Figure(_figure(series, commits))  # raises on a property plotly does not know
    layout = figure.layout
    assert [a.text for a in layout.annotations] == ["s0.eager", "s1.eager", "s2.eager"]
    medians = [t for t in figure.data if t.mode == "lines+markers"]
    assert [t.name for t in medians] == ["s0.eager", "s1.eager", "s2.eager"]
    assert [(t.xaxis, t.yaxis) for t in medians] == [("x", "y"), ("x2", "y2"), ("x3", "y3")]
    bands = [t for t in figure.data if t.mode == "lines"]  # p75 then p25 (filled to it) per series
    assert [(t.xaxis, t.yaxis, t.fill) for t in bands] == [(a, b, f) for a,
                                                           b in (("x", "y"), ("x2", "y2"), ("x3", "y3"))
                                                           for f in (None, "tonexty")]
    assert [t.y for t in bands[:2]] == [(10.5, 10.5), (9.5, 9.5)]
    # Each title sits over its own axes: the annotation's x is the middle of that axes' domain.
    for a, n in zip(layout.annotations, ("", "2", "3")):
        domain = layout[f"xaxis{n}"].domain
        assert a.x == pytest.approx((domain[0] + domain[1]) / 2) and a.font.size == 11
    assert [layout[f"yaxis{n}"].title.text for n in ("", "2", "3")] == ["µs per iteration", "bytes", "count"]
    assert list(layout.xaxis3.categoryarray) == ["a" * 7, "b" * 7] and layout.xaxis3.type == "category"
    assert [t.y for t in medians] == [(10.0, 10.0), (11.0, 11.0), (12.0, 12.0)]
    assert layout.template.layout.plot_bgcolor == "white"  # plotly_white, expanded as the dict carries it
