"""``explain``, ``dump-cmds``: describe one benchmark of a run (local or in a store) and how to reproduce
it, or print every benchmark's reproduce command."""

from __future__ import annotations

import argparse
from typing import Any

from benchtrail.cli.options import add_command, require_store, resolve_store
from benchtrail.errors import EXIT_OK, UserError


def add_explain_parsers(subparsers: Any) -> None:
    """Declare ``explain`` and ``dump-cmds``."""
    run = argparse.ArgumentParser(add_help=False)
    run.add_argument(
        "--run",
        help="run directory: a folder, or a store URL ending in /runs/<id>/<attempt>/ "
        "such as gs://bucket/runs/123/1/ (default: the "
        "newest run of the local store: --store, else $BENCHTRAIL_STORE, else "
        "[tool.benchtrail] store, else .benchtrail/store)",
    )
    run.add_argument(
        "--store",
        help="with no --run: the store whose newest run is explained (a folder or "
        "file:///ABS/PATH; default: $BENCHTRAIL_STORE, else "
        "[tool.benchtrail] store, else .benchtrail/store)",
    )
    p = add_command(subparsers, "explain", cmd_explain, parents=[run])
    p.add_argument(
        "benchmark_id",
        help="the benchmark's exact name (as the PR comment's reproduce line gives it), or its "
        "id: run config id, module id, <module id>-<metric>, or a 6+ character id prefix",
    )
    add_command(subparsers, "dump-cmds", cmd_dump_cmds, parents=[run])


def _run_dir(args: argparse.Namespace):
    """(local run directory, fetch) for ``--run``; ``fetch(module name)`` brings one module's files."""
    from benchtrail.runner.explain import locate_run

    if args.run:
        if args.store is not None:
            raise UserError(
                "--run names the run already; --store picks the newest run "
                "of a store when --run is left out: pass one"
            )
        return locate_run(args.run)
    store = require_store(args.store, f"benchtrail {args.command} without --run")
    source = resolve_store(args.store).source
    from benchtrail.store import is_local, open_store

    if not is_local(store):
        raise UserError(
            f"the store {store} (from {source}) is not a folder, and only a "
            "local store's newest run is found without --run; pass --run "
            "STORE/runs/<id>/<attempt>/ (the comment prints it)"
        )
    runs = sorted(open_store(store, read_only=True).root.glob("runs/*/*"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise UserError(
            f"no --run given and no run in the store {store} (from {source}); run `benchtrail "
            "pipeline` first, or pass --run"
        )
    return runs[-1], lambda name: None


def cmd_explain(args: argparse.Namespace) -> int:
    """Print how one benchmark of a run was set up and how to reproduce it."""
    from benchtrail.runner.explain import explain, load_targets, resolve

    run_dir, fetch_module = _run_dir(args)
    benchmark_id, target = resolve(load_targets(run_dir), args.benchmark_id)
    fetch_module(target.module.name)
    print(explain(benchmark_id, target, run_dir), end="")
    return EXIT_OK


def cmd_dump_cmds(args: argparse.Namespace) -> int:
    """Print the reproduce command of every benchmark of a run."""
    from benchtrail.runner.explain import dump_commands, load_targets

    run_dir, _ = _run_dir(args)
    print(dump_commands(load_targets(run_dir), run_dir), end="")
    return EXIT_OK
