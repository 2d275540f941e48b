#!/bin/bash
# Make base.json and head.json, then comparison-v1..v7.json by running the benchtrail of the commit that wrote each version.
# Usage: tests/data/old/make.sh OUTDIR, with the project's venv active (PY=... to pick another python).
# Each version's code runs from a git worktree of its commit (removed again at the end).
set -euo pipefail
OUT=$(realpath "$1"); PY=${PY:-python}; REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
COMMITS=(a6bff7a234e6fe22f60d07199334a9e26e84134c b1f14c205beb51815ea37c7e518d8c20e586cd35
         faed638d46f0b21e25d3d5071c5a93abe2ae1d24 b331c6835b8a22ed373b390a260820c6f291427d
         e8fbaefa1e4a6b661002b7ef2981ebc5806e2809 d2861a60f522535a0da425c44727992c906d1a6e
         4f888d2f05b970d72bd9e6f1ede94438ee9facd0)
T=$(mktemp -d)
cleanup() { for n in 1 2 3 4 5 6 7; do git -C "$REPO" worktree remove --force "$T/v$n" 2>/dev/null || true; done; rm -rf "$T"; }
trap cleanup EXIT
for n in 1 2 3 4 5 6 7; do git -C "$REPO" worktree add -q --detach "$T/v$n" "${COMMITS[n-1]}"; done
old() { local n=$1; shift; (cd "$OUT" && PYTHONPATH="$T/v$n/build_tools" "$PY" "$@"); }
# The inputs: results schema 1, written by d2861a6's write_results (4 series a side, 10 samples each).
old 6 - <<'PY'
from pathlib import Path
from benchtrail.results.io import write_results
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.stats.summary import summarize

def rec(id, start, status="ok"):
    samples = () if status != "ok" else tuple(start + i * 0.1 for i in range(10))
    return BenchmarkRecord(id=id, name=f"{id}.inference-bs1.c2-standard-16", kind="execution", metric="latency",
                           unit="us", device_name="c2-standard-16", module_name=f"{id}.cpu", compile_config="eager",
                           task="inference", status=status, reason=None if status == "ok" else "boom",
                           samples=samples, **summarize(samples), content_hash="h1", presets=("x86_64",), details={})

def side(commit, *records):
    return ResultsFile(commit=commit, dirty=False, run={"run_id": "r1", "attempt": 1, "presets": ["x86_64"]},
                       environment={"torch_version": "2.13.0"}, benchmarks=records)

write_results(Path("base.json"), side("b" * 40, rec("rc-reg", 100), rec("rc-same", 200), rec("rc-gone", 50),
                                      rec("rc-fail", 70)))
write_results(Path("head.json"), side("c" * 40, rec("rc-reg", 150), rec("rc-same", 200), rec("rc-new", 10),
                                      rec("rc-fail", 0, "failed")))
PY
old 1 -m benchtrail.cli compare --base base.json --head head.json --output comparison-v1.json
old 2 -m benchtrail.cli compare --base base.json --head head.json --accept 'rc-reg.*' --output comparison-v2.json
old 3 -c 'from pathlib import Path; from benchtrail.stages import compare_stage; compare_stage([Path("base.json")], [Path("head.json")], Path("comparison-v3.json"), None, {"mode": "paired", "commit": "b" * 40, "reason": "--base-ref main"}, paired=True)'
printf 'schema_version: 1\nquarantine:\n  - match: "rc-reg.*"\n    reason: "flaky, see issue 7"\n' > "$OUT/quarantine.yaml"
old 4 -m benchtrail.cli compare --base base.json --head head.json --quarantine quarantine.yaml --output comparison-v4.json
rm "$OUT/quarantine.yaml"
STORAGE_EMULATOR_HOST=http://127.0.0.1:9 BENCHTRAIL_STORE_DEADLINE_S=1 \
  old 5 -m benchtrail.cli compare --head head.json --store gs://bt-gone/ci --output comparison-v5.json || true
# v6: a git repo whose main holds the baseline commit; the head commit is on a branch; a file:// store.
W=$T/work; mkdir "$W"; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@x
export GIT_AUTHOR_DATE=2026-11-30T00:00:00Z GIT_COMMITTER_DATE=2026-11-30T00:00:00Z
git -C "$W" init -q -b main repo; git -C "$W/repo" commit -q --allow-empty -m base
git -C "$W/repo" checkout -q -b pr; git -C "$W/repo" commit -q --allow-empty -m head
BASE=$(git -C "$W/repo" rev-parse main); HEAD=$(git -C "$W/repo" rev-parse pr)
mkdir -p "$W/base/results" "$W/head/results"
sed "s/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/$BASE/" "$OUT/base.json" > "$W/base/results/c2-standard-16-0.json"
sed "s/cccccccccccccccccccccccccccccccccccccccc/$HEAD/" "$OUT/head.json" > "$W/head/results/c2-standard-16-0.json"
(cd "$W/repo" && PYTHONPATH="$T/v6/build_tools" "$PY" -m benchtrail.cli upload --run-dir "$W/base" \
   --store "file://$W/store" --run-id 111 --attempt 1 --write-pointer)
(cd "$W/repo" && PYTHONPATH="$T/v6/build_tools" "$PY" -m benchtrail.cli compare --head "$W/head" \
   --store "file://$W/store" --output "$OUT/comparison-v6.json")
# v7 (4f888d2, the last to write verdict noisy): a noisy +15% row and a +50% regression, 31 samples a side.
old 7 - <<'PY'
from pathlib import Path
from benchtrail.results.io import write_results
from benchtrail.results.schema import BenchmarkRecord, ResultsFile
from benchtrail.results.summary import summarize

def rec(id, samples):
    samples = tuple(samples)
    return BenchmarkRecord(id=id, name=f"{id}.inference-bs1.c2-standard-16", kind="execution", metric="latency",
                           unit="us", direction="lower-is-better", device_name="c2-standard-16", module_name=f"{id}.cpu",
                           compile_config="eager", task="inference", status="ok", reason=None, samples=samples,
                           **summarize(samples), content_hash="h1", presets=("x86_64",), details={})

def side(commit, *records):
    return ResultsFile(commit=commit, dirty=False, run={"run_id": "r1", "attempt": 1, "presets": ["x86_64"]},
                       environment={"torch_version": "2.13.0"}, benchmarks=records)

wild = [60 + 80 * i / 30 for i in range(31)]  # IQR/median 40%: noisy
steady = [100 + i * 0.1 for i in range(31)]
write_results(Path("base-v7.json"), side("b" * 40, rec("rc-noisy", wild), rec("rc-reg", steady)))
write_results(Path("head-v7.json"), side("c" * 40, rec("rc-noisy", [x * 1.15 for x in wild]),
                                        rec("rc-reg", [x * 1.5 for x in steady])))
PY
old 7 -c 'import sys; from benchtrail.cli import main; sys.exit(main())' compare --base base-v7.json \
  --head head-v7.json --output comparison-v7.json
