"""Stable ids: composites hash their children's ids with positions (IREE's ``unique_ids.py``).

A child equal to ``TRANSPARENT_ID`` is skipped: a field added with it as default keeps existing ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

#: Placeholder id that ``hash_composite_id`` skips (IREE's TRANSPARENT_ID).
TRANSPARENT_ID = "00000000000000000000000000000000"


def hash_composite_id(keys: Sequence[str]) -> str:
    """sha256 hex digest (64 chars) over ``"<index>-<key>:"`` of each non-transparent key; order matters."""
    return hashlib.sha256(
        "".join(f"{index}-{key}:" for index, key in enumerate(keys) if key != TRANSPARENT_ID).encode()
    ).hexdigest()
