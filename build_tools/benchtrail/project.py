"""The adopting repository's settings: the ``[tool.benchtrail]`` table of its ``pyproject.toml``.

Example (every key is optional; docs/adopting.md)::

    [tool.benchtrail]
    benchmarks = ["my_benchmarks.bench"]       # modules of @benchtrail.benchmark functions, or:
    suite = "my_benchmarks.suite:generate"     # module:function returning a benchtrail Suite
    presets = "x86_64,comp-stats"              # default --benchmark-presets
    store = "gs://my-bucket/benchmarks"        # default --store
    thresholds = "benchmarks/thresholds.yaml"  # default --thresholds (relative to pyproject.toml)
    quarantine = "benchmarks/quarantine.yaml"  # flaky series: run and reported, never gating
    runner-labels = { "c2-standard-16" = ["self-hosted", "cpu", "c2-standard-16"] }

The file is the nearest ``pyproject.toml`` from the working directory up to the git repository's
root. Without one, or without the table, benchtrail uses its own suite and defaults.
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
    """Settings of one repository.

    Attributes:
        pyproject: the file they came from (None: no file, all defaults).
        suite: ``module:function`` that returns the ``Suite``; the module is imported with the
            pyproject.toml's folder first on ``sys.path``.
        benchmarks: modules of ``@benchtrail.benchmark`` functions (``benchtrail.suite.functions``);
            when given, their suite is the project's (``suite`` may not be given too).
        presets: default preset list (``"x86_64,comp-stats"``), or None.
        store: default store URL or folder, or None.
        thresholds, quarantine: absolute paths of the data files, or None.
        runner_labels: device name -> the ``runs-on`` labels of its runners.
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
        """The folder of ``pyproject.toml``: relative paths in the table are relative to it."""
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
    """The folder that makes the project's own packages importable: ``load_project().root``,
    the folder of the nearest ``pyproject.toml``, found without parsing the file (a malformed one
    is reported by the command that reads it). None outside any project.

    The CLI puts it first on ``sys.path`` (:func:`put_first_on_sys_path`) and every worker process
    gets it first on ``PYTHONPATH`` (``benchtrail.runner.workers.run_in_worker``), so ``suite`` and the
    model factories it names import whether or not the project is pip-installed and from whatever
    folder benchtrail runs in.
    """
    path = find_pyproject(Path("."))
    return path.parent if path else None


def put_first_on_sys_path() -> Path | None:
    """Put :func:`import_root` first on ``sys.path`` of this process (moved there if it is already
    further down); return it, or None (nothing changed) outside any project."""
    root = import_root()
    if root is not None and sys.path[:1] != [str(root)]:
        sys.path[:] = [str(root), *(p for p in sys.path if p != str(root))]
    return root


def _string(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{path}: [tool.benchtrail] {key} must be a non-empty string, got {value!r}")
    return value.strip()


def parse_table(path: Path, table: Any) -> Project:
    """Check ``[tool.benchtrail]`` (already parsed) and return its ``Project``.

    Raises:
        UserError: an unknown key (naming the allowed ones), a value of the wrong type, a
            malformed suite entry point, or a data file that does not exist.
    """
    if not isinstance(table, dict):
        raise UserError(f"{path}: [tool.benchtrail] must be a table, got {table!r}")
    unknown = sorted(table.keys() - KEYS)
    if unknown:
        raise UserError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in [tool.benchtrail]; "
                        f"allowed keys: {', '.join(KEYS)}")
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
        if not (isinstance(modules, list) and modules and all(
                isinstance(m, str) and _MODULE.match(m) for m in modules)):
            raise UserError(f"{path}: [tool.benchtrail] benchmarks = {table['benchmarks']!r} must be a list of "
                            "module names, e.g. [\"mypkg.benchmarks\"]")
        values["benchmarks"] = tuple(modules)
    if "presets" in table:
        presets = table["presets"]
        names = presets if isinstance(presets, list) else [presets]
        if not names or not all(isinstance(p, str) and p.strip() for p in names):
            raise UserError(f"{path}: [tool.benchtrail] presets must be a preset name, a comma-separated string "
                            f"of them or a non-empty list of names (strings), got {presets!r}")
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
                isinstance(v, list) and v and all(isinstance(x, str) and x for x in v) for v in labels.values()):
            raise UserError(f"{path}: [tool.benchtrail] runner-labels must map device names to non-empty lists "
                            f"of labels, got {labels!r}")
        values["runner_labels"] = {k: tuple(v) for k, v in labels.items()}
    return Project(**values)


def load_project(start: Path = Path(".")) -> Project:
    """The ``Project`` of the repository at ``start`` (read each time: it is one small file).

    Raises:
        UserError: the pyproject.toml is not valid TOML, or its table is invalid (:func:`parse_table`).
    """
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
    """Import and call ``project.suite``; return the ``benchtrail.suite.definitions.Suite``.

    Only this call imports the suite's module; it imports torch only if that module does
    (benchtrail's own ``benchmark_suites.suite`` does not: the model factories it names are imported by
    the workers that build them).

    Names are data: a model, config, device, run config or module name may hold any printable text;
    one with a control character or line break is refused where the suite makes it
    (``benchtrail.suite.names.check_name``). Preset names are typed in the PR trailer and name
    dashboard pages, so they keep the path-safe rule (``benchtrail.results.io.PRESET_NAME_RULE``).

    Raises:
        UserError: the module or function cannot be imported, it raises, it returns no Suite, a name
            holds a control character or line break, or a preset name breaks the preset rule (each
            message names the name and the rule).
    """
    from benchtrail.suite.definitions import Suite
    from benchtrail.suite.entry_points import ModuleError, load_entry_point
    from benchtrail.suite.names import BadName

    where = f"{project.pyproject}: [tool.benchtrail] suite = {project.suite!r}" if project.pyproject else project.suite
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
    """Refuse two run configs, or two modules, of different ids under one name (results, module folders and
    the comment name them), naming both and what makes each (issue 39: ``1`` and ``"1"``)."""
    for kind, items in (("run configs", suite.run_configs), ("modules", suite.generation_configs)):
        seen: dict[str, Any] = {}
        for item in items:
            other = seen.setdefault(item.name, item)
            if other.id != item.id:
                made = " and ".join(_made_by(x) for x in (other, item))
                raise UserError(f"{where}: two {kind} are both named {item.name!r} ({made}); names must be unique "
                                "like ids: give the models, configs or parameter values names of their own")


def _made_by(item) -> str:
    """What makes a run config or module: its model's entry point, with the parameters of a function benchmark."""
    model = getattr(item, "model", None) or item.module_generation_config.model
    return model.entry_point + (f" with {dict(model.params)!r}" if model.params else "")


def _check_preset_names(suite, where: str) -> None:
    """Refuse a preset name (of the suite, a meta preset, a run config or module) that is not path-safe."""
    from benchtrail.results.io import PRESET_NAME_RULE, unsafe_preset_name

    named = [*suite.presets, *(p for name, members in suite.meta_presets for p in (name, *members)),
             *(p for obj in (*suite.run_configs, *suite.generation_configs) for p in obj.presets),
             *(p for p, _, _ in suite.compile_sampling)]
    bad = list(dict.fromkeys(p for p in named if unsafe_preset_name(p)))
    if bad:
        raise UserError(f"{where}: preset name(s) {', '.join(map(repr, bad))} refused; a preset name is typed in "
                        f"the PR trailer and names dashboard pages, so it holds {PRESET_NAME_RULE}")
