"""The benchmark workflow's concurrency groups: one per PR and job, never cancelling pushes."""

from tests.helpers.workflow_checks import read_workflow


def test_benchmark_jobs_group_per_pr_and_never_cancel_pushes():
    jobs = read_workflow("benchmark.yml")["jobs"]
    # a workflow-level group would let no-op edits cancel
    assert "concurrency" not in read_workflow("benchmark.yml")
    for job_id in ("compile", "compile-cuda", "execute", "process"):
        concurrency = jobs[job_id]["concurrency"]
        group = concurrency["group"]
        assert "format('pr-{0}', github.event.pull_request.number)" in group, job_id
        assert "format('run-{0}', github.run_id)" in group, job_id  # pushes: a group of their own
        assert "${{ needs.setup.outputs.has-benchmarks }}" in group, job_id
        assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", job_id
        assert "needs.setup.outputs.has-benchmarks == 'true'" in jobs[job_id]["if"], job_id
    assert "${{ matrix.device_name }}-${{ matrix.shard.index }}" in jobs["execute"]["concurrency"]["group"]
    # Each job has a group of its own: compile-cuda must not cancel compile, nor the reverse.
    suffixes = {job_id: jobs[job_id]["concurrency"]["group"].rsplit("}}-", 1)[1]
                for job_id in ("compile", "compile-cuda", "process")}
    assert suffixes == {"compile": "compile", "compile-cuda": "compile-cuda", "process": "process"}

