#!/usr/bin/env bash
# Runs one benchtrail command in a workflow step: `keep_going.sh .venv/bin/benchtrail run ...`.
#
# Exit 2 means "some benchmarks or module compilations failed": their results (status and reason)
# are written and the comment reports them, so the step succeeds with a warning and the job goes on
# to upload them. Every other exit code passes through (1: bad input, 3: a gated regression).
# Every workflow step whose command can exit 2 runs it through this script (docs/workflows.md).
set -uo pipefail
"$@"
status=$?
if [ "$status" -eq 2 ]; then
  echo "::warning title=benchtrail ${2:-}::some benchmarks or module compilations failed (exit 2); their rows are in the comment"
  exit 0
fi
exit "$status"
