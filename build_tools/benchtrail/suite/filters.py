"""``--filter REGEX``: narrow a suite to the run configs and modules whose name or id matches."""

from __future__ import annotations

import dataclasses
import re

from benchtrail.errors import UserError
from benchtrail.suite.definitions import Suite


def compile_filter(text: str) -> re.Pattern[str]:
    """Compile ``--filter``'s regular expression (matched with ``search``).

    Raises:
        UserError: the expression does not compile.
    """
    try:
        return re.compile(text)
    except re.error as exc:
        raise UserError(f"--filter {text!r} is not a valid regular expression: {exc}") from exc


def filter_suite(suite: Suite, pattern: re.Pattern[str]) -> Suite:
    """The run configs and modules whose name or id ``pattern`` finds, and the modules they need."""
    run_configs = tuple(rc for rc in suite.run_configs if pattern.search(rc.name) or pattern.search(rc.id))
    needed = {rc.module_generation_config.id for rc in run_configs}
    return dataclasses.replace(
        suite,
        run_configs=run_configs,
        generation_configs=tuple(
            g
            for g in suite.generation_configs
            if g.id in needed or pattern.search(g.name) or pattern.search(g.id)
        ),
    )


def check_selects(suite: Suite, presets: tuple[str, ...], text: str) -> None:
    """Raise UserError when ``--filter`` leaves no run config and no module of ``presets``."""
    if not suite.select_run_configs(presets) and not suite.select_generation_configs(presets):
        raise UserError(
            f"--filter {text!r} matches no run config or module of presets "
            f"{', '.join(presets)}; it is searched in names such as "
            "resnet18.inductor.inference-bs1.c2-standard-16 and in ids"
        )
