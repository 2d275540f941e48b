"""Constants and helpers shared by the workflow tests: loading the workflow files and the example caller's,
zizmor, running a step's script, evaluating an ``if:`` condition and parsing a step's ``benchtrail`` command.

The tests read the YAML with PyYAML, which parses the key ``on`` as the boolean ``True`` (``triggers_of``).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchtrail.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = ("benchmark.yml", "ci.yml", "post_benchmark_comment.yml", "track_regressions.yml")
MATRIX_JQ = "build_tools/github_actions/matrix.jq"
# The adopting repository of docs/adopting.md: its pyproject.toml and its two workflow files.
EXAMPLE = ROOT / "docs" / "examples" / "adopting-classes"
EXAMPLE_WORKFLOWS = EXAMPLE / ".github" / "workflows"
EXAMPLE_FILES = ("benchmarks.yml", "post_benchmark_comment.yml")
# A caller's `uses:` of one of benchtrail's reusable workflows, pinned by a full commit SHA.
CALLER_USES = re.compile(
    r"[\w.-]+/benchtrail/\.github/workflows/(benchmark|post_benchmark_comment)\.yml@([0-9a-f]{40})")
AUTH_ACTION = "google-github-actions/auth@"
WIF_STEP = "Authenticate to the store (Workload Identity Federation)"
KEY_STEP = "Authenticate to the store (service-account key)"
# An Actions `if:` condition, token by token (the subset these workflows use).
_EXPR_TOKEN = re.compile(r"(?P<str>'(?:[^']|'')*')|(?P<name>[A-Za-z_][\w-]*(?:\.(?:[\w-]+|\*))*)"
                         r"|(?P<op>&&|\|\||==|!=|!|[(),])|(?P<space>\s+)")


def read_workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers_of(workflow: dict[str, Any]) -> dict[str, Any]:
    return workflow[True]  # PyYAML (YAML 1.1) reads the key `on` as True


def steps_of(workflow: dict[str, Any]):
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def _tool(name: str) -> str | None:
    """The executable ``name`` installed beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def zizmor_findings(path: Path) -> tuple[list[dict[str, Any]], str]:
    """zizmor's findings on ``path`` (JSON) and its log."""
    exe = _tool("zizmor")
    if exe is None:
        pytest.skip("the zizmor executable is not installed (pip install zizmor, the test extras)")
    proc = subprocess.run([exe, "--offline", "--format", "json", str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    # zizmor exits 0 without findings and 10-14 with findings (by the highest severity).
    assert proc.returncode in (0, 10, 11, 12, 13, 14), f"zizmor failed ({proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout), proc.stderr


def describe_findings(findings: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(audit, severity, "file:line") of each finding, for assertion messages."""
    described = []
    for f in findings:
        location = f["locations"][0]
        key = next(iter(location["symbolic"]["key"].values()))
        path = key.get("verbatim_path") or key.get("given_path") if isinstance(key, dict) else str(key)
        row = location["concrete"]["location"]["start_point"]["row"] + 1
        described.append((f["ident"], f["determinations"]["severity"], f"{Path(str(path)).name}:{row}"))
    return described


def read_example_workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLE_WORKFLOWS / name).read_text())


def caller_jobs() -> list[tuple[str, str, dict[str, Any], str]]:
    """(example file, job id, job, called workflow file) of every job that calls benchtrail."""
    found = []
    for name in EXAMPLE_FILES:
        for job_id, job in read_example_workflow(name)["jobs"].items():
            match = CALLER_USES.fullmatch(job["uses"])
            assert match, (f"{name}: {job_id} does not call benchtrail pinned by a full commit SHA: "
                           f"{job['uses']}")
            found.append((name, job_id, job, f"{match[1]}.yml"))
    return found


def run_step_script(step: dict[str, Any], env: dict[str, str],
                    cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run a step's script as Actions would (bash -e -o pipefail) in ``cwd`` (the job's working
    directory), with ``.venv/bin/benchtrail`` replaced by this interpreter's benchtrail."""
    script = step["run"].replace(".venv/bin/benchtrail", f"{sys.executable} -m benchtrail.cli.app")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def evaluate_condition(condition: str, context: dict[str, Any], cancelled: bool = False) -> bool:
    """Evaluate an ``if:`` condition; ``context`` maps each property path it reads
    (``needs.compile.result``) to its value, and a path missing from it is an error."""
    return bool(expression_value(condition, context, cancelled))


def expression_value(condition: str, context: dict[str, Any], cancelled: bool = False) -> Any:
    """The value of an expression (``a && 'x' || 'y'`` gives ``'x'`` or ``'y'``, as in Actions)."""
    functions = {"cancelled": lambda: cancelled, "contains": lambda seq, item: item in seq,
                 "startsWith": lambda text, prefix: text.startswith(prefix)}
    python, pos = [], 0
    while pos < len(condition):
        m = _EXPR_TOKEN.match(condition, pos)
        assert m, f"cannot read {condition[pos:]!r}"
        pos = m.end()
        if m["str"]:
            python.append(repr(m["str"][1:-1].replace("''", "'")))
        elif m["name"]:
            is_call = condition[pos:pos + 1] == "("
            python.append(f"_fn[{m['name']!r}]" if is_call else f"_ctx[{m['name']!r}]")
        elif m["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(m["op"], m["op"]))
        else:
            python.append(" ")
    return eval("".join(python), {"__builtins__": {}}, {"_fn": functions, "_ctx": dict(context)})


def benchtrail_args(script: str, env: dict[str, str]):
    """The `.venv/bin/benchtrail` command of ``script``, parsed by benchtrail's own parser."""
    line = next(line for line in joined_lines(script) if ".venv/bin/benchtrail " in line)
    words = shlex.split(line.split(".venv/bin/benchtrail ", 1)[1].split("||")[0].split(">")[0])
    # A bash array "${name[@]}" expands to its words: ``env[name]``, split as the shell would.
    arrays = [re.fullmatch(r"\$\{(\w+)\[@\]\}", word) for word in words]
    return build_parser().parse_args([w for word, array in zip(words, arrays, strict=True)
                                      for w in (shlex.split(env[array[1]]) if array
                                                else [string.Template(word).substitute(env)])])


def joined_lines(script: str) -> list[str]:
    """The script's logical lines, with backslash-continued lines joined."""
    return script.replace("\\\n", " ").splitlines()


def assert_valid_workflow(path: Path) -> None:
    """``path`` validates against GitHub's workflow schema (check-jsonschema's vendored copy)."""
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout
