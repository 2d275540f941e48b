"""The stand-ins of ``tests/helpers/workflow_harness.py``: the actions and the one step it does not run
itself.

``actions/checkout`` fetches from the test's git repository (or links benchtrail's own source for
``repository: */benchtrail``); with ``ssh-key`` it writes the key into ``$RUNNER_TEMP`` and configures
``core.sshCommand`` as the real action does (but ``origin`` stays the test's repository, which git reaches
without SSH), kept with ``persist-credentials: true``, and records itself in the run's ``auth`` list.
``actions/setup-python`` does nothing (the test's interpreter), the artifact actions keep artifacts in
folders of the run (``upload-pages-artifact``: the site unpacked, as artifact ``github-pages``),
``actions/deploy-pages`` checks what the real one needs (the job's OIDC variables, the ``github-pages``
artifact), records the site in the run's ``pages`` list and outputs ``page_url``
(``https://OWNER.github.io/REPO/``), and the step named ``Install benchtrail`` links ``.venv`` to the
harness's environment. Each function takes the harness's run
(``workflow_runner.RunExecution``).

``google-github-actions/auth`` behaves as the real action (v3, ``src/main.ts``) up to the point
where it would call Google: exactly one of ``workload_identity_provider`` and ``credentials_json``;
with a provider the job must have the OIDC request variables (``ACTIONS_ID_TOKEN_REQUEST_URL`` and
``_TOKEN``: ``id-token: write``, not a fork's PR), else the step fails with the action's message;
a key needs none. It writes ``$GITHUB_WORKSPACE/gha-creds-<16 hex>.json`` (an ``external_account``
configuration, or the key) and exports ``GOOGLE_APPLICATION_CREDENTIALS``,
``CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE`` and ``GOOGLE_GHA_CREDS_PATH`` pointing at it, plus the
project variables (``GOOGLE_CLOUD_PROJECT`` …) when a project is given or follows from the service
account's e-mail or the key, through ``$GITHUB_ENV``. It appends what it did to the run's ``auth``
list. No token is exchanged: with ``STORAGE_EMULATOR_HOST`` set benchtrail's store client uses
anonymous credentials and never reads the file (``benchtrail.store.gcs.make_client``).
"""

from __future__ import annotations

import base64
import fnmatch
import glob
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.helpers.actions_expressions import interpolate
from tests.helpers.git import git

ROOT = Path(__file__).resolve().parents[2]


def artifact_paths(path_input: str, workspace: Path) -> list[tuple[Path, str]]:
    """(file, path inside the artifact) for what upload-artifact takes for ``path_input``.

    As actions/upload-artifact does: each line is a glob (a folder brings all files under it);
    a line's search path is its leading segments without a wildcard; the artifact's root is that
    search path (one line) or the lines' common ancestor, and a lone file named without a wildcard
    is stored at the root.
    """
    lines = [line.strip() for line in path_input.splitlines() if line.strip()]
    wildcard = re.compile(r"[*?]|\[[^\]]{2,}\]")
    search_paths, files = [], set()
    for line in lines:
        full = line if line.startswith("/") else str(workspace / line)
        segments = full.rstrip("/").split("/")
        literal = next((i for i, seg in enumerate(segments) if wildcard.search(seg)), len(segments))
        search_paths.append("/".join(re.sub(r"\[(.)\]", r"\1", seg) for seg in segments[:literal]) or "/")
        for found in glob.glob(full):
            found_path = Path(found)
            files.update([str(found_path)] if found_path.is_file() else
                         (str(f) for f in found_path.rglob("*") if f.is_file()))
    if len(search_paths) > 1:
        root = os.path.commonpath(search_paths)
    elif len(files) == 1 and search_paths[0] in files:
        root = os.path.dirname(search_paths[0])
    else:
        root = search_paths[0]
    return sorted((Path(f), Path(f).relative_to(root).as_posix()) for f in files)


@dataclass
class StepResult:
    name: str
    outcome: str  # success | failure | skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""
    seconds: float = 0.0


def install(run: Any, step: dict[str, Any], name: str, workspace: Path, defaults: dict[str, Any],
            context: dict[str, Any], step_env: dict[str, str], files: dict[str, Path]) -> StepResult:
    """Stand-in for the install step: ``.venv`` links to the test's environment."""
    wd = workspace / interpolate(defaults.get("working-directory") or ".", context)
    (wd / ".venv").symlink_to(run.h.venv, target_is_directory=True)
    src = workspace / step_env.get("BENCHTRAIL_CHECKOUT", ".")
    if not (src / "constraints.txt").is_file() or not (src / "build_tools" / "benchtrail").is_dir():
        return StepResult(name, "failure", "failure", log=f"no benchtrail source in {src}")
    with open(files["GITHUB_ENV"], "a") as f:
        f.write(f"BENCHTRAIL_SRC={src}\n")
    return StepResult(name, "success", "success", outputs={"pip-install": step_env.get("PIP_INSTALL", "")},
                      log=f"stand-in: .venv -> {run.h.venv}; pip-install {step_env.get('PIP_INSTALL', '')!r}")

# -- actions ----------------------------------------------------------------------------------

def action(run: Any, step: dict[str, Any], name: str, with_: dict[str, Any], workspace: Path,
           env: dict[str, str] | None = None, job_key: str = "",
           github_env: Path | None = None) -> StepResult:
    """Run the stand-in of ``step["uses"]``; ``env`` is the step's process environment, ``job_key``
    the job instance (``<job id>-<matrix index>``) and ``github_env`` the step's ``$GITHUB_ENV`` file."""
    action = step["uses"].split("@")[0]
    try:
        if action == "actions/checkout":
            log = checkout(run, with_, workspace, Path((env or {}).get("RUNNER_TEMP") or workspace), job_key)
            return StepResult(name, "success", "success", log=log)
        if action == "actions/upload-pages-artifact":
            return upload(run, name, {"name": with_.get("name") or "github-pages", "path": with_["path"],
                                      "if-no-files-found": "error"}, workspace)
        if action == "actions/deploy-pages":
            return deploy_pages(run, name, with_, env or {}, job_key)
        if action == "actions/setup-python":
            return StepResult(name, "success", "success", log=f"stand-in: {sys.executable}")
        if action == "actions/upload-artifact":
            return upload(run, name, with_, workspace)
        if action == "actions/download-artifact":
            return download(run, name, with_, workspace)
        if action == "google-github-actions/auth":
            assert github_env is not None, "the auth stand-in exports through $GITHUB_ENV"
            return google_auth(run, name, with_, workspace, env or {}, job_key, github_env)
    except (subprocess.CalledProcessError, OSError) as exc:
        return StepResult(name, "failure", "failure", log=f"{exc}\n{getattr(exc, 'stderr', '')}")
    raise AssertionError(f"no stand-in for action {action!r}")

AUTH_FAILED = "google-github-actions/auth failed with: "
AUTH_SECRETS_WARNING = (
    "If you are specifying input values via GitHub secrets, ensure the secret is being injected into the "
    "environment. By default, secrets are not passed to workflows triggered from forks, including Dependabot.")
AUTH_OIDC_WARNING = (
    "GitHub Actions did not inject $ACTIONS_ID_TOKEN_REQUEST_TOKEN or $ACTIONS_ID_TOKEN_REQUEST_URL into this "
    "job. This most likely means the GitHub Actions workflow permissions are incorrect, or this job is being run "
    "from a fork. For more information, please see https://docs.github.com/en/actions/security-guides/"
    "automatic-token-authentication#permissions-for-the-github_token")


def google_auth(run: Any, name: str, with_: dict[str, Any], workspace: Path, env: dict[str, str],
                job_key: str,
                github_env: Path) -> StepResult:
    """Stand-in for google-github-actions/auth (module docstring)."""
    def failed(message: str) -> StepResult:
        return StepResult(name, "failure", "failure", log=f"##[error]{AUTH_FAILED}{message}")

    provider = str(with_.get("workload_identity_provider") or "")
    key_json = str(with_.get("credentials_json") or "").strip()
    service_account = str(with_.get("service_account") or "")
    if bool(provider) == bool(key_json):
        return failed('The GitHub Action workflow must specify exactly one of "workload_identity_provider" or '
                      f'"credentials_json"! {AUTH_SECRETS_WARNING}')
    key: dict[str, Any] = {}
    if provider:
        request_url, request_token = env.get("ACTIONS_ID_TOKEN_REQUEST_URL"), env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        if not request_url or not request_token:
            return failed(AUTH_OIDC_WARNING)
        audience = str(with_.get("audience") or f"https://iam.googleapis.com/{provider}")
        credentials: dict[str, Any] = {
            "type": "external_account", "audience": f"//iam.googleapis.com/{provider}",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "credential_source": {"url": f"{request_url}&audience={quote(audience, safe='')}",
                                  "headers": {"Authorization": f"Bearer {request_token}"},
                                  "format": {"type": "json", "subject_token_field_name": "value"}}}
        if service_account:
            credentials["service_account_impersonation_url"] = (
                "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
                f"{service_account}:generateAccessToken")
        method = "workload_identity_federation"
    else:
        try:
            text = key_json if key_json.startswith("{") else base64.b64decode(key_json).decode()
            key = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            return failed(f"Failed to parse service account key JSON credentials: {exc}")
        if not isinstance(key, dict) or key.get("type") != "service_account":
            return failed("Provided credential is not a valid Google Service Account Key JSON")
        credentials, method = key, "credentials_json"
        service_account = service_account or str(key.get("client_email") or "")
    log = []
    if not any(workspace.iterdir()):
        log.append('⚠️ The "create_credentials_file" option is true, but the current GitHub workspace is empty. '
                   'Did you forget to use "actions/checkout" before this step?')
    path = workspace / f"gha-creds-{secrets.token_hex(8)}.json"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640), "w") as f:
        json.dump(credentials, f)
    log.append(f'Created credentials file at "{path}"')
    exports = {"CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE": str(path),
               "GOOGLE_APPLICATION_CREDENTIALS": str(path),
               "GOOGLE_GHA_CREDS_PATH": str(path)}
    # The project: the input, else the service_account input's e-mail domain (sa@PROJECT.iam…), else the
    # key's.
    sa_input = str(with_.get("service_account") or "")
    domain = sa_input.split("@")[1].split(".") if sa_input.count("@") == 1 else []
    project = str(with_.get("project_id") or "") or (domain[0] if len(domain) >= 2 else "") or str(
        key.get("project_id") or "")
    if project:
        exports.update(dict.fromkeys(("CLOUDSDK_CORE_PROJECT", "CLOUDSDK_PROJECT", "GCLOUD_PROJECT",
                                      "GCP_PROJECT", "GOOGLE_CLOUD_PROJECT"), project))
    with open(github_env, "a") as f:
        f.writelines(f"{k}={v}\n" for k, v in exports.items())
    run.result.auth.append({"job": job_key.rsplit("-", 1)[0], "instance": job_key, "method": method,
                            "service_account": service_account, "provider": provider, "project_id": project,
                            "credentials_file": str(path),
                            "oidc_request_url": env.get("ACTIONS_ID_TOKEN_REQUEST_URL",
                                                        "") if provider else ""})
    log.append(f"stand-in: {method} as {service_account or '(no service account)'}; no token exchanged")
    return StepResult(name, "success", "success", outputs={"credentials_file_path": str(path),
                                                            **({"project_id": project} if project else {})},
                      log="\n".join(log))


def checkout(run: Any, with_: dict[str, Any], workspace: Path, temp: Path, job_key: str = "") -> str:
    repository = with_.get("repository") or run.github["repository"]
    dest = workspace / (with_.get("path") or ".")
    if repository != run.h.repository:
        assert repository.endswith("/benchtrail"), repository
        dest.symlink_to(ROOT, target_is_directory=True)
        return f"stand-in: {dest} -> benchtrail's source {ROOT}"
    ref = str(with_.get("ref") or run.github["sha"])
    depth = int(float(with_.get("fetch-depth", 1)))
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q")
    git(dest, "remote", "add", "origin", f"file://{run.h.repo}")
    refspecs = ["+refs/heads/*:refs/remotes/origin/*"] if depth == 0 else []
    target = ref if re.fullmatch(r"[0-9a-f]{40}", ref) else f"refs/heads/{ref}"
    git(dest, "fetch", "-q", *([] if depth == 0 else [f"--depth={depth}"]), "origin", target, *refspecs)
    git(dest, "checkout", "-q", "--detach", "FETCH_HEAD")
    log = f"stand-in: fetched {ref} (depth {depth or 'all'}) of {run.h.repo}"
    persist = with_.get("persist-credentials", True)
    if str(persist).lower() == "true" and with_.get("ssh-key"):
        key = temp / f"ssh-key-{secrets.token_hex(4)}"
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(str(with_["ssh-key"]).strip() + "\n")
        git(dest, "config", "--local", "core.sshCommand",
            f'"ssh" -i "{key}" -o StrictHostKeyChecking=yes -o CheckHostIP=no')
        run.result.auth.append({"job": job_key.rsplit("-", 1)[0], "instance": job_key, "method": "ssh-key",
                                "key_file": str(key)})
        log += f"; ssh key in {key}, core.sshCommand kept"
    return log

def deploy_pages(run: Any, name: str, with_: dict[str, Any], env: dict[str, str], job_key: str) -> StepResult:
    """Stand-in for actions/deploy-pages (module docstring)."""
    if not env.get("ACTIONS_ID_TOKEN_REQUEST_URL") or not env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        return StepResult(name, "failure", "failure",
                          log='##[error]Ensure GITHUB_TOKEN has permission "id-token: write".')
    site = run.result.artifacts / str(with_.get("artifact_name") or "github-pages")
    if not site.is_dir():
        return StepResult(name, "failure", "failure",
                          log=f"##[error]No artifact named {site.name!r} in this run")
    owner, repo = run.h.repository.split("/")
    url = f"https://{owner.lower()}.github.io/{repo}/"
    run.result.pages.append({"job": job_key.rsplit("-", 1)[0], "site": site, "page_url": url})
    return StepResult(name, "success", "success", outputs={"page_url": url},
                      log=f"stand-in: deployed {site} to {url}")


def upload(run: Any, name: str, with_: dict[str, Any], workspace: Path) -> StepResult:
    artifact = str(with_["name"])
    target = run.result.artifacts / artifact
    if target.exists():
        return StepResult(name, "failure", "failure", log=f"an artifact named {artifact!r} exists already")
    files = artifact_paths(str(with_["path"]), workspace)
    if not files:
        if with_.get("if-no-files-found", "warn") == "error":
            return StepResult(name, "failure", "failure", log=f"no files found for {with_['path']!r}")
        return StepResult(name, "success", "success", log="no files found: nothing uploaded")
    for source, rel in files:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / rel)
    url = f"https://github.com/{run.h.repository}/actions/runs/{run.result.run_id}/artifacts/{artifact}"
    return StepResult(name, "success", "success", outputs={"artifact-url": url},
                      log=f"uploaded {len(files)} file(s) as {artifact}")

def download(run: Any, name: str, with_: dict[str, Any], workspace: Path) -> StepResult:
    run_id = with_.get("run-id")
    source = run.h.runs[int(float(run_id))].artifacts if run_id else run.result.artifacts
    available = sorted(p.name for p in source.iterdir())
    path = Path(str(with_.get("path") or "."))
    dest = path if path.is_absolute() else workspace / path
    if with_.get("name"):
        chosen, merge = [str(with_["name"])], True
        if chosen[0] not in available:
            return StepResult(name, "failure", "failure", log=f"Artifact not found: {chosen[0]}")
    else:
        chosen = [a for a in available if fnmatch.fnmatchcase(a, str(with_.get("pattern") or "*"))]
        merge = str(with_.get("merge-multiple", "false")).lower() == "true"
    for artifact in chosen:
        shutil.copytree(source / artifact, dest if merge else dest / artifact, dirs_exist_ok=True)
    return StepResult(name, "success", "success", log=f"downloaded {chosen} into {dest}")
