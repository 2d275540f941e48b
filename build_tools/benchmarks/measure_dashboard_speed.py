#!/usr/bin/env python3
"""Measure the offline dashboard's page build: ``benchtrail.history.dashboard.page_html`` on a synthetic
history of ``--series`` execution series over ``--commits`` commits (one run each, 30 samples).

Times, as the best of ``--repeat`` runs, the page as the dashboard writes it (the figure as a plain dict,
``plotly.io.to_html(..., validate=False)``) and the same figure built and validated as plotly
``graph_objects`` first (``go.Figure(dict)``), which is what validation costs. Prints a markdown table.

Usage: python build_tools/benchmarks/measure_dashboard_speed.py [--series 10 200] [--commits 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import plotly
import plotly.graph_objects as go
from plotly.io import to_html

from benchtrail.history import dashboard
from benchtrail.history.series import CommitRun, History, Point, Series


def synthetic_history(series: int, commits: int) -> History:
    """``series`` latency series (µs) of preset ``bench``, each with a point at every one of ``commits`` commits."""
    shas = [f"{i:040x}" for i in range(1, commits + 1)]
    points = lambda k: tuple(Point(c, f"run-{i}", 1, 100.0 + k + i, 2.0, 95.0, 110.0, 30, "ok",  # noqa: E731
                                   99.0, 101.0)
                             for i, c in enumerate(shas))
    return History("main", shas[-1], "synthetic",
                   tuple(CommitRun(c, f"run-{i}", 1) for i, c in enumerate(shas)),
                   tuple(Series(f"id-{k}", f"model{k}.eager.inference-bs1.laptop", "execution", "latency",
                                "us",
                                "laptop", ("bench",), "eager", "inference",
                                points(k)) for k in range(series)))


def page(series: int, commits: int) -> str:
    """The page as the dashboard writes it."""
    history = synthetic_history(series, commits)
    return dashboard.page_html(history, "bench", list(history.series))


def validated(series: int, commits: int) -> str:
    """The same figure validated as plotly ``graph_objects`` before it is written."""
    history = synthetic_history(series, commits)
    figure = go.Figure(dashboard._figure(list(history.series), history.run_commits()))
    return to_html(figure, include_plotlyjs="directory", full_html=False)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)  # includes building the synthetic history (milliseconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{datetime.date.today()} · Python {platform.python_version()} · plotly {plotly.__version__} · "
          f"{args.commits} commits · best of {args.repeat}\n")
    print("| series | page_html (dict, not validated) | the figure validated as graph_objects first |")
    print("|---:|---:|---:|")
    for n in args.series:
        times = [best(lambda fn=fn, n=n: fn(n, args.commits), args.repeat) for fn in (page, validated)]
        print(f"| {n} | {times[0]:.2f} s | {times[1]:.2f} s |")


if __name__ == "__main__":
    main()
