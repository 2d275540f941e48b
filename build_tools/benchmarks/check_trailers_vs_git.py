#!/usr/bin/env python3
"""Check ``benchtrail.github.trailers`` against the installed ``git interpret-trailers --parse --no-divider``
on many random PR descriptions: the larger, randomized run that the derandomized property test
(``tests/test_trailers_vs_git.py``) stands in for.

Each description is a title and a body of 1–4 paragraphs built from pieces that stress git's rules:
prose, trailers (``benchmarks:`` and others, keys with spaces, ``Bug #1``, non-ASCII), folded values
(indented by spaces, tabs, ``\\r``, ``\\v``, no-break spaces), ``#`` comment lines (alone, indented,
between a trailer and its continuation), git-generated trailers, ``---``, fenced code, ``key=value``,
scissors and ``Conflicts:`` blocks, NUL characters and blank-looking lines. Line ends are drawn per
body: LF, CRLF, lone CR, or a mix of all three with ``\\r\\r\\n``. A body agrees when git's stdout is
byte for byte ``format_trailers(parse_trailers(message))``.

Prints a markdown table (line ends, bodies, bodies where git finds a trailer, agreed, disagreed);
``--save FILE`` writes the disagreeing descriptions as JSON (title, body, git, ours) for the corpus
``tests/data/trailer_corpus.json``. Exit status 1 when any body disagrees.

Usage: python build_tools/benchmarks/check_trailers_vs_git.py [--examples 5000] [--seed 0] [--save FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
from pathlib import Path

from benchtrail.git import interpret_trailers as git_interpret_trailers
from benchtrail.github.trailers import format_trailers, parse_trailers, pr_message
from benchtrail.jsonio import write_text_atomic

WORDS = ["fix", "the", "matmul", "speed", "$(whoami)", "`id`", "x86_64,", "cuda", "a:b", "é", "key=value",
         "Notes", "-", "benchmarks", "50%", "#12", ":", "\t", "日本"]
KEYS = ["benchmarks", "Benchmarks", "BENCHMARKS", "benchmarks-accept", "Fixes", "Co-authored-by", "Bug-Id",
        "Key With Space", "Key\tTab", "é", "Bug #1", "-", "a_b"]
INDENTS = [" ", "  ", "\t", "\r", " \r", "\v", "\f", "\u00a0", "\u3000"]
BLANKS = ["", " ", "\t", "\r", "\v", " \r"]
EOLS = {"LF": ["\n"], "CRLF": ["\r\n"], "CR": ["\r"], "mixed": ["\n", "\r\n", "\r", "\r\r\n"]}


def _words(rng: random.Random, low: int = 1) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, 5)))


def _piece(rng: random.Random) -> list[str]:
    """A few lines of one kind (the kinds of the property test, and more)."""
    kind = rng.choice(["prose", "trailer", "presets", "continuation", "comment", "comment-in-fold",
                       "signed-off",
                       "cherry-pick", "divider", "fenced-code", "key=value", "indented", "scissors",
                       "conflicts",
                       "nul", "blank-looking", "colon-first"])
    if kind == "prose":
        return [_words(rng).capitalize() + "."]
    if kind == "trailer":
        return [f"{rng.choice(KEYS)}{rng.choice([':', ' :', ': ', ':  '])}{_words(rng, 0)}"]
    if kind == "presets":
        return ["benchmarks: " + rng.choice([",", " ", ", "]).join(
            rng.choice(["x86_64", "cuda", "comp-stats", ""]) for _ in range(rng.randint(0, 4)))]
    if kind == "continuation":
        return [f"{rng.choice(KEYS)}: {_words(rng, 0)}"] + [rng.choice(INDENTS) + _words(rng)
                                                          for _ in range(rng.randint(1, 3))]
    if kind == "comment":
        return [rng.choice(["#", "# ", "#:", " #"]) + _words(rng, 0)]
    if kind == "comment-in-fold":
        return ["benchmarks: x86_64", rng.choice(["# note", "#", " # note"]), rng.choice(INDENTS) + "cuda"]
    if kind == "signed-off":
        return ["Signed-off-by: A U Thor <a@example.com>"]
    if kind == "cherry-pick":
        return ["(cherry picked from commit 0123456789abcdef)"]
    if kind == "divider":
        return ["---"]
    if kind == "fenced-code":
        return ["```", f"benchmarks: {_words(rng)}", "```"]
    if kind == "key=value":
        return ["benchmarks=x86_64"]
    if kind == "indented":
        return [rng.choice(INDENTS) + _words(rng)]
    if kind == "scissors":
        return ["# ------------------------ >8 ------------------------", f"Cut: {_words(rng)}"]
    if kind == "conflicts":
        return ["Conflicts:", "\t" + _words(rng)]
    if kind == "nul":
        return [f"benchmarks: cuda\0{_words(rng)}"]
    if kind == "blank-looking":
        return [rng.choice(BLANKS)]
    return [f": {_words(rng)}"]


def description(rng: random.Random, eols: list[str]) -> tuple[str, str]:
    """A random ``(title, body)``; each line ends with one of ``eols``."""
    lines: list[str] = []
    for p in range(rng.randint(1, 4)):
        if p:
            lines.append(rng.choice(BLANKS))
        for _ in range(rng.randint(1, 4)):
            lines += _piece(rng)
    lines += rng.choice([[], [""], ["", ""], ["# trailing comment"], ["", "# trailing", ""]])
    ends = [rng.choice(eols) for _ in lines]
    if rng.random() < 0.3:
        ends[-1] = ""  # no line end at the very end
    return _words(rng), "".join(line + end for line, end in zip(lines, ends))


def run(examples: int, seed: int) -> tuple[dict[str, collections.Counter], list[dict]]:
    rng = random.Random(seed)
    table: dict[str, collections.Counter] = {name: collections.Counter() for name in EOLS}
    disagreements = []
    for _ in range(examples):
        name = rng.choice(sorted(EOLS))
        title, body = description(rng, EOLS[name])
        message = pr_message(title, body)
        theirs = git_interpret_trailers(message)
        ours = format_trailers(parse_trailers(message))
        counts = table[name]
        counts["bodies"] += 1
        counts["with trailers"] += bool(theirs)
        counts["agreed" if ours == theirs else "disagreed"] += 1
        if ours != theirs:
            disagreements.append({"title": title, "body": body, "git": theirs, "ours": ours})
    return table, disagreements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000, help="random descriptions (default 5000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--save", help="write the disagreeing descriptions to this JSON file")
    args = parser.parse_args(argv)
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    table, disagreements = run(args.examples, args.seed)
    print(f"{git}, {args.examples} descriptions, seed {args.seed}\n")
    print("| line ends | bodies | git finds trailers | agreed | disagreed |\n|---|---|---|---|---|")
    total: collections.Counter = collections.Counter()
    for name, counts in table.items():
        total += counts
        print(f"| {name} | {counts['bodies']} | {counts['with trailers']} | {counts['agreed']} | "
              f"{counts['disagreed']} |")
    print(f"| all | {total['bodies']} | {total['with trailers']} | {total['agreed']} | "
          f"{total['disagreed']} |")
    if args.save:
        write_text_atomic(Path(args.save), json.dumps(disagreements, indent=1) + "\n")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
