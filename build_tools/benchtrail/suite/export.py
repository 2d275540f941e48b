"""The export stage: run configs and modules selected by preset, as JSON.

``run-configs/execution.json`` and ``compilation.json``, and the seed-shaped execution export, which is
only printed (no root ``schema_version``, so the seed's jq filter can flatten it): docs/formats.md,
"Exports".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.suite.definitions import ModuleGenerationConfig, RunConfig, Suite, Task
from benchtrail.suite.names import module_dir
from benchtrail.suite.serialization import serialize_and_pack, unpack_and_deserialize

#: Version history of both export files:
#:   1 — first version.
SCHEMA_VERSION = 1


def shard(run_configs: tuple[RunConfig, ...], count: int) -> list[tuple[RunConfig, ...]]:
    """``count`` (from 1) shards, round-robin in name order (stable across runs)."""
    ordered = sorted(run_configs, key=lambda rc: rc.name)
    return [tuple(ordered[i::count]) for i in range(count)]


def _by_device(run_configs: tuple[RunConfig, ...]) -> list[tuple[str, list[RunConfig], dict[str, str]]]:
    """``(device name, its run configs, {host_environment, architecture})`` per device, by name."""
    by_device = {}
    for rc in run_configs:
        by_device.setdefault(rc.target_device.name, []).append(rc)
    return [
        (
            name,
            rcs,
            {
                "host_environment": rcs[0].target_device.host_environment,
                "architecture": rcs[0].target_device.architecture.value,
            },
        )
        for name, rcs in sorted(by_device.items())
    ]


def export_execution(suite: Suite, presets: tuple[str, ...], shard_count: int = 1) -> dict[str, Any]:
    """The execution export for ``presets``, by device then shard, with the presets themselves."""
    return {**execution_of(suite.select_run_configs(presets), shard_count), "presets": list(presets)}


def execution_of(run_configs: tuple[RunConfig, ...], shard_count: int = 1) -> dict[str, Any]:
    """The execution export of ``run_configs``, by device then shard."""
    devices = {}
    for name, rcs, device in _by_device(run_configs):
        shards = enumerate(shard(tuple(rcs), shard_count))
        devices[name] = {
            **device,
            "shards": [
                {"index": i, "count": shard_count, "run_configs": serialize_and_pack(s)} for i, s in shards
            ],
        }
    return {"schema_version": SCHEMA_VERSION, "devices": devices}


def seed_execution(suite: Suite, presets: tuple[str, ...]) -> dict[str, Any]:
    """The seed-shaped execution export for ``presets``: each device's run configs, unsharded."""
    return {
        name: {**device, "run_configs": serialize_and_pack(sorted(rcs, key=lambda rc: rc.name))}
        for name, rcs, device in _by_device(suite.select_run_configs(presets))
    }


def _read_run_configs(path: Path) -> Any:
    """The JSON of a run-configs file of any shape.

    Raises:
        UserError: the file is unreadable or not JSON.
    """
    import json

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read run configs {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"run configs {path} are not valid JSON (truncated or corrupt?): {exc}") from exc


def load_seed_run_configs(path: Path) -> tuple[RunConfig, ...]:
    """The run configs of a seed-shaped execution export or of the seed jq filter's output.

    Raises:
        UserError: the file is unreadable, not JSON, or neither shape.
    """
    obj = _read_run_configs(path)
    if isinstance(obj, dict) and set(obj) == {"root_obj", "keyed_obj_map"}:
        return unpack_and_deserialize(obj, RunConfig, where=str(path))
    if (
        isinstance(obj, dict)
        and obj
        and all(isinstance(d, dict) and "run_configs" in d for d in obj.values())
    ):
        return tuple(
            rc
            for name, d in obj.items()
            for rc in unpack_and_deserialize(d["run_configs"], RunConfig, where=f"{path}: {name}")
        )
    raise UserError(
        f"{path} is neither an execution export ({{schema_version, devices}}), a seed-shaped "
        "one ({<device>: {host_environment, run_configs}}) nor run configs "
        "({root_obj, keyed_obj_map})"
    )


def export_compilation(suite: Suite, presets: tuple[str, ...]) -> dict[str, Any]:
    """The compilation export for ``presets``: every module they need, its directory and tasks."""
    gens = suite.select_generation_configs(presets)
    # tasks: each module's graphs that the compile stage compiles into the Inductor cache the run stage uses
    tasks = {}
    for rc in suite.select_run_configs(presets):
        tasks.setdefault(rc.module_generation_config.id, set()).add(rc.execution_config.task.value)
    return {
        **_compilation(gens, {g.id: suite.select_compile_sampling(presets, g) for g in gens}),
        "presets": list(presets),
        "tasks": {g: sorted(t) for g, t in sorted(tasks.items())},
    }


def _compilation(
    gens: Sequence[ModuleGenerationConfig],
    sampling: dict[str, tuple[int, int]],
) -> dict[str, Any]:
    """A compilation export of ``gens`` with each module's ``(cold, warm)`` samples."""
    return {
        "schema_version": SCHEMA_VERSION,
        "module_dir_paths": {g.id: module_dir(g.name) for g in gens},
        "sampling": {g.id: dict(zip(("cold", "warm"), sampling[g.id])) for g in gens},
        "generation_configs": serialize_and_pack(gens),
    }


def compilation_of(gens: tuple[ModuleGenerationConfig, ...]) -> dict[str, Any]:
    """A compilation export of ``gens`` (each once, by name), cold 1 and warm 0: artifacts for a run."""
    unique = sorted({g.id: g for g in gens}.values(), key=lambda g: g.name)
    return _compilation(unique, {g.id: (1, 0) for g in unique})


def load_execution(path: Path) -> dict[str, dict[int, tuple[RunConfig, ...]]]:
    """Read an execution export: ``{device name: {shard index: run configs}}``.

    Raises:
        UserError: the file is unreadable, of an unknown version, or malformed.
    """
    devices = jsonio.read_json(path, kind="execution export", supported=SCHEMA_VERSION).get("devices")
    if not isinstance(devices, dict):
        raise UserError(f"execution export {path}: lacks a 'devices' object")
    out = {}
    for name, device in devices.items():
        try:
            where = f"{path}: {name}"
            out[name] = {
                s["index"]: unpack_and_deserialize(s["run_configs"], RunConfig, where=where)
                for s in device["shards"]
            }
        except (KeyError, TypeError) as exc:
            raise UserError(f"execution export {path}: device {name!r} is malformed ({exc!r})") from exc
    return out


def load_presets(path: Path) -> tuple[str, ...]:
    """The presets an export was made for; empty for older exports, run-config files and seed-shaped ones.

    Raises:
        UserError: the file is unreadable or not JSON, or ``presets`` is not a list of strings.
    """
    obj = _read_run_configs(path)
    presets = obj.get("presets", []) if isinstance(obj, dict) and "schema_version" in obj else []
    if not isinstance(presets, list) or not all(isinstance(p, str) and p for p in presets):
        raise UserError(f"{path}: field 'presets' is {presets!r}; allowed: a list of preset names (strings)")
    return tuple(presets)


def load_compilation(
    path: Path,
) -> tuple[
    tuple[ModuleGenerationConfig, ...], dict[str, str], dict[str, tuple[int, int]], dict[str, tuple[str, ...]]
]:
    """A compilation export: (generation configs, then by module id its dir path, (cold, warm) samples
    and task names).

    Raises:
        UserError: the file is unreadable, of an unknown version, or malformed (``tasks`` too).
    """
    obj = jsonio.read_json(path, kind="compilation export", supported=SCHEMA_VERSION)
    try:
        gens = unpack_and_deserialize(obj["generation_configs"], ModuleGenerationConfig, where=str(path))
        dirs = dict(obj["module_dir_paths"])
        sampling = {g: (int(s["cold"]), int(s["warm"])) for g, s in obj["sampling"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"compilation export {path}: malformed ({exc!r})") from exc
    missing = [g.name for g in gens if g.id not in dirs or g.id not in sampling]
    if missing:
        raise UserError(f"compilation export {path}: no module_dir_paths or sampling entry for {missing}")
    bad_sampling = {g: s for g, s in sampling.items() if s[0] < 1 or s[1] < 0}
    if bad_sampling:
        raise UserError(
            f"compilation export {path}: sampling needs cold >= 1 and warm >= 0, got {bad_sampling}"
        )
    bad = [d for d in dirs.values() if not d.startswith("modules/") or ".." in d]
    if bad:
        raise UserError(f"compilation export {path}: module directories must be modules/<name>, got {bad}")
    known = {t.value for t in Task}
    tasks = obj.get("tasks") or {}
    bad = sorted({t for names in tasks.values() for t in names} - known)
    if bad:
        raise UserError(
            f"compilation export {path}: field 'tasks' names {', '.join(map(repr, bad))}; "
            f"allowed: {', '.join(sorted(known))}"
        )
    return gens, dirs, sampling, {g: tuple(names) for g, names in tasks.items()}


def export_object(
    suite: Suite, kind: str, presets: tuple[str, ...], shard_count: int = 1, seed: bool = False
) -> dict[str, Any]:
    """The ``execution`` or ``compilation`` export for ``presets``; ``seed``: the seed-shaped one.

    Raises:
        UserError: ``seed`` with a compilation export or more than one shard.
    """
    if seed:
        if kind != "execution":
            raise UserError("--format seed is for execution exports; a compilation export has one shape")
        if shard_count != 1:
            raise UserError(
                f"--format seed writes each device's run configs unsharded; drop --shard-count {shard_count}"
            )
        return seed_execution(suite, presets)
    if kind == "execution":
        return export_execution(suite, presets, shard_count)
    return export_compilation(suite, presets)
