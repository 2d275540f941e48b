"""The function-API adoption example (docs/examples/adopting: benchmarks as functions, the caller
workflows that ``benchtrail init`` writes) through benchtrail's reusable workflows, as
tests/test_workflow_harness.py runs the class-API example (whose story also covers baselines and
failures): a PR run of the project and the poster's one comment on the PR."""

from __future__ import annotations

import shutil

import pytest

from benchtrail.cli import main
from tests.helpers.harness_story import running_story
from tests.helpers.workflow_harness import ROOT

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "docs" / "examples" / "adopting"
FAST = "processes=1, min_samples=7, warmup_time_ms=10, "


@pytest.fixture(scope="module")
def story(tmp_path_factory, gcs_emulator):
    tmp = tmp_path_factory.mktemp("harness-functions")
    project = tmp / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".benchtrail"))
    bench = project / "my_benchmarks" / "bench.py"
    bench.write_text(bench.read_text().replace("params=", FAST + "params="))
    assert main(["init", "--directory", str(project), "--benchmarks", "my_benchmarks.bench"]) == 0
    with running_story(tmp, gcs_emulator.url, example=project, overlay=None) as story:
        yield story


def test_the_function_example_runs_through_workflow_call_and_gets_its_comment(story):
    # no baseline run: its rows are new (kept short)
    head = story.push_head("a PR of the function-API project")
    body = "Adopt benchtrail.\n\nbenchmarks: default\n"
    run = story.benchmark("pull_request", story.pr_payload("synchronize", head, body=body), head,
                          "refs/pull/1/merge")
    poster = story.post(run)
    assert run.conclusion == "success", run.describe()
    assert poster.conclusion == "success", poster.describe()
    (comment,) = story.bot_comments()
    body = comment["body"]
    assert head[:7] in body
    for name in ("my_benchmarks.bench.chain[batch=32].eager.inference",  # one device: no .cpu suffix
                 "my_benchmarks.bench.softplus[n=256].eager.backward"):
        assert name in body, body
