"""The dashboard's index.html as headless Chromium renders it: each commit's date and subject, gaps
collapsed."""

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.git import git


def _dump_dom(page: Path, profile: Path) -> str:
    """The DOM of ``page`` after Chromium (``chromium`` or ``chromium-browser`` on PATH) loads it headless."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("no chromium or chromium-browser executable on PATH (.ci/run installs Debian's chromium when "
                    "it runs as root with apt-get)")
    done = subprocess.run([binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_dashboard_index_in_headless_chromium_shows_commit_subjects_and_dates_and_collapses_gaps(tmp_path):
    from benchtrail.history.dashboard import write_dashboard
    from benchtrail.history.series import CommitRun, History, Point, Series

    repo = tmp_path / "repo"
    repo.mkdir()
    subjects = ["Add the mlp model", "Speed up conv when a < b & \"fast\"", "gap one", "gap two", "gap three",
                "Use channels_last <b>everywhere</b>"]
    git(repo, "init", "-q", "-b", "main", isolated=True)
    shas = []
    for day, subject in enumerate(subjects, 1):
        dated = {"GIT_COMMITTER_DATE": f"2026-11-{day:02d}T12:00:00Z",
                 "GIT_AUTHOR_DATE": f"2026-11-{day:02d}T12:00:00Z"}
        git(repo, "commit", "-q", "--allow-empty", "-m", subject, isolated=True, env=dated)
        shas.append(git(repo, "rev-parse", "HEAD", isolated=True))
    with_runs = {0: "run-a", 1: "run-b", 5: "run-c"}
    points = tuple(Point(shas[i], run, 1, 100.0 + i, 2.0, 98.0, 103.0, 10, "ok", 99.0 + i, 101.0 + i)
                   for i, run in with_runs.items())
    series = Series(id="rc1", name="mlp.eager.inference-bs1.dev", kind="execution", metric="latency",
                    unit="us",
                    device_name="dev", presets=("smoke",), compile_config="eager", task="inference",
                    points=points)
    history = History(ref="main", head=shas[-1], store="store", series=(series,),
                      commits=tuple(CommitRun(c, with_runs.get(i), 1 if i in with_runs else None)
                                    for i, c in enumerate(shas)))
    index = write_dashboard(history, tmp_path / "dash", repo=repo)
    dom = _dump_dom(index, tmp_path / "profile")
    rows = [html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"</t[dh]>", " ", row))).strip()
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", dom, flags=re.S)]
    assert [" ".join(r.split()) for r in rows] == [
        "commit date subject run",
        f"{shas[5][:7]} 2026-11-06 Use channels_last <b>everywhere</b> run-c/1",
        f"3 commits without runs ({shas[2][:7]} … {shas[4][:7]})",
        f"{shas[1][:7]} 2026-11-02 Speed up conv when a < b & \"fast\" run-b/1",
        f"{shas[0][:7]} 2026-11-01 Add the mlp model run-a/1",
    ]
    assert "gap one" not in dom

