"""The story that the workflow-harness tests (``tests/test_workflow_harness*.py``) share, each asserting
its own chapter; the ``story`` fixture (tests/conftest.py, one per test process) runs each chapter once,
on demand, in order. the docs' adoption example
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
each head. A fork's PR #2 waits for a maintainer's label; a push to ``release-1.2`` stores the
baseline of PR #3 into it; PR #4 follows two forged pointers (a manual run's name, a push run's own
name during its store step).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.cloud import storage

from tests.helpers.cli_server import CliServer
from tests.helpers.gcs_fixtures import FaultProxy
from tests.helpers.git import git
from tests.helpers.github_server import GitHubServer
from tests.helpers.workflow_harness import ROOT, Harness, RunResult

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


class Story:
    """The runs of the module docstring, each made once, on demand, in order."""

    def __init__(self, tmp: Path, github: GitHubServer, emulator_url: str, venv: Path,
                 example: Path = EXAMPLE,
                 overlay: Path | None = OVERLAY) -> None:
        self.repo = tmp / "my-project"
        shutil.copytree(example, self.repo)
        if overlay is not None:
            shutil.copytree(overlay, self.repo, dirs_exist_ok=True)
        git(self.repo, "init", "-q", "-b", "main")
        git(self.repo, "config", "user.email", "dev@example.com")
        git(self.repo, "config", "user.name", "dev")
        self.commit("adopt benchtrail")
        self.main = git(self.repo, "rev-parse", "HEAD")
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
                  "BENCHTRAIL_WIF_PROVIDER": WIF_PROVIDER,
                  "BENCHTRAIL_PRESUBMIT_SERVICE_ACCOUNT": PRESUBMIT_SA,
                  "BENCHTRAIL_POSTSUBMIT_SERVICE_ACCOUNT": POSTSUBMIT_SA}, venv=venv, github_server=github)
        self.heads: list[str] = []
        self.comments: dict[str, str] = {}

    def commit(self, message: str) -> str:
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", message)
        return git(self.repo, "rev-parse", "HEAD")

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
                                 "base": {"sha": (base or (self.main, "main"))[0],
                                          "ref": (base or (self.main, "main"))[1],
                                          "repo": repo}},
                "repository": {**repo, "default_branch": "main"}}

    def benchmark(self, event: str, payload: dict, sha: str, ref: str, **kwargs) -> RunResult:
        return self.harness.run("benchmarks.yml", event, payload, sha, ref, **kwargs)

    def post(self, run: RunResult, action: str = "completed") -> RunResult:
        """The caller's poster workflow for ``run`` requested or completed (the default branch's file)."""
        return self.harness.run("post_benchmark_comment.yml", "workflow_run",
                                self.harness.workflow_run_payload(run, "benchmarks", action=action),
                                self.main,
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
            git(self.repo, "checkout", "-q", "-b", "faster")
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
        self.edit(head, action="edited", title="Faster layers (v2)",
                  changes={"title": {"from": "Faster layers"}})
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
        self.proxy.add("status", status=503, path_prefix="/",
                       methods=("GET", "POST", "PUT", "PATCH", "DELETE"))
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
        from google.auth.credentials import AnonymousCredentials

        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.emulator_url})
        bucket, prefix = self.harness.vars["BENCHTRAIL_STORE"].removeprefix("gs://").split("/", 1)
        (genuine,) = [json.loads(b.download_as_bytes())
                      for b in client.list_blobs(bucket,
                                                 prefix=f"{prefix}/commits/{self.main}/"
                                                 f"{self.baseline.run_id}-")]
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
        cut = git(self.repo, "commit-tree", f"{self.main}^{{tree}}", "-p", self.main, "-m", "release 1.2")
        git(self.repo, "update-ref", "refs/heads/release-1.2", cut)
        push = self.benchmark("push", {"ref": "refs/heads/release-1.2", "after": cut,
                                       "repository": {"full_name": REPOSITORY, "default_branch": "main"}},
                              cut, "refs/heads/release-1.2")
        head = git(self.repo, "commit-tree", f"{cut}^{{tree}}", "-p", cut, "-m", "a fix for 1.2")
        git(self.repo, "update-ref", "refs/heads/fix-1.2", head)
        self.github.add_pull(REPOSITORY, 3, head, body=BODY, head_ref="fix-1.2")
        run = self.benchmark("pull_request",
                             self.pr_payload("opened", head, number=3, base=(cut, "release-1.2")),
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
        dispatch = self.benchmark("workflow_dispatch", {"ref": "refs/heads/main",
                                                        "inputs": {"benchmark-presets": ""},
                                                        "repository": {"full_name": REPOSITORY,
                                                                       "default_branch": "main"}},
                                  self.main, "refs/heads/main", inputs={"benchmark-presets": ""})
        self.forge_pointer(dispatch)
        main2 = git(self.repo, "commit-tree", f"{self.main}^{{tree}}", "-p", self.main, "-m", "main moves on")
        git(self.repo, "update-ref", "refs/heads/main", main2)
        clash_run = self.harness.next_run_id + 1
        name = f"commits/{main2}/{clash_run}-1.json"

        def forge_first(body: bytes) -> None:
            if name.encode() in body:
                self.forge_pointer(dispatch, commit=main2, run_id=clash_run)

        self.proxy.add("before", callback=forge_first)
        try:
            clash = self.benchmark("push", {"ref": "refs/heads/main", "after": main2,
                                            "repository": {"full_name": REPOSITORY,
                                                           "default_branch": "main"}},
                                   main2, "refs/heads/main")
        finally:
            self.proxy.clear()
        head = git(self.repo, "commit-tree", f"{main2}^{{tree}}", "-p", main2, "-m", "pr 4")
        git(self.repo, "update-ref", "refs/heads/pr-4", head)
        self.github.add_pull(REPOSITORY, 4, head, body=BODY, head_ref="pr-4")
        run = self.benchmark("pull_request", self.pr_payload("opened", head, number=4, base=(main2, "main")),
                             head, "refs/pull/4/merge")
        return {"dispatch": dispatch, "clash": clash, "run": run, "main2": main2}

    def snapshot(self, name: str, run: RunResult, poster: RunResult) -> tuple[RunResult, RunResult]:
        comments = self.bot_comments()
        assert len(comments) == 1, [c["body"][:200] for c in comments]
        self.comments[name] = comments[0]["body"]
        return run, poster



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


def row_of(comment: str, name: str) -> str:
    """The first table row of ``comment`` that names the series ``name`` (shown without its ``.laptop``
    suffix: the runs have one device, which the comment names once)."""
    shown = name.removesuffix(".laptop")
    rows = [line for line in comment.splitlines() if line.startswith("|") and f"`{shown}`" in line]
    assert rows, f"no row for {shown} in:\n{comment}"
    return rows[0]


def reasons_of(comment: str, row: str) -> str:
    """The reasons a table row refers to (``[n]`` in its verdict cell), from the comment's legends
    (``- [n] text``, each reason said once)."""
    refs = re.findall(r"\[\d+\]", row.rsplit("|", 2)[-2])
    legend = {line.split(" ", 2)[1]: line.split(" ", 2)[2] for line in comment.splitlines()
              if re.match(r"- \[\d+\] ", line)}
    return "; ".join(legend[r] for r in refs)
