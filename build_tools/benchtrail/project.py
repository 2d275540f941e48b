"""The adopting repository's settings: ``[tool.benchtrail]`` of the nearest ``pyproject.toml``.

The file is searched from the working directory up to the git repository's root; without it or the
table, benchtrail uses its own suite and defaults. Keys and an example: docs/adopting.md.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtrail.errors import UserError

#: The keys ``[tool.benchtrail]`` may hold.
KEYS = ("benchmarks", "suite", "presets", "store", "thresholds", "quarantine", "runner-labels")
#: benchtrail's own suite, used when no project names one.
DEFAULT_SUITE = "benchmark_suites.suite:generate"
_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Project:
    """Settings of one repository; ``pyproject`` None means no file, all defaults.

    ``suite`` is ``module:function`` returning the ``Suite``; ``benchmarks``, when given, are modules of
    ``@benchtrail.benchmark`` functions whose suite is the project's. ``presets`` is comma-separated;
    ``thresholds`` and ``quarantine`` are absolute paths; ``runner_labels`` maps a device name to the
    ``runs-on`` labels of its runners.
    """

    pyproject: Path | None = None
    suite: str = DEFAULT_SUITE
    benchmarks: tuple[str, ...] = ()
    presets: str | None = None
    store: str | None = None
    thresholds: Path | None = None
    quarantine: Path | None = None
    runner_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def root(self) -> Path | None:
        """The folder of ``pyproject.toml``, which relative paths in the table start from."""
        return self.pyproject.parent if self.pyproject else None


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` from ``start`` upwards, stopping at a git repository's root."""
    for folder in (start.resolve(), *start.resolve().parents):
        if (folder / "pyproject.toml").is_file():
            return folder / "pyproject.toml"
        if (folder / ".git").exists():
            return None
    return None


def import_root() -> Path | None:
    """The folder of the nearest ``pyproject.toml`` (not parsed), which makes the project's packages
    importable; None outside any project. The CLI puts it first on ``sys.path``, the workers on
    ``PYTHONPATH``, so the suite imports without a pip install, from any folder.
    """
    path = find_pyproject(Path("."))
    return path.parent if path else None


def put_first_on_sys_path() -> Path | None:
    """Move :func:`import_root` first on ``sys.path`` and return it; None (no change) outside a project."""
    root = import_root()
    if root is not None and sys.path[:1] != [str(root)]:
        sys.path[:] = [str(root), *(p for p in sys.path if p != str(root))]
    return root


def _string(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{path}: [tool.benchtrail] {key} must be a non-empty string, got {value!r}")
    return value.strip()


def parse_table(path: Path, table: Any) -> Project:
    """``Project`` of the parsed ``[tool.benchtrail]`` table.

    Raises UserError for an unknown key (naming the allowed ones), a value of the wrong type, a malformed
    suite entry point, or a data file that does not exist.
    """
    if not isinstance(table, dict):
        raise UserError(f"{path}: [tool.benchtrail] must be a table, got {table!r}")
    unknown = sorted(table.keys() - KEYS)
    if unknown:
        raise UserError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in [tool.benchtrail]; "
            f"allowed keys: {', '.join(KEYS)}"
        )
    values: dict[str, Any] = {"pyproject": path}
    if "suite" in table:
        suite = _string(path, "suite", table["suite"])
        if not _ENTRY_POINT.match(suite):
            raise UserError(f"{path}: [tool.benchtrail] suite = {suite!r} is not 'package.module:function'")
        values["suite"] = suite
    if "benchmarks" in table:
        modules = table["benchmarks"]
        modules = [modules] if isinstance(modules, str) else modules
        if "suite" in table:
            raise UserError(f"{path}: [tool.benchtrail] has both benchmarks and suite; give one")
        if not (
            isinstance(modules, list)
            and modules
            and all(isinstance(m, str) and _MODULE.match(m) for m in modules)
        ):
            raise UserError(
                f"{path}: [tool.benchtrail] benchmarks = {table['benchmarks']!r} must be a list "
                'of module names, e.g. ["mypkg.benchmarks"]'
            )
        values["benchmarks"] = tuple(modules)
    if "presets" in table:
        presets = table["presets"]
        names = presets if isinstance(presets, list) else [presets]
        if not names or not all(isinstance(p, str) and p.strip() for p in names):
            raise UserError(
                f"{path}: [tool.benchtrail] presets must be a preset name, a comma-separated "
                f"string of them or a non-empty list of names (strings), got {presets!r}"
            )
        values["presets"] = ",".join(p.strip() for p in names)
    if "store" in table:
        values["store"] = _string(path, "store", table["store"])
    for key in ("thresholds", "quarantine"):
        if key in table:
            file = values[key] = (path.parent / _string(path, key, table[key])).resolve()
            if not file.is_file():
                raise UserError(f"{path}: [tool.benchtrail] {key} = {table[key]!r}: no such file {file}")
    if "runner-labels" in table:
        labels = table["runner-labels"]
        if not isinstance(labels, dict) or not all(
            isinstance(v, list) and v and all(isinstance(x, str) and x for x in v) for v in labels.values()
        ):
            raise UserError(
                f"{path}: [tool.benchtrail] runner-labels must map device names to non-empty "
                f"lists of labels, got {labels!r}"
            )
        values["runner_labels"] = {k: tuple(v) for k, v in labels.items()}
    return Project(**values)


def load_project(start: Path = Path(".")) -> Project:
    """The ``Project`` at ``start``, read each time; UserError when the file or its table is invalid."""
    import tomllib  # here, not at the top: ``benchtrail --help`` imports this module and reads no file

    path = find_pyproject(start)
    if path is None:
        return Project()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot read it as TOML ({exc})") from exc
    table = data.get("tool", {}).get("benchtrail")
    return Project(pyproject=path) if table is None else parse_table(path, table)


def load_suite(project: Project):
    """Import and call the project's suite (or its benchmark functions) and return the ``Suite``.

    Imports torch only if the suite's module does. Raises UserError when the module or function cannot be
    imported, raises or returns no Suite, a name holds a control character or line break, a preset name
    is not path-safe, or two run configs or modules share a name.
    """
    from benchtrail.suite.definitions import Suite
    from benchtrail.suite.entry_points import ModuleError, load_entry_point
    from benchtrail.suite.names import BadName

    where = (
        f"{project.pyproject}: [tool.benchtrail] suite = {project.suite!r}"
        if project.pyproject
        else project.suite
    )
    if project.root and str(project.root) not in sys.path:
        sys.path.insert(0, str(project.root))
    if project.benchmarks:
        from benchtrail.suite import functions

        where = f"{project.pyproject}: [tool.benchtrail] benchmarks = {list(project.benchmarks)!r}"
        try:
            suite = functions.suite_of(functions.discover(project.benchmarks))
        except UserError as exc:  # BadName too
            raise UserError(f"{where}: {exc}") from exc
    else:
        try:
            suite = load_entry_point(project.suite)()
        except (ModuleError, BadName) as exc:
            raise UserError(f"{where}: {exc}") from exc
        except Exception as exc:  # the adopter's code: report it, whatever it raised
            raise UserError(f"{where}: calling it raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(suite, Suite):
            raise UserError(f"{where}: returned {type(suite).__name__}, not a benchtrail Suite")
    _check_preset_names(suite, where)
    _check_unique_names(suite, where)
    return suite


def _check_unique_names(suite, where: str) -> None:
    """Refuse two run configs, or two modules, of different ids under one name (``1`` and ``"1"``)."""
    for kind, items in (("run configs", suite.run_configs), ("modules", suite.generation_configs)):
        seen: dict[str, Any] = {}
        for item in items:
            other = seen.setdefault(item.name, item)
            if other.id != item.id:
                made = " and ".join(_made_by(x) for x in (other, item))
                raise UserError(
                    f"{where}: two {kind} are both named {item.name!r} ({made}); names must "
                    "be unique like ids: give the models, configs or parameter values names "
                    "of their own"
                )


def _made_by(item) -> str:
    """A run config's or module's model entry point, with a function benchmark's parameters."""
    model = getattr(item, "model", None) or item.module_generation_config.model
    return model.entry_point + (f" with {dict(model.params)!r}" if model.params else "")


def _check_preset_names(suite, where: str) -> None:
    """Refuse a preset name that is not path-safe (typed in the PR trailer, names dashboard pages)."""
    from benchtrail.results.io import PRESET_NAME_RULE, unsafe_preset_name

    named = [
        *suite.presets,
        *(p for name, members in suite.meta_presets for p in (name, *members)),
        *(p for obj in (*suite.run_configs, *suite.generation_configs) for p in obj.presets),
        *(p for p, _, _ in suite.compile_sampling),
    ]
    bad = list(dict.fromkeys(p for p in named if unsafe_preset_name(p)))
    if bad:
        raise UserError(
            f"{where}: preset name(s) {', '.join(map(repr, bad))} refused; a preset name is "
            f"typed in the PR trailer and names dashboard pages, so it holds {PRESET_NAME_RULE}"
        )
