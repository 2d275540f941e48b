"""The export stage's document, checked: ``benchtrail export`` and the main job write the same. Torch-free."""

from __future__ import annotations

from typing import Any

from benchtrail.stats.power import check_sample_sizes
from benchtrail.suite.definitions import Suite
from benchtrail.suite.export import export_object


def checked_export(suite: Suite, kind: str, presets: tuple[str, ...], shard_count: int = 1,
                   seed: bool = False, name_filter: str | None = None) -> dict[str, Any]:
    """``suite.export.export_object``, refusing an execution selection whose run configs take too few
    samples to ever show a change (``stats.power.check_sample_sizes``); an execution export of a ``suite``
    narrowed by ``--filter`` records it as ``filter`` (``name_filter``: compare leaves the baseline's other
    series out; the seed shape has no room for it).

    Raises:
        UserError: as ``export_object`` and ``check_sample_sizes``.
    """
    if kind == "execution":
        check_sample_sizes(suite.select_run_configs(presets))
    obj = export_object(suite, kind, presets, shard_count, seed)
    if kind == "execution" and name_filter is not None and not seed:
        obj["filter"] = name_filter
    return obj
