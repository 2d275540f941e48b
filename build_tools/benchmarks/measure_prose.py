#!/usr/bin/env python3
"""Measure the library's prose and line shape (issue 46): docstring lines, line lengths, module docstrings.

Reads ``build_tools/benchtrail/**/*.py`` at a git commit (``--rev``) or in the working tree. Prints a
markdown table: non-blank lines, their mean length (characters), lines over 110 characters, docstring lines
(every line of every module, class and function docstring), the longest module docstring (lines), and with
``--base REV`` the change against that commit.

Usage: python build_tools/benchmarks/measure_prose.py [--rev REV] [--base REV]
"""

from __future__ import annotations

import argparse
import ast

from count_tokens import sources


def measure(rev: str | None) -> tuple[int, float, int, int, int]:
    """(non-blank lines, mean length, lines > 110, docstring lines, longest module docstring) at ``rev``."""
    lines, chars, long, doc, module_doc = 0, 0, 0, 0, 0
    for text in sources(rev).values():
        nonblank = [line for line in text.splitlines() if line.strip()]
        lines += len(nonblank)
        chars += sum(len(line) for line in nonblank)
        long += sum(len(line) > 110 for line in nonblank)
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and ast.get_docstring(node, clean=False) is not None:
                first = node.body[0]
                span = first.end_lineno - first.lineno + 1
                doc += span
                if isinstance(node, ast.Module):
                    module_doc = max(module_doc, span)
    return lines, chars / lines, long, doc, module_doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", help="a commit (default: the working tree)")
    parser.add_argument("--base", help="a commit to compare with")
    args = parser.parse_args()
    rows = [("base " + args.base, *measure(args.base))] if args.base else []
    rows.append((args.rev or "working tree", *measure(args.rev)))
    print("| source | non-blank lines | mean length | lines > 110 | docstring lines | change | "
          "longest module docstring |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, lines, mean, long, doc, module_doc in rows:
        change = f"{doc / rows[0][4] - 1:+.1%}" if len(rows) > 1 else ""
        print(f"| {name} | {lines} | {mean:.1f} | {long} | {doc} | {change} | {module_doc} |")


if __name__ == "__main__":
    main()
