"""Which stored runs may serve as baselines (docs/store.md, "Trusted baselines").

A PR's process job can write a pointer for any commit, so a pointer alone proves nothing: a baseline
lookup asks a ``Trust``. ``TrustAll`` trusts every run (a local store's own, or ``--trust all``);
``GitHubRunTrust`` trusts a pointer ``commits/<sha>/<run_id>-<attempt>.json`` only when that attempt is a
push or manual run of ``<sha>`` on the default or a release branch with the trusted workflow, completed with
success, whose process job (``PROCESS_JOB``) succeeded while the store created the pointer (``stored_at``,
±``SLACK_S``). A run GitHub cannot be asked about is not trusted.
"""

from __future__ import annotations

import datetime
import functools
import os
from typing import Any

from benchtrail.compare.stored_runs import Trust, TrustAll
from benchtrail.errors import UserError
from benchtrail.github.selection import POSTSUBMIT_EVENTS, Names, release_branches, stores_baselines
from benchtrail.store import remote

#: Clock difference (s) allowed between GCS's ``timeCreated`` and GitHub's run and job times.
SLACK_S = 60.0
#: The end of the name of the job that stores a run (a caller's run prefixes its own job).
PROCESS_JOB = "process (compare, re-check, comment)"


def _client(token: str | None, base_url: str) -> Any:
    import github
    from urllib3.util.retry import Retry

    from benchtrail.github.post import make_client

    if token:
        return make_client(token, base_url)
    retry = Retry(
        total=2,
        other=0,
        backoff_factor=0.5,
        status_forcelist=(500, 502, 503, 504),
        allowed_methods=frozenset({"GET"}),
        respect_retry_after_header=False,
        raise_on_status=False,
    )
    return github.Github(
        base_url=base_url.rstrip("/"), timeout=30, retry=retry, seconds_between_requests=None
    )


def _failure(exc: Exception) -> str:
    """``<HTTP status or exception type>: <message>``."""
    return f"{getattr(exc, 'status', None) or type(exc).__name__}: {exc}"


def _utc(value: Any) -> datetime.datetime | None:
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    return value if value is None or value.tzinfo else value.replace(tzinfo=datetime.UTC)


class GitHubRunTrust:
    """A run trust through the GitHub API; ``repo`` is ``OWNER/NAME``, ``token`` needs ``actions: read``
    (None: anonymous, enough for a public repository), ``base_url`` is ``GITHUB_API_URL``."""

    def __init__(
        self, repo: str, workflow_path: str, token: str | None, base_url: str, release_branches: Names
    ) -> None:
        self.repo_name, self.workflow_path, self.release_branches = (repo, workflow_path, release_branches)
        self.description = (
            f"runs of {workflow_path} made by a push or manual run on the default branch "
            f"or a release branch ({', '.join(release_branches)}) of {repo}, as the GitHub "
            f"API at {base_url} records them"
        )
        self._gh = _client(token, base_url)
        self._attempts: dict[tuple[int, int], Any] = {}
        self._listed: dict[str, dict[int, Any]] = {}
        self._job_lists: dict[str, list[Any]] = {}

    @functools.cached_property
    def _repo(self) -> Any:
        return self._gh.get_repo(self.repo_name)

    def _attempt(self, run_id: int, attempt: int, commit: str) -> Any:
        """The record of ``attempt`` of run ``run_id``, or None when the commit's listing (one request per
        commit) has no such run or attempt."""
        if (run_id, attempt) not in self._attempts:
            if commit not in self._listed:
                self._listed[commit] = {r.id: r for r in self._repo.get_workflow_runs(head_sha=commit)}
            latest = self._listed[commit].get(run_id)
            if latest is None or attempt > latest.run_attempt:
                return None
            record = latest if attempt == latest.run_attempt else latest.get_attempt(attempt)
            record.event  # noqa: B018 - completes a lazy object now: a 404 raises here
            self._attempts[(run_id, attempt)] = record
        return self._attempts[(run_id, attempt)]

    def check(self, pointer: dict[str, Any], branches: Names = ()) -> str | None:
        """None when the pointer's run is trusted, else why not, naming the run."""
        import github

        api_errors = (github.GithubException, OSError)
        run_id, attempt = str(pointer.get("run_id")), pointer.get("attempt")
        commit = str(pointer.get("commit"))
        name = f"run {run_id}/{attempt}"
        if not run_id.isdigit() or not isinstance(attempt, int):
            return f"{name} is not a GitHub Actions run, so GitHub cannot vouch for it"
        try:
            default = self._repo.default_branch
        except api_errors as exc:
            return (
                f"{name} could not be verified: GitHub did not answer for repository "
                f"{self.repo_name} ({_failure(exc)})"
            )
        try:
            record = self._attempt(int(run_id), attempt, commit)
            if record is None:
                return (
                    f"{name}: GitHub lists no such run attempt of commit {commit[:12]} in "
                    f"{self.repo_name} (a pointer may only name a run of its own commit)"
                )
            event, branch, sha, path = record.event, record.head_branch, record.head_sha, record.path
            status, conclusion = record.status, record.conclusion
            started, updated = _utc(record.run_started_at), _utc(record.updated_at)
        except github.UnknownObjectException:
            return f"{name}: GitHub has no such workflow run attempt in {self.repo_name}"
        except api_errors as exc:
            return f"{name} could not be verified with the GitHub API ({_failure(exc)})"
        if event not in POSTSUBMIT_EVENTS:
            return f"{name} was made by a {event} event, not a push or manual run"
        if not stores_baselines(branch, default, self.release_branches):
            return (
                f"{name} ran on branch {branch!r}, neither the default branch {default!r} nor a "
                f"release branch ({', '.join(self.release_branches)}): its runs store no baselines"
            )
        if sha != commit:
            return f"{name} measured commit {str(sha)[:12]}, not {commit[:12]} as its pointer claims"
        if path != self.workflow_path:
            return f"{name} ran workflow {path}, not the trusted {self.workflow_path}"
        # The reader's own run (a postsubmit run's pages job) is still in progress: its process job vouches.
        own = (run_id, str(attempt)) == (
            os.environ.get("GITHUB_RUN_ID"),
            os.environ.get("GITHUB_RUN_ATTEMPT"),
        )
        if status != "completed" and not own:
            return f"{name} has not completed yet (status {status})"
        if conclusion != "success" and not own:
            return f"{name} ended with conclusion {conclusion}, not success"
        stored, slack = _utc(pointer.get("stored_at")), datetime.timedelta(seconds=SLACK_S)
        if stored is None or (
            not own and (None in (started, updated) or not started - slack <= stored <= updated + slack)
        ):
            return (
                f"{name}: its pointer was stored at {pointer.get('stored_at')}, outside the time "
                f"that attempt ran ({started} to {updated})"
            )
        try:
            if run_id not in self._job_lists:  # every attempt's jobs: one listing per run
                self._job_lists[run_id] = list(record.jobs("all"))
        except api_errors as exc:
            return f"{name}: its jobs could not be listed with the GitHub API ({_failure(exc)})"
        job = next(
            (
                j
                for j in reversed(self._job_lists[run_id])
                if j.run_attempt == attempt and j.name.endswith(PROCESS_JOB)
            ),
            None,
        )
        if job is None:
            return f"{name} has no job '{PROCESS_JOB}', the one that stores a run"
        if job.conclusion != "success":
            return f"{name}: its job '{job.name}' ended {job.conclusion}, not success: it stored no run"
        began, ended = _utc(job.started_at), _utc(job.completed_at)
        if None in (began, ended) or not began - slack <= stored <= ended + slack:
            return (
                f"{name}: its pointer was stored at {pointer.get('stored_at')}, outside the time its "
                f"job '{job.name}' ran ({began} to {ended})"
            )
        return None


#: ``--trust`` choices; ``auto``: ``github`` in GitHub Actions for a remote store (``gs://``, ``git:``), else
#: ``all``.
TRUST_CHOICES = ("auto", "github", "all")


def workflow_path_from_ref(workflow_ref: str | None) -> str | None:
    """``.github/workflows/x.yml`` of ``GITHUB_WORKFLOW_REF`` (``owner/repo/<that path>@refs/…``)."""
    if not workflow_ref or "/.github/" not in workflow_ref:
        return None
    return ".github/" + workflow_ref.split("/.github/", 1)[1].split("@", 1)[0]


def trust_from_options(
    mode: str, store_url: str, trusted_workflow: str | None = None, repo_name: str | None = None
) -> Trust:
    """The ``Trust`` for ``--trust mode`` with a store at ``store_url``.

    ``github`` reads ``GITHUB_REPOSITORY`` (or ``repo_name``), ``GITHUB_API_URL``, ``GITHUB_TOKEN`` and
    the workflow (``trusted_workflow``, ``BENCHTRAIL_TRUSTED_WORKFLOW``, else ``GITHUB_WORKFLOW_REF``'s);
    UserError without a repository or a workflow.
    """
    env = os.environ
    if mode == "auto":
        mode = "github" if env.get("GITHUB_ACTIONS") == "true" and remote(store_url) else "all"
    if mode == "all":
        return TrustAll()
    from benchtrail.github.post import DEFAULT_API_URL

    repo = repo_name or env.get("GITHUB_REPOSITORY", "").strip()
    workflow = (
        trusted_workflow
        or env.get("BENCHTRAIL_TRUSTED_WORKFLOW", "").strip()
        or workflow_path_from_ref(env.get("GITHUB_WORKFLOW_REF"))
    )
    if not repo:
        raise UserError("--trust github needs the repository: set GITHUB_REPOSITORY (OWNER/NAME)")
    if not workflow:
        raise UserError(
            "--trust github needs the workflow whose push runs are trusted: pass "
            "--trusted-workflow .github/workflows/<file>.yml or set "
            "BENCHTRAIL_TRUSTED_WORKFLOW (in Actions, GITHUB_WORKFLOW_REF gives this run's "
            "own workflow)"
        )
    return GitHubRunTrust(
        repo,
        workflow,
        env.get("GITHUB_TOKEN", "").strip() or None,
        env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL,
        release_branches(env),
    )
