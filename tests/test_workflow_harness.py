"""The workflows, executed for real events by ``tests/workflow_harness.py``: every failure ends in
the current head's PR comment.

One story, shared by the tests (each asserts its own chapter): the docs' adoption example
(``docs/examples/adopting-classes``: its pyproject.toml and both caller workflows, not pip-installed) with
a three-case suite (``tests/data/harness_project``) calls benchtrail's reusable workflows. A push
to main stores the baseline in the GCS emulator. Then PR #1, trailer ``benchmarks: smoke``:

1. head h1 makes ``Chain`` 4x slower (it waits 40 ms instead of 10 ms) and breaks ``Mix`` (its
   eager case fails, its export module fails to compile): the comment lists both failures and the
   regression, which the paired re-check confirms, so the gate fails; a title-only edit and an
   unrelated label leave it failing; a ``benchmarks-accept:`` edit turns it green unmeasured;
2. head h2 meets a store outage (the emulator behind a proxy answering 503) and the runner of
   execute shard 1 dies (its job times out): the comment says both, and lists that shard's case;
3. head h3's re-check hits its step timeout: the regression stays unconfirmed and the gate passes;
4. an edit puts an unknown preset in the trailer: the comment names it and the valid ones;
5. an edit of the title alone selects nothing;
6. head h4 makes ``Chain`` fast again and drops the trailer: nothing selected, the gate passes;
   adding the trailer back makes it pending until its run's comparison passes it;
7. a re-run of h4 whose process job dies fails the gate: no comparison.

Each benchmark run is followed by the poster (``workflow_run``), run against the local GitHub REST
server, which holds one bot comment for the PR throughout and the ``benchtrail/gate`` status of
each head. A fork's PR #2 waits for a maintainer's label.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.cloud import storage

from tests.cli_server import CliServer
from tests.gcs_fixtures import FaultProxy
from tests.github_server import GitHubServer
from tests.workflow_harness import ROOT, Harness, RunResult, load_workflow, pending_survivors

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "docs" / "examples" / "adopting-classes"
OVERLAY = ROOT / "tests" / "data" / "harness_project"
REPOSITORY = "octo/my-project"
PR_NUMBER = 1
BODY = "Speeds things up, we hope.\n\nbenchmarks: smoke\n"
RECHECK_STEP = "process/Re-check regressions in paired A/B runs"
SHARD_DIES = "execute-1/Run benchmarks"  # shard 1's job stops at its timeout-minutes
WIF_PROVIDER = "projects/123456789/locations/global/workloadIdentityPools/github/providers/my-project"
PRESUBMIT_SA = "benchtrail-presubmit@my-gcp-project.iam.gserviceaccount.com"
POSTSUBMIT_SA = "benchtrail-postsubmit@my-gcp-project.iam.gserviceaccount.com"
GATE = "benchtrail/gate"
REF = f"refs/pull/{PR_NUMBER}/merge"
CHAIN, MIX_EAGER, MIX_EXPORT = ("chain.eager.inference-quick.laptop", "mix.eager.inference-quick.laptop",
                                "mix.export.inference-quick.laptop")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


class Story:
    """The runs of the module docstring, each made once, on demand, in order."""

    def __init__(self, tmp: Path, github: GitHubServer, emulator_url: str, venv: Path, example: Path = EXAMPLE,
                 overlay: Path | None = OVERLAY) -> None:
        self.repo = tmp / "my-project"
        shutil.copytree(example, self.repo)
        if overlay is not None:
            shutil.copytree(overlay, self.repo, dirs_exist_ok=True)
        _git(self.repo, "init", "-q", "-b", "main")
        _git(self.repo, "config", "user.email", "dev@example.com")
        _git(self.repo, "config", "user.name", "dev")
        self.commit("adopt benchtrail")
        self.main = _git(self.repo, "rev-parse", "HEAD")
        bucket = f"harness-{uuid.uuid4().hex[:10]}"
        from google.auth.credentials import AnonymousCredentials

        storage.Client(project="test", credentials=AnonymousCredentials(),
                       client_options={"api_endpoint": emulator_url}).create_bucket(bucket)
        self.emulator_url = emulator_url
        self.proxy = FaultProxy(upstream=emulator_url).start()
        self.github = github
        self.harness = Harness(
            self.repo, REPOSITORY, tmp / "runs", api_url=github.url, token="ghs_test",
            env={"STORAGE_EMULATOR_HOST": self.proxy.url, "BENCHTRAIL_STAGING": str(tmp / "staging")},
            vars={"BENCHTRAIL_STORE": f"gs://{bucket}/benchmarks", "BENCHTRAIL_STORE_DEADLINE_S": "2",
                  "BENCHTRAIL_WIF_PROVIDER": WIF_PROVIDER, "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": PRESUBMIT_SA,
                  "BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": POSTSUBMIT_SA}, venv=venv, github_server=github)
        self.heads: list[str] = []
        self.comments: dict[str, str] = {}

    def commit(self, message: str) -> str:
        _git(self.repo, "add", "-A")
        _git(self.repo, "commit", "-q", "-m", message)
        return _git(self.repo, "rev-parse", "HEAD")

    # -- events -----------------------------------------------------------------------------------

    def pr_payload(self, action: str, head: str, body: str = BODY, title: str = "Faster layers",
                   labels: tuple[str, ...] = (), number: int = PR_NUMBER, head_repo: str = REPOSITORY,
                   base: tuple[str, str] | None = None, **extra) -> dict:
        """The event, and the PR as GitHub then holds it (its title, body and labels: what the poster reads)."""
        with self.github.lock:
            pull = self.github.pulls.get((REPOSITORY, number))
            if pull is not None:
                pull.update(title=title, body=body, labels=list(labels))
        repo = {"full_name": REPOSITORY}
        return {"action": action, "number": number, **extra,
                "pull_request": {"number": number, "title": title, "body": body,
                                 "labels": [{"name": n} for n in labels],
                                 "head": {"sha": head, "ref": "faster", "repo": {"full_name": head_repo}},
                                 "base": {"sha": (base or (self.main, "main"))[0], "ref": (base or (self.main, "main"))[1],
                                          "repo": repo}},
                "repository": {**repo, "default_branch": "main"}}

    def benchmark(self, event: str, payload: dict, sha: str, ref: str, **kwargs) -> RunResult:
        return self.harness.run("benchmarks.yml", event, payload, sha, ref, **kwargs)

    def post(self, run: RunResult, action: str = "completed") -> RunResult:
        """The caller's poster workflow for ``run`` requested or completed (the default branch's file)."""
        return self.harness.run("post_benchmark_comment.yml", "workflow_run",
                                self.harness.workflow_run_payload(run, "benchmarks", action=action), self.main,
                                "refs/heads/main")

    def gate(self, head: str) -> tuple[str, str] | None:
        """``(state, description)`` of the head's ``benchtrail/gate`` status."""
        return self.github.status(REPOSITORY, head, GATE)

    def edit(self, head: str, **kwargs) -> tuple[RunResult, RunResult]:
        """A PR event on ``head`` (``pr_payload``'s arguments) that starts the benchmark run and its poster."""
        run = self.benchmark("pull_request", self.pr_payload(head=head, **kwargs), head, REF)
        return run, self.post(run)

    def push_head(self, message: str, edit=None) -> str:
        if not self.heads:
            _git(self.repo, "checkout", "-q", "-b", "faster")
        if edit:
            edit(self.repo)
        else:
            (self.repo / "CHANGELOG").write_text(f"{message}\n")
        head = self.commit(message)
        self.heads.append(head)
        if PR_NUMBER not in {n for _, n in self.github.pulls}:
            self.github.add_pull(REPOSITORY, PR_NUMBER, head, title="Faster layers", body=BODY)
        with self.github.lock:
            self.github.pulls[(REPOSITORY, PR_NUMBER)].update(head_sha=head, body=BODY, labels=[])
        return head

    def pr_run(self, head: str, **kwargs) -> tuple[RunResult, RunResult]:
        run = self.benchmark("pull_request", self.pr_payload("synchronize", head), head,
                             f"refs/pull/{PR_NUMBER}/merge", **kwargs)
        return run, self.post(run)

    def bot_comments(self) -> list[dict]:
        return [c for c in self.github.issue_comments(REPOSITORY, PR_NUMBER)
                if c["user"]["login"] == "github-actions[bot]"]

    # -- chapters ---------------------------------------------------------------------------------

    @functools.cached_property
    def baseline(self) -> RunResult:
        run = self.benchmark("push", {"ref": "refs/heads/main", "after": self.main,
                                      "repository": {"full_name": REPOSITORY, "default_branch": "main"}},
                             self.main, "refs/heads/main")
        assert run.conclusion == "success", run.describe()
        return run

    @functools.cached_property
    def failures(self) -> tuple[RunResult, RunResult]:
        self.baseline

        def slow_and_broken(repo: Path) -> None:
            layers = repo / "my_project" / "layers.py"
            text = layers.read_text().replace("DELAY_S = 0.010\n", "DELAY_S = 0.040\n")
            text = text.replace("        return torch.sigmoid(self.gate(x)) * self.value(x)",
                                "        raise RuntimeError('Mix is broken by this PR')")
            layers.write_text(text)

        head = self.push_head("Chain waits 4x longer; Mix raises", slow_and_broken)
        return self.snapshot("failures", *self.pr_run(head))

    @functools.cached_property
    def edits_on_h1(self) -> dict[str, tuple[str, str] | None]:
        """h1's gate after its comparison, then after a title-only edit, an unrelated label and a
        ``benchmarks-accept:`` edit (its run measures nothing: the poster gates h1's comparison again)."""
        self.failures
        head = self.heads[0]
        states = {"compared": self.gate(head)}
        self.edit(head, action="edited", title="Faster layers (v2)", changes={"title": {"from": "Faster layers"}})
        states["title"] = self.gate(head)
        self.edit(head, action="labeled", labels=("documentation",), label={"name": "documentation"})
        states["label"] = self.gate(head)
        accept = BODY + "benchmarks-accept: chain.*\n"
        states["accept_run"] = self.edit(head, action="edited", body=accept, changes={"body": {"from": BODY}})
        states["accepted"] = self.gate(head)
        return states

    @functools.cached_property
    def outage(self) -> tuple[RunResult, RunResult]:
        self.edits_on_h1
        head = self.push_head("h2: the store is down")
        self.proxy.add("status", status=503, path_prefix="/", methods=("GET", "POST", "PUT", "PATCH", "DELETE"))
        try:
            run = self.benchmark("pull_request", self.pr_payload("synchronize", head), head,
                                 f"refs/pull/{PR_NUMBER}/merge", step_timeouts=(SHARD_DIES,))
        finally:
            self.proxy.clear()
        return self.snapshot("outage", run, self.post(run))

    def forge_pointer(self, run: RunResult, commit: str | None = None, run_id: int | None = None) -> str:
        """What h1's process job could do with the store identity it holds: create a pointer object for
        main's commit (or ``commit``) naming its own stored run (or ``run_id``; main's pointer copied, the
        newest ``created``)."""
        import json

        from google.auth.credentials import AnonymousCredentials

        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.emulator_url})
        bucket, prefix = self.harness.vars["BENCHTRAIL_STORE"].removeprefix("gs://").split("/", 1)
        (genuine,) = [json.loads(b.download_as_bytes())
                      for b in client.list_blobs(bucket, prefix=f"{prefix}/commits/{self.main}/{self.baseline.run_id}-")]
        commit, run_id = commit or self.main, run_id or run.run_id
        forged = {**genuine, "commit": commit, "run_id": str(run_id), "attempt": run.attempt,
                  "created": "2099-01-01T00:00:00+00:00"}
        name = f"{prefix}/commits/{commit}/{run_id}-{run.attempt}.json"
        client.bucket(bucket).blob(name).upload_from_string(json.dumps(forged), if_generation_match=0)
        return name

    @functools.cached_property
    def recheck_timeout(self) -> tuple[RunResult, RunResult]:
        self.outage
        self.forge_pointer(self.failures[0])  # h1 stored its run, slow Chain and all
        head = self.push_head("h3: the re-check times out")
        return self.snapshot("recheck_timeout", *self.pr_run(head, step_timeouts=(RECHECK_STEP,)))

    @functools.cached_property
    def bad_trailer(self) -> tuple[RunResult, RunResult]:
        self.recheck_timeout
        head = self.heads[-1]
        body = BODY.replace("benchmarks: smoke", "benchmarks: smoke,nonsense")
        payload = self.pr_payload("edited", head, body=body, changes={"body": {"from": BODY}})
        run = self.benchmark("pull_request", payload, head, f"refs/pull/{PR_NUMBER}/merge")
        return self.snapshot("bad_trailer", run, self.post(run))

    @functools.cached_property
    def title_edit(self) -> tuple[RunResult, RunResult]:
        self.bad_trailer
        head = self.heads[-1]
        payload = self.pr_payload("edited", head, title="Faster layers (v2)",
                                  changes={"title": {"from": "Faster layers"}})
        run = self.benchmark("pull_request", payload, head, f"refs/pull/{PR_NUMBER}/merge")
        return self.snapshot("title_edit", run, self.post(run))

    @functools.cached_property
    def fixed(self) -> dict[str, Any]:
        """h4 makes Chain fast again with the trailer dropped, then the trailer comes back."""
        self.title_edit
        bare = "Speeds things up, we hope.\n"

        def fast_again(repo: Path) -> None:
            layers = repo / "my_project" / "layers.py"
            layers.write_text(layers.read_text().replace("DELAY_S = 0.040\n", "DELAY_S = 0.010\n"))

        head = self.push_head("h4: Chain is fast again", fast_again)
        chapter: dict[str, Any] = {"bare": self.edit(head, action="synchronize", body=bare)}
        chapter["bare_gate"] = self.gate(head)
        payload = self.pr_payload("edited", head, body=BODY, changes={"body": {"from": bare}})
        queued = self.harness.queue("benchmarks.yml", "pull_request", payload, head)
        self.post(queued, action="requested")
        chapter["requested_gate"] = self.gate(head)
        run = self.benchmark("pull_request", payload, head, REF, run_id=queued.run_id)
        chapter["run"] = self.snapshot("fixed", run, self.post(run))
        chapter["gate"] = self.gate(head)
        return chapter

    @functools.cached_property
    def process_dies(self) -> tuple[RunResult, RunResult]:
        """A re-run (attempt 2) of h4's run whose process job's runner dies while comparing."""
        run = self.fixed["run"][0]
        rerun = self.benchmark("pull_request", run.payload, run.sha, REF, run_id=run.run_id, attempt=2,
                               step_timeouts=("process/Compare with the stored baseline",))
        return rerun, self.post(rerun)

    @functools.cached_property
    def release(self) -> tuple[RunResult, RunResult]:
        """A push to ``release-1.2`` (a commit after main's), then PR #3 into it: the push run and the PR's."""
        self.baseline
        cut = _git(self.repo, "commit-tree", f"{self.main}^{{tree}}", "-p", self.main, "-m", "release 1.2")
        _git(self.repo, "update-ref", "refs/heads/release-1.2", cut)
        push = self.benchmark("push", {"ref": "refs/heads/release-1.2", "after": cut,
                                       "repository": {"full_name": REPOSITORY, "default_branch": "main"}},
                              cut, "refs/heads/release-1.2")
        head = _git(self.repo, "commit-tree", f"{cut}^{{tree}}", "-p", cut, "-m", "a fix for 1.2")
        _git(self.repo, "update-ref", "refs/heads/fix-1.2", head)
        self.github.add_pull(REPOSITORY, 3, head, body=BODY, head_ref="fix-1.2")
        run = self.benchmark("pull_request", self.pr_payload("opened", head, number=3, base=(cut, "release-1.2")),
                             head, "refs/pull/3/merge")
        return push, run

    @functools.cached_property
    def forgeries(self) -> dict[str, Any]:
        """The two forgeries of the presubmit identity, then PR #4 into main:

        1. a manual run on main that selects nothing lends its name to a pointer for main's commit,
           created right after the run (inside its time on GitHub's record);
        2. main moves on to main2; while main2's push run stores its run, the forger creates that run's
           own pointer just before the run writes it: the run's create-only write fails (it reports
           the clash and fails) and the forged pointer stays."""
        self.baseline
        dispatch = self.benchmark("workflow_dispatch", {"ref": "refs/heads/main", "inputs": {"benchmark-presets": ""},
                                                        "repository": {"full_name": REPOSITORY, "default_branch": "main"}},
                                  self.main, "refs/heads/main", inputs={"benchmark-presets": ""})
        self.forge_pointer(dispatch)
        main2 = _git(self.repo, "commit-tree", f"{self.main}^{{tree}}", "-p", self.main, "-m", "main moves on")
        _git(self.repo, "update-ref", "refs/heads/main", main2)
        clash_run = self.harness.next_run_id + 1
        name = f"commits/{main2}/{clash_run}-1.json"

        def forge_first(body: bytes) -> None:
            if name.encode() in body:
                self.forge_pointer(dispatch, commit=main2, run_id=clash_run)

        self.proxy.add("before", callback=forge_first)
        try:
            clash = self.benchmark("push", {"ref": "refs/heads/main", "after": main2,
                                            "repository": {"full_name": REPOSITORY, "default_branch": "main"}},
                                   main2, "refs/heads/main")
        finally:
            self.proxy.clear()
        head = _git(self.repo, "commit-tree", f"{main2}^{{tree}}", "-p", main2, "-m", "pr 4")
        _git(self.repo, "update-ref", "refs/heads/pr-4", head)
        self.github.add_pull(REPOSITORY, 4, head, body=BODY, head_ref="pr-4")
        run = self.benchmark("pull_request", self.pr_payload("opened", head, number=4, base=(main2, "main")),
                             head, "refs/pull/4/merge")
        return {"dispatch": dispatch, "clash": clash, "run": run, "main2": main2}

    def snapshot(self, name: str, run: RunResult, poster: RunResult) -> tuple[RunResult, RunResult]:
        comments = self.bot_comments()
        assert len(comments) == 1, [c["body"][:200] for c in comments]
        self.comments[name] = comments[0]["body"]
        return run, poster


@pytest.fixture(scope="module")
def story(tmp_path_factory, gcs_emulator):
    with running_story(tmp_path_factory.mktemp("harness"), gcs_emulator.url) as story:
        yield story


@contextlib.contextmanager
def running_story(tmp: Path, emulator_url: str, **project: Any) -> Iterator[Story]:
    """A :class:`Story` with its GitHub server, CLI stand-in and store proxy, stopped on exit;
    ``project``: :class:`Story`'s ``example`` and ``overlay``."""
    github = GitHubServer().start()
    cli = CliServer(tmp)
    cli.install(tmp / "venv")
    story = Story(tmp, github, emulator_url, tmp / "venv", **project)
    try:
        yield story
    finally:
        story.proxy.stop()
        cli.stop()
        github.stop()


def _row(comment: str, name: str) -> str:
    """The first table row of ``comment`` that names the series ``name`` (shown without its ``.laptop``
    suffix: the runs have one device, which the comment names once)."""
    shown = name.removesuffix(".laptop")
    rows = [line for line in comment.splitlines() if line.startswith("|") and f"`{shown}`" in line]
    assert rows, f"no row for {shown} in:\n{comment}"
    return rows[0]


def _reasons(comment: str, row: str) -> str:
    """The reasons a table row refers to (``[n]`` in its verdict cell), from the comment's legends
    (``- [n] text``, each reason said once)."""
    refs = re.findall(r"\[\d+\]", row.rsplit("|", 2)[-2])
    legend = {line.split(" ", 2)[1]: line.split(" ", 2)[2] for line in comment.splitlines()
              if re.match(r"- \[\d+\] ", line)}
    return "; ".join(legend[r] for r in refs)


# -- the adoption example -------------------------------------------------------------------------


def _documented_permissions() -> dict[str, str]:
    """The permissions docs/adopting.md lists for the calling `benchmark` job."""
    text = (ROOT / "docs" / "adopting.md").read_text()
    section = text.split("### Permissions", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `([\w-]+)` \| `(read|write)` \|", section, re.MULTILINE))


def test_the_adoption_example_runs_through_workflow_call_without_pip_install(story):
    run = story.baseline
    jobs = {job_id: job.result for job_id, job in run.jobs.items()}
    assert jobs == {"benchmark": "success", "benchmark/setup": "success", "benchmark/compile": "success",
                    "benchmark/compile-cuda": "skipped", "benchmark/execute": "success",
                    "benchmark/process": "success", "benchmark/summary": "success"}, run.describe()
    installs = [s for job in run.jobs.values() for s in job.steps if s.name == "Install benchtrail"]
    assert installs and all(s.outputs["pip-install"] == "" for s in installs)
    caller = load_workflow(story.repo / ".github" / "workflows" / "benchmarks.yml")
    assert caller["jobs"]["benchmark"]["permissions"] == _documented_permissions()
    stored = run.job("process").step("Store the run")
    assert stored.outcome == "success" and "/runs/" in stored.outputs["run-url"], stored.log
    # Everything the run wrote is stored: each case's flattened document too (from the execute jobs).
    from google.auth.credentials import AnonymousCredentials

    bucket, prefix = story.harness.vars["BENCHTRAIL_STORE"].removeprefix("gs://").split("/", 1)
    client = storage.Client(project="test", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": story.emulator_url})
    names = [b.name.split(f"/runs/{run.run_id}/1/", 1)[1]
             for b in client.list_blobs(bucket, prefix=f"{prefix}/runs/{run.run_id}/1/")]
    docs = sorted(n.split("_")[1] for n in names if n.startswith("results/docs/bench_"))
    assert [d for d in docs if d.endswith(".laptop")] == sorted([CHAIN, MIX_EAGER, MIX_EXPORT]), names


def test_a_caller_granting_less_than_the_documented_permissions_fails_when_it_loads(story, tmp_path):
    caller = yaml.safe_load((EXAMPLE / ".github" / "workflows" / "benchmarks.yml").read_text())
    del caller["jobs"]["benchmark"]["permissions"]["pull-requests"]
    path = tmp_path / "benchmarks.yml"
    path.write_text(yaml.safe_dump(caller))
    head = story.main
    run = story.harness.run(path, "pull_request", story.pr_payload("opened", head), head, "refs/pull/1/merge")
    assert run.jobs == {} and run.error == ("The nested job 'setup' is requesting 'pull-requests: read', "
                                            "but is only allowed 'pull-requests: none'.")


# -- failures end in the current head's comment ---------------------------------------------------


def test_a_failed_case_is_a_row_of_the_current_heads_comment(story):
    run, poster = story.failures
    assert run.job("execute").result == "success", run.describe()
    assert re.search(r"\b(created|updated)\b", poster.job("post/post").step("Post the comment").log), poster.describe()
    comment = story.comments["failures"]
    assert story.heads[0][:7] in comment
    assert "failed" in _row(comment, MIX_EAGER) and "Mix is broken by this PR" in _reasons(comment, _row(comment, MIX_EAGER))


def test_a_failed_module_compile_fails_only_its_own_run_configs(story):
    run, _ = story.failures
    assert run.job("compile").result == "success", run.describe()
    comment = story.comments["failures"]
    export = _row(comment, MIX_EXPORT)
    assert "failed" in export and "failed to compile" in _reasons(comment, export)
    assert "regressed" in _row(comment, CHAIN)


def test_a_confirmed_regression_fails_the_gate_status_which_no_edit_or_label_clears(story):
    run, poster = story.failures
    assert run.job("process").result == "success" and poster.conclusion == "success", poster.describe()
    assert re.search(r"regressed · confirmed", _row(story.comments["failures"], CHAIN))
    states = story.edits_on_h1
    failed = ("failure", f"1 confirmed regression: {CHAIN} (failure, run {run.run_id}/1)")
    assert states["compared"] == failed
    # A title-only edit measures nothing; a label other than safe-to-benchmark starts no job at all.
    assert states["title"] == failed and states["label"] == failed
    target = story.github.statuses[(REPOSITORY, story.heads[0])][-1]["target_url"]
    assert target.startswith(f"https://github.com/{REPOSITORY}/pull/{PR_NUMBER}#issuecomment-"), target


def test_a_benchmarks_accept_edit_passes_the_gate_without_measuring_again(story):
    run, _ = story.failures
    accept_run, poster = story.edits_on_h1["accept_run"]
    assert accept_run.job("setup").outputs["has-benchmarks"] == "false", accept_run.describe()
    assert accept_run.job("compile").result == "skipped"
    gate = poster.job("post/gate")
    assert gate.step("Find a comparison to gate again").outputs["regate-run"] == f"{run.run_id}/1", gate.log
    assert story.edits_on_h1["accepted"] == (
        "success", f"no confirmed regression; 1 accepted (success, run {run.run_id}/1)")


def test_a_store_outage_is_reported_in_the_comment_which_is_edited(story):
    run, poster = story.outage
    assert run.job("process").result == "success", run.describe()
    assert run.job("process").step("Store the run").outcome == "failure"
    comment = story.comments["outage"]
    assert story.heads[1][:7] in comment and story.heads[0][:7] not in comment
    assert "could not be stored" in comment and "store could not be read" in comment, comment
    assert story.gate(story.heads[1]) == ("success", f"no confirmed regression (success, run {run.run_id}/1)")


def test_a_shard_whose_runner_died_is_named_and_its_cases_are_failed_rows(story):
    run, _ = story.outage
    assert run.job("execute").result == "failure", run.describe()
    assert [s.outcome for s in run.job("execute").steps if s.name == "Run benchmarks"] == ["success", "failure"]
    comment = story.comments["outage"]
    assert "Shards that did not report: laptop shard 1." in comment, comment
    assert "Job execute did not report in full (failure)" in comment
    notes = [line.split(" ", 2)[1] for line in comment.splitlines()
             if line.startswith("- [") and "shard 1 of device laptop did not report" in line]
    assert len(notes) == 1, comment  # the reason, said once
    shard_1 = [line for line in comment.splitlines() if line.startswith("| `") and notes[0] in line]
    assert shard_1 and all(re.search(r"\| failed [^|]*\|$", line) for line in shard_1), comment


def test_a_recheck_failure_leaves_regressions_unconfirmed_and_ungated(story):
    run, _ = story.recheck_timeout
    process = run.job("process")
    assert process.result == "success" and process.step("Re-check regressions in paired A/B runs").outcome == "failure"
    comment = story.comments["recheck_timeout"]
    assert story.heads[2][:7] in comment and "re-check did not finish" in comment, comment
    assert "regressed · unconfirmed" in _row(comment, CHAIN)
    assert story.gate(story.heads[2]) == (
        "success", f"no confirmed regression; 1 unconfirmed, not gated (success, run {run.run_id}/1)")


def test_a_pointer_forged_by_a_pr_run_is_ignored_by_the_next_pr_and_by_track(story, tmp_path):
    """Before h3, a pointer for main's commit naming h1's run (its Chain 4x slower) was created in the
    store as h1's credentials allow: h3 still compares with the push run (Chain regressed, above) and
    its comment says which stored run it ignored and why; ``benchtrail track`` ignores it too."""
    run, _ = story.recheck_timeout
    h1 = story.failures[0]
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(story.baseline.run_id), story.main)
    assert baseline["ignored"] == [{"commit": story.main, "run_id": str(h1.run_id), "attempt": 1,
                                    "reason": f"run {h1.run_id}/1: GitHub lists no such run attempt of commit "
                                              f"{story.main[:12]} in {REPOSITORY} (a pointer may only name a run "
                                              "of its own commit)"}]
    assert "⚠ Ignored 1 stored run that is not a trusted baseline: " in story.comments["recheck_timeout"]
    env = {**os.environ, "STORAGE_EMULATOR_HOST": story.emulator_url, "BENCHTRAIL_STAGING": str(tmp_path / "staging"),
           "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_API_URL": story.github.url,
           "GITHUB_TOKEN": "ghs_test", "BENCHTRAIL_TRUSTED_WORKFLOW": ".github/workflows/benchmarks.yml"}
    done = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", "track", "--store",
                           story.harness.vars["BENCHTRAIL_STORE"], "--repo", str(story.repo), "--ref", "main"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (f"run not used: {story.main[:7]}: not a trusted run: run {h1.run_id}/1: GitHub lists no such run "
            "attempt of commit") in done.stderr


def test_a_bad_trailer_edits_the_comment_to_name_the_bad_preset(story):
    run, poster = story.bad_trailer
    assert run.job("setup").result == "failure" and run.job("compile").result == "skipped", run.describe()
    comment = story.comments["bad_trailer"]
    assert "nonsense" in comment and "smoke" in comment, comment
    assert poster.conclusion == "success", poster.describe()


def test_a_title_only_edit_selects_nothing(story):
    run, poster = story.title_edit
    setup = run.job("setup")
    assert setup.result == "success" and setup.outputs["has-benchmarks"] == "false", run.describe()
    assert {run.job(j).result for j in ("compile", "execute", "process")} == {"skipped"}
    assert not (run.artifacts / "comment").exists()
    assert story.comments["title_edit"] == story.comments["bad_trailer"]
    # Neither the bad trailer nor the title edit compared: h3 keeps its comparison's status.
    h3_run, _ = story.recheck_timeout
    assert story.gate(story.heads[2])[1].endswith(f"(success, run {h3_run.run_id}/1)")


def test_a_fork_pr_without_the_label_waits_for_a_maintainer(story):
    story.baseline
    head = _git(story.repo, "commit-tree", f"{story.main}^{{tree}}", "-p", story.main, "-m", "from a fork")
    _git(story.repo, "update-ref", "refs/heads/fork-pr", head)
    story.github.add_pull(REPOSITORY, 2, head, title="Fork PR", body=BODY, head_repo="someone/my-project",
                          head_ref="faster")
    run, poster = story.edit(head, action="opened", number=2, head_repo="someone/my-project")
    setup = run.job("setup")
    assert setup.outputs["has-benchmarks"] == "false" and run.job("compile").result == "skipped", run.describe()
    assert "waiting for a maintainer to add the `safe-to-benchmark` label" in setup.summary
    assert story.gate(head) == ("pending", "waiting for a maintainer to add the safe-to-benchmark label (a fork's PR)")


def test_a_late_poster_for_an_older_head_leaves_the_current_heads_comment(story):
    story.title_edit
    current = story.comments["title_edit"]
    old_run, _ = story.failures
    late = story.post(old_run)
    assert "skipped-head-changed" in late.job("post/post").step("Post the comment").log, late.describe()
    (comment,) = story.bot_comments()
    assert comment["body"] == current

    # GitHub keeps one waiting run per concurrency group and cancels it when another queues. The
    # posters of two heads are in different groups, so a late poster cannot displace the current one.
    new_run, _ = story.recheck_timeout
    groups = {name: story.post(run).job("post/post").concurrency for name, run in (("old", old_run), ("new", new_run))}
    assert groups["old"] != groups["new"]
    assert pending_survivors([("new", groups["new"]), ("old", groups["old"])], running={"busy"}) == ["new", "old"]


# -- keyless store credentials ----------------------------------------------------------------------


def test_only_the_process_job_gets_an_oidc_token_and_it_authenticates_by_federation(story):
    run = story.baseline
    # GitHub's runner injects the OIDC request variables only where `id-token: write` is granted.
    with_token = sorted(job_id for job_id, job in run.jobs.items() if "ACTIONS_ID_TOKEN_REQUEST_URL" in job.runner_env)
    assert with_token == ["benchmark/process"], run.describe()
    (auth,) = run.auth
    assert (auth["job"], auth["method"], auth["provider"], auth["service_account"]) == (
        "benchmark/process", "workload_identity_federation", WIF_PROVIDER, POSTSUBMIT_SA)  # a push to main
    assert auth["oidc_request_url"] == run.job("process").runner_env["ACTIONS_ID_TOKEN_REQUEST_URL"]
    process = run.job("process")
    assert process.step("Authenticate to the store (Workload Identity Federation)").outcome == "success"
    assert process.step("Authenticate to the store (service-account key)").outcome == "skipped"
    assert process.step("Store the run").outcome == "success", process.log
    # GitHub's record of the run that stored the baseline: what trusted-baseline lookups check.
    record = story.github.workflow_runs[(REPOSITORY, run.run_id, run.attempt)]
    assert {k: record[k] for k in ("event", "head_branch", "head_sha", "path", "status", "conclusion")} == {
        "event": "push", "head_branch": "main", "head_sha": story.main, "path": ".github/workflows/benchmarks.yml",
        "status": "completed", "conclusion": "success"}



def test_a_pr_run_authenticates_as_presubmit_and_checks_the_baselines_run_record(story):
    baseline, (run, _) = story.baseline, story.failures  # the shared chapters: no new run
    (auth,) = run.auth
    assert (auth["job"], auth["method"], auth["service_account"]) == (
        "benchmark/process", "workload_identity_federation", PRESUBMIT_SA)
    # compare took the stored baseline only after reading GitHub's record of the run that wrote it: the
    # runs GitHub lists for main's commit (the latest attempt of each; no further request was needed).
    listed = [c for c in story.github.calls("GET", f"/repos/{REPOSITORY}/actions/runs")
              if c.query.get("head_sha") == [story.main]]
    assert listed and {c.status for c in listed} == {200}, story.github.calls("GET")
    compare = run.job("process").step("Compare with the stored baseline")
    assert f"run {baseline.run_id}/{baseline.attempt}" in compare.log, compare.log


# -- after the late poster: h4, the last head ------------------------------------------------------


def test_adding_a_trailer_makes_the_gate_pending_until_its_runs_comparison(story):
    chapter = story.fixed
    bare_run, _ = chapter["bare"]
    assert bare_run.job("setup").outputs["has-benchmarks"] == "false"
    assert chapter["bare_gate"] == ("success", "no benchmarks selected")  # h4 never selected benchmarks
    run, _ = chapter["run"]
    assert chapter["requested_gate"] == ("pending", f"run {run.run_id}/1 running; no result yet")
    assert chapter["gate"] == ("success", f"no confirmed regression (success, run {run.run_id}/1)")
    assert "similar" in _row(story.comments["fixed"], CHAIN)


def test_a_process_job_that_fails_fails_the_gate_with_the_reason(story):
    rerun, poster = story.process_dies
    assert rerun.job("process").result == "failure" and poster.conclusion == "success", poster.describe()
    assert story.gate(story.heads[3]) == (
        "failure", f"no comparison: the benchmark run ended 'failure' before comparing (failure, run "
                   f"{rerun.run_id}/2)")


def test_a_push_to_a_release_branch_stores_the_baseline_of_prs_into_it(story):
    push, run = story.release
    assert push.job("setup").outputs["postsubmit"] == "true" and push.conclusion == "success", push.describe()
    (auth,) = push.auth
    assert auth["service_account"] == POSTSUBMIT_SA
    assert push.job("process").step("Store the run").outcome == "success"
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(push.run_id), push.sha), baseline
    assert str(push.run_id) not in {i["run_id"] for i in baseline["ignored"]}
    index = (run.artifacts / "benchmark-report" / "dashboard" / "index.html").read_text()
    assert f"<td>{push.run_id}/1</td>" in index and f"run {push.run_id}/1" not in index  # the dashboard trusts it
    assert run.job("setup").outputs.get("postsubmit", "") == "" and run.auth[0]["service_account"] == PRESUBMIT_SA
    # The push stores under the store's root, where baselines are read; the PR under presubmit/.
    prefix = story.harness.vars["BENCHTRAIL_STORE"]
    urls = [r.job("process").step("Store the run").outputs["run-url"] for r in (push, run)]
    assert urls == [f"{prefix}/runs/{push.run_id}/1/", f"{prefix}/presubmit/runs/{run.run_id}/1/"], urls


def test_pointers_forged_in_a_manual_run_or_during_a_push_runs_store_step_are_ignored(story, tmp_path):
    chapter = story.forgeries
    dispatch, clash, run, main2 = chapter["dispatch"], chapter["clash"], chapter["run"], chapter["main2"]
    assert dispatch.job("setup").outputs["has-benchmarks"] == "false" and dispatch.conclusion == "success"
    stored = clash.job("process").step("Store the run")
    assert stored.outcome == "failure" and clash.conclusion == "failure", clash.describe()
    assert "never overwritten" in stored.log, stored.log  # the push run reports the clash
    comparison = json.loads((run.artifacts / "benchmark-report" / "comparison.json").read_text())
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["commit"]) == (str(story.baseline.run_id), story.main), baseline
    reasons = {i["run_id"]: i["reason"] for i in baseline["ignored"]}
    assert reasons[str(dispatch.run_id)] == (f"run {dispatch.run_id}/1: its job 'benchmark / process (compare, "
                                             "re-check, comment)' ended skipped, not success: it stored no run")
    assert reasons[str(clash.run_id)] == f"run {clash.run_id}/1 ended with conclusion failure, not success"
    index = (run.artifacts / "benchmark-report" / "dashboard" / "index.html").read_text()
    not_used = index.split("<h2>Runs not used</h2>", 1)[1]
    assert f"run {dispatch.run_id}/1: its job" in not_used and f"run {clash.run_id}/1 ended with" in not_used
    assert f"<td>{story.baseline.run_id}/1</td>" in index and f"<td>{dispatch.run_id}/1</td>" not in index
    env = {**os.environ, "STORAGE_EMULATOR_HOST": story.emulator_url, "BENCHTRAIL_STAGING": str(tmp_path / "staging"),
           "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_API_URL": story.github.url,
           "GITHUB_TOKEN": "ghs_test", "BENCHTRAIL_TRUSTED_WORKFLOW": ".github/workflows/benchmarks.yml"}
    for command in (["history", "--output", str(tmp_path / "history.json")], ["track"]):
        done = subprocess.run([sys.executable, "-m", "benchtrail.cli.app", *command, "--store",
                               story.harness.vars["BENCHTRAIL_STORE"], "--repo", str(story.repo), "--ref", main2],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f"not a trusted run: run {dispatch.run_id}/1: its job" in done.stderr, (command, done.stderr)
        assert f"not a trusted run: run {clash.run_id}/1 ended with conclusion failure" in done.stderr, command
