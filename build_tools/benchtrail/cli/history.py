"""``benchtrail history``, ``plot``, ``pages`` and ``compare-builds`` (docs/history.md). Each prints its main
output's path last: history.json, the dashboard's index.html, the site's index.html, the ratio plot."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchtrail import jsonio
from benchtrail.cli.flag_values import check_output_dir, max_commits, path_argument
from benchtrail.cli.options import (
    STORE_HELP,
    add_command,
    add_trust_arguments,
    open_trusted,
    optional_store,
    require_store,
)
from benchtrail.errors import EXIT_OK, UserError, missing_extra


def add_history_parsers(subparsers: Any) -> None:
    """Declare ``history``, ``plot``, ``pages`` and ``compare-builds``."""
    p = add_command(subparsers, "history", cmd_history)
    add_walk_arguments(p)
    p.add_argument(
        "--output",
        type=path_argument,
        default=Path("history.json"),
        help="history file to write; never overwritten (default history.json)",
    )
    add_trust_arguments(p)

    p = add_command(subparsers, "plot", cmd_plot)
    p.add_argument(
        "--history", type=path_argument, required=True, help="history file written by `benchtrail history`"
    )
    p.add_argument(
        "--output-dir",
        type=path_argument,
        required=True,
        help="new (or empty) folder for the PNGs and the dashboard",
    )
    p.add_argument(
        "--self-contained",
        action="store_true",
        help="inline plotly.js into every page (about 4.9 MB each) instead of one plotly.min.js beside them",
    )
    p.add_argument(
        "--repo",
        type=path_argument,
        default=Path("."),
        help="git repository that gives each commit's date and subject in index.html (default .)",
    )
    p.add_argument(
        "--baseline",
        metavar="REF",
        help="commit or ref (in --repo) to mark with a dashed line on every PNG, e.g. origin/main",
    )
    p.add_argument(
        "--y-axis",
        choices=("auto", "zero", "ratio"),
        default="auto",
        help="the PNGs' value axis: auto (fits the data), zero (starts at 0) or ratio (each "
        "series over its value at --baseline, else at its oldest point); default auto",
    )

    p = add_command(subparsers, "pages", cmd_pages)
    add_walk_arguments(p)
    p.add_argument(
        "--output-dir",
        type=path_argument,
        required=True,
        help="new (or empty) folder for the site: publish it as GitHub Pages, or upload it as an "
        "Actions artifact",
    )
    add_trust_arguments(p)

    p = add_command(subparsers, "compare-builds", cmd_compare_builds)
    p.add_argument("a", metavar="A", help="base build: a commit or ref with a stored run, or a run directory")
    p.add_argument("b", metavar="B", help="other build, the same kinds of value as A")
    p.add_argument("--store", help=STORE_HELP + "; read when A or B is a commit")
    p.add_argument(
        "--repo",
        type=path_argument,
        default=Path("."),
        help="git repository that resolves A and B (default .)",
    )
    p.add_argument(
        "--output-dir", type=path_argument, default=Path("."), help="folder for the ratio plot (default .)"
    )
    p.add_argument(
        "--allow-same-run",
        action="store_true",
        help="compare a run with itself (refused by default: every row would be 'similar')",
    )
    add_trust_arguments(p)


def add_walk_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``--store``, ``--repo``, ``--ref`` and ``--max-commits``: what :func:`collect` walks."""
    parser.add_argument("--store", help=STORE_HELP)
    parser.add_argument(
        "--repo",
        type=path_argument,
        default=Path("."),
        help="git repository whose history is walked (default .)",
    )
    parser.add_argument("--ref", default="HEAD", help="newest commit: a branch, tag or sha (default HEAD)")
    parser.add_argument(
        "--max-commits",
        type=max_commits,
        default=100,
        metavar="N",
        help="walk at most N first-parent commits back from --ref (default 100)",
    )


def collect(args: argparse.Namespace, store: str, repository: str | None = None) -> tuple[Any, Any]:
    """``(opened store, history)``: the first-parent history of ``--ref`` from the store's runs that
    ``--trust`` trusts; a warning on stderr for each run not used."""
    from benchtrail.history.collect import collect_history

    opened, trust = open_trusted(args, store, repository)
    history = collect_history(opened, args.repo, args.ref, args.max_commits, trust=trust)
    for line in history.skipped:
        print(f"benchtrail: warning: run not used: {line}", file=sys.stderr)
    return opened, history


def cmd_history(args: argparse.Namespace) -> int:
    """Collect, print a summary, write the history file and print its path."""
    from benchtrail.history.collect import write_history

    jsonio.check_new(args.output)
    opened, history = collect(args, require_store(args.store, "benchtrail history"))
    incomplete = opened.incomplete_runs()
    if incomplete:
        shown = ", ".join(f"{r}/{a}" for r, a in incomplete[:10]) + (" …" if len(incomplete) > 10 else "")
        print(
            f"benchtrail: {len(incomplete)} incomplete run(s) without a commit "
            f"pointer (interrupted or failed before they were stored in full; never read): {shown}",
            file=sys.stderr,
        )
    print(
        f"{len(history.series)} series over {len(history.run_commits())} of {len(history.commits)} "
        f"first-parent commits of {args.ref}"
    )
    print(write_history(args.output, history))
    return EXIT_OK


@contextlib.contextmanager
def publish_folder(out_dir: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``out_dir`` to fill, then rename it to ``out_dir``: all or nothing. Raises
    UserError when ``out_dir`` is a file or a folder that holds files, or cannot be written; the temporary
    folder is removed on any error."""
    check_output_dir(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise UserError(
            f"--output-dir {out_dir} exists and is not an empty folder; "
            "benchtrail never overwrites (choose a new folder)"
        )
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp"))
    except OSError as exc:
        raise UserError(f"cannot create --output-dir {out_dir}: {exc.strerror or exc}") from exc
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if out_dir.exists():
            out_dir.rmdir()
        os.rename(tmp, out_dir)
    except OSError as exc:
        raise UserError(f"cannot write --output-dir {out_dir}: {exc.strerror or exc}") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def cmd_plot(args: argparse.Namespace) -> int:
    """Write the PNGs and the dashboard; print the PNG paths, then index.html's."""
    from benchtrail.git import resolve_commit
    from benchtrail.history.collect import load_history
    from benchtrail.history.dashboard import write_dashboard
    from benchtrail.history.plots import plot_history_png

    history = load_history(args.history)
    baseline = None
    if args.baseline is not None:
        baseline = resolve_commit(args.repo, args.baseline)
        if baseline is None:
            raise UserError(
                f"--baseline {args.baseline!r}: git cannot resolve it to a commit in --repo "
                f"{str(args.repo)!r}; give a sha, a branch or a tag of that repository"
            )
    with publish_folder(args.output_dir) as folder:
        pngs = plot_history_png(history, folder, baseline=baseline, y_axis=args.y_axis)
        try:
            pngs.append(
                write_dashboard(
                    history, folder, images=pngs, self_contained=args.self_contained, repo=args.repo
                )
            )
        except ModuleNotFoundError as exc:
            print(f"no HTML dashboard (PNGs only): needs {missing_extra(exc)}", file=sys.stderr)
    for path in pngs:
        print(args.output_dir / path.relative_to(folder))
    return EXIT_OK


def cmd_pages(args: argparse.Namespace) -> int:
    """Write the static site of ``--ref``'s history into ``--output-dir``, all or nothing; print a summary,
    then index.html's path. Raises UserError for an ``--output-dir`` that is a file or holds files (before the
    store is read), or what ``history`` refuses."""
    from benchtrail.history.pages import write_site

    with publish_folder(args.output_dir) as folder:
        opened, history = collect(args, require_store(args.store, "benchtrail pages"))
        index = write_site(opened, history, folder, repo=args.repo)
    print(
        f"{len(history.series)} series over {len(history.run_commits())} of {len(history.commits)} "
        f"first-parent commits of {args.ref}"
    )
    print(args.output_dir / index.relative_to(folder))
    return EXIT_OK


def cmd_compare_builds(args: argparse.Namespace) -> int:
    """Print the table, write the ratio plot and print its path."""
    from benchtrail.git import short_sha
    from benchtrail.history.builds import compare_builds, format_table, plot_comparison

    check_output_dir(args.output_dir)
    url = optional_store(args.store)  # a run directory needs no store
    store, trust = open_trusted(args, url) if url else (None, None)
    comparison = compare_builds(
        args.a, args.b, store, args.repo, allow_same_run=args.allow_same_run, trust=trust
    )
    path = (
        args.output_dir
        / f"compare-builds-{short_sha(comparison.a.commit)}-{short_sha(comparison.b.commit)}.png"
    )
    jsonio.check_new(path)
    print(format_table(comparison))
    print(plot_comparison(comparison, path))
    return EXIT_OK
