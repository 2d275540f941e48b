"""Assets that a store's runs share (``<root>/assets/<name>``), on both backends (``tests.test_store.store``)."""

from __future__ import annotations

import pytest

from benchtrail.errors import UserError
from tests.test_store import store  # noqa: F401 - the fixture: a folder, and GCS with create-only enforced


def test_an_asset_is_written_once_and_a_second_write_keeps_the_first(store, tmp_path):  # noqa: F811
    first = store.write_asset("plotly-1.0.0.min.js", b"one")
    assert store.write_asset("plotly-1.0.0.min.js", b"two") == first  # no upload: a 412 would say "other content"
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
def test_an_asset_name_is_one_safe_path_segment(store, name):  # noqa: F811
    with pytest.raises(UserError, match="asset"):
        store.write_asset(name, b"x")
