"""Entry points ``"package.module:function"`` and the modes that write an artifact; torch-free."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from benchtrail.suite.definitions import CompileMode

#: Artifact file of each mode that writes one, inside the module directory.
ARTIFACTS = {CompileMode.EXPORT: "exported_program.pt2", CompileMode.AOT_INDUCTOR: "aoti_package.pt2"}
#: Modes compiled by ``torch.compile`` with the Inductor backend.
INDUCTOR_MODES = (CompileMode.INDUCTOR, CompileMode.INDUCTOR_MAX_AUTOTUNE)


class ModuleError(Exception):
    """A module cannot be built or loaded; the message says which and why."""


def load_entry_point(entry_point: str) -> Callable[..., Any]:
    """Import ``"package.module:function"``; the function, not called.

    Raises:
        ModuleError: the entry point is malformed or names nothing.
    """
    module_name, sep, attr = entry_point.partition(":")
    if not sep or not module_name or not attr:
        raise ModuleError(f"entry point {entry_point!r} is not of the form 'package.module:function'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ModuleError(f"cannot load entry point {entry_point!r}: {exc}") from exc
