"""Stable ids for suite definitions.

Leaf ids (models, devices, compile and execution configs) are fixed strings written once in
``benchmark_suites/unique_ids.py``. Composite ids hash their children's ids with their positions,
as IREE's ``e2e_test_framework/unique_ids.py`` does, so the same children in another order give
another id, and a child equal to ``TRANSPARENT_ID`` is skipped: a field added later with a
transparent default leaves every existing id unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

#: Placeholder id that ``hash_composite_id`` skips (IREE's TRANSPARENT_ID).
TRANSPARENT_ID = "00000000000000000000000000000000"


def hash_composite_id(keys: Sequence[str]) -> str:
    """Return the sha256 hex digest (64 chars) over ``"<index>-<key>:"`` for each non-transparent key.

    Example: ``hash_composite_id(["a", "b"]) != hash_composite_id(["b", "a"])``.
    """
    return hashlib.sha256("".join(f"{index}-{key}:" for index, key in enumerate(keys)
                                  if key != TRANSPARENT_ID).encode()).hexdigest()
