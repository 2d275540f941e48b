"""The checked export document: suite/export.py's export object, an execution selection's sample sizes
checked; ``benchtrail export`` and the main job write the same. Torch-free."""

from __future__ import annotations

from typing import Any

from benchtrail.stats.power import check_sample_sizes
from benchtrail.suite.definitions import Suite
from benchtrail.suite.export import export_object


def checked_export(
    suite: Suite,
    kind: str,
    presets: tuple[str, ...],
    shard_count: int = 1,
    seed: bool = False,
    name_filter: str | None = None,
) -> dict[str, Any]:
    """The export object, refusing an execution selection whose run configs take too few samples to ever
    show a change; an execution export of a ``suite`` narrowed by ``--filter`` records ``name_filter`` as
    ``filter``. Raises UserError as the export and the sample-size check do."""
    if kind == "execution":
        check_sample_sizes(suite.select_run_configs(presets))
    obj = export_object(suite, kind, presets, shard_count, seed)
    if kind == "execution" and name_filter is not None and not seed:
        obj["filter"] = name_filter
    return obj
