"""``benchtrail pages``: the GitHub Pages site of a real store (``history_store``: runs at c1, c2, s1 and c3,
first parents c1-c2-c3), served over HTTP under a sub-path as GitHub Pages serves it and rendered by headless
Chromium; and the PR comment's link to it (``BENCHTRAIL_PAGES_URL``)."""

import contextlib
import functools
import html
import http.server
import io
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.compare.comment_header import verdict_line
from benchtrail.compare.document import load_comparison
from benchtrail.history.collect import load_history
from benchtrail.history.series import page_groups
from tests.helpers.cli import run_cli
from tests.helpers.comparisons import comparison_of, write_comparison
from tests.helpers.dashboards import chromium
from tests.helpers.records import record


@pytest.fixture(scope="module")
def site(history_store, tmp_path_factory):
    """``(site folder, printed lines, history)``: ``benchtrail pages`` of ``main`` in the history store, and the
    history of the same walk (``benchtrail history``) to check the site against."""
    root = tmp_path_factory.mktemp("pages")
    stdout = io.StringIO()
    walk = ["--store", str(history_store["store"]), "--repo", str(history_store["repo"]), "--ref", "main"]
    with contextlib.redirect_stdout(stdout):
        assert main(["pages", *walk, "--output-dir", str(root / "site")]) == 0
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["history", *walk, "--output", str(root / "history.json")]) == 0
    return root / "site", stdout.getvalue().strip().splitlines(), load_history(root / "history.json")


@pytest.fixture(scope="module")
def served(site, tmp_path_factory):
    """The site copied to ``<root>/REPO/`` and served over HTTP from ``<root>``: its URL
    ``http://127.0.0.1:PORT/REPO/``, as GitHub Pages serves ``https://OWNER.github.io/REPO/``."""
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(site[0], root / "REPO")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no line per request on stderr
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/REPO/"
    finally:
        server.shutdown()
        server.server_close()


def _browse(url: str, profile: Path, *flags: str) -> str:
    """Headless Chromium's stdout for ``url`` (``--dump-dom``, or with ``--screenshot`` nothing to read)."""
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (CI installs Debian's chromium; see .ci/run)")
    done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=10000",
                           "--disable-background-networking", "--disable-component-update", "--no-first-run",
                           f"--user-data-dir={profile}", *flags, url], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _screenshot(url: str, tmp_path: Path, name: str) -> Path:
    """A PNG of ``url`` as headless Chromium draws it, under ``tmp_path``; its path is printed (``-rP``)."""
    import matplotlib.image

    png = tmp_path / name
    _browse(url, tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={png}")
    image = matplotlib.image.imread(png)
    # something drawn, not a blank page
    assert image.shape[:2] == (2400, 1280) and image[..., :3].std() > 0.01
    print(f"screenshot of {url}: {png}")
    return png


def _rows(dom: str, table: int) -> list[list[str]]:
    """The cells' text of each row of the ``table``-th table of ``dom``."""
    body = re.findall(r"<table>(.*?)</table>", dom, flags=re.S)[table]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row,
                                                                                  flags=re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)]


@pytest.mark.e2e
def test_the_site_holds_the_history_pages_pngs_and_plotly_and_prints_its_index_last(site):
    folder, lines, history = site
    assert lines[-1] == str(folder / "index.html")
    assert lines[-2] == f"{len(history.series)} series over 3 of 3 first-parent commits of main"
    pages = list(page_groups(history))
    assert sorted(pages) == ["compilation", "smoke"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [".nojekyll", "index.html", "plotly.min.js", *(f"{p}.html" for p in pages),
         *(f"{p}.png" for p in pages)])
    assert (folder / "plotly.min.js").stat().st_size > 1_000_000
    for page in pages:  # plotly.js from beside the page, never the store's assets/ nor the network
        text = (folder / f"{page}.html").read_text()
        assert '<script charset="utf-8" src="plotly.min.js">' in text
        assert "assets/" not in text and "cdn.plot.ly" not in text


@pytest.mark.e2e
def test_the_index_in_headless_chromium_lists_every_run_and_links_every_page(site, served, history_store,
                                                                             tmp_path):
    folder, _, history = site
    dom = _browse(served + "index.html", tmp_path / "profile", "--dump-dom")
    links = re.findall(r'<a href="([^"]+)"', dom)
    pages = list(page_groups(history))
    assert sorted(links) == sorted([*(f"{p}.html" for p in pages), *(f"{p}.png" for p in pages)])
    assert all((folder / link).is_file() for link in links)

    runs = _rows(dom, 0)
    assert runs[0] == ["commit", "run", "stored", "presets", "devices", "verdicts"]
    want = []
    for name in ("c3", "c2", "c1"):  # newest first; s1 is no first parent of main
        run_dir = history_store["run_dirs"][name]
        pointer = json.loads((history_store["store"] / "commits" / history_store["commits"][name]
                              / f"{run_dir.parent.name}-{run_dir.name}.json").read_text())
        assert pointer["presets"] == ["smoke"] and pointer["devices"]
        verdicts = verdict_line(load_comparison(run_dir / "comparison.json")).removeprefix("### benchtrail: ")
        created = pointer["created"]  # a local store's stored_at: the pointer's own time (UTC)
        assert created.endswith("+00:00")
        stored = f"{created[:10]} {created[11:16]} UTC"
        want.append([history_store["commits"][name][:7], f"{run_dir.parent.name}/{run_dir.name}", stored,
                     "smoke",
                     ", ".join(pointer["devices"]), verdicts])
    assert runs[1:] == want
    first = load_comparison(history_store["run_dirs"]["c1"] / "comparison.json")  # no baseline: every row new
    assert f"{len(first.rows)} new" in runs[3][5]
    assert history_store["run_dirs"]["s1"].parent.name not in dom

    commits = _rows(dom, 1)  # the commits walked, with their subjects from --repo
    assert [r[0] for r in commits[1:]] == [history_store["commits"][n][:7] for n in ("c3", "c2", "c1")]
    assert [r[2] for r in commits[1:]] == ["c3", "c2", "c1"]
    _screenshot(served + "index.html", tmp_path, "pages-index.png")


@pytest.mark.e2e
@pytest.mark.parametrize("page,kind", [("smoke", "execution"), ("compilation", "compilation")])
def test_a_history_page_served_under_a_sub_path_draws_every_panel_in_headless_chromium(site, served, tmp_path,
                                                                                      page, kind):
    _, _, history = site
    series = [s for s in history.series if s.kind == kind]
    dom = _browse(served + f"{page}.html", tmp_path / "profile", "--dump-dom")
    assert 'class="main-svg"' in dom  # plotly.js (the site's own copy) ran and drew
    assert len(re.findall(r'<g class="subplot x\d*y\d*"', dom)) == len(series)  # a panel per series
    legend = sorted(html.unescape(t) for t in re.findall(r'<text class="legendtext"[^>]*>([^<]*)</text>',
                                                         dom))
    assert legend == sorted(s.name for s in series)
    medians = sum(p.median is not None for s in series for p in s.points)
    runs = sum(r.median is not None for s in series for p in s.points for r in p.runs)
    assert medians == 3 * len(series)  # c1, c2, c3 for every series
    assert len(re.findall(r'<path class="point[ "]', dom)) == medians + runs  # the line's and each run's
    _screenshot(served + f"{page}.html", tmp_path, f"pages-{page}.png")


def test_pages_refuses_an_output_dir_holding_files_and_a_store_without_runs_and_writes_nothing(tmp_path,
                                                                                               capsys,
                                                                                             repo):
    (tmp_path / "store").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.html").write_text("kept")
    code = main(["pages", "--store", str(tmp_path / "store"), "--repo", str(repo), "--output-dir",
                 str(tmp_path / "full")])
    assert code == 1 and "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["old.html"]
    code = main(["pages", "--store", str(tmp_path / "store"), "--repo", str(repo), "--output-dir",
                 str(tmp_path / "site")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1 and f"{tmp_path / 'store'}: no usable run of any of the 3 first-parent commit(s)" in err
    # no site, no temporary folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "repo", "store"]


# -- the PR comment's link
# ----------------------------------------------------------------------------------------


def _body(tmp_path, capsys, name, *flags):
    out = tmp_path / name
    comparison = tmp_path / "comparison.json"
    if not comparison.exists():
        write_comparison(tmp_path, comparison_of([record("a")], [record("a")]))
    code, _, err = run_cli(capsys, "comment", "--comparison", comparison, "--output-dir", out,
                           "--artifacts-url", "https://github.com/o/r/actions/runs/1", *flags)
    assert code == 0, err
    return (out / "comment.md").read_text(), json.loads((out / "comment.json").read_text())


def test_the_comment_links_the_pages_dashboard_when_benchtrail_pages_url_is_set_and_is_unchanged_without(
        tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BENCHTRAIL_PAGES_URL", raising=False)
    plain, plain_json = _body(tmp_path, capsys, "plain")
    assert "Pages" not in plain
    monkeypatch.setenv("BENCHTRAIL_PAGES_URL", "")  # set but empty: no link, as unset
    assert _body(tmp_path, capsys, "empty") == (plain, plain_json)

    monkeypatch.setenv("BENCHTRAIL_PAGES_URL", "https://octo.github.io/proj/")
    linked, linked_json = _body(tmp_path, capsys, "linked")
    line = "Dashboard on GitHub Pages (every stored run, by commit): https://octo.github.io/proj/"
    lines = linked.splitlines()
    assert lines.count(line) == 1
    assert lines[lines.index(line)
                 + 1] == "Actions artifacts of this run: https://github.com/o/r/actions/runs/1#artifacts"
    assert "\n".join(x for x in lines if x != line) + "\n" == plain  # the link line is all that changes
    assert linked_json["body"] == linked and {k: v for k, v in linked_json.items() if k != "body"} == {
        k: v for k, v in plain_json.items() if k != "body"}

    other, _ = _body(tmp_path, capsys, "flag", "--pages-url", "https://example.org/bench/")  # the flag wins
    assert "Dashboard on GitHub Pages (every stored run, by commit): https://example.org/bench/" in other.splitlines()
    assert "octo.github.io" not in other
    none, _ = _body(tmp_path, capsys, "off", "--pages-url", "")  # an empty flag turns the variable's link off
    assert none == plain


@pytest.mark.parametrize("env, flags, message", [
    ("octo.github.io/proj", [],
     "BENCHTRAIL_PAGES_URL 'octo.github.io/proj': allowed: the https:// URL of the "
                                "GitHub Pages site"),
    (None, ["--pages-url", "https://x/`rm`"], "--pages-url 'https://x/`rm`': allowed: the https:// URL"),
])
def test_the_comment_refuses_a_pages_url_that_is_no_https_url_naming_its_source(tmp_path, capsys, monkeypatch,
                                                                                env,
                                                                                flags, message):
    if env is None:
        monkeypatch.delenv("BENCHTRAIL_PAGES_URL", raising=False)
    else:
        monkeypatch.setenv("BENCHTRAIL_PAGES_URL", env)
    out = tmp_path / "comment"
    code, stdout, err = run_cli(capsys, "comment", "--comparison",
                                write_comparison(tmp_path, comparison_of([record("a")], [record("a")])),
                                "--output-dir", out, *flags)
    assert code == 1 and stdout == "" and message in err
    assert not out.exists()
