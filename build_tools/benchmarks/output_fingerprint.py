"""The fingerprint of a run's files, and the difference of two (for ``compare_outputs.py``).

What each pattern masks and why: ``compare_outputs.py``'s docstring. ``fingerprint_files`` turns a
folder into ``{relative path: normalised content}``; ``diff_file`` compares two normalised files.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

BINARY = {".png", ".jpg", ".svg", ".pt", ".pt2", ".so", ".pyc", ".zip", ".gz", ".whl", ".bin", ".js", ".lock"}
#: Files whose numbers are the suite's (run-config exports): kept verbatim.
FIXED_NUMBERS = re.compile(r"(^|/)(run-configs/[^/]*|run_configs|seed-export|benchtrail-export-seed|execution"
                           r"|matrix)\.json$")
#: Torch's own cache: presence only, whatever it holds.
OPAQUE = re.compile(r"(^|/)inductor-cache/.*")
#: Files that exist only when the timing says so (a re-check, strip plots of changed series, profiles of
#: confirmed regressions, a run's journal).
OPTIONAL_FILES = re.compile(r"(^|/)(ab|distributions|profiles)/|\.partial\.jsonl$")
#: JSON keys whose subtree exists only when the timing says so.
OPTIONAL_KEYS = {"ab", "rerun", "guard", "stored", "recheck", "paired", "profile", "profiles", "distribution",
                 "distributions", "stop", "failed", "warned", "runner_checks", "mark"}
#: JSON keys whose string values vary with timing or the host: type only.
VARYING_KEYS = re.compile(r"^(verdict|mark|outcome|stop|recheck|reason|reasons|label|labels|status_reason"
                          r"|message|noisy|hostname|host|cpu_model|kernel|python|platform|subject|date)$")
#: Key paths whose string values vary with the load on the machine (the doctor's checks, the arm a paired
#: run's guard caught).
VARYING_PATH = re.compile(r"\.doctor\..*\.(status|value|advice)$|\.(failed|warned)\[\]|\.guard\.")
#: Keys whose numbers are kept (schema and method versions).
VERSION_KEY = re.compile(r"version$")
#: Verdict words, which the timing picks: masked as ``<v>``, and a list of counts of them as ``<counts>``.
VERDICT = re.compile(r"\b(regress(?:ed|ions?)|improve(?:d|ments?)|inconclusive|similar|unconfirmed|new"
                     r"|removed|insufficient[- ]samples|not[- ]comparable|failed|noisy|cleared|confirmed)\b",
                     re.IGNORECASE)
COUNTS = re.compile(r"(?:^and )?<n> <v>(?: \(<n> <v>\))?(?:(?:,| and| ·) <n> <v>(?: \(<n> <v>\))?)*")
#: Units a number is shown in (chosen by its size).
UNIT = re.compile(r"<n> ?(?:ns|µs|us|ms|s|min|h|B|KiB|MiB|GiB|kB|MB|GB)\b")
#: Text lines that exist or read differently depending on the verdicts: a benchmark's row in a table (the
#: comment's, the terminal's), footnotes and legends of paired or inconclusive rows, the re-check's lines,
#: the runner-check warning, the compilation-statistics table (only changed series), the terminal table.
OPTIONAL_LINE = re.compile(r"^\| `|^- \[<n>\]|^(?!\|? ?benchmark\b).*→|could detect|paired|re-?check"
                           r"|runner checks|Compilation statistics|^\| module \| metric \||^<v> \(<n>\):"
                           r"|^no <v> or <v>$|^No <v> <v> or <v>\.$|^benchmark verdict change"
                           r"|^<details><summary><v>")
#: Lines whose benchmark name is chosen by the verdicts (the first changed row's ``explain``).
VARYING_LINE = re.compile(r"(benchtrail explain )\S+")
#: Markdown table separators (their tables' headers say the same).
SEPARATOR = re.compile(r"^\|[-:| ]+\|$")

RUN_ID = re.compile(r"\b[a-z][a-z0-9]*-\d{8}T\d{6}Z-[0-9a-f]{8}\b")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                  r"|(?<!\d)\d{8}T\d{6}Z")
DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")
ABS_PATH = re.compile(r"(?<![\w.:<>~-])/[\w.+@%~-]+(?:/[\w.+@%~-]+)*/?")
NUMBER = re.compile(r"(?<![\w.>-])[-+−]?\d(?:[\d,]*\d)?(?:\.\d+)*(?:[eE][-+]?\d+)?(?![0-9a-f]{2})")
NUMBERS = re.compile(r"<n>(?:\s*,\s*<n>)+")


class Masker:
    """Masks what varies from run to run in a path, a line or a JSON string."""

    def __init__(self, roots: dict[str, str], runs: dict[str, str], shas: set[str], subject: str) -> None:
        self.roots = sorted(roots.items(), key=lambda kv: -len(kv[0]))
        self.runs = runs
        self.shas = shas
        self.subject = subject

    def _hex(self, m: re.Match[str]) -> str:
        h = m.group()
        known = len(h) == 40 or any(s.startswith(h) for s in self.shas)
        mixed = re.search(r"\d", h) and re.search(r"[a-f]", h)
        return "<sha>" if known or mixed else h

    def __call__(self, text: str) -> str:
        for root, name in self.roots:
            text = text.replace(root, name)
        text = RUN_ID.sub(lambda m: self.runs.get(m.group(), "<run>"), text)
        if len(self.subject) >= 8:
            text = text.replace(self.subject, "<subject>").replace(html.escape(self.subject), "<subject>")
        text = text.replace(" (dirty)", "")  # the checkout's state, not the code's behaviour
        text = DATE.sub("<date>", TIME.sub("<time>", text)).replace("<time>_", "<time>-")
        text = re.sub(r"(?<=<time>-)[0-9a-f]{8}(?![0-9A-Za-z])", "<id>", text)  # bench_<name>_<time>_<uuid8>
        text = HEX.sub(self._hex, ABS_PATH.sub("<path>", text))
        return NUMBERS.sub("<n>", NUMBER.sub("<n>", text))


# --- normalisation ---------------------------------------------------------------------------------


def run_labels(out: Path) -> dict[str, str]:
    """``<run1>``, ``<run2>``… for the run ids of each store under ``out``, in the order of their time."""
    labels = {}
    for store in sorted(p for p in out.iterdir() if p.is_dir()):
        ids = {m.group() for p in store.rglob("*") for m in RUN_ID.finditer(p.name)}
        order = sorted(ids, key=lambda r: (TIME.search(r).group(), r))  # type: ignore[union-attr]
        labels.update({r: f"<run{i}>" for i, r in enumerate(order, 1)})
    return labels


def type_name(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "object",
            type(None): "null"}[type(value)]


def json_shape(docs: list[Any], mask: Masker, fixed_numbers: bool) -> dict[str, Any]:
    """Key paths → types, and key paths → kept values, of JSON documents (merged)."""
    keys: dict[str, set[str]] = defaultdict(set)
    values: dict[str, set[str]] = defaultdict(set)

    def walk(value: Any, path: str, key: str) -> None:
        keys[path].add(type_name(value))
        if isinstance(value, dict):
            for k, v in value.items():
                name = mask(str(k))
                walk(v, f"{path}.{name}", name.rsplit(".", 1)[-1])
        elif isinstance(value, list):
            for v in value:
                walk(v, f"{path}[]", key)
        elif isinstance(value, str) and not (VARYING_KEYS.match(key) or VARYING_PATH.search(path)):
            kept = text_lines(value, False, mask) if "\n" in value else {mask(value)}
            values[path].update(kept)
        elif type(value) in (int, float) and (fixed_numbers or VERSION_KEY.search(key)):
            values[path].add(repr(value))

    for doc in docs:
        walk(doc, "$", "")
    return {"kind": "json", "keys": {k: sorted(v) for k, v in sorted(keys.items())},
            "values": {k: sorted(v) for k, v in sorted(values.items()) if v}}


def text_lines(text: str, is_html: bool, mask: Masker) -> set[str]:
    """The masked lines of a text (HTML split at tags and JSON commas too), verdict-dependent ones out."""
    if is_html:
        text = re.sub(r'(<[^>]+>|,")', r"\n\1", text)
    text = text.replace(" \n", " ")  # a message wrapped at the terminal's width (where depends on numbers)
    lines = set()
    for line in text.splitlines():
        line = UNIT.sub("<n> <unit>", VERDICT.sub("<v>", " ".join(mask(line).split())))
        lines.add(VARYING_LINE.sub(r"\1<benchmark>", COUNTS.sub("<counts>", line)))
    return {line for line in lines if line and not OPTIONAL_LINE.search(line) and not SEPARATOR.match(line)}


def normalise_file(path: Path, rel: str, mask: Masker) -> tuple[str, Any]:
    """(kind, content) of one file: ``json`` documents, ``text`` lines, or ``binary`` (presence)."""
    if path.suffix in BINARY or OPAQUE.search(rel):
        return "binary", None
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return "binary", None
    if path.suffix in (".json", ".jsonl"):
        try:
            if path.suffix == ".json":
                return "json", [json.loads(text)]
            return "json", [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            pass  # not JSON after all: compared as text
    return "text", text_lines(text, path.suffix in (".html", ".htm"), mask)


def fingerprint_files(root: Path, mask: Masker) -> dict[str, Any]:
    """``{masked relative path: normalised content}`` of every file under ``root`` (``_*`` skipped)."""
    merged: dict[str, tuple[str, list[Any]]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("_"):
            continue
        name = mask(rel)
        if OPAQUE.search(rel):
            name = OPAQUE.sub(r"\1inductor-cache/**", name)
        kind, content = normalise_file(path, rel, mask)
        if name in merged and merged[name][0] != kind:
            kind = "mixed"
        merged.setdefault(name, (kind, []))
        merged[name] = (kind, merged[name][1] + ([content] if content is not None else []))
    files: dict[str, Any] = {}
    for name, (kind, parts) in sorted(merged.items()):
        if kind == "json":
            entry = json_shape([d for part in parts for d in part], mask, bool(FIXED_NUMBERS.search(name)))
        elif kind == "text":
            entry = {"kind": "text", "lines": sorted(set().union(*parts))}
        else:
            entry = {"kind": kind}
        entry["optional"] = bool(OPTIONAL_FILES.search(name))
        files[name] = entry
    return files


# --- diff ------------------------------------------------------------------------------------------


def optional_roots(path: str, loose: bool = False) -> list[tuple[str, bool]]:
    """The prefixes of key path ``path`` that end at an optional key (``loose``: every key), each with
    whether a list follows it."""
    parts = re.split(r"(?=[.\[])", path)
    return [("".join(parts[:i]), parts[i:i + 1] == ["[]"])
            for i in range(1, len(parts) + 1) if loose or parts[i - 1].lstrip(".") in OPTIONAL_KEYS]


def optional_missing(path: str, other: dict[str, Any], loose: bool) -> bool:
    """Whether key path ``path`` lies in an optional subtree that ``other`` lacks (absent, null, [])."""
    return any(set(other.get(root, [])) <= {"null"} or (listed and f"{root}[]" not in other)
               for root, listed in optional_roots(path, loose))


def types_differ(path: str, a: list[str], b: list[str], loose: bool) -> bool:
    """Whether the types at ``path`` differ (loose, or in an optional subtree: nulls aside, if any)."""
    ta, tb = set(a), set(b)
    if loose or optional_roots(path):
        ta, tb = ta - {"null"}, tb - {"null"}
        return bool(ta and tb) and ta != tb
    return ta != tb


def diff_file(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The differences between two normalised files, one line each. An optional file's values and nulls
    (which series a re-check picked: ``correctness`` is null for some) are not compared, only its key paths
    (those under a key null or absent on one side aside) and types."""
    loose = a.get("optional", False)
    if a["kind"] != b["kind"]:
        return [f"kind: {a['kind']} vs {b['kind']}"]
    out = []
    if a["kind"] == "text":
        out += [f"line only in A: {x}" for x in sorted(set(a["lines"]) - set(b["lines"]))]
        out += [f"line only in B: {x}" for x in sorted(set(b["lines"]) - set(a["lines"]))]
    elif a["kind"] == "json":
        ka, kb = a["keys"], b["keys"]
        out += [f"key only in A: {k}" for k in ka if k not in kb and not optional_missing(k, kb, loose)]
        out += [f"key only in B: {k}" for k in kb if k not in ka and not optional_missing(k, ka, loose)]
        out += [f"types of {k}: {ka[k]} vs {kb[k]}"
                for k in ka if k in kb and types_differ(k, ka[k], kb[k], loose)]
        va, vb = a["values"], b["values"]
        for k in sorted(set(va) | set(vb)) if not loose else ():
            if k in ka and k in kb and not VARYING_PATH.search(k):
                sa, sb = set(va.get(k, [])), set(vb.get(k, []))
                out += [f"value of {k} only in A: {v!r}" for v in sorted(sa - sb)]
                out += [f"value of {k} only in B: {v!r}" for v in sorted(sb - sa)]
    return out
