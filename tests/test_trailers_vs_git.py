"""Property test: our trailer extraction agrees with ``git interpret-trailers --parse --no-divider``."""

import shutil
import subprocess

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from benchtrail.trailers import parse_trailers, pr_message

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

WORDS = st.sampled_from(["fix", "the", "matmul", "speed", "$(whoami)", "`id`", "x86_64,", "cuda", "a:b", "é",
                         "key=value", "Notes", "-", "benchmarks", "50%"])
KEYS = st.sampled_from(["benchmarks", "Benchmarks", "BENCHMARKS", "Fixes", "Notes", "Co-authored-by", "Bug-Id",
                        "Key With Space"])


def _words(min_size=1):
    return st.lists(WORDS, min_size=min_size, max_size=6).map(" ".join)


PARTS = {
    "prose": _words().map(lambda w: [w.capitalize() + "."]),
    "trailer": st.tuples(KEYS, _words(0)).map(lambda kv: [f"{kv[0]}: {kv[1]}"]),
    "presets": st.lists(st.sampled_from(["x86_64", "cuda", "comp-stats", "smoke", ""]), max_size=4)
                 .map(lambda ps: [f"benchmarks: {','.join(ps)}"]),
    "continuation": _words().map(lambda w: ["benchmarks: x86_64", f"  {w}"]),
    "signed-off": st.just(["Signed-off-by: A U Thor <a@example.com>"]),
    "cherry-pick": st.just(["(cherry picked from commit 0123456789abcdef)"]),
    "divider": st.just(["---"]),
    "comment": _words().map(lambda w: [f"# {w}"]),
    "fenced-code": _words().map(lambda w: ["```", f"benchmarks: {w}", "```"]),
    "key=value": st.just(["benchmarks=x86_64"]),
    "indented": _words().map(lambda w: [f"    {w}"]),
}


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
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    event(f"line ending: {eol!r}")
    trailing = draw(st.sampled_from(["", eol, eol + eol, eol + "# trailing comment" + eol]))
    body = (eol + eol).join(eol.join(p) for p in paragraphs) + trailing
    title = draw(_words())
    return title, body


def _norm(pairs):
    return [(k, " ".join(v.replace("\r", " ").split())) for k, v in pairs]


def git_trailers(message: str) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "interpret-trailers", "--parse", "--no-divider"], input=message.encode(),
                         capture_output=True, check=True).stdout.decode()
    pairs = []
    for line in out.split("\n")[:-1]:  # not splitlines(): git keeps a "\r" inside values
        key, _, value = line.partition(":")
        pairs.append((key.strip(), value))
    return pairs


@settings(max_examples=500, deadline=None, derandomize=True)
@given(descriptions())
@example(("t", "Notes.\n\nSigned-off-by: A U Thor <a@example.com>\n# fix\n    fix"))  # a comment ends a trailer
def test_extraction_agrees_with_git_interpret_trailers(description):
    title, body = description
    ours = parse_trailers(pr_message(title, body))
    theirs = git_trailers(f"{title}\n\n{body}")
    event(f"trailers found: {min(len(theirs), 3)}")
    assert _norm(ours) == _norm(theirs)
