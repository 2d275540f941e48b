"""``benchtrail``: one subcommand per stage; the one catch site of ``UserError`` (README "Exit codes")."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from benchtrail.cli.options import project, project_presets, suite
from benchtrail.errors import EXIT_USER_ERROR, UserError, missing_extra

#: The command registry, in ``benchtrail --help`` order: ``(module, function, {command: summary, ...})``;
#: ``function(subparsers)`` declares the row's commands. ``benchtrail <command>`` imports one row's module,
#: ``benchtrail --help`` none (it lists the summaries). tests/test_cli_startup.py checks the summaries.
COMMANDS: tuple[tuple[str, str, dict[str, str]], ...] = (
    (
        "benchtrail.cli.init",
        "add_init_parser",
        {"init": "write [tool.benchtrail], an example benchmarks module and the caller workflows"},
    ),
    (
        "benchtrail.cli.github",
        "add_configure_parser",
        {"configure": "select presets from a GitHub event (PR trailer, labels, push, dispatch)"},
    ),
    (
        "benchtrail.cli.stages",
        "add_stage_parsers",
        {
            "export": "write the run configs of presets as JSON",
            "compile": "compile the modules of a compilation export",
            "run": "run one device's shard of an execution export",
        },
    ),
    (
        "benchtrail.cli.compare",
        "add_compare_parsers",
        {
            "compare": "compare head results with base results",
            "comment": "render comparison.json as the PR comment",
        },
    ),
    ("benchtrail.cli.stages", "add_pipeline_parser", {"pipeline": "the main job, end to end"}),
    (
        "benchtrail.cli.ab",
        "add_ab_parser",
        {"ab": "paired A/B: run base and head interleaved on this machine (or re-check a comparison)"},
    ),
    (
        "benchtrail.cli.explain",
        "add_explain_parsers",
        {
            "explain": "describe one benchmark of a run and how to reproduce it",
            "dump-cmds": "print the reproduce command of every benchmark in a run",
        },
    ),
    (
        "benchtrail.cli.github",
        "add_post_parser",
        {"post": "post comment.json as the PR comment (edits our earlier one)"},
    ),
    (
        "benchtrail.cli.github",
        "add_gate_status_parser",
        {
            "gate-status": "set the benchtrail/gate commit status of a benchmark run's head (the poster "
            "workflow)"
        },
    ),
    (
        "benchtrail.cli.track",
        "add_track_parsers",
        {
            "track": "change points over the first-parent history; file regressions as issues",
            "bisect-range": "the first-parent commits after build A up to build B",
        },
    ),
    (
        "benchtrail.cli.detector",
        "add_evaluate_detector_parser",
        {
            "evaluate-detector": "measure the regression detector's false-positive and detection rates "
            "(a benchmark of about 15 minutes)"
        },
    ),
    (
        "benchtrail.cli.store",
        "add_upload_parser",
        {"upload": "upload a run directory into a store (create-only, never overwrites)"},
    ),
    (
        "benchtrail.cli.store",
        "add_fetch_parser",
        {"fetch": "download a run's files (or some of them) from a store"},
    ),
    (
        "benchtrail.cli.history",
        "add_history_parsers",
        {
            "history": "collect every series over the first-parent commits of a ref",
            "plot": "PNG plots and an offline HTML dashboard of a history file",
            "pages": "a static site of a store's history and runs, for GitHub Pages (works from any URL)",
            "compare-builds": "ratio of medians B/A of every benchmark of two builds",
        },
    ),
    (
        "benchtrail.cli.interop",
        "add_interop_parsers",
        {
            "compare-backends": "one run: median latency and speedup over eager of each compile config, "
            "as a table and a grouped bar plot PNG",
            "convert": "write one run's results as github-action-benchmark (gab) or Bencher Metric Format "
            "(bmf) JSON",
        },
    ),
    (
        "benchtrail.cli.doctor",
        "add_doctor_parser",
        {
            "doctor": "check this machine before measuring: CPU governor, turbo, load, busy processes, "
            "memory pressure, GPU clocks and processes"
        },
    ),
    (
        "benchtrail.cli.github",
        "add_runner_labels_parser",
        {
            "runner-labels": "print the runs-on labels of the project's runners as JSON ([tool.benchtrail] "
            "runner-labels; default [self-hosted, <architecture>, <device name>])"
        },
    ),
    (
        "benchtrail.cli.ci",
        "add_ci_parsers",
        {
            "gate": "the CI gating check: exit 3 when a confirmed regression of a "
            "comparison is neither accepted nor quarantined",
            "dashboard": "draw the first-parent history of a run's commit, the run newest, "
            "into <run dir>/dashboard/",
        },
    ),
)
SUMMARIES = {name: summary for _, _, commands in COMMANDS for name, summary in commands.items()}


def _apply_project_defaults(args: argparse.Namespace) -> None:
    """Fill presets, thresholds and quarantine left out on the command line from ``[tool.benchtrail]``."""
    if getattr(args, "benchmark_presets", False) is None and args.command in ("export", "pipeline"):
        settings = project()
        if settings.presets is None:
            raise UserError("pass --benchmark-presets, or set presets in [tool.benchtrail] of pyproject.toml")
        suite()  # a suite that cannot load says so itself, not as a problem of the presets
        args.benchmark_presets = project_presets(settings)
    for name in ("thresholds", "quarantine"):
        if getattr(args, name, False) is None:
            setattr(args, name, getattr(project(), name))


class _Commands(argparse._SubParsersAction):
    """Subcommands: each one's ``help`` is its summary in :data:`COMMANDS`."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return super().add_parser(name, help=SUMMARIES[name], **kwargs)


class ExitOneArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on bad flags; benchtrail keeps 2 for failed benchmarks, so use 1."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None, *, summaries_only: bool = False) -> argparse.ArgumentParser:
    """``command``: import and declare only its registry row. ``summaries_only``: declare every command by its
    summary alone, importing no family module (``--help``, ``--version``, a missing or unknown command)."""
    from benchtrail import __version__

    parser = ExitOneArgumentParser(
        prog="benchtrail", description="Continuous benchmarking for PyTorch: one subcommand per stage."
    )
    parser.add_argument("--version", action="version", version=f"benchtrail {__version__}")
    parser.register("action", "parsers", _Commands)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=ExitOneArgumentParser
    )
    if summaries_only:
        for name in SUMMARIES:
            sub.add_parser(name)
        return parser
    rows = [row for row in COMMANDS if command in row[2]] or COMMANDS
    for module, function, _ in rows:
        getattr(importlib.import_module(module), function)(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a CI cancel, ``timeout``) unwinds like Ctrl-C, so worker processes are killed."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    import signal

    from benchtrail.project import put_first_on_sys_path

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    # The project's own packages (its suite, the model factories that run configs name) import in
    # this process from any folder of the project, installed or not; workers get the same root
    # first on PYTHONPATH.
    put_first_on_sys_path()
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in SUMMARIES else None
    args = build_parser(command, summaries_only=command is None).parse_args(argv)
    try:
        _apply_project_defaults(args)
        return args.func(args)
    except UserError as exc:
        print(f"benchtrail: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except ModuleNotFoundError as exc:
        # torch is the `torch` extra, a project's own build; the other extras: errors.EXTRAS.
        need = (
            "torch, which is not installed here: install the project's torch, or benchtrail's torch "
            'extra (pip install "benchtrail[torch] @ ..."; docs/adopting.md, "Install")'
            if exc.name == "torch"
            else missing_extra(exc)
        )
        print(f"benchtrail: error: `benchtrail {command}` needs {need}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
