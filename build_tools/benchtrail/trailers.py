"""Git trailers in a PR description, parsed exactly as ``git interpret-trailers --parse --no-divider``.

A port of the rules in git's ``trailer.c`` (``find_trailer_block_start``, ``find_separator``,
``unfold_value``) and ``commit.c`` (``ignored_log_message_bytes``), with the default settings:
separator ``:``, comment character ``#``, no configured trailer keys. In short:

* the text is ``<title>\\n\\n<body>``; the first paragraph (the title) is never trailers;
* trailing comment (``#``) lines and empty lines, and everything after a scissors line, are ignored;
* only the last paragraph can be the trailer block; it counts when all its non-comment lines are
  trailers (``Key: value``, key of letters, digits and ``-``), or when it holds a git-generated
  trailer (``Signed-off-by: ``, ``(cherry picked from commit ``) and trailers are at least 25% of
  its lines;
* a line starting with whitespace continues the trailer above it; values are unfolded (line
  breaks and the indentation after them become one space) and trimmed.

``benchmark_presets`` adds benchtrail's own rules on top: ``benchmarks`` keys match
case-insensitively, values split on commas and/or whitespace and are lowercased, empty items are
dropped, and several ``benchmarks:`` trailers are united.
"""

from __future__ import annotations

import re

COMMENT = "#"
GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
SCISSORS = "# ------------------------ >8 ------------------------\n"
#: The trailer keys benchtrail reads (matched case-insensitively).
BENCHMARKS_KEY = "benchmarks"
ACCEPT_KEY = "benchmarks-accept"


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (not on other line breaks), keeping each line's ``\\n`` as git does."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _is_blank(line: str) -> bool:
    return line.strip(" \t\n\r\v\f") == ""


def find_separator(line: str) -> int:
    """Index of the ``:`` that ends a trailer key, or -1 (git's ``find_separator``)."""
    whitespace_found = False
    for i, c in enumerate(line):
        if c == ":":
            return i
        if not whitespace_found and (c.isascii() and c.isalnum() or c == "-"):
            continue
        if i != 0 and c in " \t":
            whitespace_found = True
            continue
        break
    return -1


def _end_of_message(lines: list[str]) -> int:
    """Number of leading lines that make up the message (git's ``ignored_log_message_bytes``)."""
    cutoff = len(lines)
    for i, line in enumerate(lines):
        if line == SCISSORS or line == SCISSORS.rstrip("\n"):
            cutoff = i
            break
    boc = None
    in_conflicts = False
    for i in range(cutoff):
        line = lines[i]
        if line.startswith(COMMENT) or line == "\n":
            if boc is None:
                boc = i
        elif line == "Conflicts:\n":
            in_conflicts = True
            if boc is None:
                boc = i
        elif in_conflicts and line.startswith("\t"):
            pass
        elif boc is not None:
            boc = None
            in_conflicts = False
    return boc if boc is not None else cutoff


def _trailer_block_start(lines: list[str]) -> int:
    """Index of the first line of the trailer block, or ``len(lines)`` when there is none."""
    end_of_title = len(lines)
    for i, line in enumerate(lines):
        if line.startswith(COMMENT):
            continue
        if _is_blank(line):
            end_of_title = i
            break
    only_spaces = True
    recognized_prefix = False
    trailer_lines = non_trailer_lines = possible_continuation = 0
    for i in range(len(lines) - 1, end_of_title - 1, -1):
        line = lines[i]
        if line.startswith(COMMENT):
            non_trailer_lines += possible_continuation
            possible_continuation = 0
            continue
        if _is_blank(line):
            if only_spaces:
                continue
            non_trailer_lines += possible_continuation
            if recognized_prefix and trailer_lines * 3 >= non_trailer_lines:
                return i + 1
            if trailer_lines and not non_trailer_lines:
                return i + 1
            return len(lines)
        only_spaces = False
        if line.startswith(GIT_GENERATED_PREFIXES):
            trailer_lines += 1
            possible_continuation = 0
            recognized_prefix = True
            continue
        if find_separator(line) >= 1 and not line[0].isspace():
            trailer_lines += 1
            possible_continuation = 0
        elif line[0].isspace():
            possible_continuation += 1
        else:
            non_trailer_lines += 1 + possible_continuation
            possible_continuation = 0
    return len(lines)


def _unfold(value: str) -> str:
    out = re.sub(r"\n[ \t\n\r\v\f]*", " ", value)
    return out.strip(" \t\n\r\v\f")


def parse_trailers(message: str) -> list[tuple[str, str]]:
    """``[(key, value)]`` of the message's trailers, in order, as git prints them with ``--parse``."""
    lines = _lines(message)
    lines = lines[: _end_of_message(lines)]
    start = _trailer_block_start(lines)
    strings: list[str] = []
    last: int | None = None
    for line in lines[start:]:
        if line.startswith(COMMENT):  # git keeps it as a line of its own (no separator), then drops it,
            last = None  # so an indented line after it continues nothing
            continue
        if last is not None and line[:1].isspace():
            strings[last] += line
            continue
        strings.append(line)
        last = len(strings) - 1 if find_separator(line) >= 1 else None
    trailers = []
    for s in strings:
        pos = find_separator(s)
        if pos >= 1:
            trailers.append((s[:pos].strip(" \t\n\r\v\f"), _unfold(s[pos + 1:])))
    return trailers


def pr_message(title: str | None, body: str | None) -> str:
    """The text git would see for a PR: ``<title>\\n\\n<body>``; None counts as empty; CRLF becomes LF."""
    text = f"{title or ''}\n\n{body or ''}"
    return text.replace("\r\n", "\n")


def benchmark_presets(title: str | None, body: str | None) -> list[str] | None:
    """Preset names from every ``benchmarks:`` trailer of a PR description, in order, without duplicates.

    Returns None when the description has no ``benchmarks`` trailer (an empty one returns []).
    """
    found = [v for k, v in parse_trailers(pr_message(title, body)) if k.lower() == BENCHMARKS_KEY]
    if not found:
        return None
    items = [item.lower() for value in found for item in re.split(r"[,\s]+", value) if item]
    return list(dict.fromkeys(items))


def accepted_regressions(title: str | None, body: str | None) -> list[str]:
    """Series names or globs from every ``benchmarks-accept:`` trailer, comma-separated, in order."""
    found = [v for k, v in parse_trailers(pr_message(title, body)) if k.lower() == ACCEPT_KEY]
    items = [item.strip() for value in found for item in value.split(",") if item.strip()]
    return list(dict.fromkeys(items))
