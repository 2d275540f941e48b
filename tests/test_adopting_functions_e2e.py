"""Adopting benchtrail with benchmarks as functions, as a new user does: a git repository holding a
model module and a benchmarks module (docs/examples/adopting/my_benchmarks), ``benchtrail init``,
then ``benchtrail pipeline`` twice; the second run's comment compares it with the first.

Only the test's copy is changed: one worker process of 7 samples per case (enough for 4 series to reach
1%: benchtrail.stats.power), to keep it fast.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.git import git

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "adopting"
FAST = "processes=1, min_samples=7, warmup_time_ms=10, "


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"{' '.join(args)} exited "
                                  f"{proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def test_init_then_two_pipelines_give_a_comment_comparing_the_runs(tmp_path):
    repo = tmp_path / "my-project"
    shutil.copytree(EXAMPLE / "my_benchmarks", repo / "my_benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    bench = repo / "my_benchmarks" / "bench.py"
    bench.write_text(bench.read_text().replace("params=", FAST + "params="))
    assert bench.read_text().count(FAST) == 2 and len(bench.read_text().splitlines()) <= 22
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BENCHTRAIL_"))}
    git(repo, "init", "-q", identity=True)
    cli = [sys.executable, "-c", "import sys; from benchtrail.cli import main; sys.exit(main())"]

    init = _run([*cli, "init", "--benchmarks", "my_benchmarks.bench"], repo, env).stdout
    assert "wrote pyproject.toml" in init and "kept  my_benchmarks/bench.py (the benchmarks module exists)" in init
    assert (repo / ".github/workflows/benchmarks.yml").is_file()
    assert (repo / ".github/workflows/post_benchmark_comment.yml").is_file()
    assert 'benchmarks = ["my_benchmarks.bench"]' in (repo / "pyproject.toml").read_text()
    git(repo, "add", "-A", identity=True)
    git(repo, "commit", "-qm", "adopt benchtrail", identity=True)

    comments = []
    for _ in range(2):
        out = _run([*cli, "pipeline"], repo, env).stdout
        comments.append(repo / out.strip().splitlines()[-1])
    first, second = (json.loads((c.parents[1] / "comparison.json").read_text()) for c in comments)
    names = {r["name"] for r in second["rows"] if r["kind"] == "execution"}
    assert names == {f"my_benchmarks.bench.chain[batch={b}].eager.inference.cpu" for b in (1, 32)} | {
        f"my_benchmarks.bench.softplus[n=256].eager.{t}.cpu" for t in ("inference", "backward")}
    assert {r["verdict"] for r in first["rows"]} == {"new"}  # nothing to compare with yet
    execution = [r for r in second["rows"] if r["kind"] == "execution"]
    assert all(r["verdict"] not in ("new", "failed") and r["base_median"] > 0 for r in execution), execution
    head = git(repo, "rev-parse", "HEAD", identity=True)
    # the first run, of the same commit
    assert second["base"] is not None and head in json.dumps(second["base"])
    text = comments[1].read_text()
    assert re.search(r"softplus\[n=256\]", text) and head[:7] in text
