"""Which stored runs may serve as baselines (docs/store.md, "Trusted baselines").

A PR's process job holds the store's write identity, so it can add a commit pointer for any
commit, with any content. A pointer alone therefore proves nothing; a baseline lookup asks a
``Trust`` about each candidate before using it:

* ``TrustAll``: every run of the store counts (a local ``file://`` store trusts its own runs, and
  ``--trust all`` says so for any store).
* ``GitHubRunTrust`` (``benchtrail.github.run_trust``): the GitHub API's record of the workflow run
  attempt the pointer names must show a push (or manual run) on a trusted branch, of the pointer's
  commit, by the trusted workflow, and the store must have created the pointer while that attempt ran.

``trust_from_options`` picks one from ``--trust`` and the environment.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from benchtrail.errors import UserError

#: ``--trust`` choices. ``auto``: ``github`` in GitHub Actions (``GITHUB_ACTIONS=true``) for a ``gs://``
#: store, else ``all``.
TRUST_CHOICES = ("auto", "github", "all")


class Trust(Protocol):
    """Decides whether the run a commit pointer names may be a baseline."""

    #: One line for messages: what this trust accepts.
    description: str

    def check(self, pointer: dict[str, Any], branches: tuple[str, ...] = ()) -> str | None:
        """None when the pointer's run is trusted, else why not (one sentence naming the run).

        ``pointer`` is a dict of ``Store.pointers`` (with the store's ``stored_at``); ``branches`` the
        branches besides the default branch whose pushes count (a PR's base branch)."""
        ...


class TrustAll:
    """Every stored run counts: a local store's own runs, or ``--trust all``."""

    description = "every stored run"

    def check(self, pointer: dict[str, Any], branches: tuple[str, ...] = ()) -> str | None:
        return None


def workflow_path_from_ref(workflow_ref: str | None) -> str | None:
    """``.github/workflows/x.yml`` from ``GITHUB_WORKFLOW_REF`` (``owner/repo/.github/workflows/x.yml@refs/…``)."""
    if not workflow_ref or "/.github/" not in workflow_ref:
        return None
    return ".github/" + workflow_ref.split("/.github/", 1)[1].split("@", 1)[0]


def trust_from_options(mode: str, store_url: str, trusted_workflow: str | None = None,
                       repo_name: str | None = None, env: dict[str, str] | None = None) -> Trust:
    """The ``Trust`` for ``--trust mode`` with a store at ``store_url``.

    ``github`` reads ``GITHUB_REPOSITORY`` (or ``repo_name``), ``GITHUB_API_URL`` and ``GITHUB_TOKEN``
    (optional for a public repository) from ``env`` (default ``os.environ``); the trusted workflow is
    ``trusted_workflow``, else ``BENCHTRAIL_TRUSTED_WORKFLOW``, else the path in ``GITHUB_WORKFLOW_REF``
    (this run's own workflow file).

    Raises:
        UserError: an unknown mode, or ``github`` without a repository or a trusted workflow.
    """
    env = os.environ if env is None else env
    if mode not in TRUST_CHOICES:
        raise UserError(f"--trust {mode!r} is not one of {', '.join(TRUST_CHOICES)}")
    if mode == "auto":
        mode = "github" if env.get("GITHUB_ACTIONS") == "true" and store_url.startswith("gs://") else "all"
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
        raise UserError("--trust github needs the workflow whose push runs are trusted: pass --trusted-workflow "
                        ".github/workflows/<file>.yml or set BENCHTRAIL_TRUSTED_WORKFLOW (in Actions, "
                        "GITHUB_WORKFLOW_REF gives this run's own workflow)")
    return GitHubRunTrust(repo, workflow, env.get("GITHUB_TOKEN", "").strip() or None,
                          env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL)


def add_trust_arguments(parser: Any) -> None:
    """``--trust`` and ``--trusted-workflow`` on an argparse parser."""
    parser.add_argument("--trust", choices=TRUST_CHOICES, default="auto",
                        help="which stored runs may be baselines: 'github' verifies each with the GitHub API's "
                             "record of the workflow run that wrote it (a push or manual run on the default or "
                             "base branch, of that commit, by the trusted workflow); 'all' trusts every run; "
                             "'auto' (default): github in GitHub Actions with a gs:// store, else all")
    parser.add_argument("--trusted-workflow", metavar="PATH", default=None,
                        help="with --trust github: the workflow file whose runs are trusted, e.g. "
                             ".github/workflows/benchmark.yml (default: BENCHTRAIL_TRUSTED_WORKFLOW, else this "
                             "run's own workflow from GITHUB_WORKFLOW_REF)")
