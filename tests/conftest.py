"""Shared pytest fixtures."""

from __future__ import annotations

import os

import pytest

# The suite runs the same in GitHub Actions (ci.yml) as anywhere else: benchtrail reads these to tell a
# CI run (run ids, `--trust auto`, the trusted workflow), so tests that want them set them themselves.
for _name in ("GITHUB_ACTIONS", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_WORKFLOW_REF",
              "GITHUB_REPOSITORY",
              "GITHUB_TOKEN", "GITHUB_API_URL", "BENCHTRAIL_TRUSTED_WORKFLOW", "BENCHTRAIL_STORE"):
    os.environ.pop(_name, None)

# No noise rerun (docs/statistics.md, "Noise guard"): the tests check what runs record, not how precisely they
# measure, and on a loaded 2-core test machine most cases pass 10% IQR/median, which doubled their run time
# (issue 19: the suite's time). test_run_stage's rerun tests set it back to 1.
os.environ["BENCHTRAIL_NOISE_RERUN"] = "0"
# AOTInductor's generated wrapper built at -O0, not torch's default -O1: its g++ step is the dearest of an
# AOTInductor compile (linear: 11 s -> 5-6 s here), and the tests read counts, files and correctness, never
# the compiled module's speed. Set for the whole session: a worker server is shared only by jobs of one
# environment, so a test-local setting would start a server of its own.
os.environ["AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL"] = "O0"

# benchtrail's stderr console reads FORCE_COLOR, NO_COLOR and the terminal once, when it is made at import:
# made here, in the session's environment, never under a test's monkeypatched FORCE_COLOR (which left every
# later message coloured and wrapped: test_old_files after test_terminal_table in one process).
import benchtrail.progress  # noqa: E402, F401
from tests.helpers.git import git  # noqa: E402
from tests.helpers.github_server import GitHubServer  # noqa: E402  (after the environment is cleaned)

# The GCS emulator's fixtures (gcs_emulator, gcs_env, gcs_bucket, fault_proxy) for every test module, by name:
# importing them into each module left names that pyflakes and ruff report as unused (F401, F811), and
# started one session emulator per importing module.
pytest_plugins = ["tests.helpers.gcs_fixtures"]


@pytest.fixture
def repo(tmp_path):
    """A git repository at ``tmp_path/repo`` on branch ``main`` with three empty commits; its path.

    Made with tests/helpers/git.py's ``git`` (the identity of the environment the tests run in), for the
    test modules that go on with its ``git`` and ``commit`` helpers.
    """
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    for i in range(3):
        git(r, "commit", "-q", "--allow-empty", "-m", f"main {i}")
    return r


@pytest.fixture(params=["file", "gs"])
def store(request, tmp_path):
    """Each store backend in turn: a folder, and GCS (the emulator behind ``FaultProxy``, so that
    ``ifGenerationMatch=0`` is enforced); for the store contract's tests."""
    from benchtrail.store import open_store
    from tests.helpers.gcs_fixtures import FAST_RETRY

    if request.param == "file":
        return open_store(str(tmp_path / "store"))
    bucket = request.getfixturevalue("gcs_bucket")
    request.getfixturevalue("fault_proxy")
    return open_store(f"gs://{bucket}/ci", retry=FAST_RETRY)


@pytest.fixture
def gh(tmp_path, monkeypatch):
    """A GitHub Actions-like environment: event file, output and summary files."""
    import json

    from benchtrail.cli import main

    for var in ("PR_TITLE", "PR_BODY", "PR_LABELS", "BENCHMARK_PRESETS_INPUT", "GITHUB_OUTPUT",
                "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    output, summary = tmp_path / "output", tmp_path / "summary"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    def run(event_name, payload, *flags):
        path = tmp_path / "event.json"
        path.write_text(json.dumps(payload))
        monkeypatch.setenv("GITHUB_EVENT_NAME", event_name)
        monkeypatch.setenv("GITHUB_EVENT_PATH", str(path))
        code = main(["configure", *flags])
        read = lambda p: p.read_text() if p.exists() else ""  # noqa: E731
        return code, read(output), read(summary)

    return run


@pytest.fixture
def github_server():
    """A local server speaking GitHub's REST shapes (see tests/helpers/github_server.py), stopped
    afterwards."""
    server = GitHubServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def history_store(tmp_path_factory):
    """A local store holding four real ``smoke`` pipeline runs over a small git history.

    The history is ``c1 - c2 - c3`` on main (first parents), with a side-branch commit ``s1``
    (branched from c1) merged by c3. Runs were made at c1, c2, s1 and c3, in that order, so
    first-parent history from c3 is c1, c2, c3 and leaves s1 out.

    Returns ``{"repo": Path, "store": Path, "commits": {name: sha}, "run_dirs": {name: Path}}``.

    Building it takes about a minute. Under pytest-xdist the test processes share one build: the first
    to need it builds it under a file lock and writes its description (this dict, paths as strings) next
    to the processes' temporary folders, and the others wait for the lock and read it (pytest-xdist's
    documented pattern for a session fixture made once). For development only,
    ``BENCHTRAIL_TEST_HISTORY_STORE`` may name such a JSON file from an earlier build, to reuse it.
    """
    import json
    import os
    from pathlib import Path

    from filelock import FileLock

    def load(path):
        saved = json.loads(Path(path).read_text())
        return {"repo": Path(saved["repo"]), "store": Path(saved["store"]), "commits": saved["commits"],
                "run_dirs": {k: Path(v) for k, v in saved["run_dirs"].items()}}

    if os.environ.get("BENCHTRAIL_TEST_HISTORY_STORE"):
        return load(os.environ["BENCHTRAIL_TEST_HISTORY_STORE"])
    # the xdist processes' common folder
    shared = tmp_path_factory.getbasetemp().parent / "history_store.json"
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return _build_history_store(tmp_path_factory)
    with FileLock(str(shared) + ".lock"):
        if shared.is_file():
            return load(shared)
        built = _build_history_store(tmp_path_factory)
        shared.write_text(json.dumps({k: (str(v) if isinstance(v, Path) else
                                          {n: str(p) for n, p in v.items()} if k == "run_dirs" else v)
                                      for k, v in built.items()}))
        return built


def _build_history_store(tmp_path_factory):
    """The runs of :func:`history_store`: the suite's ``smoke`` cases, each in two worker processes (not
    three) after a 100 ms warm-up (not 300 ms), ids unchanged; the tests read what the runs record, not
    how precisely they measure (issue 19: the suite's time)."""
    import dataclasses

    from benchmark_suites.suite import SMOKE, generate
    from benchtrail.pipeline.job import run_pipeline
    from benchtrail.suite.definitions import RunConfig

    def light(rc):
        execution = dataclasses.replace(rc.execution_config, processes=2, warmup_time_ms=100.0)
        return RunConfig.build(rc.module_generation_config, execution, rc.target_device, rc.presets)

    suite = generate()
    suite = dataclasses.replace(suite, run_configs=tuple(light(rc) if SMOKE in rc.presets else rc
                                                         for rc in suite.run_configs))

    root = tmp_path_factory.mktemp("history")
    repo, store = root / "repo", root / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", isolated=True)
    commits, run_dirs = {}, {}

    def commit_and_run(name):
        (repo / f"{name}.txt").write_text(name)
        git(repo, "add", f"{name}.txt", isolated=True)
        git(repo, "commit", "-q", "-m", name, isolated=True)
        commits[name] = git(repo, "rev-parse", "HEAD", isolated=True)
        run_dirs[name] = run_pipeline(suite, (SMOKE,), str(store), repo=repo, recheck=False).run_dir

    commit_and_run("c1")
    commit_and_run("c2")
    git(repo, "checkout", "-q", "-b", "side", commits["c1"], isolated=True)
    commit_and_run("s1")
    git(repo, "checkout", "-q", "main", isolated=True)
    git(repo, "merge", "-q", "--no-ff", "-m", "c3", "side", isolated=True)
    commits["c3"] = git(repo, "rev-parse", "HEAD", isolated=True)
    run_dirs["c3"] = run_pipeline(suite, (SMOKE,), str(store), repo=repo, recheck=False).run_dir
    return {"repo": repo, "store": store, "commits": commits, "run_dirs": run_dirs}


@pytest.fixture(scope="session")
def story(tmp_path_factory, gcs_emulator):
    """The workflow harness's story (tests/helpers/harness_story.py), one per test process, shared by the
    tests/test_workflow_harness*.py modules; its chapters run once, on demand, in order."""
    from tests.helpers.harness_story import running_story

    with running_story(tmp_path_factory.mktemp("harness"), gcs_emulator.url) as story:
        yield story
