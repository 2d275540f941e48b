"""``benchtrail init``: the files a project needs to adopt benchtrail, written once (docs/adopting.md).

``[tool.benchtrail]`` in pyproject.toml, an example benchmarks module unless ``--benchmarks`` exists,
``.benchtrail/`` in .gitignore, and the two caller workflows, pinned to the commit pip installed benchtrail
from (PEP 610), else to a placeholder. Without ``--store`` the workflow keeps runs in the repository's data
branch on GitHub-hosted runners; ``--store gs://…`` adds self-hosted ``runner-labels``. An existing file is
kept and reported, never overwritten; files are written atomically.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from importlib import metadata, resources
from pathlib import Path

from benchtrail import jsonio
from benchtrail.cli.options import add_command
from benchtrail.errors import UserError

#: The placeholders of a caller workflow's ``uses:`` when no installed commit is known.
PLACEHOLDER_REPOSITORY = "OWNER/benchtrail"
PLACEHOLDER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: The local store's folder, ignored by git (``.gitignore``).
STORE_IGNORE = ".benchtrail/"
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_GS = re.compile(r"^gs://[a-z0-9][a-z0-9._-]*[a-z0-9](/[^\s'\"#]*)?$")
#: The reusable workflow's store when nothing names one (docs/store.md, "A store in a git branch (`git:`)").
DEFAULT_STORE = "git:origin#benchtrail-data"
#: The labels of the CPU device's self-hosted runners that ``--store gs://…`` writes.
SELF_HOSTED = 'runner-labels = { "cpu" = ["self-hosted", "cpu"] }\n'
#: What to set up once for the git store: the data branch's ruleset (only a deploy key may bypass it), the
#: deploy key in an environment restricted to the default and release branches, and Pages.
GIT_NEXT = """
The workflow stores runs in this repository's branch {branch} (docs/adopting.md, "No infrastructure"). Once,
with the GitHub CLI (gh) in a clone of the repository (gh fills in {{owner}}/{{repo}}):
  1. a ruleset on {branch} that only a deploy key may bypass, so no workflow token (a PR's code) can push:
       echo {ruleset} | gh api repos/{{owner}}/{{repo}}/rulesets -X POST --input -
  2. a deploy key with write access, its private half a secret of the environment benchtrail-postsubmit, which
     only the default and release branches may use:
       ssh-keygen -t ed25519 -N "" -C benchtrail-data -f benchtrail-deploy-key
       gh repo deploy-key add benchtrail-deploy-key.pub --allow-write --title benchtrail-data
       gh api repos/{{owner}}/{{repo}}/environments/benchtrail-postsubmit -X PUT \\
         -F 'deployment_branch_policy[protected_branches]=false' \\
         -F 'deployment_branch_policy[custom_branch_policies]=true'
       gh api repos/{{owner}}/{{repo}}/environments/benchtrail-postsubmit/deployment-branch-policies \\
         -f name="$(gh repo view --json defaultBranchRef -q .defaultBranchRef.name)"
       gh api repos/{{owner}}/{{repo}}/environments/benchtrail-postsubmit/deployment-branch-policies \\
         -f name='release-*'
       gh secret set BENCHTRAIL_DEPLOY_KEY --env benchtrail-postsubmit < benchtrail-deploy-key
       rm benchtrail-deploy-key benchtrail-deploy-key.pub
  3. Settings > Pages > Source: GitHub Actions (the history dashboard; a private repository without Pages
     gets it as an Actions artifact).
CPU cases run on GitHub-hosted runners and gate on instruction counts. To move to a bucket and self-hosted
runners later: docs/adopting.md, "Growing: GCS and self-hosted runners" (benchtrail init --store gs://...).
"""


def ruleset(branch: str) -> dict[str, object]:
    """The data branch's ruleset (GitHub's REST body): no creation, update, deletion or force-push of
    ``branch`` but by a deploy key."""
    return {
        "name": "benchtrail-data",
        "target": "branch",
        "enforcement": "active",
        "conditions": {"ref_name": {"include": [f"refs/heads/{branch}"], "exclude": []}},
        "rules": [{"type": t} for t in ("creation", "update", "deletion", "non_fast_forward")],
        "bypass_actors": [{"actor_type": "DeployKey", "bypass_mode": "always"}],
    }


def add_init_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "init", cmd_init)
    p.add_argument(
        "--benchmarks",
        default="benchmarks",
        metavar="MODULE",
        help="module of the project's @benchmark functions (default: "
        "benchmarks, i.e. benchmarks.py); an example is written when it does not exist",
    )
    p.add_argument("--directory", type=Path, default=Path("."), help="the project's folder (default: here)")
    p.add_argument(
        "--store",
        metavar="URL",
        help="the workflow's store: gs://BUCKET[/PREFIX] (with self-hosted runner-labels) or "
        "git:REMOTE#BRANCH (default: none written: the workflow stores runs in this "
        f"repository's branch, {DEFAULT_STORE}, on GitHub-hosted runners)",
    )


def installed_pin() -> tuple[str, str] | None:
    """``(owner/name, commit)`` from the ``direct_url.json`` (PEP 610) of a ``pip install "benchtrail @
    git+https://github.com/OWNER/NAME@SHA"``; None for any other install."""
    try:
        return pin_of_direct_url(metadata.distribution("benchtrail").read_text("direct_url.json"))
    except metadata.PackageNotFoundError:
        return None


def pin_of_direct_url(text: str | None) -> tuple[str, str] | None:
    """``(owner/name, commit)`` of a ``direct_url.json`` text recording a git install from github.com at a
    full SHA; None for anything else."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    match = re.match(
        r"^(?:git\+)?https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?$", str(data.get("url", ""))
    )
    commit = (data.get("vcs_info") or {}).get("commit_id")
    if not match or not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    return match.group(1), commit


def _template(name: str) -> str:
    """Text of ``benchtrail/data/init/<name>``."""
    return resources.files("benchtrail").joinpath("data", "init", name).read_text(encoding="utf-8")


def workflow(template: str, pin: tuple[str, str] | None, store: str | None = None) -> str:
    """A caller workflow from ``template``, pinned to ``pin`` (None: the placeholders), ``store`` its
    ``store`` input (None: the reusable workflow's default)."""
    repository, commit = pin or (PLACEHOLDER_REPOSITORY, PLACEHOLDER_COMMIT)
    line = f"      store: {store}\n" if store else ""
    comment, note = (
        (
            f"# Pinned to the benchtrail commit `benchtrail init` was installed from "
            f"({repository}@{commit}).\n",
            "",
        )
        if pin
        else (
            "# Pin `uses:` by a full commit SHA of benchtrail. The SHA below is a PLACEHOLDER (and "
            "OWNER is\n# benchtrail's owner): replace both with a real commit of benchtrail's "
            "repository.\n",
            " # placeholder: a real benchtrail commit",
        )
    )
    return (
        _template(template)
        .replace("{pin_comment}", comment)
        .replace("{repository}", repository)
        .replace("{commit}", commit)
        .replace("{pin_note}", note)
        .replace("      # {store_line}\n", line)
    )


def table(module: str, self_hosted: bool = False) -> str:
    """The starter ``[tool.benchtrail]`` table; ``self_hosted`` adds the CPU device's runner labels."""
    return (
        "\n# benchtrail's settings (docs/adopting.md). `benchtrail pipeline` runs the presets below and\n"
        "# writes the comment into the store (`.benchtrail/store` unless `store` says otherwise; CI's\n"
        "# store is the workflow's).\n"
        "[tool.benchtrail]\n"
        f'benchmarks = ["{module}"]\n'
        'presets = "default"\n' + (SELF_HOSTED if self_hosted else "")
    )


def checked_store(url: str | None) -> str | None:
    """``--store`` (None stays None). Raises UserError for anything but a ``gs://`` or ``git:`` URL (a folder
    is no store for CI) or a malformed one, naming what is allowed."""
    if url is None:
        return None
    if url.startswith("git:"):
        from benchtrail.store import written_url

        return written_url(url)
    if not _GS.match(url):
        raise UserError(
            f"--store {url!r}: the workflow's store is gs://BUCKET[/PREFIX] (a bucket name: "
            "lower-case letters, digits, '.', '_', '-') or git:REMOTE#BRANCH; leave it out for "
            f"{DEFAULT_STORE}"
        )
    return url


def cmd_init(args: argparse.Namespace) -> int:
    import tomllib

    root = args.directory
    if not root.is_dir():
        raise UserError(f"--directory {root}: no such folder")
    if not _MODULE.match(args.benchmarks):
        raise UserError(
            f"--benchmarks {args.benchmarks!r} is not a module name (e.g. benchmarks or mypkg.bench)"
        )
    store = checked_store(args.store)
    written, kept = [], []

    def place(path: Path, kept_because: str | None, text: str, note: str = "") -> None:
        """Write ``text`` to ``path``, unless ``kept_because`` says why the file is kept."""
        if kept_because:
            kept.append(f"kept  {path} ({kept_because})")
        else:
            jsonio.write_text_atomic(path, text)
            written.append(f"wrote {path}{note}")

    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    try:
        existing = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{pyproject}: cannot read it as TOML ({exc}); nothing was written") from exc
    starter = table(args.benchmarks, self_hosted=bool(store and store.startswith("gs://")))
    place(
        pyproject,
        "benchtrail" in existing.get("tool", {}) and "it already has [tool.benchtrail]",
        text.rstrip("\n") + "\n" + starter if text else starter.lstrip("\n"),
    )

    base = root.joinpath(*args.benchmarks.split("."))
    module_file = base.with_suffix(".py")
    place(
        module_file,
        (module_file.is_file() or (base / "__init__.py").is_file()) and "the benchmarks module exists",
        _template("example_benchmarks.py.template"),
    )

    gitignore = root / ".gitignore"
    ignored = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
    place(
        gitignore,
        STORE_IGNORE in ignored.splitlines() and f"it ignores {STORE_IGNORE}",
        ignored
        + ("" if not ignored or ignored.endswith("\n") else "\n")
        + f"# benchtrail's local store (benchtrail init)\n{STORE_IGNORE}\n",
        f" ({STORE_IGNORE} ignored)",
    )

    pin = installed_pin()
    for name in ("benchmarks.yml", "post_benchmark_comment.yml"):
        path = root / ".github" / "workflows" / name
        place(path, path.exists() and "exists", workflow(f"{name}.template", pin, store))

    print(*written, *kept, sep="\n")
    if pin is None:
        print(
            f"note: pin `uses:` in .github/workflows/*.yml to a benchtrail commit (it says "
            f'{PLACEHOLDER_REPOSITORY}@{PLACEHOLDER_COMMIT[:7]}...; docs/adopting.md, "The workflow")'
        )
    print(
        "next: commit, then benchtrail pipeline   (runs the benchmarks and writes the comment into "
        ".benchtrail/store; each run is recorded under its commit)"
    )
    if store is None or store.startswith("git:"):
        branch = (store or DEFAULT_STORE).rpartition("#")[2]
        print(GIT_NEXT.format(branch=branch, ruleset=shlex.quote(json.dumps(ruleset(branch)))), end="")
    else:
        print(
            f"\nThe workflow stores runs in {store} and runs on self-hosted runners (runner-labels): "
            'docs/store.md, "Setting up the bucket", and docs/runners.md'
        )
    return 0
