"""The JSON Schemas of ``docs/schemas/`` as tests read them: which schema each file of a store or run
directory has (by its path), and every way a document breaks its schema."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"

#: A file of a run directory (its path relative to the run directory) -> its schema; the first match wins.
RUN_FILES: tuple[tuple[str, str], ...] = (
    (r"run-configs/execution\.json", "execution-export.schema.json"),
    (r"run-configs/compilation\.json", "compilation-export.schema.json"),
    (r"modules/[^/]+/module_info\.json", "module-info.schema.json"),
    (r"modules/[^/]+/compile-stats\.json", "compile-stats.schema.json"),
    (r"results/docs/bench_[^/]+_[0-9]{8}T[0-9]{6}Z_[0-9a-f]{8}\.json", "bench-document.schema.json"),
    # <device>-<shard>.json, compilation-<device>.json; base.json and head.json of `benchtrail ab`
    (r"results/[^/]+\.json", "results.schema.json"),
    (r"ab/ab-(base|head)\.json", "results.schema.json"),  # the pipeline's paired re-check
    (r"comparison\.json", "comparison.schema.json"),
    (r"comment/comment\.json", "comment.schema.json"),
    (r"timings\.json", "timings.schema.json"),
    (r"profiles/[^/]+/(base|head)\.trace\.json", "profile-trace.schema.json"),  # the re-check's profiles
)
#: A file of a store outside its run directories (path relative to the store) -> its schema.
STORE_FILES: tuple[tuple[str, str], ...] = (
    (r"commits/[0-9a-f]{40}/[A-Za-z0-9][A-Za-z0-9._-]*-[1-9][0-9]*\.json", "pointer.schema.json"),
)
#: The other files of a run directory: not JSON, so no schema.
RUN_NON_JSON = (r"comment/(comment|full)\.md", r"dashboard/[^/]+\.(png|html)", r"dashboard/plotly\.min\.js",
                r"results/callgrind/[^/]+\.out",  # the count stage's callgrind files (runner.count_cases)
                r"distributions/[^/]+\.png",  # pipeline.report_stages.distribution_stage
                r"modules/[^/]+/(exported_program|aoti_package)\.pt2",
                r"modules/inductor-cache/.+")  # Inductor's own cache (compile stage, used by the run stage)
#: The other files of a store outside its run directories: the dashboards' one plotly.js (Store.write_asset).
STORE_NON_JSON = (r"assets/plotly-[0-9.]+\.min\.js",)
_RUN_DIR = re.compile(r"runs/[A-Za-z0-9][A-Za-z0-9._-]*/[1-9][0-9]*/(?P<rel>.+)")


@functools.cache
def schemas() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(SCHEMAS.glob("*.schema.json"))}


@functools.cache
def registry() -> Registry:
    """Every schema under its file name, which is how the schemas' relative ``$ref``s name each other
    (check-jsonschema resolves them the same way, relative to the schema file)."""
    return Registry().with_resources((name, Resource.from_contents(s)) for name, s in schemas().items())


def errors(schema: str, document: Any) -> list[str]:
    """``"<json path>: <message>"`` for every way ``document`` breaks ``schema`` (none: it validates),
    with the errors of each ``oneOf`` alternative after the error that sums them up."""
    validator = jsonschema.Draft202012Validator(schemas()[schema], registry=registry(),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    def lines(error: jsonschema.ValidationError, depth: int = 0):
        yield f"{'  ' * depth}{error.json_path}: {error.message[:300]}"
        for sub in sorted(error.context or (), key=lambda e: e.json_path):
            yield from lines(sub, depth + 1)

    return [line for e in validator.iter_errors(document) for line in lines(e)]


def assert_valid(schema: str, path: Path) -> None:
    problems = errors(schema, json.loads(path.read_text(encoding="utf-8")))
    assert not problems, (f"{path} does not validate against docs/schemas/{schema}:\n"
                          + "\n".join(problems[:20]))


def _in_run(rel: str, run_dir: bool) -> str | None:
    """A file's path relative to its run directory (None: a store's file outside every run directory)."""
    run = None if run_dir else _RUN_DIR.fullmatch(rel)
    return rel if run_dir else run["rel"] if run else None


def schema_of(rel: str, run_dir: bool = False) -> str | None:
    """The schema of a file by its path relative to the store (``run_dir``: to its run directory); None when
    no pattern matches."""
    run = _in_run(rel, run_dir)
    table, name = (RUN_FILES, run) if run is not None else (STORE_FILES, rel)
    return next((schema for pattern, schema in table if re.fullmatch(pattern, name)), None)


def check_tree(root: Path, run_dir: bool = False) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Every file under ``root``, a store (``run_dir``: a run directory), by its path: (the files no pattern
    matches, ``"<path> (<schema>) <error>"`` of those that break their schema, the paths of each schema)."""
    unmatched, invalid, seen = [], [], {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if path.suffix != ".json":
            run = _in_run(rel, run_dir)
            patterns, name = (RUN_NON_JSON, run) if run is not None else (STORE_NON_JSON, rel)
            if not any(re.fullmatch(p, name) for p in patterns):
                unmatched.append(rel)  # a new kind of file: JSON with another suffix (.jsonl), YAML, ...
        elif (schema := schema_of(rel, run_dir)) is None:
            unmatched.append(rel)
        else:
            seen.setdefault(schema, []).append(rel)
            problems = errors(schema, json.loads(path.read_text(encoding="utf-8")))
            invalid += [f"{rel} ({schema}) {p}" for p in problems[:10]]
    return unmatched, invalid, seen


def store_files(history_store) -> tuple[Path, list[Path]]:
    store = Path(history_store["store"])
    assert all(Path(d).is_relative_to(store) for d in history_store["run_dirs"].values()), history_store
    return store, sorted(p for p in store.rglob("*") if p.is_file())
