"""Preset names: parse a list, expand meta-presets (``default``, ``all``), reject unknown names."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from benchtrail.errors import UserError, suggest


def split_presets(text: str) -> list[str]:
    """Split ``"x86_64, cuda comp-stats,"`` on commas and spaces, lowercased."""
    return [item.lower() for item in re.split(r"[,\s]+", text) if item]


def resolve_presets(
    names: Iterable[str], known: Iterable[str], meta: Mapping[str, Iterable[str]]
) -> tuple[str, ...]:
    """Expand meta-presets; the presets in first-seen order, without duplicates.

    Raises:
        UserError: the list is empty, or a name is neither a preset nor a meta-preset.
    """
    known = list(known)
    names = list(names)
    # The presets, then the meta-presets that are not also preset names (a function-API suite's preset
    # ``default`` is the name of the meta-preset a push runs), each sorted.
    valid = sorted(known) + sorted(m for m in meta if m not in known)
    if not names:
        raise UserError(f"no benchmark preset given; choose from: {', '.join(valid)}")
    for name in names:
        if name not in meta and name not in known:
            raise UserError(
                f"unknown benchmark preset {name!r}; valid presets: {', '.join(valid)}."
                + suggest(name, valid)
            )
    return tuple(dict.fromkeys(p for name in names for p in meta.get(name, [name])))
