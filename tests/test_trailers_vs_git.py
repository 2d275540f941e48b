"""Our trailer extraction agrees byte for byte with ``git interpret-trailers --parse --no-divider``.

Two checks, both deterministic: a committed corpus of hard descriptions (``tests/data/trailer_corpus.json``:
lone ``\\r`` and CRLF line ends, ``#`` comment lines around folded values, scissors and ``Conflicts:``
blocks, NUL, ``\\v``), each with git's recorded output and benchtrail's presets; and a derandomized
Hypothesis property test (the same examples on every run). The larger randomized run is
``build_tools/benchmarks/check_trailers_vs_git.py`` (docs/trailers.md).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from benchtrail.git import interpret_trailers as git_interpret_trailers
from benchtrail.github.trailers import benchmark_presets, format_trailers, parse_trailers, pr_message

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ROOT = Path(__file__).resolve().parents[1]
CORPUS = json.loads((Path(__file__).parent / "data" / "trailer_corpus.json").read_text(encoding="utf-8"))["cases"]

WORDS = st.sampled_from(["fix", "the", "matmul", "speed", "$(whoami)", "`id`", "x86_64,", "cuda", "a:b", "é",
                         "key=value", "Notes", "-", "benchmarks", "50%", "#12"])
KEYS = st.sampled_from(["benchmarks", "Benchmarks", "BENCHMARKS", "Fixes", "Notes", "Co-authored-by",
                        "Bug-Id",
                        "Key With Space", "Bug #1"])
INDENTS = st.sampled_from(["  ", "\t", "\r", "\v", "\u00a0"])  # git's whitespace is " \t\n\r" only


def _words(min_size=1):
    return st.lists(WORDS, min_size=min_size, max_size=6).map(" ".join)


PARTS = {
    "prose": _words().map(lambda w: [w.capitalize() + "."]),
    "trailer": st.tuples(KEYS, _words(0)).map(lambda kv: [f"{kv[0]}: {kv[1]}"]),
    "presets": st.lists(st.sampled_from(["x86_64", "cuda", "comp-stats", "smoke", ""]), max_size=4)
                 .map(lambda ps: [f"benchmarks: {','.join(ps)}"]),
    "continuation": st.tuples(INDENTS, _words()).map(lambda iw: ["benchmarks: x86_64", iw[0] + iw[1]]),
    "comment-in-fold": st.tuples(st.sampled_from(["# note", "#", "  # note"]), INDENTS)
                         .map(lambda ci: ["benchmarks: x86_64", ci[0], ci[1] + "cuda"]),
    "signed-off": st.just(["Signed-off-by: A U Thor <a@example.com>"]),
    "cherry-pick": st.just(["(cherry picked from commit 0123456789abcdef)"]),
    "divider": st.just(["---"]),
    "comment": _words().map(lambda w: [f"# {w}"]),
    "fenced-code": _words().map(lambda w: ["```", f"benchmarks: {w}", "```"]),
    "key=value": st.just(["benchmarks=x86_64"]),
    "indented": st.tuples(INDENTS, _words()).map(lambda iw: [iw[0] + iw[1]]),
    "scissors": st.just(["# ------------------------ >8 ------------------------", "Cut: here"]),
    "conflicts": st.just(["Conflicts:", "\tfile.py"]),
    "blank-looking": st.sampled_from([[" "], ["\r"], ["\v"]]),
}
EOLS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}


@st.composite
def descriptions(draw):
    paragraphs = []
    for _ in range(draw(st.integers(1, 4))):
        names = draw(st.lists(st.sampled_from(sorted(PARTS)), min_size=1, max_size=4))
        lines = []
        for name in names:
            event(f"part: {name}")
            lines += draw(PARTS[name])
        paragraphs.append(lines)
    kind = draw(st.sampled_from(sorted(EOLS)))
    eol = EOLS[kind]
    event(f"line ends: {kind}")
    trailing = draw(st.sampled_from(["", eol, eol + eol, eol + "# trailing comment" + eol]))
    body = (eol + eol).join(eol.join(p) for p in paragraphs) + trailing
    title = draw(_words())
    return title, body


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_description_parses_as_git_does(case):
    message = pr_message(case["title"], case["body"])
    ours = format_trailers(parse_trailers(message))
    assert ours == case["git"]
    assert git_interpret_trailers(message) == case["git"], ("the installed git no longer gives the recorded "
                                                            "output")
    assert benchmark_presets(case["title"], case["body"]) == case["presets"]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(descriptions())
# a comment ends a trailer
@example(("t", "Notes.\n\nSigned-off-by: A U Thor <a@example.com>\n# fix\n    fix"))
@example(("t", "Text.\r\rbenchmarks: cuda\r"))  # lone CR: one line, no trailer
@example(("t", "Text.\r\n\r\nbenchmarks: x86_64,\r\n  cuda\r\n"))  # the value keeps "\r " from the fold
@example(("t", "Text.\n\nbenchmarks: x86_64\n# note\n  cuda\n"))  # comment then indented line: no block
@example(("t", "Text.\n\nbenchmarks: x86_64\n  # note\n  cuda\n"))  # an indented "#" line is a continuation
@example(("t", "Text.\r\n\r\nbenchmarks: cuda\r\nConflicts:\r\n\tfile.py\r\n"))  # CRLF: no Conflicts block
def test_extraction_agrees_with_git_interpret_trailers(description):
    message = pr_message(*description)
    theirs = git_interpret_trailers(message)
    event(f"trailers found: {min(theirs.count(chr(10)), 3)}")
    assert format_trailers(parse_trailers(message)) == theirs


@pytest.mark.parametrize("seed", [0, 7])
def test_randomized_check_script_counts_agreeing_descriptions(tmp_path, seed):
    saved = tmp_path / "disagreements.json"
    proc = subprocess.run([sys.executable, str(ROOT / "build_tools/benchmarks/check_trailers_vs_git.py"),
                           "--examples", "40", "--seed", str(seed), "--save", str(saved)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["all"][0] == rows["all"][2] == "40" and rows["all"][3] == "0"  # bodies, agreed, disagreed
    assert sum(int(rows[k][0]) for k in ("LF", "CRLF", "CR", "mixed")) == 40
    assert json.loads(saved.read_text()) == []
