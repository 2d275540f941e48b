"""The export stage: select run configs and modules by preset and write them as JSON.

Execution export (``run-configs/execution.json``)::

    {schema_version, devices: {<device name>: {host_environment, architecture, shards: [
        {index, count, run_configs: {root_obj, keyed_obj_map}}]}}}

Compilation export (``run-configs/compilation.json``)::

    {schema_version, module_dir_paths: {<module id>: "modules/<name>"},
     sampling: {<module id>: {cold, warm}}, generation_configs: {root_obj, keyed_obj_map}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.errors import UserError
from benchtrail.suite.definitions import ModuleGenerationConfig, RunConfig, Suite
from benchtrail.suite.serialization import serialize_and_pack, unpack_and_deserialize

#: Version history of both export files:
#:   1 — first version.
SCHEMA_VERSION = 1


def shard(run_configs: tuple[RunConfig, ...], count: int) -> list[tuple[RunConfig, ...]]:
    """Split run configs into ``count`` shards round-robin in name order (stable across runs).

    Raises:
        UserError: ``count`` is below 1.
    """
    if count < 1:
        raise UserError(f"--shard-count must be at least 1, got {count}")
    ordered = sorted(run_configs, key=lambda rc: rc.name)
    return [tuple(ordered[i::count]) for i in range(count)]


def export_execution(suite: Suite, presets: tuple[str, ...], shard_count: int = 1) -> dict[str, Any]:
    """The execution export for ``presets``: run configs grouped by device, then by shard."""
    by_device: dict[str, list[RunConfig]] = {}
    for rc in suite.select_run_configs(presets):
        by_device.setdefault(rc.target_device.name, []).append(rc)
    devices = {}
    for name, rcs in sorted(by_device.items()):
        shards = shard(tuple(rcs), shard_count)
        devices[name] = {
            "host_environment": rcs[0].target_device.host_environment,
            "architecture": rcs[0].target_device.architecture.value,
            "shards": [
                {"index": i, "count": shard_count, "run_configs": serialize_and_pack(s)}
                for i, s in enumerate(shards)
            ],
        }
    return {"schema_version": SCHEMA_VERSION, "devices": devices}


def export_compilation(suite: Suite, presets: tuple[str, ...]) -> dict[str, Any]:
    """The compilation export for ``presets``: every module they need, and its directory."""
    gens = suite.select_generation_configs(presets)
    return {
        "schema_version": SCHEMA_VERSION,
        "module_dir_paths": {g.id: f"modules/{g.name}" for g in gens},
        "sampling": {g.id: dict(zip(("cold", "warm"), suite.select_compile_sampling(presets, g))) for g in gens},
        "generation_configs": serialize_and_pack(gens),
    }


def load_execution(path: Path) -> dict[str, dict[int, tuple[RunConfig, ...]]]:
    """Read an execution export: ``{device name: {shard index: run configs}}``.

    Raises:
        UserError: the file is unreadable, of an unknown version, or malformed.
    """
    obj = jsonio.read_json(path, kind="execution export", supported=SCHEMA_VERSION)
    devices = obj.get("devices")
    if not isinstance(devices, dict):
        raise UserError(f"execution export {path}: lacks a 'devices' object")
    out: dict[str, dict[int, tuple[RunConfig, ...]]] = {}
    for name, device in devices.items():
        try:
            shards = device["shards"]
            out[name] = {
                s["index"]: unpack_and_deserialize(s["run_configs"], RunConfig, where=f"{path}: {name}")
                for s in shards
            }
        except (KeyError, TypeError) as exc:
            raise UserError(f"execution export {path}: device {name!r} is malformed ({exc!r})") from exc
    return out


def load_compilation(
    path: Path,
) -> tuple[tuple[ModuleGenerationConfig, ...], dict[str, str], dict[str, tuple[int, int]]]:
    """Read a compilation export: (generation configs, module dir path and (cold, warm) samples by module id).

    Raises:
        UserError: the file is unreadable, of an unknown version, or malformed.
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
        raise UserError(f"compilation export {path}: sampling needs cold >= 1 and warm >= 0, got {bad_sampling}")
    bad = [d for d in dirs.values() if not d.startswith("modules/") or ".." in d or d.startswith("/")]
    if bad:
        raise UserError(f"compilation export {path}: module directories must be modules/<name>, got {bad}")
    return gens, dirs, sampling
