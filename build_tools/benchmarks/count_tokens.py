#!/usr/bin/env python3
"""Count the Python tokens of the library, comments and docstrings excluded (issue 42's size measure).

Counts every token ``tokenize`` yields in ``build_tools/benchtrail/**/*.py`` except comments, newlines,
indents, dedents, the end marker and the string tokens of docstrings (the first statement of a module,
class or function when it is a string). Reads the files of a git commit (``--rev``) or of the working tree.
Prints a markdown table: files, lines, tokens, and with ``--base REV`` the change against that commit.

Usage: python build_tools/benchmarks/count_tokens.py [--rev REV] [--base REV] [--by-module]
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from pathlib import Path

ROOT = "build_tools/benchtrail"
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER, tokenize.ENCODING}


def sources(rev: str | None) -> dict[str, str]:
    """Path → text of every library module, at ``rev`` (a commit) or in the working tree (None)."""
    if rev is None:
        return {str(p): p.read_text() for p in sorted(Path(ROOT).rglob("*.py"))}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, ROOT], check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py")}


def docstring_starts(text: str) -> set[tuple[int, int]]:
    """(line, column) where each docstring's string token starts."""
    starts = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                starts.add((body[0].lineno, body[0].col_offset))
    return starts


def count(text: str) -> int:
    """Tokens of one module, comments and docstrings excluded."""
    docs = docstring_starts(text)
    return sum(1 for tok in tokenize.generate_tokens(io.StringIO(text).readline)
               if tok.type not in SKIPPED and not (tok.type == tokenize.STRING and tok.start in docs))


def totals(rev: str | None) -> tuple[int, int, int, dict[str, int]]:
    files = sources(rev)
    per = {path: count(text) for path, text in files.items()}
    return len(files), sum(t.count("\n") for t in files.values()), sum(per.values()), per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", help="a commit (default: the working tree)")
    parser.add_argument("--base", help="a commit to compare with")
    parser.add_argument("--by-module", action="store_true", help="also list the largest modules")
    args = parser.parse_args()
    rows = [("base " + args.base, *totals(args.base))] if args.base else []
    rows.append((args.rev or "working tree", *totals(args.rev)))
    print("| source | files | lines | tokens | change |\n|---|---:|---:|---:|---:|")
    for name, files, lines, tokens, _ in rows:
        change = f"{tokens / rows[0][3] - 1:+.1%}" if len(rows) > 1 else ""
        print(f"| {name} | {files} | {lines} | {tokens} | {change} |")
    if args.by_module:
        print("\n| module | tokens |\n|---|---:|")
        for path, tokens in sorted(rows[-1][4].items(), key=lambda kv: -kv[1])[:30]:
            print(f"| {path.removeprefix(ROOT + '/')} | {tokens} |")


if __name__ == "__main__":
    main()
