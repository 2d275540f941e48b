"""The artifact store: run directories and per-commit pointers (``docs/formats.md``).

``open_store`` takes a folder path or a ``file://`` URL. Layout::

    <root>/runs/<run_id>/<attempt>/...            one run directory, never overwritten
    <root>/commits/<sha>/<run_id>-<attempt>.json  pointer: which presets/devices that run holds
"""

from __future__ import annotations

from benchtrail.store.local import LocalStore, open_store

__all__ = ["LocalStore", "open_store"]
