"""The workflow harness's git-store story (issue 45; ``tests/test_workflow_harness_git.py`` asserts it).

A repository with no store setting, no GCS variable and no runner labels: the docs' adoption example
(``docs/examples/adopting-classes``) without its ``runner-labels``, its suite cut to one eager case (Chain)
and its caller passing ``metrics: latency`` (no valgrind in the story). ``origin`` is a real bare
repository (``origin.git``), so the workflows' default store, ``git:origin#benchtrail-data``, is its data
branch. Its ``benchtrail-postsubmit`` environment holds the deploy key (deployment branches ``main`` and
``release-*``). A ``pre-receive`` hook of ``origin.git`` logs every push to the data branch
(``old new``); armed, it holds the first one until a second arrives, so two writers race for real.

Chapters, each run once on demand: a push to main stores its run; PR #1 (h1) compares against it and gets
its comment and gate; a forged run pushed into the data branch under h1's run (what the PR's code could do
with a token that may push: on GitHub the branch's ruleset rejects it, docs/store.md) and PR head h2 that
compares after it; two pushes to main whose store steps race.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers.cli_server import CliServer
from tests.helpers.git import git
from tests.helpers.github_server import GitHubServer
from tests.helpers.harness_story import EXAMPLE, OVERLAY, REPOSITORY, Story
from tests.helpers.workflow_harness import Harness, RunResult

DATA = "benchtrail-data"
DEPLOY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nharness-deploy-key\n-----END OPENSSH PRIVATE KEY-----"
PAGES_URL = "https://octo.github.io/my-project/"
#: The pre-receive hook of origin.git (module docstring); it runs in the bare repository.
HOOK = """#!/bin/bash
while read -r old new ref; do
  [ "$ref" = refs/heads/benchtrail-data ] || continue
  echo "$old $new" >> data-pushes.log
  if [ -f race-armed ] && mkdir race-first 2>/dev/null; then
    for _ in $(seq 600); do [ -f race-second ] && break; sleep 0.1; done
    rm -f race-armed
  elif [ -f race-armed ]; then
    touch race-second
  fi
done
"""


class GitStory(Story):
    """The runs of the module docstring (``Story``'s events and poster, another repository)."""

    def __init__(self, tmp: Path, github: GitHubServer, venv: Path) -> None:
        self.repo, self.origin = tmp / "my-project", tmp / "origin.git"
        shutil.copytree(EXAMPLE, self.repo)
        shutil.copytree(OVERLAY, self.repo, dirs_exist_ok=True)
        _replace(self.repo / "pyproject.toml", re.compile(r"^runner-labels = .*\n", re.M), "")
        _replace(self.repo / "my_benchmarks" / "suite.py", re.compile(r"modules = \(.*?\)\)\n", re.S),
                 "modules = (ModuleGenerationConfig.build(chain_model, EAGER, Architecture.CPU),)\n")
        _replace(self.repo / ".github" / "workflows" / "benchmarks.yml",
                 re.compile(r"      cpu-device: laptop\n"),
                 "      cpu-device: laptop\n      metrics: latency\n")
        git(self.repo, "init", "-q", "-b", "main")
        git(self.repo, "config", "user.email", "dev@example.com")
        git(self.repo, "config", "user.name", "dev")
        git(None, "init", "-q", "--bare", str(self.origin))
        (self.origin / "hooks" / "pre-receive").write_text(HOOK)
        (self.origin / "hooks" / "pre-receive").chmod(0o755)
        git(self.repo, "remote", "add", "origin", str(self.origin))
        self.main = self.commit("adopt benchtrail")
        self.github = github
        self.harness = Harness(
            self.origin, REPOSITORY, tmp / "runs", api_url=github.url, token="ghs_test", venv=venv,
            github_server=github, environments={"benchtrail-postsubmit": {
                "branches": ["main", "release-*"], "secrets": {"BENCHTRAIL_DEPLOY_KEY": DEPLOY_KEY}}})
        self.heads: list[str] = []
        self.comments: dict[str, str] = {}

    def commit(self, message: str) -> str:
        """Commit everything and push every branch to origin (where the runs check out)."""
        sha = super().commit(message)
        self.sync()
        return sha

    def sync(self) -> None:
        git(self.repo, "push", "-q", "origin", "refs/heads/*:refs/heads/*")

    def data(self, *args: str) -> str:
        """``git <args>`` in origin.git (the data branch's home)."""
        return git(self.origin, *args)

    def data_files(self) -> list[str]:
        return self.data("ls-tree", "-r", "--name-only", DATA).splitlines()

    def push(self, sha: str, **kwargs: Any) -> RunResult:
        payload = {"ref": "refs/heads/main", "after": sha,
                   "repository": {"full_name": REPOSITORY, "default_branch": "main"}}
        return self.benchmark("push", payload, sha, "refs/heads/main", **kwargs)

    # -- chapters ---------------------------------------------------------------------------------

    @functools.cached_property
    def baseline(self) -> RunResult:
        return self.push(self.main)

    @functools.cached_property
    def first_pr(self) -> tuple[RunResult, RunResult]:
        """h1's PR run and its poster; ``first_pr_files``: the data branch's files right after them (later
        chapters, in any order under xdist's worksteal, add to the branch)."""
        self.baseline
        runs = self.snapshot("h1", *self.pr_run(self.push_head("h1: a changelog")))
        self.first_pr_files = self.data_files()
        return runs

    @functools.cached_property
    def forged(self) -> dict[str, Any]:
        """A run and a pointer for main's commit pushed under h1's run id, then h2's PR run."""
        from benchtrail.store.git_branch import open_git_store

        run, _ = self.first_pr
        store = open_git_store(f"git:{self.origin}#{DATA}", staging=self.harness.work / "forger")
        genuine = store.pointers(self.main)[0]
        files = store.fetch_run(genuine["run_id"], genuine["attempt"], self.harness.work / "forged-run")
        store.upload_run(files, str(run.run_id), 1)
        info = {k: v for k, v in genuine.items() if k not in ("schema_version", "commit", "run_id", "attempt",
                                                              "stored_at")}
        store.write_pointer(self.main, str(run.run_id), 1, {**info, "created": "2099-01-01T00:00:00+00:00"})
        head = self.push_head("h2: another changelog")
        return {"forged_run": run.run_id, "files": self.data_files(),
                "run": self.snapshot("h2", *self.pr_run(head))}

    @functools.cached_property
    def two_pushes(self) -> dict[str, Any]:
        """main2 and main3 pushed together; their first pushes to the data branch race (the hook). After the
        PR chapters, whose baseline is main's first commit."""
        self.forged
        git(self.repo, "checkout", "-q", "main")
        shas = []
        for name in ("main2", "main3"):
            (self.repo / "CHANGELOG").write_text(f"{name}\n")
            shas.append(self.commit(name))
        (self.origin / "race-armed").touch()
        ids = [self.harness.next_run_id + 1, self.harness.next_run_id + 2]
        self.harness.next_run_id += 2
        runs: dict[int, RunResult] = {}

        def push(sha: str, run_id: int) -> None:
            runs[run_id] = self.push(sha, run_id=run_id)

        threads = [threading.Thread(target=push, args=pair) for pair in zip(shas, ids, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        log = [line.split() for line in (self.origin / "data-pushes.log").read_text().splitlines()]
        return {"runs": [runs[i] for i in ids], "shas": shas, "log": log, "files": self.data_files()}


def _replace(path: Path, pattern: re.Pattern[str], new: str) -> None:
    text, count = pattern.subn(new, path.read_text(), count=1)
    assert count == 1, (path, pattern.pattern)
    path.write_text(text)


@contextlib.contextmanager
def running_git_story(tmp: Path, venv: Path | None = None) -> Iterator[GitStory]:
    """A :class:`GitStory` with its GitHub server, stopped on exit; its ``.venv`` is ``venv`` (another story's
    CLI stand-in), else a CLI stand-in of its own."""
    github = GitHubServer().start()
    cli = None
    if venv is None:
        cli, venv = CliServer(tmp), tmp / "venv"
        cli.install(venv)
    try:
        yield GitStory(tmp, github, venv)
    finally:
        if cli is not None:
            cli.stop()
        github.stop()
