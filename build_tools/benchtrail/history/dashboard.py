"""The offline HTML dashboard of a history: ``index.html`` and one plotly page per page group.

Each page is a grid of subplots, one per series: x the short commits in first-parent order, y the median
with its IQR band, each run's median a dot (noisy open, unconfirmed regressions crosses). Names are data,
never markup or hover-template references. plotly.js is written once beside the pages, inlined, or
loaded from a given relative URL: nothing comes from the network. ``index.html`` lists the commits
newest first with date and subject, consecutive commits without a run as one line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from benchtrail import jsonio
from benchtrail.git import git, short_sha
from benchtrail.history.plots import UNIT_LABELS
from benchtrail.history.series import (
    COMPILATION_PAGE,
    NO_PRESET_PAGE,
    History,
    Series,
    aligned,
    band,
    page_groups,
)
from benchtrail.markup import html_text, plotly_text

INDEX = "index.html"
PLOTLY_JS = "plotly.min.js"
COLUMNS = 2
#: Height of one row of subplots, in CSS pixels.
ROW_HEIGHT = 300

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
    "code{font-size:95%}"
)


def _page_title(page: str) -> str:
    return {COMPILATION_PAGE: "compilation statistics", NO_PRESET_PAGE: "execution series of no preset"}.get(
        page, f"preset {page}"
    )


def _figure(series: Sequence[Series], commits: list[str]) -> dict:
    """A plotly figure dict: one subplot per series, a median line with markers and an IQR band each.

    Traces are plain dicts written unvalidated: as ``graph_objects`` 200 series took 7.0 s, now 0.7-0.9 s.
    """
    from plotly.colors import hex_to_rgb, qualitative
    from plotly.io import templates
    from plotly.subplots import make_subplots

    cols = min(COLUMNS, len(series))
    rows = math.ceil(len(series) / cols)
    layout = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[plotly_text(s.name) for s in series],
        vertical_spacing=min(0.12, 0.45 / rows),
        horizontal_spacing=0.08,
    ).to_dict()["layout"]
    x = [short_sha(c) for c in commits]
    palette = qualitative.Plotly
    traces: list[dict] = []
    for i, s in enumerate(series):
        axis = "" if i == 0 else str(i + 1)  # make_subplots numbers axes row by row: x, x2, x3, ...
        common = {"type": "scatter", "legendgroup": s.id, "xaxis": f"x{axis}", "yaxis": f"y{axis}"}
        color = palette[i % len(palette)]
        fill = "rgba({},{},{},0.25)".format(*hex_to_rgb(color))  # the line's colour at 1/4
        points = aligned(s, commits)
        bands = [band(p) for p in points]
        unit, name = UNIT_LABELS.get(s.unit, s.unit), plotly_text(s.name)
        for k in (1, 0):  # the band's top, then its bottom filled up to it
            traces.append(
                {
                    **common,
                    "x": x,
                    "y": [b[k] for b in bands],
                    "mode": "lines",
                    "line": {"width": 0, "color": color},
                    **({} if k else {"fill": "tonexty"}),
                    "fillcolor": fill,
                    "showlegend": False,
                    "hoverinfo": "skip",
                }
            )
        custom = [
            [p.iqr, p.n, p.status, f"{p.run_id}/{p.attempt}", p.commit, len(p.runs) or 1] if p else [None] * 6
            for p in points
        ]
        runs = [(short_sha(p.commit), r) for p in s.points for r in p.runs if r.median is not None]
        traces.append(
            {
                **common,
                "x": [c for c, _ in runs],
                "y": [r.median for _, r in runs],
                "mode": "markers",
                "showlegend": False,
                "hoverinfo": "y",
                # noisy open, unconfirmed a cross
                "marker": {
                    "size": 5,
                    "color": color,
                    "symbol": [
                        "x" if r.mark == "unconfirmed" else "circle-open" if r.noisy else "circle"
                        for _, r in runs
                    ],
                },
            }
        )
        traces.append(
            {
                **common,
                "x": x,
                "y": [p.value if p else None for p in points],
                "mode": "lines+markers",
                "name": name,
                "line": {"color": color},
                "marker": {"size": 6},
                "customdata": custom,
                # The name goes in as data (%{text}), never into the template, where "%{" is a reference.
                "text": [name] * len(x),
                "hovertemplate": (
                    f"<b>%{{text}}</b><br>commit %{{customdata[4]}}<br>median of "
                    f"%{{customdata[5]}} run(s) %{{y:.4g}} "
                    f"{plotly_text(unit)}<br>IQR %{{customdata[0]:.3g}}<br>n "
                    "%{customdata[1]} · %{customdata[2]}<br>run %{customdata[3]}<extra></extra>"
                ),
            }
        )
        layout[f"yaxis{axis}"].update(title={"text": unit, "font": {"size": 10}})
        layout[f"xaxis{axis}"].update(type="category", categoryorder="array", categoryarray=x)
    layout.update(
        height=ROW_HEIGHT * rows + 120,
        showlegend=True,
        template=templates["plotly_white"].to_plotly_json(),
        margin={"t": 60},
        legend={"font": {"size": 10}},
    )
    for annotation in layout.get("annotations", []):
        annotation["font"] = {"size": 11}
    return {"data": traces, "layout": layout}


def _document(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html_text(title)}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _context(history: History) -> str:
    return (
        f"<p><code>{html_text(history.ref)}</code> at <code>{short_sha(history.head)}</code> · "
        f"{len(history.run_commits())} of {len(history.commits)} first-parent commits have a run · "
        f"store <code>{html_text(history.store)}</code></p>"
    )


def plotly_asset() -> tuple[str, bytes]:
    """``("plotly-<plotly.js version>.min.js", its bytes)``: the one copy a store keeps for its runs."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js", get_plotlyjs().encode()


def page_html(
    history: History,
    page: str,
    series: Sequence[Series],
    *,
    self_contained: bool = False,
    plotly_js: str | None = None,
) -> str:
    """The HTML of one dashboard page; ``plotly_js`` as in :func:`write_dashboard`."""
    from plotly.io import to_html

    include = self_contained or plotly_js or "directory"  # a path ending in .js: <script src=...>
    div = to_html(
        _figure(series, history.run_commits()),
        include_plotlyjs=include,
        full_html=False,
        div_id=f"benchtrail-{page}",
        config={"displaylogo": False},
        validate=False,
    )
    title = f"benchtrail history · {_page_title(page)}"
    body = (
        f'<p><a href="{INDEX}">← all pages</a></p>\n<h1>{html_text(title)}</h1>\n'
        f"{_context(history)}\n"
        f"<p>{len(series)} series; median with its IQR band (p25–p75) per commit; a missing point is a "
        "commit without a run or without the series.</p>\n" + div
    )
    return _document(title, body)


def commit_log(repo: Path | None, history: History) -> dict[str, tuple[str, str]]:
    """``{sha: (committer date YYYY-MM-DD, subject)}`` from ``git log --first-parent`` in ``repo``; ``{}``
    when ``repo`` is None or git cannot tell; commits beyond a shallow clone's depth left out."""
    if repo is None:
        return {}
    out = (
        git(
            Path(repo),
            "log",
            "--first-parent",
            f"--max-count={len(history.commits)}",
            "--format=%H%x1f%cs%x1f%s",
            history.head,
        )
        or ""
    )
    return {
        sha: (date, subject)
        for sha, date, subject in (line.split("\x1f") for line in out.splitlines() if line.count("\x1f") == 2)
    }


def commit_rows(history: History, log: dict[str, tuple[str, str]]) -> str:
    """The commits table's rows, newest first; two or more consecutive commits without a run are one row,
    ``12 commits without runs (<oldest> … <newest>)``."""
    rows: list[str] = []
    for has_run, group in itertools.groupby(reversed(history.commits), key=lambda c: c.run_id is not None):
        gap = list(group)
        if has_run or len(gap) == 1:
            for c in gap:
                date, subject = log.get(c.commit, ("—", ""))
                run = html_text(f"{c.run_id}/{c.attempt}") if c.run_id else "no run"
                rows.append(
                    f"<tr><td><code>{short_sha(c.commit)}</code></td><td>{html_text(date)}</td>"
                    f"<td>{html_text(subject)}</td><td>{run}</td></tr>\n"
                )
        else:
            rows.append(
                f'<tr class="gap"><td colspan="4">{len(gap)} commits without runs '
                f"(<code>{short_sha(gap[-1].commit)}</code> … <code>{short_sha(gap[0].commit)}</code>)"
                "</td></tr>\n"
            )
    return "".join(rows)


def index_html(
    history: History,
    pages: dict[str, list[Series]],
    images: Sequence[str] = (),
    log: dict[str, tuple[str, str]] | None = None,
    extra: str = "",
) -> str:
    """``index.html``: links to the pages and PNGs, ``extra`` HTML, and the commits (``log``:
    :func:`commit_log`)."""
    links = "".join(
        f'<li><a href="{html_text(p)}.html">{html_text(_page_title(p))}</a> ({len(s)} series)</li>\n'
        for p, s in pages.items()
    )
    pngs = "".join(f'<li><a href="{html_text(i)}">{html_text(i)}</a></li>\n' for i in images)
    body = (
        f"<h1>benchtrail history</h1>\n{_context(history)}\n<h2>Pages</h2>\n"
        + (f"<ul>\n{links}</ul>\n" if links else "<p>No series in this history.</p>\n")
        + (f"<h2>Static plots (PNG)</h2>\n<ul>\n{pngs}</ul>\n" if pngs else "")
        + extra
        + "<h2>Commits (newest first)</h2>\n<table><tr><th>commit</th><th>date</th><th>subject</th>"
        "<th>run</th></tr>\n" + commit_rows(history, log or {}) + "</table>\n"
    )
    if history.skipped:
        body += (
            "<h2>Runs not used</h2>\n<ul>\n"
            + "".join(f"<li>{html_text(s)}</li>\n" for s in history.skipped)
            + "</ul>\n"
        )
    return _document("benchtrail history", body)


def write_dashboard(
    history: History,
    out_dir: Path,
    *,
    images: Sequence[Path] = (),
    self_contained: bool = False,
    repo: Path | None = Path("."),
    plotly_js: str | None = None,
    extra: str = "",
) -> Path:
    """Write ``index.html`` (returned), a ``<page>.html`` per page group and, unless ``self_contained``
    (inlined) or ``plotly_js`` (a URL relative to ``out_dir``), ``plotly.min.js`` (about 4.9 MB) once.

    ``images``: PNGs that ``index.html`` links; ``repo``: where ``git log`` gives dates and subjects.
    Raises UserError, before writing anything, when a file exists; or when one cannot be written.
    """
    from plotly.offline import get_plotlyjs

    out_dir = Path(out_dir)
    pages = page_groups(history)
    script = [] if self_contained or plotly_js or not pages else [out_dir / PLOTLY_JS]
    jsonio.check_new(*(out_dir / f"{p}.html" for p in pages), out_dir / INDEX, *script)
    for path in script:
        jsonio.write_text_atomic(path, get_plotlyjs(), exclusive=True)
    for page, series in pages.items():
        jsonio.write_text_atomic(
            out_dir / f"{page}.html",
            page_html(history, page, series, self_contained=self_contained, plotly_js=plotly_js),
            exclusive=True,
        )
    relative = [
        Path(i).relative_to(out_dir).as_posix() if Path(i).is_relative_to(out_dir) else str(i) for i in images
    ]
    page = index_html(history, pages, relative, commit_log(repo, history), extra)
    return jsonio.write_text_atomic(out_dir / INDEX, page, exclusive=True)
