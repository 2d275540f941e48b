"""Which stored runs may serve as baselines (docs/store.md, "Trusted baselines").

A PR's process job can write a pointer for any commit, so a pointer alone proves nothing: a baseline
lookup asks a ``Trust``. ``TrustAll`` trusts every run (a local store's own, or ``--trust all``);
``GitHubRunTrust`` asks GitHub's record of the run that wrote the pointer.
"""

from __future__ import annotations

import os

from benchtrail.compare.trust import Trust, TrustAll
from benchtrail.errors import UserError
from benchtrail.store import remote

#: ``--trust`` choices; ``auto``: ``github`` in GitHub Actions for a remote store (``gs://``, ``git:``), else
#: ``all``.
TRUST_CHOICES = ("auto", "github", "all")


def workflow_path_from_ref(workflow_ref: str | None) -> str | None:
    """``.github/workflows/x.yml`` of ``GITHUB_WORKFLOW_REF`` (``owner/repo/<that path>@refs/…``)."""
    if not workflow_ref or "/.github/" not in workflow_ref:
        return None
    return ".github/" + workflow_ref.split("/.github/", 1)[1].split("@", 1)[0]


def trust_from_options(mode: str, store_url: str, trusted_workflow: str | None = None,
                       repo_name: str | None = None) -> Trust:
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
    from benchtrail.github.run_trust import GitHubRunTrust

    repo = repo_name or env.get("GITHUB_REPOSITORY", "").strip()
    workflow = (trusted_workflow or env.get("BENCHTRAIL_TRUSTED_WORKFLOW", "").strip()
                or workflow_path_from_ref(env.get("GITHUB_WORKFLOW_REF")))
    if not repo:
        raise UserError("--trust github needs the repository: set GITHUB_REPOSITORY (OWNER/NAME)")
    if not workflow:
        raise UserError("--trust github needs the workflow whose push runs are trusted: pass "
                        "--trusted-workflow .github/workflows/<file>.yml or set "
                        "BENCHTRAIL_TRUSTED_WORKFLOW (in Actions, GITHUB_WORKFLOW_REF gives this run's "
                        "own workflow)")
    from benchtrail.github.configure import release_branches

    return GitHubRunTrust(repo, workflow, env.get("GITHUB_TOKEN", "").strip() or None,
                          env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL,
                          release_branches(env))
