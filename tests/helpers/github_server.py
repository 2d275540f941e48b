"""A small local HTTP server speaking the GitHub REST shapes that ``benchtrail post`` and ``track`` use.

Tests drive PyGithub itself against it (``base_url=server.url``), so what is exercised is the
real client: its URLs, its pagination through RFC 5988 ``Link`` headers, its error classes.
State lives in plain dicts; nothing here knows about benchtrail.

Routes (all JSON):
    GET   /repos/{owner}/{repo}
    GET   /repos/{owner}/{repo}/pulls/{n}
    GET   /repos/{owner}/{repo}/issues/{n}/comments      ?per_page (default 30, max 100) &page
    POST  /repos/{owner}/{repo}/issues/{n}/comments      {"body": ...}
    PATCH /repos/{owner}/{repo}/issues/comments/{id}     {"body": ...}
    DELETE /repos/{owner}/{repo}/issues/comments/{id}    204; only its author may (else 403), 404 when gone
    GET   /repos/{owner}/{repo}/issues                   ?state (open|closed|all, default open) &labels
                                                         (comma-separated, all must match) &per_page &page;
                                                         newest first, pull requests included (as on GitHub)
    POST  /repos/{owner}/{repo}/issues                   {"title": ..., "body": ..., "labels": [...]}
    GET   /repos/{owner}/{repo}/issues/{n}
    PATCH /repos/{owner}/{repo}/issues/{n}               {"title", "body", "state", "labels"}: any of them
    GET   /repos/{owner}/{repo}/commits/{sha}             only its sha (what PyGithub's lazy ``Commit`` needs)
    GET   /repos/{owner}/{repo}/pulls                     ?head (``owner:branch``) &per_page &page; all are open
    GET   /repos/{owner}/{repo}/commits/{sha}/statuses    newest first, ?per_page &page (also at
                                                         /statuses/{sha}, GitHub's older path that PyGithub uses)
    POST  /repos/{owner}/{repo}/statuses/{sha}            {"state", "description" (<= 140), "target_url",
                                                         "context"}; the token's user is the creator
    GET   /repos/{owner}/{repo}/actions/runs              ?head_sha &event &branch &per_page &page
    GET   /repos/{owner}/{repo}/actions/runs/{run_id}    the run's latest attempt
    GET   /repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt}
    GET   /repos/{owner}/{repo}/actions/runs/{run_id}/jobs ?filter (latest, the default, or all) &per_page &page:
                                                         the jobs of the run's latest attempt, or of all attempts

Issues and pull requests share one number sequence per repository, as on GitHub. A repository's
``default_branch`` is ``main`` unless ``add_repo(..., default_branch=...)`` says otherwise. Workflow
runs (``add_workflow_run``, ``update_workflow_run``) are kept per attempt and answered in the shape of
GitHub's "Get a workflow run (attempt)" (what PyGithub's ``WorkflowRun`` reads: ``event``,
``head_branch``, ``head_sha``, ``path``, ``status``, ``conclusion``, ``run_attempt``,
``run_started_at``, ``created_at``, ``updated_at`` …); an unknown run or attempt is a 404.

``fail(method, path, kind, times, headers)`` makes a route answer with an error ``times`` times:
``"read-only"`` (403, the reply a fork's read-only ``GITHUB_TOKEN`` gets), ``"validation"``
(422), ``"secondary-rate-limit"`` (403 with GitHub's message and ``Retry-After: 1``),
``"secondary-rate-limit-429"`` (429 with that message and no ``Retry-After``),
``"primary-rate-limit"`` (403 "API rate limit exceeded", ``X-RateLimit-Remaining: 0`` and a reset
in 2100) or ``"unavailable"`` (503 with ``Retry-After: 3600``); ``headers`` replaces or (value
None) removes response headers, e.g. ``{"Retry-After": "120"}``. Every request is recorded in
``requests``.

``hold(method, path, times, skip)`` models races: the matching requests (after the first ``skip``)
wait at the server, before they are answered and without blocking other requests, until the test
calls ``Gate.release``; ``Gate.wait_arrived(n)`` waits until ``n`` of them are waiting. A test
thus orders two real PyGithub clients' requests exactly, without relying on thread timing.

The code is in three modules: this one holds the server's state, its set-up and the JSON shapes
it answers with; ``tests/helpers/github_faults.py`` the recorded requests and the injected faults
(``FAILURES``, ``Gate``); ``tests/helpers/github_routes.py`` the HTTP request handler and its routes.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any

from tests.helpers.github_faults import FAILURES, FailureOrder, Gate, Request
from tests.helpers.github_routes import RequestHandler

BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
#: A GitHub App's bot, as an installation token (``APP_TOKEN``) comments: ``<app slug>[bot]``.
APP_BOT = {"login": "benchtrail-demo-app[bot]", "id": 149000001, "type": "Bot"}
APP_TOKEN = "ghs_app_installation"


@dataclass
class GitHubServer:
    """GitHub's REST API for one or more repositories, served on 127.0.0.1 at a random port.

    ``tokens`` maps accepted tokens to the user a request acts as (``ghs_test``: GitHub Actions'
    bot, ``APP_TOKEN``: a GitHub App's); a request without a known token gets 401, as on GitHub.
    """

    tokens: dict[str, dict[str, Any]] = field(default_factory=lambda: {"ghs_test": BOT, APP_TOKEN: APP_BOT})
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    issues: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    label_ids: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (full name, run id, attempt) -> the attempt's fields (``add_workflow_run``).
    workflow_runs: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    #: (full name, run id) -> the jobs of its attempts (``add_job``), in the order they ended.
    workflow_jobs: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    #: (full name, sha) -> its commit statuses, oldest first.
    statuses: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    failures: list[FailureOrder] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1000
    _httpd: ThreadingHTTPServer | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> GitHubServer:
        server = self

        class Handler(RequestHandler):
            github = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         name="github-server", daemon=True).start()
        return self

    def stop(self) -> None:
        for gate in self.gates:  # a failed test may leave requests held: answer them
            gate.release()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- state set-up --------------------------------------------------------------------------

    def add_pull(self, full_name: str, number: int, head_sha: str, title: str | None = None,
                 body: str | None = None, labels: tuple[str, ...] = (), head_repo: str | None = None,
                 head_ref: str | None = None) -> None:
        """Create the repository (if new) and pull request ``number`` whose head is ``head_sha``, on branch
        ``head_ref`` (default ``feature-<number>``) of ``head_repo`` (default: a branch of ``full_name``)."""
        owner, name = full_name.split("/")
        head_repo, head_ref = head_repo or full_name, head_ref or f"feature-{number}"
        with self.lock:
            self.repos.setdefault(full_name, {"id": len(self.repos) + 1, "name": name, "owner": owner})
            self.pulls[(full_name, number)] = {"head_sha": head_sha, "issue_comments": [], "body": body,
                                               "title": title or f"PR {number}", "labels": list(labels),
                                               "head_repo": head_repo, "head_ref": head_ref,
                                               "head_label": f"{head_repo.split('/')[0]}:{head_ref}"}

    def add_repo(self, full_name: str, default_branch: str | None = None) -> None:
        """Create the repository ``OWNER/NAME`` (if new); ``default_branch`` sets its default branch (``main``)."""
        owner, name = full_name.split("/")
        with self.lock:
            repo = self.repos.setdefault(full_name, {"id": len(self.repos) + 1, "name": name, "owner": owner})
            if default_branch is not None:
                repo["default_branch"] = default_branch

    def add_workflow_run(self, full_name: str, run_id: int, attempt: int, *, event: str, head_branch: str,
                         head_sha: str, path: str, status: str = "completed",
                         conclusion: str | None = "success",
                         run_started_at: datetime | str | None = None,
                         updated_at: datetime | str | None = None,
                         name: str = "benchmarks") -> None:
        """Create the repository (if new) and attempt ``attempt`` of workflow run ``run_id``.

        ``path`` is the workflow file (``.github/workflows/x.yml``); times are UTC ``datetime``s or
        ISO strings (``2026-12-01T18:00:00Z``), default now. The run's ``created_at`` is its first
        attempt's ``run_started_at``; ``run_number`` counts the runs of the workflow file.
        """
        self.add_repo(full_name)
        started = _timestamp(run_started_at)
        with self.lock:
            if (full_name, run_id, attempt) in self.workflow_runs:
                raise ValueError(f"run {run_id} attempt {attempt} of {full_name} exists already")
            earlier = [r for (f, i, _), r in self.workflow_runs.items() if f == full_name and i == run_id]
            numbers = {r["run_number"] for (f, i, _), r in self.workflow_runs.items()
                       if f == full_name and r["path"] == path and i != run_id}
            workflow_ids = {r["path"]: r["workflow_id"]
                            for (f, _, _), r in self.workflow_runs.items() if f == full_name}
            self.workflow_runs[(full_name, run_id, attempt)] = {
                "name": name, "event": event, "head_branch": head_branch, "head_sha": head_sha, "path": path,
                "status": status, "conclusion": conclusion, "run_started_at": started,
                "updated_at": _timestamp(updated_at) if updated_at is not None else started,
                "created_at": earlier[0]["created_at"] if earlier else started,
                "run_number": earlier[0]["run_number"] if earlier else len(numbers) + 1,
                "workflow_id": workflow_ids.get(path, 300 + len(set(workflow_ids.values())) + 1),
            }

    def update_workflow_run(self, full_name: str, run_id: int, attempt: int, **fields: Any) -> None:
        """Change fields of a run attempt, e.g. ``status="completed", conclusion="failure", updated_at=...``."""
        allowed = {"name", "event", "head_branch", "head_sha", "path", "status", "conclusion",
                   "run_started_at",
                   "updated_at", "created_at"}
        unknown = sorted(set(fields) - allowed)
        if unknown:
            raise ValueError(f"unknown workflow run field(s) {unknown}; known: {sorted(allowed)}")
        with self.lock:
            run = self.workflow_runs.get((full_name, run_id, attempt))
            if run is None:
                raise KeyError(f"no run {run_id} attempt {attempt} of {full_name}")
            for key, value in fields.items():
                run[key] = _timestamp(value) if key.endswith("_at") else value

    def add_job(self, full_name: str, run_id: int, attempt: int, name: str, conclusion: str,
                started_at: datetime | str | None = None, completed_at: datetime | str | None = None) -> None:
        """A completed job of attempt ``attempt`` of run ``run_id``, as "List jobs for a workflow run" shows it."""
        with self.lock:
            self._next_id += 1
            self.workflow_jobs.setdefault((full_name, run_id), []).append({
                "id": self._next_id, "run_id": run_id, "run_attempt": attempt, "name": name,
                "status": "completed",
                "conclusion": conclusion, "started_at": _timestamp(started_at),
                "completed_at": _timestamp(completed_at),
                "url": f"{self.url}/repos/{full_name}/actions/jobs/{self._next_id}", "head_sha": "",
                "steps": []})

    def add_issue(self, full_name: str, title: str, body: str | None = None, labels: tuple[str, ...] = (),
                  state: str = "open", user: dict[str, Any] | None = None) -> int:
        """Create the repository (if new) and an issue in it as ``user`` (a human by default); return its number."""
        self.add_repo(full_name)
        with self.lock:
            return self._insert_issue(full_name, title, body, labels, state,
                                      user or {"login": "octocat", "id": 1, "type": "User"})

    def add_comment(self, full_name: str, number: int, body: str,
                    user: dict[str, Any] | None = None) -> int:
        """Add an issue comment to PR ``number`` as ``user`` (a human by default); return its id."""
        with self.lock:
            return self._insert_comment(full_name, number, body, user or {"login": "octocat", "id": 1,
                                                                          "type": "User"})

    def fail(self, method: str, path: str, kind: str, times: int = 1,
             headers: dict[str, str | None] | None = None) -> None:
        """Answer the next ``times`` ``method path`` requests with the error ``kind`` (see FAILURES);
        ``headers`` replaces the kind's response headers by name, a None value removes one."""
        if kind not in FAILURES:
            raise ValueError(f"unknown failure kind {kind!r}; known: {sorted(FAILURES)}")
        with self.lock:
            self.failures.append(FailureOrder(method.upper(), path, kind, times, dict(headers or {})))

    def hold(self, method: str, path: str, times: int = 1, skip: int = 0) -> Gate:
        """Hold the next ``times`` ``method path`` requests, after letting ``skip`` through, until released."""
        gate = Gate(method.upper(), path, skip, times)
        with self.lock:
            self.gates.append(gate)
        return gate

    # -- queries for tests ---------------------------------------------------------------------

    def status(self, full_name: str, sha: str, context: str) -> tuple[str, str] | None:
        """``(state, description)`` of the newest status of ``context`` on ``sha``, or None."""
        with self.lock:
            found = [s for s in self.statuses.get((full_name, sha), []) if s["context"] == context]
        return (found[-1]["state"], found[-1]["description"]) if found else None

    def issue_comments(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [self._comment_json(i) for i in self.pulls[(full_name, number)]["issue_comments"]]

    def issue(self, full_name: str, number: int) -> dict[str, Any]:
        """Issue ``number`` as the API returns it."""
        with self.lock:
            return self._issue_json(full_name, number)

    def repo_issues(self, full_name: str) -> list[dict[str, Any]]:
        """Every issue of the repository (not pull requests), oldest first, as the API returns them."""
        with self.lock:
            return [self._issue_json(f, n) for f, n in sorted(self.issues) if f == full_name]

    def calls(self, method: str, path_pattern: str = ".*") -> list[Request]:
        """Recorded requests with this method whose path fully matches the regex."""
        with self.lock:
            return [r for r in self.requests
                    if r.method == method.upper() and re.fullmatch(path_pattern, r.path)]

    def writes(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method not in ("GET", "HEAD")]

    # -- shapes --------------------------------------------------------------------------------

    def _insert_comment(self, full_name: str, number: int, body: str, user: dict[str, Any]) -> int:
        self._next_id += 1
        cid = self._next_id
        now = "2026-01-01T00:00:00Z"
        self.comments[cid] = {"full_name": full_name, "number": number, "body": body,
                              "user": dict(user), "created_at": now, "updated_at": now}
        self.pulls[(full_name, number)]["issue_comments"].append(cid)
        return cid

    def _next_number(self, full_name: str) -> int:
        used = [n for f, n in (*self.pulls, *self.issues) if f == full_name]
        return max(used, default=0) + 1

    def _insert_issue(self, full_name: str, title: str, body: str | None, labels: Any, state: str,
                      user: dict[str, Any]) -> int:
        number = self._next_number(full_name)
        now = "2026-01-01T00:00:00Z"
        self.issues[(full_name, number)] = {"title": title, "body": body, "labels": list(labels),
                                            "state": state,
                                            "user": dict(user), "created_at": now, "updated_at": now,
                                            "closed_at": now if state == "closed" else None}
        return number

    def _labels_json(self, full_name: str, names: list[str]) -> list[dict[str, Any]]:
        out = []
        for name in names:
            lid = self.label_ids.setdefault((full_name, name), len(self.label_ids) + 1)
            out.append({"id": lid, "node_id": f"LA_{lid}", "name": name, "color": "ededed", "default": False,
                        "description": None, "url": f"{self.url}/repos/{full_name}/labels/{name}"})
        return out

    def _issue_json(self, full_name: str, number: int) -> dict[str, Any]:
        """An issue, or a pull request as the issues API shows it (with a ``pull_request`` object)."""
        api = f"{self.url}/repos/{full_name}"
        pull = self.pulls.get((full_name, number))
        if pull is not None:
            issue = {"title": pull["title"], "body": pull["body"], "labels": pull["labels"], "state": "open",
                     "user": {"login": "contributor", "id": 2, "type": "User"},
                     "created_at": "2026-01-01T00:00:00Z",
                     "updated_at": "2026-01-01T00:00:00Z", "closed_at": None}
        else:
            issue = self.issues[(full_name, number)]
        out = {"id": 7000 + number, "node_id": f"I_{number}", "number": number, "title": issue["title"],
               "body": issue["body"], "state": issue["state"], "locked": False,
               "labels": self._labels_json(full_name, issue["labels"]),
               "user": self._user_json(issue["user"]), "url": f"{api}/issues/{number}", "repository_url": api,
               "html_url": f"https://github.com/{full_name}/{'pull' if pull else 'issues'}/{number}",
               "comments_url": f"{api}/issues/{number}/comments",
               "events_url": f"{api}/issues/{number}/events",
               "labels_url": f"{api}/issues/{number}/labels{{/name}}",
               "comments": len(pull["issue_comments"]) if pull else 0, "author_association": "NONE",
               "created_at": issue["created_at"], "updated_at": issue["updated_at"],
               "closed_at": issue["closed_at"]}
        if pull is not None:
            out["pull_request"] = {"url": f"{api}/pulls/{number}",
                                   "html_url": f"https://github.com/{full_name}/pull/{number}"}
        return out

    def _user_json(self, user: dict[str, Any]) -> dict[str, Any]:
        login = user["login"]
        return {"login": login, "id": user["id"], "type": user["type"],
                "url": f"{self.url}/users/{login}", "html_url": f"https://github.com/{login}"}

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        repo = self.repos[full_name]
        return {"id": repo["id"], "node_id": f"R_{repo['id']}", "name": repo["name"],
                "full_name": full_name, "private": False, "fork": False,
                "owner": self._user_json({"login": repo["owner"], "id": 100 + repo["id"],
                                          "type": "Organization"}),
                "url": f"{self.url}/repos/{full_name}", "html_url": f"https://github.com/{full_name}",
                "default_branch": repo.get("default_branch", "main")}

    def _workflow_run_json(self, full_name: str, run_id: int, attempt: int) -> dict[str, Any]:
        """A workflow run attempt as "Get a workflow run attempt" returns it (``url`` names the run, as on GitHub)."""
        run = self.workflow_runs[(full_name, run_id, attempt)]
        api = f"{self.url}/repos/{full_name}"
        run_url = f"{api}/actions/runs/{run_id}"
        actor = self._user_json({"login": "octocat", "id": 1, "type": "User"})
        person = {"name": "dev", "email": "dev@example.com", "date": run["created_at"]}
        return {
            "id": run_id, "node_id": f"WFR_{run_id}", "name": run["name"], "display_title": run["name"],
            "path": run["path"], "event": run["event"], "head_branch": run["head_branch"],
            "head_sha": run["head_sha"], "status": run["status"], "conclusion": run["conclusion"],
            "run_number": run["run_number"], "run_attempt": attempt, "workflow_id": run["workflow_id"],
            "check_suite_id": 20000 + run_id, "check_suite_node_id": f"CS_{run_id}",
            "created_at": run["created_at"], "updated_at": run["updated_at"],
            "run_started_at": run["run_started_at"],
            "url": run_url, "html_url": f"https://github.com/{full_name}/actions/runs/{run_id}",
            "jobs_url": f"{run_url}/jobs", "logs_url": f"{run_url}/logs",
            "check_suite_url": f"{api}/check-suites/{20000 + run_id}",
            "artifacts_url": f"{run_url}/artifacts",
            "cancel_url": f"{run_url}/cancel", "rerun_url": f"{run_url}/rerun",
            "previous_attempt_url": f"{run_url}/attempts/{attempt - 1}" if attempt > 1 else None,
            "workflow_url": f"{api}/actions/workflows/{run['workflow_id']}",
            "pull_requests": [], "referenced_workflows": [], "actor": actor, "triggering_actor": actor,
            "head_commit": {"id": run["head_sha"], "tree_id": "0" * 40, "message": "",
                            "timestamp": run["created_at"],
                            "author": person, "committer": person},
            "repository": self._repo_json(full_name), "head_repository": self._repo_json(full_name),
        }

    def _pull_json(self, full_name: str, number: int) -> dict[str, Any]:
        pull = self.pulls[(full_name, number)]
        api = f"{self.url}/repos/{full_name}"
        return {"id": 5000 + number, "number": number, "state": "open", "title": pull["title"],
                "body": pull["body"],
                "labels": [{"id": i + 1, "name": n} for i, n in enumerate(pull["labels"])],
                "url": f"{api}/pulls/{number}", "html_url": f"https://github.com/{full_name}/pull/{number}",
                "issue_url": f"{api}/issues/{number}", "comments_url": f"{api}/issues/{number}/comments",
                "review_comments_url": f"{api}/pulls/{number}/comments",
                "comments": len(pull["issue_comments"]),
                "user": self._user_json({"login": "contributor", "id": 2, "type": "User"}),
                "head": {"sha": pull["head_sha"], "ref": pull["head_ref"], "label": pull["head_label"],
                         "repo": {**self._repo_json(full_name), "full_name": pull["head_repo"],
                                  "fork": pull["head_repo"] != full_name}},
                "base": {"sha": "0" * 40, "ref": "main", "label": "owner:main",
                         "repo": self._repo_json(full_name)}}

    def _comment_json(self, cid: int) -> dict[str, Any]:
        c = self.comments[cid]
        api = f"{self.url}/repos/{c['full_name']}"
        return {"id": cid, "node_id": f"IC_{cid}", "body": c["body"], "user": self._user_json(c["user"]),
                "url": f"{api}/issues/comments/{cid}",
                "html_url": f"https://github.com/{c['full_name']}/pull/{c['number']}#issuecomment-{cid}",
                "issue_url": f"{api}/issues/{c['number']}", "author_association": "NONE",
                "created_at": c["created_at"], "updated_at": c["updated_at"]}


def _timestamp(value: datetime | str | None) -> str:
    """GitHub's time format, ``2026-12-01T18:00:00Z``, of a UTC ``datetime`` (naive: UTC), an ISO string or now."""
    if value is None:
        value = datetime.now(UTC)
    elif isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

