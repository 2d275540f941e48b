"""``benchtrail``: one console script, one subcommand per stage.

Exit codes (documented in README): 0 ok; 1 user or input error; 2 some benchmarks (or module
compilations) failed; 3 a regression was found that no ``benchmarks-accept:`` trailer accepts
(``compare --fail-on regressed``, ``ab --fail-on regressed``; ``gate``: a confirmed one); 4 a runner
check failed (only ``doctor``). ``UserError`` is caught only here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchtrail.errors import UserError
from benchtrail.github.trust import add_trust_arguments

EXIT_OK, EXIT_USER_ERROR, EXIT_BENCHMARKS_FAILED, EXIT_REGRESSION = 0, 1, 2, 3
DEFAULT_STORE = ".benchtrail/store"


def _project():
    """The working directory's ``[tool.benchtrail]`` settings (``benchtrail.project``)."""
    from benchtrail.project import load_project

    return load_project(Path("."))


def _suite():
    """The project's suite (benchtrail's own ``benchmark_suites`` unless ``[tool.benchtrail] suite`` names one)."""
    from benchtrail.project import load_suite

    return load_suite(_project())


def _presets(text: str) -> tuple[str, ...]:
    """argparse type: ``"x86_64,comp-stats"`` → resolved preset tuple (meta-presets expanded)."""
    from benchtrail.suite.presets import resolve_presets, split_presets

    try:
        suite = _suite()
        return resolve_presets(split_presets(text), suite.presets, dict(suite.meta_presets))
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _apply_project_defaults(args: argparse.Namespace) -> None:
    """Fill presets, store and thresholds the command line left out from ``[tool.benchtrail]``."""
    if getattr(args, "benchmark_presets", False) is None and args.command in ("export", "pipeline"):
        project = _project()
        if project.presets is None:
            raise UserError("pass --benchmark-presets, or set presets in [tool.benchtrail] of pyproject.toml")
        try:
            args.benchmark_presets = _presets(project.presets)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{project.pyproject}: [tool.benchtrail] presets: {exc}") from exc
    if getattr(args, "thresholds", False) is None:
        args.thresholds = _project().thresholds
    if getattr(args, "quarantine", False) is None:
        args.quarantine = _project().quarantine
    if args.command == "pipeline" and args.store is None:
        args.store = _project().store or DEFAULT_STORE


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


class ExitOneArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on bad flags; benchtrail keeps 2 for failed benchmarks, so use 1."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}\n")


def _run_info(run_configs: Path) -> dict:
    """``run`` of a results file written from the export ``run_configs``: a new run id, attempt and
    the presets the export was made for (CI's runs record them; none for older exports)."""
    from benchtrail.suite.export import load_presets
    from benchtrail.pipeline import new_run_id

    run_id, attempt = new_run_id()
    return {"run_id": run_id, "attempt": attempt, "presets": list(load_presets(run_configs))}


def _filtered_suite(args: argparse.Namespace):
    """The project's suite narrowed by ``--filter`` (all of it without one)."""
    from benchtrail.suite.filters import check_selects, compile_filter, filter_suite

    suite = _suite()
    if args.filter is None:
        return suite
    suite = filter_suite(suite, compile_filter(args.filter))
    check_selects(suite, args.benchmark_presets, args.filter)
    return suite


def cmd_export(args: argparse.Namespace) -> int:
    from benchtrail import jsonio
    from benchtrail.stages import export_object

    output = args.output or Path(f"{args.kind}.json")
    if args.format == "seed" and str(output) != "-":
        raise UserError("--format seed prints to stdout only (pass --output -): every file benchtrail writes has a "
                        "root schema_version, which the seed's shape cannot hold")
    if str(output) != "-":
        jsonio.check_new(output)  # before the suite is read
    obj = export_object(_filtered_suite(args), args.kind, args.benchmark_presets, args.shard_count,
                        seed=args.format == "seed")
    if str(output) == "-":  # the JSON alone, for a pipe (progress and messages go to stderr)
        sys.stdout.write(jsonio.dumps(obj))
        return EXIT_OK
    print(jsonio.write_text_atomic(output, jsonio.dumps(obj), exclusive=True))
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from benchtrail.stages import compile_stage
    from benchtrail.suite.definitions import Architecture

    path, ok = compile_stage(args.run_configs, args.output_dir, args.device_name,
                             Architecture(args.architecture), _run_info(args.run_configs), args.module_id)
    if path is None:
        print(f"benchtrail: no module in {args.run_configs} targets {args.architecture}", file=sys.stderr)
        return EXIT_OK
    print(path)
    return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    from benchtrail.stages import run_stage

    path, ok = run_stage(args.run_configs, args.device_name, args.shard_index, args.output,
                         _run_info(args.run_configs), args.benchmark_id, args.modules_dir, resume=args.resume,
                         name_filter=args.filter, refuse_without_cuda=True)
    print(path)
    return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED


def _store_failures() -> tuple[type[BaseException], ...]:
    """What a store that cannot be read raises: ``StoreError`` (the store's own message, naming the
    bucket), and, should one ever escape the store's handling, google-api-core, google-auth and
    requests errors (none does against a stopped emulator or one answering 503: each becomes a
    ``StoreError`` at its deadline)."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    from benchtrail.errors import StoreError

    return StoreError, GoogleAPIError, GoogleAuthError, RequestException


def _stored_baseline(args: argparse.Namespace) -> tuple[list | None, dict | None]:
    """``(baseline results or None, comparison.json's baseline or None)`` for ``compare --store``: each
    head device's nearest trusted baseline run (``benchtrail.compare.baseline``), fetched from the store.

    A store that cannot be read (an outage still failing at the deadline, which
    ``BENCHTRAIL_STORE_DEADLINE_S`` caps; a missing bucket; no permission or credentials) does not stop
    the comparison: it warns on stderr and returns ``(None, {reason: "the store could not be read:
    <message>", store: <URL>, store_error: <message>})``, so every row is new (or failed).

    Raises:
        UserError: ``--base`` given too, head results of several commits, a malformed store URL, a bad
            ``BENCHTRAIL_STORE_DEADLINE_S``, a bad ``--trust`` set-up, a ``--base-branch`` that is not a
            branch, or a ``--base-commit`` the store has no trusted run of.
    """
    from benchtrail.compare.baseline import fetch_baselines, find_baselines
    from benchtrail.results.baseline_key import keys_of_results
    from benchtrail.pipeline import report_baselines
    from benchtrail.results.io import load_results_paths
    from benchtrail.store import open_store
    from benchtrail.github.trust import trust_from_options

    if args.base:
        raise UserError("--base and --store both name a baseline; pass one")
    head = load_results_paths(args.head)
    commits = {f.commit for f in head}
    if len(commits) != 1:
        raise UserError(f"--store: the head results come from {len(commits)} commits; compare one commit's run")
    trust = trust_from_options(args.trust, args.store, args.trusted_workflow)
    if args.store.startswith("gs://"):
        from benchtrail.store.gcs_transfer import deadline_cap

        deadline_cap()  # a bad value is the user's error, not a store outage
    try:
        store = open_store(args.store)
        found = find_baselines(store, Path("."), commits.pop(), keys_of_results(head), trust,
                               base_branch=args.base_branch, explicit=args.base_commit)
        files, found = fetch_baselines(store, found)
    except _store_failures() as exc:
        message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        print(f"benchtrail: warning: the store {args.store} could not be read, so this comparison has no "
              f"baseline (every row is new or failed): {message}", file=sys.stderr)
        return None, {"reason": f"the store could not be read: {message}", "store": args.store,
                      "store_error": message}
    report_baselines(found)
    return files, found.to_dict()


def cmd_compare(args: argparse.Namespace) -> int:
    from benchtrail.stages import compare_stage

    import json

    from benchtrail.cli.ci import accept_globs
    from benchtrail.compare.verdicts import gate

    accept = accept_globs(args.accept)
    base, baseline, base_results = list(args.base), None, None
    if args.store:
        base_results, baseline = _stored_baseline(args)
        base_results = base_results or []
    path = compare_stage(base, args.head, args.output, args.thresholds, baseline, accept=accept,
                         quarantine=args.quarantine, base_results=base_results)
    failing = gate(json.loads(path.read_text())["rows"], args.fail_on)
    print(path)
    if failing:
        print(f"benchtrail: {len(failing)} regression(s) not accepted: {', '.join(failing[:10])}. Accept one with "
              "a `benchmarks-accept: <series name or glob>` trailer.", file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_OK


def cmd_comment(args: argparse.Namespace) -> int:
    from benchtrail.compare.comment import check_comment_options
    from benchtrail.stages import comment_stage

    notes = tuple(args.note or ())
    check_comment_options(args.run_url, args.dashboard, args.artifacts_url, notes)
    print(comment_stage(args.comparison, args.output_dir, args.run_url, args.dashboard, args.artifacts_url, notes))
    return EXIT_OK


def cmd_configure(args: argparse.Namespace) -> int:
    import os

    from benchtrail.github.configure import configure

    suite, project = _suite(), _project()
    meta = dict(suite.meta_presets)
    if "default" not in meta and project.presets:  # what a push to the default branch runs
        try:
            meta["default"] = _presets(project.presets)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{project.pyproject}: [tool.benchtrail] presets: {exc}") from exc
    configure(os.environ, suite.presets, meta, args.error_comment)
    return EXIT_OK


def _run_dir(args: argparse.Namespace):
    """(local run directory, fetch) for ``--run``; ``fetch(module name)`` brings one module's files."""
    from benchtrail.runner.explain import locate_run

    if args.run:
        return locate_run(args.run)
    runs = sorted(Path(DEFAULT_STORE, "runs").glob("*/*"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise UserError(f"no --run given and no run in {DEFAULT_STORE}; run `benchtrail pipeline` first")
    return runs[-1], lambda name: None


def cmd_explain(args: argparse.Namespace) -> int:
    from benchtrail.runner.explain import explain, load_targets, resolve

    run_dir, fetch_module = _run_dir(args)
    benchmark_id, target = resolve(load_targets(run_dir), args.benchmark_id)
    fetch_module(target.module.name)
    print(explain(benchmark_id, target, run_dir), end="")
    return EXIT_OK


def cmd_dump_cmds(args: argparse.Namespace) -> int:
    from benchtrail.runner.explain import dump_commands, load_targets

    run_dir, _ = _run_dir(args)
    print(dump_commands(load_targets(run_dir), run_dir), end="")
    return EXIT_OK


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def _policy(args: argparse.Namespace):
    from benchtrail.runner.ab import Policy

    if args.min_rounds and args.min_rounds > args.max_rounds:
        raise UserError(f"--min-rounds {args.min_rounds} is more than --max-rounds {args.max_rounds}")
    return Policy(args.min_rounds, args.max_rounds, args.budget_s, args.seed, args.total_budget_s)


def cmd_ab(args: argparse.Namespace) -> int:
    import json

    from benchtrail.compare.verdicts import gate
    from benchtrail.pipeline import available_architectures
    from benchtrail.stages import ab_stage, recheck_stage

    suite, policy, repo = _suite(), _policy(args), Path(".")
    if args.recheck:
        if args.benchmark_id:
            raise UserError("--benchmark-id selects cases of --benchmark-presets; --recheck takes the "
                            "comparison's unconfirmed regressions")
        from benchtrail.cli.ci import accept_globs

        comment, ok = recheck_stage(args.recheck, args.output_dir, repo, suite, args.thresholds, policy,
                                    args.base_ref, args.device_name, tuple(accept_globs(args.accept)))
    else:
        if args.total_budget_s is not None:
            raise UserError("--total-budget-s bounds a --recheck of several suspects; with --benchmark-presets "
                            "every case runs (bound each with --budget-s)")
        if not args.base_ref:
            raise UserError("--base-ref is required with --benchmark-presets (the commit to compare against)")
        if args.device_name:
            raise UserError("--device-name selects the rows of --recheck; with --benchmark-presets pick cases "
                            "with --benchmark-id")
        here = available_architectures()
        rcs = tuple(rc for rc in suite.select_run_configs(args.benchmark_presets)
                    if rc.target_device.architecture in here)
        if args.benchmark_id:
            unknown = sorted(set(args.benchmark_id) - {rc.id for rc in rcs})
            if unknown:
                raise UserError(f"--benchmark-id {', '.join(unknown)}: not a run config of presets "
                                f"{', '.join(args.benchmark_presets)} that this machine can run")
            rcs = tuple(rc for rc in rcs if rc.id in set(args.benchmark_id))
        if not rcs:
            raise UserError(f"presets {', '.join(args.benchmark_presets)} select no case this machine can run")
        comment = ab_stage(repo, args.base_ref, rcs, args.output_dir, args.thresholds, policy, args.accept)
    print(comment)
    rows = json.loads((args.output_dir / "comparison.json").read_text())["rows"]
    failing = gate(rows, args.fail_on)
    if failing:
        print(f"benchtrail: {len(failing)} regression(s) not accepted: {', '.join(failing[:10])}", file=sys.stderr)
        return EXIT_REGRESSION
    if args.recheck:  # 2 only for a paired run of this re-check that failed, not for rows failed before it
        return EXIT_OK if ok else EXIT_BENCHMARKS_FAILED
    return EXIT_BENCHMARKS_FAILED if any(r["verdict"] == "failed" for r in rows) else EXIT_OK


def cmd_pipeline(args: argparse.Namespace) -> int:
    from benchtrail.pipeline import run_pipeline

    result = run_pipeline(_filtered_suite(args), args.benchmark_presets, args.store, args.base_commit, args.thresholds,
                          recheck=args.recheck, quarantine=args.quarantine)
    print(result.comment_md)
    return EXIT_OK if result.all_ok else EXIT_BENCHMARKS_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = ExitOneArgumentParser(prog="benchtrail", description="Continuous benchmarking for PyTorch: one subcommand per stage.")
    from benchtrail import __version__

    parser.add_argument("--version", action="version", version=f"benchtrail {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=ExitOneArgumentParser)

    filtering = argparse.ArgumentParser(add_help=False)
    filtering.add_argument("--filter", metavar="REGEX", help="only run configs (and modules) whose name or id this "
                           "regular expression finds, e.g. 'resnet18|gpt2' or 'inductor.*backward'")
    presets = argparse.ArgumentParser(add_help=False)
    presets.add_argument("--benchmark-presets", type=_presets, metavar="P[,P...]",
                         help="presets or meta-presets, comma- or space-separated (e.g. x86_64,comp-stats; "
                              "default: presets of [tool.benchtrail] in pyproject.toml)")
    thresholds = argparse.ArgumentParser(add_help=False)
    thresholds.add_argument("--thresholds", type=Path, help="thresholds YAML (default: [tool.benchtrail] "
                                                           "thresholds, else the shipped table)")
    quarantine = argparse.ArgumentParser(add_help=False)
    quarantine.add_argument("--quarantine", type=Path, help="quarantine YAML: flaky series reported but never "
                            "gating (default: [tool.benchtrail] quarantine, else the shipped, empty list)")

    p = sub.add_parser("configure", help="select presets from a GitHub event (PR trailer, labels, push, dispatch)")
    p.add_argument("--error-comment", type=Path, metavar="DIR",
                   help="also append selection-error=true|false to $GITHUB_OUTPUT; when a PR's selection is "
                        "invalid (an unknown preset, a bad benchmarks-accept item, malformed PR_LABELS) write "
                        "DIR/comment.json and DIR/comment.md, a PR comment naming the error for `benchtrail post`, "
                        "then fail as without it (exit 1)")
    p.set_defaults(func=cmd_configure)

    p = sub.add_parser("export", parents=[presets, filtering], help="write the run configs of presets as JSON")
    p.add_argument("kind", choices=("execution", "compilation"))
    p.add_argument("--shard-count", type=_int_at_least(1), default=1, help="shards per device (default 1)")
    p.add_argument("--output", type=Path, help="output file, or - for stdout (default: ./<kind>.json)")
    p.add_argument("--format", choices=("benchtrail", "seed"), default="benchtrail",
                   help="execution only, with --output -: seed prints {<device>: {host_environment, architecture, "
                        "run_configs}}, unsharded and without schema_version, the shape IREE's export script printed "
                        "for the seed's `jq 'flatten | map(.run_configs) | ...'` (default: benchtrail, the export "
                        "`benchtrail run` reads)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("compile", help="compile the modules of a compilation export")
    p.add_argument("--run-configs", type=Path, required=True, help="compilation export (compilation.json)")
    p.add_argument("--output-dir", type=Path, required=True, help="run directory to write modules/ into")
    p.add_argument("--device-name", required=True, help="this runner's device name, recorded with the statistics")
    p.add_argument("--architecture", choices=("cpu", "cuda"), default="cpu", help="modules to compile (default cpu)")
    p.add_argument("--module-id", action="append", help="compile only this module (repeatable)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", parents=[filtering], help="run one device's shard of an execution export")
    p.add_argument("--run-configs", type=Path, required=True, help="execution export (execution.json)")
    p.add_argument("--device-name", required=True, help="device to run (a key of the export's devices); a CUDA "
                   "device on a machine where torch sees no GPU is refused before its first case (exit 1)")
    p.add_argument("--shard-index", type=_int_at_least(0), help="shard to run (default: all shards)")
    p.add_argument("--benchmark-id", action="append", help="run only this run config id (repeatable)")
    p.add_argument("--modules-dir", type=Path,
                   help="run directory holding modules/<name>/ (export and AOTInductor artifacts); a case "
                        "whose module failed to compile or was not compiled there is recorded failed, "
                        "not run")
    p.add_argument("--output", type=Path, required=True, help="results file to write")
    p.add_argument("--continue", dest="resume", action="store_true",
                   help="resume a run stage that stopped part-way: keep the cases its journal "
                        "(<output>.partial.jsonl) holds, run the rest")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", parents=[thresholds, quarantine], help="compare head results with base results")
    p.add_argument("--base", type=Path, action="append", default=[],
                   help="baseline results file or run dir (repeatable; none: every series is new)")
    p.add_argument("--head", type=Path, action="append", required=True,
                   help="head results file or run dir (repeatable)")
    p.add_argument("--store", help="find the baseline run in this store (README's Baseline rule) instead of --base; "
                                   "a store that cannot be read (outage, missing bucket, no credentials) only warns: "
                                   "the comparison has no baseline (BENCHTRAIL_STORE_DEADLINE_S caps GCS retries)")
    p.add_argument("--base-commit", help="with --store: the baseline commit (default: the Baseline rule)")
    p.add_argument("--base-branch", metavar="BRANCH",
                   help="with --store: the branch the head merges into (a PR's base branch, the pushed branch "
                        "for a push): baselines come from its merge base with HEAD (default: the default branch)")
    add_trust_arguments(p)
    p.add_argument("--output", type=Path, default=Path("comparison.json"))
    p.add_argument("--accept", action="append", metavar="GLOB",
                   help="accept regressions of series whose name or id matches (repeatable; also the "
                        "comma-separated BENCHMARKS_ACCEPT, which `benchtrail configure` fills from trailers)")
    p.add_argument("--fail-on", choices=("regressed",), help="exit 3 when a regression is not accepted")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("comment", help="render comparison.json as the PR comment")
    p.add_argument("--comparison", type=Path, required=True)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--run-url", metavar="URL",
                   help="the run's store URL (gs://BUCKET/PREFIX/runs/<id>/<attempt>/) or folder: adds the "
                        "`gcloud storage cp -r` and `benchtrail explain <id> --run URL` lines")
    p.add_argument("--dashboard", metavar="PATH",
                   help="the dashboard's index.html relative to --run-url (e.g. dashboard/index.html), linked "
                        "(https://storage.cloud.google.com/... for gs://); needs --run-url")
    p.add_argument("--artifacts-url", metavar="URL",
                   help="the GitHub Actions run's page, linked as its artifacts for readers without bucket access")
    p.add_argument("--note", action="append", metavar="TEXT",
                   help="a line near the top of the comment, shown as plain text (repeatable), e.g. "
                        "'⚠ the run could not be stored: ...'")
    p.set_defaults(func=cmd_comment)

    p = sub.add_parser("pipeline", parents=[presets, filtering, thresholds, quarantine], help="the main job, end to end")
    p.add_argument("--store", help="store: folder, file:///ABS/PATH or gs://BUCKET[/PREFIX] (default: "
                                   f"[tool.benchtrail] store, else {DEFAULT_STORE})")
    p.add_argument("--base-commit", help="baseline commit (default: the merge-base rule in README's Baseline section)")
    p.add_argument("--recheck", action=argparse.BooleanOptionalAction, default=True,
                   help="re-check regressions against the baseline commit in paired A/B runs (default on)")
    p.set_defaults(func=cmd_pipeline)

    p = sub.add_parser("ab", parents=[thresholds],
                       help="paired A/B: run base and head interleaved on this machine (or re-check a comparison)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--benchmark-presets", type=_presets, metavar="P[,P...]", help="cases to run paired")
    which.add_argument("--recheck", type=Path, metavar="COMPARISON",
                       help="re-check the unconfirmed regressions of this comparison.json")
    p.add_argument("--base-ref", help="base commit or ref, checked out in a git worktree (with --recheck: "
                                      "default the comparison's base commit)")
    p.add_argument("--benchmark-id", action="append", help="only this run config id (repeatable)")
    p.add_argument("--device-name", help="with --recheck: re-check only this device's rows (the runner's own)")
    p.add_argument("--output-dir", type=Path, required=True, help="folder for results, comparison.json, comment/")
    p.add_argument("--min-rounds", type=_int_at_least(1),
                   help="rounds always run, one worker per arm each (default: the run config's processes)")
    p.add_argument("--max-rounds", type=_int_at_least(1), default=6, help="rounds at most per case (default 6)")
    p.add_argument("--budget-s", type=_positive_seconds, default=300.0,
                   help="no new round starts after this many seconds of a case (default 300)")
    p.add_argument("--total-budget-s", type=_positive_seconds, metavar="S",
                   help="with --recheck: suspects are re-checked largest change first, no case starts once S "
                        "seconds have passed since the re-check began, and each gets at most the time left as "
                        "its --budget-s; rows not reached stay unconfirmed (default: no limit)")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="seeds arm order and bootstrap (default 0)")
    p.add_argument("--accept", action="append", metavar="GLOB",
                   help="accept regressions of matching series (with --recheck: those the re-check finds, with "
                        "the comma-separated BENCHMARKS_ACCEPT too)")
    p.add_argument("--fail-on", choices=("regressed",), help="exit 3 when a regression is not accepted")
    p.set_defaults(func=cmd_ab)

    run = argparse.ArgumentParser(add_help=False)
    run.add_argument("--run", help="run directory: a folder, or a store URL ending in /runs/<id>/<attempt>/ "
                                   f"such as gs://bucket/runs/123/1/ (default: the newest run in {DEFAULT_STORE})")
    p = sub.add_parser("explain", parents=[run], help="describe one benchmark of a run and how to reproduce it")
    p.add_argument("benchmark_id", help="run config id, module id, <module id>-<metric>, a 6+ character prefix, or a name")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("dump-cmds", parents=[run], help="print the reproduce command of every benchmark in a run")
    p.set_defaults(func=cmd_dump_cmds)

    from benchtrail.detector.evaluate import add_evaluate_detector_parser
    from benchtrail.runner.doctor import add_doctor_parser
    from benchtrail.github.post import add_post_parser
    from benchtrail.cli.history import add_history_parsers
    from benchtrail.cli.interop import add_interop_parsers
    from benchtrail.github.runner_labels import add_runner_labels_parser
    from benchtrail.cli.store import add_fetch_parser, add_upload_parser
    from benchtrail.history.track import add_track_parsers

    add_post_parser(sub)
    add_track_parsers(sub)
    add_evaluate_detector_parser(sub)
    add_upload_parser(sub)
    add_fetch_parser(sub)
    add_history_parsers(sub)
    add_interop_parsers(sub)
    add_doctor_parser(sub)
    add_runner_labels_parser(sub)
    from benchtrail.cli.ci import add_ci_parsers

    add_ci_parsers(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a CI cancel, ``timeout``) unwinds like Ctrl-C, so worker processes are killed."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; return the exit code."""
    import signal

    from benchtrail.project import put_first_on_sys_path

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    # The project's own packages (its suite, the model factories that run configs name) import in
    # this process from any folder of the project, installed or not; workers get the same root
    # first on PYTHONPATH (benchtrail.runner.workers.run_in_worker).
    put_first_on_sys_path()
    args = build_parser().parse_args(argv)
    try:
        _apply_project_defaults(args)
        return args.func(args)
    except UserError as exc:
        print(f"benchtrail: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
