"""One GitHub issue per regression that ``benchtrail track`` finds, found again by a hidden marker.

Issues carry the label ``LABEL`` (only triage or push access can set it, so no one else can capture or
suppress one) and end with ``<!-- benchtrail:track series=<id> commit=<sha> -->``. An open match is
edited when its text changed, a closed one left alone, and an issue created only for a new regression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from benchtrail.errors import UserError
from benchtrail.git import short_sha
from benchtrail.github.post import describe, make_client
from benchtrail.history.track import ChangePoint, TrackReport
from benchtrail.markup import code_span, md_text
from benchtrail.store import fetch_command, remote, run_url

LABEL = "benchtrail-regression"
MARKER_PREFIX = "<!-- benchtrail:track"
_MARKER = re.compile(
    re.escape(MARKER_PREFIX) + r" series=(?P<series>[0-9A-Za-z._-]+) "
    r"commit=(?P<commit>[0-9a-f]{7,64}) -->"
)


@dataclass(frozen=True)
class IssueAction:
    """What ``post_issues`` did for one regression; ``number``/``url`` None for ``not-new``."""

    series_id: str
    head_commit: str
    action: str  # created, updated, unchanged, closed or not-new
    number: int | None
    url: str | None
    message: str


def marker(series_id: str, commit: str) -> str:
    return f"{MARKER_PREFIX} series={series_id} commit={commit} -->"


def parse_marker(text: str) -> tuple[str, str] | None:
    """``(series id, commit)`` of the last track marker in ``text``; None when there is none."""
    found = list(_MARKER.finditer(text or ""))
    return found[-1].group("series", "commit") if found else None


def _value(x: float, unit: str) -> str:
    return f"{x:,.4g} {unit}" if abs(x) < 1e4 else f"{x:,.0f} {unit}"


def issue_body(cp: ChangePoint, report: TrackReport, repo_html_url: str) -> str:
    """The issue's Markdown: what changed where, how sure we are, how to find the commit and the runs."""
    base, head = short_sha(cp.base_commit), short_sha(cp.head_commit)
    gaps = f", {len(cp.gap_commits)} without a stored run" if cp.gap_commits else ""
    compare = f"{repo_html_url.rstrip('/')}/compare/{cp.base_commit}...{cp.head_commit}"
    lines = [
        f"### benchtrail: {code_span(cp.series_name)} regressed {cp.magnitude_pct:+.1f}%",
        "",
        "| | |",
        "|---|---|",
        f"| series | {code_span(cp.series_name, in_table=True)} ({code_span(cp.series_id, in_table=True)}) |",
        f"| device | {md_text(cp.device_name)} |",
        f"| metric | {cp.kind} {cp.metric} ({cp.unit}) |",
        f"| commits | `{base}..{head}` ([compare]({compare})): {len(cp.commits)} commit(s){gaps} |",
        f"| median | {_value(cp.before_median, cp.unit)} → {_value(cp.after_median, cp.unit)} "
        f"({cp.n_before} → {cp.n_after} commits with a run) |",
        f"| change | **{cp.magnitude_pct:+.1f}%** (threshold: {cp.threshold}) |",
        f"| confidence | {100 * cp.confidence:.1f}% (1 − p, two-sided Mann–Whitney U "
        f"over per-commit medians; p = {cp.p_value:.2g}) |",
        "",
        "Commits to test (first parents after the last good build, up to the first bad one), and the "
        "two builds side by side:",
        "",
        "```sh",
        f"benchtrail bisect-range {cp.base_commit} {cp.head_commit}",
        f"benchtrail compare-builds {cp.base_commit} {cp.head_commit} --store {report.store}",
        "```",
        "",
    ]
    runs = ((cp.base_run, "before"), (cp.head_run, "after"))
    if remote(report.store):
        lines += ["Runs before and after the change:", "", "```sh", "mkdir -p before after"]
        lines += [fetch_command(run_url(report.store, *run), f"{where}/") for run, where in runs]
        lines += ["```", ""]
    else:
        lines += [f"Runs: {where} `runs/{run_id}/{attempt}/`" for (run_id, attempt), where in runs]
        lines += [f"in the store `{report.store}`.", ""]
    lines += [
        f"Found by `benchtrail track` (ruptures PELT, l1 cost) over {report.runs} runs of "
        f"{report.commits} first-parent commits up to `{short_sha(report.head)}`. "
        "Close this issue to accept the change; benchtrail never reopens it.",
        marker(cp.series_id, cp.head_commit),
        "",
    ]
    return "\n".join(lines)


def _user_error(exc: Any, repo: str, base_url: str) -> UserError:
    status = getattr(exc, "status", None)
    if status == 401:
        return UserError(f"GitHub rejected the token ({describe(exc)}); check GITHUB_TOKEN")
    if status == 403:
        return UserError(
            f"the token may not write issues of {repo} ({describe(exc)}); the job needs "
            "`permissions: issues: write`"
        )
    if status in (404, 410):
        return UserError(
            f"{repo} or its issues not found at {base_url} ({describe(exc)}); check "
            "--repo-name, --api-url and that issues are enabled"
        )
    return UserError(f"GitHub API error on {repo} ({describe(exc)})")


def _match(cp: ChangePoint, ours: dict[tuple[str, str], Any], used: set[int]) -> Any | None:
    """Our unused issue of ``cp``'s series whose marker commit is the head or one of ``cp.nearby_commits``."""
    near = cp.nearby_commits
    for commit in sorted(near, key=lambda c: abs(near.index(c) - near.index(cp.head_commit))):
        issue = ours.get((cp.series_id, commit))
        if issue is not None and issue.number not in used:
            return issue
    return None


def post_issues(report: TrackReport, *, repo: str, token: str, base_url: str) -> list[IssueAction]:
    """Open or update one issue per regression of ``report`` in ``repo`` (``OWNER/NAME``).

    An open issue is updated whatever the threshold or p-value; a new one needs ``cp.issue`` and
    ``cp.new``. Improvements are never posted. Raises UserError for 401, 403, 404/410, another API
    error or an unreachable API URL.
    """
    import github
    import requests

    actions: list[IssueAction] = []
    try:
        repository = make_client(token, base_url).get_repo(repo)
        ours: dict[tuple[str, str], Any] = {}
        for issue in repository.get_issues(state="all", labels=[LABEL]):
            found = parse_marker(issue.body or "")
            if issue.pull_request is None and found is not None:
                ours.setdefault(found, issue)  # newest first: a duplicate made by hand is ignored
        used: set[int] = set()
        for cp in report.change_points:
            if cp.direction != "regression":
                continue
            issue = _match(cp, ours, used)
            where = f"{cp.series_name} at {short_sha(cp.head_commit)}"
            title = f"Regression: {cp.series_name} {cp.magnitude_pct:+.1f}% at {short_sha(cp.head_commit)}"
            body = issue_body(cp, report, repository.html_url)
            if issue is not None:
                used.add(issue.number)
                if issue.state == "closed":
                    action, text = "closed", f"issue #{issue.number} ({where}) is closed; left alone"
                elif issue.title == title and issue.body == body:
                    action, text = "unchanged", f"issue #{issue.number} ({where}) is up to date"
                else:
                    issue.edit(title=title, body=body)
                    action, text = "updated", f"updated issue #{issue.number} ({where})"
            elif cp.issue and cp.new:
                issue = repository.create_issue(title=title, body=body, labels=[LABEL])
                action, text = "created", f"created issue #{issue.number} ({where})"
            elif cp.issue:
                action, text = ("not-new", f"{where} is older than --new-within and has no issue; not filed")
            else:
                continue
            number, url = (issue.number, issue.html_url) if issue is not None else (None, None)
            actions.append(IssueAction(cp.series_id, cp.head_commit, action, number, url, text))
    except github.GithubException as exc:
        raise _user_error(exc, repo, base_url) from exc
    except requests.exceptions.RequestException as exc:
        raise UserError(f"cannot reach the GitHub API at {base_url} ({exc}); check --api-url") from exc
    return actions
