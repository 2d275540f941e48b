"""``benchtrail plot``: PNGs and the offline plotly dashboard of a real history (``history_store``), the
dashboard rendered by headless Chromium."""

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.results.io import load_results_paths


def _run(capsys, *args):
    code = main(list(map(str, args)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


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


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _rendered(page: Path) -> str:
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (CI installs Debian's chromium; see .ci/run)")
    done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("page,kind", [("smoke", "execution"), ("compilation", "compilation")])
def test_dashboard_page_renders_every_series_offline_in_headless_chromium(plotted, page, kind):
    history, out_dir, _ = plotted
    dom = _rendered(out_dir / f"{page}.html")
    assert 'class="main-svg"' in dom  # plotly.js (from plotly.min.js beside the page) ran and drew
    legend = [html.unescape(t) for t in re.findall(r'<text class="legendtext"[^>]*>([^<]*)</text>', dom)]
    assert sorted(legend) == sorted(_names(history, kind))
    medians = sum(p["median"] is not None for s in history["series"].values() if s["kind"] == kind
                  for p in s["points"])
    assert medians == 3 * len(legend)  # c1, c2, c3 for every series
    assert len(re.findall(r'<path class="point[ "]', dom)) == medians


@pytest.mark.e2e
def test_dashboard_carries_the_stored_medians(plotted, history_store):
    history, out_dir, _ = plotted
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
    ('{"schema_version": 99, "series": {}}', "has schema_version 99, but this benchtrail reads versions 1..1; "
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
    code, out, err = _run(capsys, "plot", "--history", history, "--output-dir", out_dir)
    assert code == 1
    assert str(history) in err and message in err
    assert not out_dir.exists() and not list(tmp_path.glob(".dash*"))


@pytest.mark.e2e
def test_plot_never_writes_into_a_folder_that_holds_files(plotted, tmp_path, capsys):
    history, out_dir, _ = plotted
    history_file = _write(tmp_path / "history.json", json.dumps(history))
    code, out, err = _run(capsys, "plot", "--history", history_file, "--output-dir", out_dir)
    assert code == 1 and "exists and is not an empty folder" in err
