"""The HTTP side of the local GitHub server (``tests/helpers/github_server.py``): its request handler and
routes.

``RequestHandler`` reads each request, records it, waits at a ``Gate`` if one holds it, answers an
injected failure or the route (``_ROUTES``, listed in ``tests/helpers/github_server.py``'s docstring) with
the server's lock held, and sends the JSON reply with GitHub's rate-limit headers. The helpers
below it build GitHub's errors (401, 404, 422) and its ``Link`` pagination.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.helpers.github_faults import DOCS, FAILURES, Request

if TYPE_CHECKING:
    from tests.helpers.github_server import GitHubServer

#: GitHub rejects issue comment bodies longer than this (characters).
MAX_BODY_CHARS = 65_536


_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_ROUTES = (
    ("GET", re.compile(_REPO), "get_repo"),
    ("GET", re.compile(_REPO + r"/pulls/(?P<number>\d+)"), "get_pull"),
    ("GET", re.compile(_REPO + r"/issues/(?P<number>\d+)/comments"), "list_comments"),
    ("POST", re.compile(_REPO + r"/issues/(?P<number>\d+)/comments"), "create_comment"),
    ("PATCH", re.compile(_REPO + r"/issues/comments/(?P<id>\d+)"), "edit_comment"),
    ("DELETE", re.compile(_REPO + r"/issues/comments/(?P<id>\d+)"), "delete_comment"),
    ("GET", re.compile(_REPO + r"/issues"), "list_issues"),
    ("POST", re.compile(_REPO + r"/issues"), "create_issue"),
    ("GET", re.compile(_REPO + r"/issues/(?P<number>\d+)"), "get_issue"),
    ("PATCH", re.compile(_REPO + r"/issues/(?P<number>\d+)"), "edit_issue"),
    ("GET", re.compile(_REPO + r"/commits/(?P<sha>[0-9a-f]{40})"), "get_commit"),
    ("GET", re.compile(_REPO + r"/pulls"), "list_pulls"),
    ("GET", re.compile(_REPO + r"/commits/(?P<sha>[0-9a-f]{40})/statuses"), "list_statuses"),
    ("GET", re.compile(_REPO + r"/statuses/(?P<sha>[0-9a-f]{40})"), "list_statuses"),  # PyGithub's path
    ("POST", re.compile(_REPO + r"/statuses/(?P<sha>[0-9a-f]{40})"), "create_status"),
    ("GET", re.compile(_REPO + r"/actions/runs"), "list_workflow_runs"),
    ("GET", re.compile(_REPO + r"/actions/runs/(?P<run_id>\d+)"), "get_workflow_run"),
    ("GET", re.compile(_REPO + r"/actions/runs/(?P<run_id>\d+)/attempts/(?P<attempt>\d+)"),
     "get_workflow_run"),
    ("GET", re.compile(_REPO + r"/actions/runs/(?P<run_id>\d+)/jobs"), "list_jobs"),
)


class RequestHandler(BaseHTTPRequestHandler):
    github: GitHubServer
    server_version = "GitHub.com"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        gh = self.github
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        record = Request(method, url.path, parse_qs(url.query),
                         {k.lower(): v for k, v in self.headers.items()},
                         json.loads(raw) if raw else None)
        with gh.lock:
            held = [gate._take() for gate in gh.gates if gate.method == method and gate.path == url.path]
        events = [event for event in held if event is not None]
        for event in events:  # held outside the lock: other requests are answered meanwhile
            event.wait()
        with gh.lock:
            gh.requests.append(record)
            status, headers, payload = self._answer(method, url.path, record)
            record.status = status
        self._send(status, headers, payload)

    def _answer(self, method: str, path: str, req: Request) -> tuple[int, dict[str, str], Any]:
        gh = self.github
        for failure in gh.failures:
            if failure.times > 0 and failure.method == method and failure.path == path:
                failure.times -= 1
                status, headers, payload = FAILURES[failure.kind]
                headers = {k: v for k,
                           v in headers.items() if k.lower() not in {h.lower() for h in failure.headers}}
                headers.update({k: v for k, v in failure.headers.items() if v is not None})
                return status, headers, payload
        user = gh.tokens.get(_token(req.headers.get("authorization", "")))
        if user is None:
            return 401, {}, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}
        for route_method, pattern, name in _ROUTES:
            m = pattern.fullmatch(path)
            if m and route_method == method:
                params = m.groupdict()
                full_name = f"{params.pop('owner')}/{params.pop('repo')}"
                if full_name not in gh.repos:
                    return _not_found()
                return getattr(self, name)(full_name, req, user, **params)
        return _not_found()

    # Each route runs with gh.lock held.

    def get_repo(self, full_name: str, req: Request, user: dict[str, Any]):
        return 200, {}, self.github._repo_json(full_name)

    def get_pull(self, full_name: str, req: Request, user: dict[str, Any], number: str):
        if (full_name, int(number)) not in self.github.pulls:
            return _not_found()
        return 200, {}, self.github._pull_json(full_name, int(number))

    def list_comments(self, full_name: str, req: Request, user: dict[str, Any], number: str):
        gh = self.github
        pull = gh.pulls.get((full_name, int(number)))
        if pull is None:
            return _not_found()
        headers, ids = _paginate(gh, req, pull["issue_comments"])
        return 200, headers, [gh._comment_json(i) for i in ids]

    def create_comment(self, full_name: str, req: Request, user: dict[str, Any], number: str):
        gh = self.github
        if (full_name, int(number)) not in gh.pulls:
            return _not_found()
        error = _body_error(req.json)
        if error:
            return error
        cid = gh._insert_comment(full_name, int(number), req.json["body"], user)
        return 201, {"Location": gh._comment_json(cid)["url"]}, gh._comment_json(cid)

    def _own_comment(self, full_name: str, user: dict[str, Any], id: str):
        """(the comment ``id`` of ``full_name`` written by ``user``, None) or (None, the error answer)."""
        comment = self.github.comments.get(int(id))
        if comment is None or comment["full_name"] != full_name:
            return None, _not_found()
        if comment["user"]["login"] != user["login"]:
            return None, FAILURES["read-only"]
        return comment, None

    def edit_comment(self, full_name: str, req: Request, user: dict[str, Any], id: str):
        gh = self.github
        comment, error = self._own_comment(full_name, user, id)
        error = error or _body_error(req.json)
        if error:
            return error
        comment["body"] = req.json["body"]
        comment["updated_at"] = "2026-01-02T00:00:00Z"
        return 200, {}, gh._comment_json(int(id))

    def delete_comment(self, full_name: str, req: Request, user: dict[str, Any], id: str):
        gh = self.github
        comment, error = self._own_comment(full_name, user, id)
        if error:
            return error
        del gh.comments[int(id)]
        gh.pulls[(full_name, comment["number"])]["issue_comments"].remove(int(id))
        return 204, {}, None

    def list_issues(self, full_name: str, req: Request, user: dict[str, Any]):
        gh = self.github
        state = req.query.get("state", ["open"])[0]
        if state not in ("open", "closed", "all"):
            return FAILURES["validation"]
        wanted = {n.strip() for n in req.query.get("labels", [""])[0].split(",") if n.strip()}
        # newest first
        numbers = sorted({n for f, n in (*gh.pulls, *gh.issues) if f == full_name}, reverse=True)
        items = [gh._issue_json(full_name, n) for n in numbers]
        items = [i for i in items if (state == "all" or i["state"] == state)
                 and wanted <= {label["name"] for label in i["labels"]}]
        headers, page = _paginate(gh, req, items)
        return 200, headers, page

    def create_issue(self, full_name: str, req: Request, user: dict[str, Any]):
        gh = self.github
        payload = req.json if isinstance(req.json, dict) else {}
        error = _issue_error(payload, require_title=True)
        if error:
            return error
        number = gh._insert_issue(full_name, payload["title"], payload.get("body"),
                                  payload.get("labels") or (),
                                  "open", user)
        issue = gh._issue_json(full_name, number)
        return 201, {"Location": issue["url"]}, issue

    def get_issue(self, full_name: str, req: Request, user: dict[str, Any], number: str):
        gh = self.github
        if (full_name, int(number)) not in gh.issues and (full_name, int(number)) not in gh.pulls:
            return _not_found()
        return 200, {}, gh._issue_json(full_name, int(number))

    def edit_issue(self, full_name: str, req: Request, user: dict[str, Any], number: str):
        gh = self.github
        issue = gh.issues.get((full_name, int(number)))
        if issue is None:
            return _not_found()
        payload = req.json if isinstance(req.json, dict) else {}
        error = _issue_error(payload, require_title=False)
        if error:
            return error
        for key in ("title", "body", "state", "labels"):
            if key in payload:
                issue[key] = list(payload[key]) if key == "labels" else payload[key]
        issue["updated_at"] = "2026-01-02T00:00:00Z"
        issue["closed_at"] = issue["updated_at"] if issue["state"] == "closed" else None
        return 200, {}, gh._issue_json(full_name, int(number))

    def get_commit(self, full_name: str, req: Request, user: dict[str, Any], sha: str):
        return 200, {}, {"sha": sha, "url": f"{self.github.url}/repos/{full_name}/commits/{sha}"}

    def list_pulls(self, full_name: str, req: Request, user: dict[str, Any]):
        """"List pull requests": all are open; ``head`` (``owner:branch``) filters by the head's label."""
        gh = self.github
        numbers = sorted(n for (f, n), p in gh.pulls.items() if f == full_name and req.query.get(
            "head", [p["head_label"]])[0] == p["head_label"])
        headers, page = _paginate(gh, req, numbers)
        return 200, headers, [gh._pull_json(full_name, n) for n in page]

    def list_statuses(self, full_name: str, req: Request, user: dict[str, Any], sha: str):
        """"List commit statuses for a reference": newest first."""
        gh = self.github
        headers, page = _paginate(gh, req, list(reversed(gh.statuses.get((full_name, sha), []))))
        return 200, headers, page

    def create_status(self, full_name: str, req: Request, user: dict[str, Any], sha: str):
        """"Create a commit status": ``state`` one of GitHub's four, a ``description`` of at most 140
        characters (else 422), ``context`` (default ``default``)."""
        gh, payload = self.github, req.json if isinstance(req.json, dict) else {}
        if payload.get("state") not in ("error", "failure", "pending", "success") or \
                len(payload.get("description") or "") > 140:
            return 422, {}, {"message": "Validation Failed", "documentation_url": DOCS, "status": "422"}
        gh._next_id += 1
        status = {"id": gh._next_id, "state": payload["state"], "description": payload.get("description"),
                  "target_url": payload.get("target_url"), "context": payload.get("context") or "default",
                  "creator": gh._user_json(user), "url": f"{gh.url}/repos/{full_name}/statuses/{sha}",
                  "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
        gh.statuses.setdefault((full_name, sha), []).append(status)
        return 201, {}, status

    def list_workflow_runs(self, full_name: str, req: Request, user: dict[str, Any]):
        """"List workflow runs for a repository": each run's latest attempt, newest run first, filtered
        by ``head_sha``, ``event`` and ``branch`` (``head_branch``) when given."""
        gh = self.github
        latest: dict[int, int] = {}
        for f, i, n in gh.workflow_runs:
            if f == full_name:
                latest[i] = max(n, latest.get(i, 0))
        items = [gh._workflow_run_json(full_name, i, n) for i, n in sorted(latest.items(), reverse=True)]
        for field_name, key in (("head_sha", "head_sha"), ("event", "event"), ("branch", "head_branch")):
            if field_name in req.query:
                items = [r for r in items if r[key] == req.query[field_name][0]]
        headers, page = _paginate(gh, req, items)
        return 200, headers, {"total_count": len(items), "workflow_runs": page}

    def get_workflow_run(self, full_name: str, req: Request, user: dict[str, Any], run_id: str,
                         attempt: str | None = None):
        gh = self.github
        attempts = [n for f, i, n in gh.workflow_runs if f == full_name and i == int(run_id)]
        wanted = int(attempt) if attempt is not None else max(attempts, default=0)
        if wanted not in attempts:
            return _not_found(f"{DOCS}/actions/workflow-runs#get-a-workflow-run"
                              + ("-attempt" if attempt is not None else ""))
        return 200, {}, gh._workflow_run_json(full_name, int(run_id), wanted)

    def list_jobs(self, full_name: str, req: Request, user: dict[str, Any], run_id: str):
        """"List jobs for a workflow run": ``filter=latest`` (default) the latest attempt's, ``all`` every attempt's."""
        gh = self.github
        jobs = gh.workflow_jobs.get((full_name, int(run_id)), [])
        if req.query.get("filter", ["latest"])[0] != "all":
            latest = max((j["run_attempt"] for j in jobs), default=0)
            jobs = [j for j in jobs if j["run_attempt"] == latest]
        headers, page = _paginate(gh, req, jobs)
        return 200, headers, {"total_count": len(jobs), "jobs": page}

    def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
        data = b"" if status == 204 else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        defaults = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999",
                    "X-RateLimit-Reset": "4102444800"}
        for key, value in defaults.items():
            if key.lower() not in {k.lower() for k in headers}:  # a failure's own value replaces the default
                self.send_header(key, value)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def _token(authorization: str) -> str:
    scheme, _, value = authorization.partition(" ")
    return value if scheme.lower() in ("token", "bearer") else ""


def _not_found(documentation_url: str = DOCS) -> tuple[int, dict[str, str], dict[str, Any]]:
    return 404, {}, {"message": "Not Found", "documentation_url": documentation_url, "status": "404"}


def _paginate(gh: GitHubServer, req: Request, items: list[Any]) -> tuple[dict[str, str], list[Any]]:
    """``(headers, page)``: the requested page (``per_page`` default 30, max 100; ``page`` from 1) and
    GitHub's RFC 5988 ``Link`` header, whose URLs keep the request's other query parameters."""
    per_page = min(100, max(1, int(req.query.get("per_page", ["30"])[0])))
    page = max(1, int(req.query.get("page", ["1"])[0]))
    last = max(1, -(-len(items) // per_page))
    kept = [(k, v) for k, values in req.query.items() if k not in ("per_page", "page") for v in values]
    base = f"{gh.url}{req.path}?{urlencode([*kept, ('per_page', per_page)])}&page="
    links = []
    if page < last:
        links += [f'<{base}{page + 1}>; rel="next"', f'<{base}{last}>; rel="last"']
    if page > 1:
        links += [f'<{base}1>; rel="first"', f'<{base}{page - 1}>; rel="prev"']
    return ({"Link": ", ".join(links)} if links else {}), items[(page - 1) * per_page: page * per_page]


def _issue_error(payload: dict[str, Any], *, require_title: bool) -> tuple[int, dict[str, str],
                                                                           dict[str, Any]] | None:
    """GitHub's 422 for a missing or empty title, a body over the limit, a bad state or labels."""
    title, body = payload.get("title"), payload.get("body")
    bad = ((require_title or "title" in payload) and (not isinstance(title, str) or not title.strip())) or (
        body is not None and (not isinstance(body, str) or len(body) > MAX_BODY_CHARS)) or (
        payload.get("state", "open") not in ("open", "closed")) or (
        not isinstance(payload.get("labels", []),
                       list) or not all(isinstance(n, str) for n in payload.get("labels", [])))
    if bad:
        return 422, {}, {"message": "Validation Failed", "status": "422",
                         "errors": [{"resource": "Issue", "code": "invalid", "field": "title"}],
                         "documentation_url": f"{DOCS}/issues/issues"}
    return None


def _body_error(payload: Any) -> tuple[int, dict[str, str], dict[str, Any]] | None:
    """GitHub's 422 for a missing or over-long body."""
    body = payload.get("body") if isinstance(payload, dict) else None
    if not isinstance(body, str) or not body:
        return FAILURES["validation"]
    if len(body) > MAX_BODY_CHARS:
        return 422, {}, {"message": "Validation Failed", "status": "422",
                         "errors": [{"resource": "IssueComment", "code": "custom", "field": "body",
                                     "message": f"body is too long (maximum is {MAX_BODY_CHARS} characters)"}],
                         "documentation_url": DOCS}
    return None
