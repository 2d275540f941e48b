#!/usr/bin/env bash
# The workflows' "Install benchtrail" step (benchmark.yml, post_benchmark_comment.yml): makes .venv in the
# job's working directory and installs the project's environment, then benchtrail with its `ci` extra (the
# store, GitHub, the dashboard and change points: pyproject.toml), into it.
#
#   install.sh project|cpu|none
#
#   project  the project's own torch build: the jobs on GPU runners (compile-cuda, execute on a CUDA
#            device). Without one in the project's environment, benchtrail's range
#            (pyproject.toml, the `torch` extra) picks the newest torch from the package index.
#   cpu      the CPU build of that same torch version (download.pytorch.org/whl/cpu, for torch alone,
#            without its dependencies, which come from the package index as usual): the jobs on CPU
#            runners, where PyPI's default Linux build (CUDA) only adds gigabytes: setup (it imports
#            the suite but runs no model), compile, process, and execute on a CPU device. A version the
#            CPU index does not have (a nightly, a local build) warns and installs the project's own build.
#   none     no torch at all: the poster (`benchtrail post` imports none).
#
# Environment: BENCHTRAIL_CHECKOUT ("." in benchtrail's own repository), PIP_INSTALL (the input
# pip-install: pip arguments for the project's own packages, run in the working directory).
#
# Called from another repository, the project's packages are installed first and without benchtrail's
# constraints, then benchtrail with one constraint, `torch==<the version now installed>`, so pip keeps
# the project's torch (or fails, naming it, when it lies outside benchtrail's range). In benchtrail's
# own repository every install uses constraints.txt (torch 2.13.0), as the README and .ci/run do. The
# poster, which installs no project package, uses constraints.txt everywhere (it pins no torch there).
set -euo pipefail
mode=${1:-}
case $mode in
  project|cpu|none) ;;
  *) echo "::error title=benchtrail install::install.sh takes project, cpu or none, not '$mode'"; exit 2 ;;
esac
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cpu_index=https://download.pytorch.org/whl/cpu
read -ra project <<< "${PIP_INSTALL:-}"
benchtrail=(-e "$src[torch,ci]")
[ "$mode" = none ] && benchtrail=(-e "$src[ci]")
pins=()
if [ "${BENCHTRAIL_CHECKOUT:-.}" = . ] || [ "$mode" = none ]; then
  pins=(-c "$src/constraints.txt")
fi

python -m venv .venv
pip=(.venv/bin/pip install)
installed_torch() {  # the installed torch's version (metadata only: torch is not imported), else nothing
  .venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true
}

if [ "$mode" = cpu ]; then
  # The torch version that the project's packages and benchtrail resolve to (pip reads the wheels'
  # metadata, downloads none), installed first as the CPU build; the installs below keep it.
  report=$(mktemp)
  "${pip[@]}" --quiet --dry-run --report "$report" "${pins[@]}" "${project[@]}" "${benchtrail[@]}"
  version=$(jq -r '[.install[].metadata | select(.name | ascii_downcase == "torch") | .version][0] // empty' \
    "$report")
  rm -f "$report"
  if [ -n "$version" ] && ! "${pip[@]}" --no-deps --index-url "$cpu_index" "${pins[@]}" "torch==${version%%+*}"; then
    echo "::warning title=benchtrail install::no CPU build of torch ${version%%+*} at $cpu_index; the project's own torch build is installed instead"
  fi
fi

if [ ${#project[@]} -gt 0 ]; then
  "${pip[@]}" "${pins[@]}" "${project[@]}"
fi

keep=()
torch=$(installed_torch)
if [ -n "$torch" ] && [ ${#pins[@]} -eq 0 ]; then
  keep_file=$(mktemp)
  echo "torch==$torch" > "$keep_file"
  keep=(-c "$keep_file")
fi
if ! "${pip[@]}" "${pins[@]}" "${keep[@]}" "${benchtrail[@]}"; then
  if [ ${#keep[@]} -gt 0 ]; then
    echo "::error title=benchtrail install::benchtrail does not install beside the project's torch $torch (benchtrail's range: pyproject.toml, the torch extra; docs/adopting.md, \"Supported torch versions\"); see pip's message above"
  fi
  exit 1
fi
