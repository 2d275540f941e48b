"""The setup job's selection: which presets a GitHub event asks for, and from where.

A PR's trailers and ``benchmarks:<preset>`` labels (``PR_TITLE``, ``PR_BODY``, ``PR_LABELS`` override the
payload), the ``default`` meta-preset for a push to the default or a release branch, the
``benchmark-presets`` input of a manual run. Rules per event, edits included: docs/trailers.md, "Events".
The body is read from the event file: one environment variable holds at most 128 KiB on Linux.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchtrail.errors import UserError
from benchtrail.github.trailers import accepted_regressions, benchmark_presets
from benchtrail.suite.presets import resolve_presets, split_presets

LABEL_PREFIX = "benchmarks:"
SAFE_ACCEPT = re.compile(r"^[A-Za-z0-9._*?\[\]-]+$")
DEFAULT_META_PRESET = "default"
PR_EVENTS = ("pull_request", "pull_request_target")
#: Events whose runs of the default or a release branch store baselines (postsubmit runs).
POSTSUBMIT_EVENTS = ("push", "workflow_dispatch")
EDIT_KEPT_SELECTION = "the edit did not change the benchmark selection"
EDIT_ADDED_ACCEPT = (
    "the edit only added `benchmarks-accept` items: the `benchtrail/gate` status gates "
    "the head's last comparison with them again, without measuring"
)
SAFE_LABEL = "safe-to-benchmark"
RELEASE_BRANCHES_ENV = "BENCHTRAIL_RELEASE_BRANCHES"
DEFAULT_RELEASE_BRANCHES = "release-*"
FORK_WAITING = (
    f"this PR comes from a fork: waiting for a maintainer to add the `{SAFE_LABEL}` label "
    "(the `benchtrail/gate` status is pending until then)"
)
#: Where a PR's requests come from, as an error names it.
PR_SOURCES = {"trailer": "PR description", "label": f"PR labels ({LABEL_PREFIX}<preset>)"}

Env = Mapping[str, str]  # environment variables
Json = Mapping[str, Any]  # a JSON object: the event payload or a part of it
Names = tuple[str, ...]  # preset names, or series or branch globs
Meta = Mapping[str, Names]  # meta-preset -> its presets
PrTexts = tuple[str | None, str | None, list[str]]  # a PR's title, body and label names


def payload_value(obj: Json, *keys: str) -> Any:
    """The value at ``obj[key1][key2]…`` of an event payload; None where a level is missing, null or empty."""
    for key in keys:
        obj = (obj or {}).get(key)
    return obj


class SelectionError(UserError):
    """An invalid selection (unknown preset, bad ``benchmarks-accept`` item, malformed ``PR_LABELS``) that
    its author fixes by editing the PR, workflow input or labels."""


@dataclass(frozen=True)
class Selection:
    """What to benchmark: resolved presets and, per requested name, where it came from."""

    presets: Names = ()
    sources: tuple[tuple[str, str], ...] = ()  # (requested name, "trailer" | "label" | "default" | "input")
    skipped_reason: str | None = None
    notes: tuple[str, ...] = ()
    accept: Names = ()  # series names or globs from benchmarks-accept: trailers

    @property
    def has_benchmarks(self) -> bool:
        return bool(self.presets) and self.skipped_reason is None


def _resolve(requested: list[tuple[str, str]], known: Names, meta: Meta, where: dict[str, str]) -> Names:
    """The presets of ``requested``, first seen first, resolved per source so an error names the place
    (``where``: source → place)."""
    resolved: dict[str, None] = {}
    for source, place in where.items():
        try:
            names = [name for name, s in requested if s == source]
            resolved.update(dict.fromkeys(resolve_presets(names, known, meta) if names else ()))
        except UserError as exc:
            raise SelectionError(f"{place}: {exc}") from None
    return tuple(resolved)


def pr_requests(title: str | None, body: str | None, labels: list[str]) -> tuple[list[tuple[str, str]], bool]:
    """``([(preset, source)], trailer_found)`` from a PR's trailers and ``benchmarks:<preset>`` labels."""
    from_trailer = benchmark_presets(title, body)
    requested = dict.fromkeys(from_trailer or [], "trailer")
    for label in labels:
        if label.lower().startswith(LABEL_PREFIX):
            for preset in split_presets(label[len(LABEL_PREFIX) :]):
                requested.setdefault(preset, "label")
    return list(requested.items()), from_trailer is not None


def no_trailer_note(body: str) -> str:
    """The note for a PR description without a trailer; it names lone CR line ends, which git ignores."""
    cr = (
        (
            " (its lines end in a lone CR, `\\r`, which git does not read as a line end: the description is "
            "one long line; send LF or CRLF line ends)"
        )
        if "\r" in body.replace("\r\n", "")
        else ""
    )
    return "no `benchmarks:` trailer in the last paragraph of the PR description" + cr


def select(event_name: str, payload: Json, env: Env, known: Names, meta: Meta) -> Selection:
    """The presets for one event.

    Raises SelectionError for an unknown preset (with its source, the valid ones and a close match), a
    bad ``benchmarks-accept`` item or malformed ``PR_LABELS``; UserError when a re-run cannot re-read
    the PR or the payload's title or body is not text.
    """
    if event_name in PR_EVENTS:
        pr = event_pr = payload.get("pull_request") or {}
        if int(env.get("GITHUB_RUN_ATTEMPT", "1") or 1) > 1 and env.get("GITHUB_TOKEN") and pr.get("number"):
            pr = {**pr, **fetch_current_pr(env, int(pr["number"]))}
        title, body, labels = _pr_texts(env, pr)
        requested, trailer_found = pr_requests(title, body, labels)
        accept = accept_items(title, body)
        presets = _resolve(requested, known, meta, PR_SOURCES)
        # Before the edit: the event's own title, body and labels (a re-run's re-read PR may have
        # changed since), with what the edit replaced taken from ``changes``.
        skipped = payload.get("action") == "edited" and _edit_kept_selection(
            payload.get("changes"), _pr_texts(env, event_pr), presets, accept, known, meta
        )
        if not skipped:
            fork = payload_value(event_pr, "head", "repo", "full_name") != payload_value(
                payload, "repository", "full_name"
            )
            skipped = FORK_WAITING if presets and fork and SAFE_LABEL not in labels else None
        return Selection(
            presets, tuple(requested), skipped, () if trailer_found else (no_trailer_note(body),), accept
        )
    if event_name == "push":
        if postsubmit_branch(payload, env):
            if DEFAULT_META_PRESET not in meta:
                return Selection(
                    skipped_reason="push to the default branch, but the suite has no "
                    "'default' meta-preset and [tool.benchtrail] sets no "
                    "presets: nothing to run"
                )
            return Selection(tuple(meta[DEFAULT_META_PRESET]), ((DEFAULT_META_PRESET, "default"),))
        globs = ", ".join(release_branches(env))
        return Selection(
            skipped_reason=f"push to {payload.get('ref')}, neither the default branch nor a "
            f"release branch ({RELEASE_BRANCHES_ENV}: {globs})"
        )
    if event_name == "workflow_dispatch":
        text = env.get("BENCHMARK_PRESETS_INPUT", payload_value(payload, "inputs", "benchmark-presets")) or ""
        requested = [(p, "input") for p in split_presets(text)]
        presets = _resolve(requested, known, meta, {"input": "workflow_dispatch input"})
        return Selection(presets, tuple(requested))
    return Selection(skipped_reason=f"event {event_name!r} does not run benchmarks")


def release_branches(env: Env) -> Names:
    """Globs of ``BENCHTRAIL_RELEASE_BRANCHES`` (comma-separated), default ``release-*``."""
    return tuple(
        g.strip() for g in (env.get(RELEASE_BRANCHES_ENV) or DEFAULT_RELEASE_BRANCHES).split(",") if g.strip()
    )


def postsubmit_branch(payload: Json, env: Env) -> bool:
    """Whether the event's ref (a push's ``ref``, else ``GITHUB_REF``) is the default or a release branch."""
    ref = payload.get("ref") or env.get("GITHUB_REF") or ""
    return (
        isinstance(ref, str)
        and ref.startswith("refs/heads/")
        and stores_baselines(
            ref.removeprefix("refs/heads/"),
            payload_value(payload, "repository", "default_branch"),
            release_branches(env),
        )
    )


def stores_baselines(branch: str | None, default: str | None, release_globs: Names) -> bool:
    """Whether ``branch`` is the ``default`` branch or matches a release glob."""
    return branch == default or any(fnmatch.fnmatchcase(branch or "", g) for g in release_globs)


def accept_items(title: str | None, body: str | None) -> Names:
    """``benchmarks-accept`` globs; SelectionError for characters other than letters, digits, ``._-*?[]``."""
    accept = tuple(accepted_regressions(title, body))
    for item in accept:
        if not SAFE_ACCEPT.match(item):
            raise SelectionError(
                f"benchmarks-accept item {item!r}: use series names or globs of letters, "
                "digits and . _ - * ? [ ]"
            )
    return accept


def _pr_texts(env: Env, pr: Json) -> PrTexts:
    """``(title, body, label names)``, ``PR_TITLE``, ``PR_BODY``, ``PR_LABELS`` before the PR object.

    Raises UserError when the title or body is not text or null, SelectionError for a bad ``PR_LABELS``.
    """
    texts = {key: env.get(f"PR_{key.upper()}", pr.get(key)) for key in ("title", "body")}
    for key, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise UserError(f"the PR {key} in the event payload must be text or null, got {value!r:.60}")
    if "PR_LABELS" not in env:
        labels = [label.get("name", "") for label in pr.get("labels") or []]
    else:
        try:
            labels = json.loads(env["PR_LABELS"])
        except json.JSONDecodeError:
            labels = None
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise SelectionError(f"PR_LABELS must be a JSON list of label names, got {env['PR_LABELS']!r}")
    return *texts.values(), labels


def _edit_kept_selection(
    changes: Any, event: PrTexts, presets: Names, accept: Names, known: Names, meta: Meta
) -> str | None:
    """Why an ``edited`` event measures nothing (:data:`EDIT_KEPT_SELECTION`, :data:`EDIT_ADDED_ACCEPT`),
    or None: presets and accept items compared as sets before (``changes.<title|body>.from``) and after.
    Any other change (``changes.base``) or an invalid selection before the edit measures again.
    Raises TypeError or AttributeError when ``changes`` is not shaped like GitHub's.
    """
    changes = {} if changes is None else changes
    if not isinstance(changes, Mapping):
        raise TypeError(f"changes must be an object, got {type(changes).__name__}")
    if not set(changes) <= {"title", "body"}:
        return None

    def before(key: str, now: str | None) -> str | None:
        entry = changes.get(key)
        if entry is None:
            return now
        if not isinstance(entry, Mapping) or not isinstance(entry.get("from"), (str, type(None))):
            raise TypeError(f"changes.{key} must be an object with a text or null 'from', got {entry!r:.60}")
        return entry.get("from", now)

    title, body, labels = event
    old_title, old_body = before("title", title), before("body", body)
    try:
        presets_before = _resolve(pr_requests(old_title, old_body, labels)[0], known, meta, PR_SOURCES)
        accept_before = accept_items(old_title, old_body)
    except SelectionError:
        return None
    if set(presets_before) != set(presets) or not set(accept_before) <= set(accept):
        return None
    return EDIT_KEPT_SELECTION if set(accept_before) == set(accept) else EDIT_ADDED_ACCEPT


def fetch_current_pr(env: Env, number: int) -> dict[str, Any]:
    """The PR's current title, body and labels, read with ``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` and
    ``GITHUB_API_URL``; UserError for a bad ``GITHUB_REPOSITORY``, an HTTP error or an unreachable API."""
    import github
    import requests

    from benchtrail.github.post import DEFAULT_API_URL, describe, make_client

    repo = env.get("GITHUB_REPOSITORY", "")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
        raise UserError(f"GITHUB_REPOSITORY={repo!r}: a re-run re-reads the PR and needs OWNER/NAME")
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    where = (
        f"cannot re-read PR {repo}#{number} for this re-run (attempt {env.get('GITHUB_RUN_ATTEMPT')}) "
        f"from {api_url}"
    )
    try:
        pull = make_client(env["GITHUB_TOKEN"], api_url).get_repo(repo).get_pull(number)
        return {
            "title": pull.title,
            "body": pull.body,
            "labels": [{"name": label.name} for label in pull.labels],
        }
    except github.GithubException as exc:
        hint = {
            401: "GITHUB_TOKEN was rejected",
            403: "GITHUB_TOKEN may not read it: give the job `pull-requests: read`",
            404: "check GITHUB_REPOSITORY, the PR number and that GITHUB_TOKEN can read the repository",
        }.get(exc.status, "GitHub failed to answer; re-run the job later" if exc.status >= 500 else "")
        raise UserError(f"{where}: {describe(exc)}{f' ({hint})' if hint else ''}") from exc
    except requests.exceptions.RequestException as exc:
        raise UserError(f"{where}: {type(exc).__name__} ({exc}); check GITHUB_API_URL") from exc
