"""Which stored runs may serve as baselines (docs/store.md, "Trusted baselines").

A PR's process job holds the store's write identity, so it can add a commit pointer for any
commit, with any content. A pointer alone therefore proves nothing; a baseline lookup asks a
``Trust`` about each candidate before using it:

* ``TrustAll``: every run of the store counts (a local ``file://`` store trusts its own runs, and
  ``--trust all`` says so for any store).
* ``GitHubRunTrust`` (``benchtrail.github.run_trust``): the GitHub API's record of the workflow run
  attempt the pointer names must show a push (or manual run) on a trusted branch, of the pointer's
  commit, by the trusted workflow, and the store must have created the pointer while that attempt ran.

``trust_from_options`` picks one from ``--trust`` (``benchtrail.cli.options.add_trust_arguments``) and
the environment.
"""

from __future__ import annotations

import os

from benchtrail.compare.trust import Trust, TrustAll
from benchtrail.errors import UserError
from benchtrail.store import remote

#: ``--trust`` choices. ``auto``: ``github`` in GitHub Actions (``GITHUB_ACTIONS=true``) for a remote store
#: (``benchtrail.store.remote``: ``gs://`` or ``git:``), else ``all``.
TRUST_CHOICES = ("auto", "github", "all")


def workflow_path_from_ref(workflow_ref: str | None) -> str | None:
    """``.github/workflows/x.yml`` from ``GITHUB_WORKFLOW_REF``
    (``owner/repo/.github/workflows/x.yml@refs/…``)."""
    if not workflow_ref or "/.github/" not in workflow_ref:
        return None
    return ".github/" + workflow_ref.split("/.github/", 1)[1].split("@", 1)[0]


def trust_from_options(mode: str, store_url: str, trusted_workflow: str | None = None,
                       repo_name: str | None = None) -> Trust:
    """The ``Trust`` for ``--trust mode`` with a store at ``store_url``.

    ``github`` reads ``GITHUB_REPOSITORY`` (or ``repo_name``), ``GITHUB_API_URL`` and ``GITHUB_TOKEN``
    (optional for a public repository) from the environment; the trusted workflow is
    ``trusted_workflow``, else ``BENCHTRAIL_TRUSTED_WORKFLOW``, else the path in ``GITHUB_WORKFLOW_REF``
    (this run's own workflow file).

    ``mode`` is one of ``TRUST_CHOICES`` (argparse's ``choices`` checked it).

    Raises:
        UserError: ``github`` without a repository or a trusted workflow.
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
                        "--trusted-workflow .github/workflows/<file>.yml or set BENCHTRAIL_TRUSTED_WORKFLOW "
                        "(in Actions, GITHUB_WORKFLOW_REF gives this run's own workflow)")
    from benchtrail.github.configure import release_branches

    return GitHubRunTrust(repo, workflow, env.get("GITHUB_TOKEN", "").strip() or None,
                          env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL, release_branches(env))
