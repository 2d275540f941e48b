"""The post stage: put ``comment/comment.json`` on the PR, editing our earlier comment in place.

As IREE's ``post_benchmark_comment.py``: check the PR's head is still the measured commit, find our
comment by its hidden marker and author, edit it (or create one), never overwrite a newer run's.
Racing posters end with one comment; rate limits are retried within bounds; a comment that cannot be
posted goes to the job summary and the step still succeeds. Details: docs/workflows.md, "The poster".
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchtrail.compare import comment as comment_stage
from benchtrail.errors import UserError
from benchtrail.jsonio import read_json

if TYPE_CHECKING:
    from benchtrail.github.retry import Clock, RetryBudget, Sleep

#: GitHub rejects issue comments longer than this many characters.
GITHUB_MAX_COMMENT_CHARS = 65_536
DEFAULT_API_URL = "https://api.github.com"
#: The login of GitHub Actions' ``GITHUB_TOKEN``; only its comments count as ours, so a marker pasted
#: by anyone else can neither suppress nor capture the benchmark comment.
DEFAULT_COMMENT_AUTHOR = "github-actions[bot]"
#: The longest rate-limit wait (s) waited out; a longer one sends the body to the job summary at once.
#: 90 s covers the usual secondary-limit answers (about a minute; GitHub's "Rate limits for the REST
#: API", "Exceeding the rate limit") without holding a job for an hour.
RATE_LIMIT_MAX_WAIT_S = 90.0
#: Wait (s) after a secondary rate limit without ``Retry-After``: GitHub's "at least one minute".
SECONDARY_RATE_LIMIT_WAIT_S = 60.0
#: How many times one request is repeated after rate-limit or 5xx answers before giving up.
MAX_RETRIES = 2
#: Seconds all retries of one post may take from its first request (``--retry-budget``): a third of
#: the post job's ``timeout-minutes: 15``, the rest left for checkout, install and the requests.
RETRY_BUDGET_S = 300.0
COMMENT_KEYS = frozenset(
    {"schema_version", "marker", "verdict", "counts", "head_commit", "base_commit", "notes", "body"}
)

_MARKER = re.compile(
    re.escape(comment_stage.MARKER_PREFIX) + r" run=(?P<run>\S+) attempt=(?P<attempt>\S+) -->"
)
_DETAILS = re.compile(r"<details\b.*?</details>[ \t]*\n?", re.DOTALL | re.IGNORECASE)
DETAILS_DROPPED_NOTE = (
    "_Collapsed sections were left out to fit GitHub's comment size limit: "
    "see full.md in the run's artifacts._\n"
)
TRUNCATED_NOTE = (
    "\n_… truncated to fit GitHub's 65,536-character comment limit: "
    "the full report is full.md in the run's artifacts._\n\n"
)


MarkerRun = tuple[str, int]  # (run id, attempt) of a comment's marker


@dataclass(frozen=True)
class PostResult:
    """What ``post_comment`` did; ``comment_id``: the comment created or updated (dry-run: that would be;
    skipped-stale-run: the newer one), else None; ``warnings``: for the job log."""

    # created, updated, deduplicated, skipped-stale-run, skipped-head-changed, dry-run or fallback-summary
    action: str
    comment_id: int | None
    message: str
    warnings: tuple[str, ...] = ()


# -- the marker and the body --------------------------------------------------------------------


def parse_marker(text: str) -> MarkerRun | None:
    """``(run_id, attempt)`` of the last benchtrail marker in ``text``; None without a valid one."""
    found = None
    for m in _MARKER.finditer(text):
        found = m
    if found is None or not found["attempt"].isdigit():
        return None
    return found["run"], int(found["attempt"])


def is_newer(run: MarkerRun, than: MarkerRun) -> bool:
    """Whether marker ``run`` comes from a later run than ``than``: ids compare as integers (GitHub's) or
    as strings (local ids sort by time), a CI and a local id not at all; attempts break ties."""
    (run_id, attempt), (other_id, other_attempt) = run, than
    if run_id.isdigit() != other_id.isdigit():
        return False
    key = int if run_id.isdigit() else str
    return (key(run_id), attempt) > (key(other_id), other_attempt)


def fit_body(body: str, marker: str, limit: int = GITHUB_MAX_COMMENT_CHARS) -> str:
    """``body`` in at most ``limit`` characters, ``marker`` last: ``<details>`` sections dropped from the
    last up, then cut at a line, pointing to full.md; a short footer (≤ 2,000 characters) is kept.

    Raises UserError when ``limit`` cannot hold the marker and the truncation note.
    """
    if len(body) <= limit and body.rstrip().splitlines()[-1:] == [marker] and body.count(marker) == 1:
        return body
    text = body.replace(marker, "").rstrip() + "\n"
    split = text.rstrip("\n").rfind("\n\n")
    footer = text[split + 2 :] if split >= 0 else ""
    if len(footer) > min(2_000, limit // 4) or "<details" in footer.lower():
        footer = ""
    head = text[: len(text) - len(footer)]
    tail = (footer or "\n") + marker + "\n"
    room = limit - len(tail)  # for the head
    if len(head) <= room:
        return head + tail
    sections = list(_DETAILS.finditer(head))
    if sections:
        note_at, kept = sections[0].start(), head
        for m in reversed(sections):  # later sections go first; earlier offsets stay valid
            kept = kept[: m.start()] + kept[m.end() :]
            head = kept[:note_at] + DETAILS_DROPPED_NOTE + kept[note_at:]
            if len(head) <= room:
                return head + tail
    room -= len(TRUNCATED_NOTE)
    if room <= 0:
        raise UserError(f"the comment footer alone is {len(tail)} characters; GitHub allows {limit}")
    cut = head.rfind("\n", 0, room)
    return head[: cut + 1 if cut >= 0 else room] + TRUNCATED_NOTE + tail


def load_comment(path: Path) -> dict[str, Any]:
    """Read comment.json; UserError when unreadable, newer, with unknown keys, or no ``body``/``marker``."""
    data = read_json(path, kind="comment file", supported=comment_stage.SCHEMA_VERSION)
    unknown = sorted(set(data) - COMMENT_KEYS)
    if unknown:
        raise UserError(f"comment file {path}: unknown key(s) {unknown}; allowed: {sorted(COMMENT_KEYS)}")
    if not isinstance(data.get("body"), str) or not data["body"].strip():
        raise UserError(f"comment file {path}: 'body' must be a non-empty string")
    if not isinstance(data.get("marker"), str) or _MARKER.fullmatch(data["marker"]) is None:
        raise UserError(
            f"comment file {path}: 'marker' must look like '{comment_stage.MARKER_PREFIX} "
            f"run=<id> attempt=<n> -->', got {data.get('marker')!r}"
        )
    return data


# -- talking to GitHub --------------------------------------------------------------------------


def make_client(
    token: str,
    base_url: str,
    *,
    max_wait_s: float = RATE_LIMIT_MAX_WAIT_S,
    secondary_wait_s: float = SECONDARY_RATE_LIMIT_WAIT_S,
    sleep: Sleep = time.sleep,
    budget: RetryBudget | None = None,
):
    """A ``github.Github`` retrying rate limits, 5xx (never a POST) and connection errors, ``MAX_RETRIES``
    per request. A wait over ``max_wait_s`` s raises ``github.RateLimitExceededExceedsMaxWait``; a retry
    ending past the shared ``budget`` raises ``RetryBudgetSpent``.
    """
    import github

    from benchtrail.github.retry import BoundedGithubRetry

    # ``total`` bounds each kind of retry: connection, read and status alike.
    retry = BoundedGithubRetry(
        total=MAX_RETRIES,
        other=0,
        backoff_factor=0.5,
        status_forcelist=[429, 500, 502, 503, 504],
        raise_on_status=False,
        allowed_methods=frozenset({"GET", "PATCH", "DELETE", "POST"}),
        secondary_rate_wait=secondary_wait_s,
        max_rate_limit_wait=max_wait_s,
        sleep=sleep,
        budget=budget,
    )
    return github.Github(
        auth=github.Auth.Token(token),
        base_url=base_url.rstrip("/"),
        per_page=100,
        timeout=30,
        retry=retry,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def _message(exc: Any) -> str:
    data = getattr(exc, "data", None)
    return str(data.get("message", "")) if isinstance(data, dict) else str(data or "")


def is_rate_limited(exc: Any) -> bool:
    """A 429, or a 403 with GitHub's rate-limit message or a ``Retry-After`` header (s)."""
    return exc.status == 429 or (
        exc.status == 403
        and (
            "rate limit" in _message(exc).lower()
            or any(
                k.lower() == "retry-after" and str(v).strip().isdigit()
                for k, v in (exc.headers or {}).items()
            )
        )
    )


def describe(exc: Any) -> str:
    """``HTTP <status>: <GitHub's message>``."""
    return f"HTTP {getattr(exc, 'status', '?')}: {_message(exc) or exc}"


def _reason(exc: Any, max_wait_s: float) -> str:
    """Why posting failed, for the job summary."""
    from benchtrail.github.retry import RetryBudgetSpent

    if isinstance(exc, RetryBudgetSpent):
        flag = "(--retry-budget, at most the job's timeout)"
        if exc.left <= 0:
            return f"{describe(exc)}; the {exc.budget:g} s retry budget is spent {flag}"
        return (
            f"{describe(exc)}; retrying needs a wait of {exc.wait:.0f} s, but only "
            f"{exc.left:.0f} s of the {exc.budget:g} s retry budget are left {flag}"
        )
    wait = getattr(exc, "wait", None)
    if wait is not None:
        return (
            f"{describe(exc)}; retrying needs a wait of {wait:.0f} s, longer than the "
            f"{max_wait_s:g} s benchtrail waits at most"
        )
    if is_rate_limited(exc):
        return f"{describe(exc)}; still rate limited after {MAX_RETRIES} retries"
    return describe(exc)


def _fallback(body: str, reason: str, summary_path: Path | None, dry_run: bool) -> PostResult:
    """Write the body to ``summary_path``, else ``$GITHUB_STEP_SUMMARY``, else stderr."""
    if summary_path is None and os.environ.get("GITHUB_STEP_SUMMARY"):
        summary_path = Path(os.environ["GITHUB_STEP_SUMMARY"])
    where = summary_path or "stderr"
    if dry_run:
        return PostResult("dry-run", None, f"dry run: would write the comment to {where} ({reason})")
    text = f"> [!WARNING]\n> benchtrail could not post the PR comment ({reason}); here it is.\n\n{body}\n"
    if summary_path is None:
        sys.stderr.write(text)
    else:
        try:
            with open(summary_path, "a", encoding="utf-8") as f:  # the summary file is appended to
                f.write(text)
        except OSError as exc:
            raise UserError(f"cannot write the job summary {summary_path}: {exc.strerror or exc}") from exc
    return PostResult(
        "fallback-summary", None, f"could not post the PR comment ({reason}); wrote it to {where}"
    )


def find_ours(comments: Iterable[Any], author: str) -> list[tuple[Any, MarkerRun | None]]:
    """Our comments (marker prefix in the body, by ``author``) with their markers, oldest first."""
    return [
        (c, parse_marker(c.body or ""))
        for c in comments
        if comment_stage.MARKER_PREFIX in (c.body or "") and c.user.login == author
    ]


def post_comment(
    comment: dict[str, Any],
    *,
    repo: str,
    pr_number: int,
    run_head_sha: str,
    token: str,
    base_url: str = DEFAULT_API_URL,
    dry_run: bool = False,
    summary_path: Path | None = None,
    author: str = DEFAULT_COMMENT_AUTHOR,
    max_wait_s: float = RATE_LIMIT_MAX_WAIT_S,
    secondary_wait_s: float = SECONDARY_RATE_LIMIT_WAIT_S,
    retry_budget_s: float = RETRY_BUDGET_S,
    sleep: Sleep = time.sleep,
    clock: Clock = time.monotonic,
) -> PostResult:
    """Create or edit our comment on PR ``pr_number`` of ``repo`` (``OWNER/NAME``).

    Skips when the PR's head is no longer ``run_head_sha`` or one of our comments is from a newer run;
    edits our earliest comment, else creates one. A 403, a too-long wait, a spent budget, a lasting
    rate limit or a 5xx writes the body to the job summary (``fallback-summary``). Waits in seconds.
    Raises UserError for 404, 401, 422 or an unreachable API URL.
    """
    import github
    import requests

    from benchtrail.github.retry import RetryBudget, RetryBudgetSpent

    marker = comment["marker"]
    ours_run = parse_marker(marker)
    if ours_run is None:
        raise UserError(f"not a benchtrail marker: {marker!r}")
    body = fit_body(comment["body"], marker)
    gh = make_client(
        token,
        base_url,
        max_wait_s=max_wait_s,
        secondary_wait_s=secondary_wait_s,
        sleep=sleep,
        budget=RetryBudget(retry_budget_s, clock),
    )
    try:
        pull = gh.get_repo(repo).get_pull(pr_number)
        head = pull.head.sha
        if head.lower() != run_head_sha.lower():
            return PostResult(
                "skipped-head-changed",
                None,
                f"PR #{pr_number} head is now {head[:12]}, not {run_head_sha[:12]} which "
                "this run measured; not posting",
            )
        ours = find_ours(pull.get_issue_comments(), author)
        for existing, run in ours:
            if run is not None and is_newer(run, ours_run):
                return PostResult(
                    "skipped-stale-run",
                    existing.id,
                    f"comment {existing.id} is from run {run[0]} attempt {run[1]}, newer "
                    f"than run {ours_run[0]} attempt {ours_run[1]}; not posting",
                )
        target = ours[0][0] if ours else None
        if dry_run:
            what = f"update comment {target.id}" if target else "create a comment"
            return PostResult(
                "dry-run",
                target.id if target else None,
                f"dry run: would {what} on PR #{pr_number} ({len(body)} characters)",
            )
        if target is not None:
            target.edit(body)
            return PostResult("updated", target.id, f"updated comment {target.id} on PR #{pr_number}")
        created = pull.create_issue_comment(body)
    except github.GithubException as exc:
        if isinstance(exc, RetryBudgetSpent) or exc.status in (403, 429) or exc.status >= 500:
            return _fallback(body, _reason(exc, max_wait_s), summary_path, dry_run)
        raise _user_error(exc, repo, pr_number, base_url) from exc
    except requests.exceptions.RequestException as exc:
        raise UserError(f"cannot reach the GitHub API at {base_url} ({exc}); check --api-url") from exc
    login = created.user.login
    result = _deduplicate(pull, created, body, ours_run, login, pr_number, found_late=login != author)
    if login == author:
        return result
    warning = (
        f"this token comments as {login!r}, not as {author!r} (--comment-author): set "
        f"--comment-author {login} (or BENCHTRAIL_COMMENT_AUTHOR={login}, which `benchtrail "
        "gate-status` reads too); without it each run creates a comment before it finds its "
        "earlier one by that login, edits that and deletes the new one"
    )
    return replace(result, warnings=(warning,))


def _deduplicate(
    pull: Any,
    created: Any,
    body: str,
    ours_run: MarkerRun,
    author: str,
    pr_number: int,
    found_late: bool = False,
) -> PostResult:
    """After creating ``created``, keep the oldest of ours (lowest id) and delete ``created`` if younger.

    Each racing poster deletes only its own, so all keep the same one. The kept comment takes our body
    unless its marker is from a newer run. A failure here leaves ``created`` posted. ``found_late``:
    ``author`` is ``created``'s login, which found none of ours before.
    """
    import github
    import requests

    done = f"created comment {created.id} on PR #{pr_number}"
    try:
        first, run = min(
            [*find_ours(pull.get_issue_comments(), author), (created, None)], key=lambda pair: pair[0].id
        )
        if first.id == created.id:
            return PostResult("created", created.id, done)
        took_body = run is None or is_newer(ours_run, run)
        if took_body:
            first.edit(body)
        try:
            created.delete()
        except github.UnknownObjectException:
            pass  # already gone (a retried DELETE whose first try went through)
    except (github.GithubException, requests.exceptions.RequestException) as exc:
        return PostResult(
            "created",
            created.id,
            f"{done}; could not check it for duplicates from a racing poster ({describe(exc)})",
        )
    if found_late:
        moved = "moved this run's body there" if took_body else "kept it"
        return PostResult(
            "deduplicated",
            first.id,
            f"found our earlier comment {first.id} on PR #{pr_number} by {author!r}, the "
            f"login of the comment {created.id} just created; {moved} and deleted "
            f"{created.id}",
        )
    kept = "kept it with this run's body" if took_body else "kept it"
    return PostResult(
        "deduplicated",
        first.id,
        f"another poster created comment {first.id} on PR "
        f"#{pr_number} first; {kept} and deleted our duplicate "
        f"{created.id}",
    )


def _user_error(exc: Any, repo: str, pr_number: int, base_url: str) -> UserError:
    if exc.status == 401:
        return UserError(f"GitHub rejected the token ({describe(exc)}); check GITHUB_TOKEN")
    if exc.status == 404:
        return UserError(
            f"PR #{pr_number} of {repo} not found at {base_url} ({describe(exc)}); check "
            "--repo, --pr, --api-url and that the token can read the repository"
        )
    if exc.status == 422:
        errors = exc.data.get("errors") if isinstance(exc.data, dict) else None
        details = "; ".join(
            str(e.get("message") or e.get("code")) if isinstance(e, dict) else str(e) for e in errors or ()
        )
        return UserError(f"GitHub rejected the comment ({describe(exc)}{': ' + details if details else ''})")
    return UserError(f"GitHub API error ({describe(exc)})")
