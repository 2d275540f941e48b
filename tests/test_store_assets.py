"""Assets that a store's runs share (``<root>/assets/<name>``), on both backends (the ``store`` fixture,
tests/conftest.py)."""

from __future__ import annotations

import re
import shutil

import pytest

from benchtrail.errors import UserError
from tests.helpers.dashboards import rendered


def test_an_asset_is_written_once_and_a_second_write_keeps_the_first(store, tmp_path):
    first = store.write_asset("plotly-1.0.0.min.js", b"one")
    # no upload: a 412 would say "other content"
    assert store.write_asset("plotly-1.0.0.min.js", b"two") == first
    assert first == (f"{store.url}/assets/plotly-1.0.0.min.js" if str(first).startswith("gs://")
                     else store.root / "assets" / "plotly-1.0.0.min.js")
    if str(first).startswith("gs://"):
        from google.cloud import storage

        bucket, name = first.removeprefix("gs://").split("/", 1)
        assert storage.Client(project="test").bucket(bucket).blob(name).download_as_bytes() == b"one"
        assert (tmp_path / "staging" / bucket / name).read_bytes() == b"one"  # the staged pages' copy
    else:
        assert first.read_bytes() == b"one"


@pytest.mark.parametrize("name", ["a/b.js", "../x.js", "x[1].js", ""])
def test_an_asset_name_is_one_safe_path_segment(store, name):
    with pytest.raises(UserError, match="asset"):
        store.write_asset(name, b"x")


# -- one plotly.js per store: the pipeline's pages load it by a relative path
# -------------------------------------


def _plotly_src(page: str) -> str:
    (src,) = re.findall(r'<script charset="utf-8" src="([^"]+)"></script>', page)
    return src


@pytest.mark.e2e
def test_a_local_stores_runs_share_one_plotly_js_that_their_pages_load(history_store):
    from benchtrail.history.dashboard import plotly_asset

    name, data = plotly_asset()
    root, asset = history_store["store"], history_store["store"] / "assets" / name
    assert name == "plotly-3.7.0.min.js" and list((root / "assets").iterdir()) == [asset]
    assert asset.read_bytes() == data and not list(root.glob("runs/**/plotly.min.js"))
    pages = [p for p in root.glob("runs/*/*/dashboard/*.html") if p.name != "index.html"]
    assert sorted(p.parent.parent for p in pages) == sorted(2 * list(history_store["run_dirs"].values()))
    for page in pages:
        assert (page.parent / _plotly_src(page.read_text())).resolve() == asset.resolve()
    dom = rendered(history_store["run_dirs"]["c3"] / "dashboard" / "smoke.html")
    assert 'class="main-svg"' in dom  # plotly.js, loaded from the store's copy, drew


@pytest.mark.e2e
def test_runs_staged_for_a_gcs_store_share_one_plotly_js_object_that_their_pages_load(history_store,
                                                                                      gcs_bucket,
                                                                                       tmp_path):
    import posixpath

    from google.cloud import storage

    from benchtrail.history.dashboard import plotly_asset
    from benchtrail.pipeline.report_stages import dashboard_stage
    from benchtrail.store import open_store

    gcs, (name, data) = open_store(f"gs://{gcs_bucket}/ci"), plotly_asset()
    bucket = storage.Client(project="test").bucket(gcs_bucket)
    generations = []
    for run_id in ("r1", "r2"):
        run_dir = gcs.create_run_dir(run_id, 1)
        shutil.copytree(history_store["run_dirs"]["c3"] / "results", run_dir / "results")
        assert dashboard_stage(gcs, history_store["repo"], history_store["commits"]["c3"], run_id, 1, run_dir)
        gcs.upload_run(run_dir, run_id, 1)
        generations.append(bucket.get_blob(f"ci/assets/{name}").generation)
    # created once (the emulator would overwrite: it ignores preconditions)
    assert generations[0] == generations[1]
    assert bucket.get_blob(f"ci/assets/{name}").download_as_bytes() == data
    names = [b.name for b in bucket.list_blobs()]
    assert [n for n in names if "plotly" in n] == [f"ci/assets/{name}"]
    pages = [n for n in names if n.endswith(("smoke.html", "compilation.html"))]
    assert len(pages) == 4
    for page in pages:  # resolved against the page's object name, as a browser resolves it under one URL
        src = _plotly_src(bucket.blob(page).download_as_text())
        assert posixpath.normpath(posixpath.join(posixpath.dirname(page), src)) == f"ci/assets/{name}"
        # the staging folder mirrors the layout, asset included
        staged = tmp_path / "staging" / gcs_bucket / page
        assert (staged.parent / src).resolve().read_bytes() == data
