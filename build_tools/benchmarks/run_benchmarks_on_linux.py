#!/usr/bin/env python3
"""Seed-compatible runner: ``run_benchmarks_on_linux.py --run_config F --output F [--shard_index I] [--verbose]``.

A thin wrapper over ``benchtrail run``. ``--run_config`` takes an execution export
(``benchtrail export execution``, ``export_benchmark_config.py --output F``), a seed-shaped one
(what ``export_benchmark_config.py execution`` prints), or the run configs the seed's jq filter
merges from it (``{root_obj, keyed_obj_map}``)::

    build_tools/benchmarks/run_benchmarks_on_linux.py --output=./results.json --verbose --run_config=./run_configs.json

Without ``--device_name`` it runs the run configs of the device this machine can run (CPU always,
CUDA when torch sees a GPU) and names those it skips, in one message on stderr; a file with several
such devices needs ``--device_name``. A named device is run, or refused before its first case
when this machine cannot run it (``benchtrail run``). Export and aot-inductor cases run from
compiled artifacts: those of ``--modules_dir`` (a run directory ``benchtrail compile`` wrote), else
benchtrail's compile stage compiles the modules they need first, into a temporary folder.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import tempfile
from pathlib import Path

# this checkout's benchtrail, installed or not
if (Path(__file__).resolve().parents[1] / "benchtrail").is_dir():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchtrail.cli import main as benchtrail_main
from benchtrail.cli.app import ExitOneArgumentParser as ArgumentParser
from benchtrail.errors import UserError

PROG = "run_benchmarks_on_linux.py"


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _is_export(path: Path) -> bool:
    """Whether ``path`` holds a benchtrail execution export (a root ``schema_version``)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # load_execution names what is wrong with it
    return isinstance(obj, dict) and "schema_version" in obj


def _devices(path: Path, shard_index: str | None) -> tuple[dict, bool]:
    """(``{device name: {shard index: run configs}}``, whether ``path`` is a benchtrail execution
    export); run configs of another shape are one shard, 0.

    Raises:
        UserError: the file cannot be read, or ``--shard_index`` names shards of unsharded run configs.
    """
    from benchtrail.suite.export import load_execution, load_seed_run_configs

    if _is_export(path):
        return load_execution(path), True
    if shard_index is not None:
        raise UserError(f"--shard_index: {path} holds unsharded run configs; shards are in an execution "
                        "export "
                        "(export_benchmark_config.py --output F --shard_count N)")
    devices: dict = {}
    for rc in load_seed_run_configs(path):
        devices.setdefault(rc.target_device.name, []).append(rc)
    return {name: {0: tuple(rcs)} for name, rcs in devices.items()}, False


def _compile_artifacts(rcs: tuple, device: str, folder: Path) -> Path | None:
    """Compile the modules of ``rcs`` that run from an artifact (export, aot-inductor) into
    ``folder/modules/`` with benchtrail's compile stage; return ``folder`` for ``--modules-dir``, or
    None when no run config needs one or this machine cannot run the device (``benchtrail run``
    refuses it). A module that fails to compile fails its cases in the run stage, with the reason.
    """
    from benchtrail import jsonio
    from benchtrail.pipeline.job import available_architectures, new_run_id
    from benchtrail.pipeline.measure_stages import compile_stage
    from benchtrail.project import put_first_on_sys_path
    from benchtrail.suite.entry_points import ARTIFACTS
    from benchtrail.suite.export import compilation_of

    gens = tuple(rc.module_generation_config for rc in rcs
                 if rc.module_generation_config.compile_config.mode in ARTIFACTS)
    if not gens or rcs[0].target_device.architecture not in available_architectures():
        return None
    export = jsonio.write_json(folder / "compilation.json", compilation_of(gens))
    run_id, attempt = new_run_id()
    logging.info("%s: compiling %d module(s) that run from an artifact into %s", PROG,
                 len({g.id for g in gens}),
                 folder)
    put_first_on_sys_path()  # the project's model factories import here, as in `benchtrail compile`
    compile_stage(export, folder, device, rcs[0].target_device.architecture,
                  {"run_id": run_id, "attempt": attempt, "presets": []})
    return folder


def _runnable_device(path: Path, shards: dict) -> str:
    """The one device of ``shards`` (``{device: {index: run configs}}``) this machine can run; the
    others are named on stderr, in one message.

    Raises:
        UserError: no device, or several, that this machine can run.
    """
    from benchtrail.pipeline.job import available_architectures

    here = available_architectures()
    devices = {name: tuple(rc for rcs in by_index.values() for rc in rcs) for name,
               by_index in shards.items()}
    arch = {name: rcs[0].target_device.architecture for name, rcs in devices.items() if rcs}
    runnable = sorted(name for name in arch if arch[name] in here)
    skipped = sorted(name for name in arch if arch[name] not in here)
    if skipped:
        count = sum(len(devices[name]) for name in skipped)
        listed = "; ".join(f"device {name} needs {arch[name].value}: "
                           f"{', '.join(sorted(rc.name for rc in devices[name]))}" for name in skipped)
        print(f"{PROG}: skipping {count} run config(s) this machine cannot run (it runs "
              f"{', '.join(sorted(a.value for a in here))} only; torch sees no CUDA GPU): {listed}",
              file=sys.stderr)
    if not runnable:
        raise UserError(f"{path} holds no run config this machine can run "
                        f"(it runs {', '.join(sorted(a.value for a in here))})")
    if len(runnable) > 1:
        raise UserError(f"{path} holds run configs of several devices this machine can run "
                        f"({', '.join(runnable)}); "
                        "pass --device_name")
    return runnable[0]


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])  # exits 1 on bad flags
    parser.add_argument("--run_config", required=True,
                        help="execution export, seed-shaped export, or the seed jq filter's {root_obj, "
                        "keyed_obj_map}")
    parser.add_argument("--output", required=True, help="results file to write")
    parser.add_argument("--shard_index", default=None,
                        help="shard to run (default: all; execution exports only)")
    parser.add_argument("--device_name", default=None,
                        help="device to run (default: the one device of the file this machine can run)")
    parser.add_argument("--modules_dir", default=None,
                        help="run directory holding modules/<name>/ compiled by `benchtrail compile` "
                        "(default: "
                             "the export and aot-inductor modules the run configs need are compiled first, "
                        "into a "
                             "temporary folder)")
    parser.add_argument("--verbose", action="store_true", help="log what is run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a cancel unwinds like Ctrl-C, as in benchtrail:
        signal.signal(signal.SIGTERM, _terminate)         # workers are killed, the temporary folder removed
    path = Path(args.run_config)
    try:
        devices, is_export = _devices(path, args.shard_index)
        if args.device_name is not None and args.device_name not in devices:
            raise UserError(f"device {args.device_name!r} is not in {path}; devices there: "
                            f"{', '.join(sorted(devices)) or 'none'}")
        device = args.device_name or _runnable_device(path, devices)
        shards = devices[device]
        if args.shard_index is not None and args.shard_index.isdigit():  # benchtrail run checks it
            shards = {i: rcs for i, rcs in shards.items() if i == int(args.shard_index)}
        rcs = tuple(rc for i in sorted(shards) for rc in shards[i])
        from benchtrail import jsonio
        from benchtrail.runner.run_cases import Journal

        jsonio.check_new(Path(args.output))  # before any module is compiled, as benchtrail run checks it
        Journal(Path(args.output + ".partial.jsonl")).refuse_stale()
        with tempfile.TemporaryDirectory(prefix="benchtrail-seed-run-") as folder:
            folder = Path(folder)
            export = path
            if not is_export:  # benchtrail run reads an execution export
                from benchtrail.suite.export import execution_of

                export = jsonio.write_json(folder / "execution.json", execution_of(rcs))
            forwarded = ["run", "--run-configs", str(export), "--device-name", device, "--output",
                         args.output]
            if args.shard_index is not None:
                forwarded += ["--shard-index", args.shard_index]
            modules_dir = args.modules_dir or (rcs and _compile_artifacts(rcs, device, folder))
            if modules_dir:
                forwarded += ["--modules-dir", str(modules_dir)]
            logging.info("%s: %d run config(s) of device %s from %s; benchtrail %s", PROG, len(rcs), device,
                         path,
                         " ".join(forwarded))
            return benchtrail_main(forwarded)
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
