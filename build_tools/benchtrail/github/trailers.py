"""Git trailers in a PR description, parsed exactly as ``git interpret-trailers --parse --no-divider``.

A port of the rules of git 2.39's ``trailer.c`` (``find_trailer_start``, ``find_separator``,
``trailer_info_get``, ``unfold_value``) and ``commit.c`` (``ignored_log_message_bytes``), with
git's default settings: separator ``:``, comment character ``#``, no configured trailer keys. In
short:

* the text is ``<title>\\n\\n<body>``, kept byte for byte: lines end at ``\\n`` only, a ``\\r`` is
  an ordinary whitespace character (so a CRLF line that is otherwise empty is blank, and a body
  with lone ``\\r`` line ends is one long line), and a NUL character ends the text;
* "whitespace" is git's: space, tab, ``\\n`` and ``\\r`` (not ``\\v``, ``\\f`` or Unicode spaces);
* the first paragraph (the title) is never trailers;
* a run of comment (``#``) lines, empty lines (exactly ``\\n``) and ``Conflicts:`` blocks at the
  end is ignored, and so is everything from a scissors line (``# -------- >8 --------``) on;
* only the last paragraph can be the trailer block; it counts when all its non-comment lines are
  trailers (``Key: value``, key of ASCII letters, digits and ``-``, then optional spaces or tabs),
  or when it holds a git-generated trailer (``Signed-off-by: ``, ``(cherry picked from commit ``)
  and trailers are at least 25% of its lines;
* a line starting with whitespace continues the trailer just above it; a comment line in the block
  is dropped but ends the trailer above (an indented line after it continues nothing); values are
  unfolded (each line break and the whitespace after it become one space) and trimmed, so a value
  can keep a ``\\r`` from a CRLF continuation line, as git prints it.

``benchmark_presets`` adds benchtrail's own rules on top: ``benchmarks`` keys match
case-insensitively, values split on commas and/or whitespace (``\\r`` included) and are lowercased,
empty items are dropped, and several ``benchmarks:`` trailers are united.
"""

from __future__ import annotations

import re


COMMENT = "#"
GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
SCISSORS = "# ------------------------ >8 ------------------------\n"
#: git's ``isspace`` (``sane_ctype``): not ``\v``, ``\f`` or anything outside ASCII.
GIT_SPACE = " \t\n\r"
#: The trailer keys benchtrail reads (matched case-insensitively).
BENCHMARKS_KEY = "benchmarks"
ACCEPT_KEY = "benchmarks-accept"


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (not on ``\\r`` or other line breaks), keeping each line's ``\\n`` as git does."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _starts_with_space(line: str) -> bool:
    return line[:1] != "" and line[0] in GIT_SPACE


def _is_blank(line: str) -> bool:
    """git's ``is_blank_line``: only spaces, tabs and ``\\r`` before the ``\\n`` (or the end)."""
    return line.strip(GIT_SPACE) == ""


def find_separator(line: str) -> int:
    """Index of the ``:`` that ends a trailer key, or -1 (git's ``find_separator``).

    0 means the line starts with ``:`` (an empty key, which is not a trailer).
    """
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
    """Number of leading lines before the ignored tail (git's ``ignored_log_message_bytes``)."""
    cutoff = lines.index(SCISSORS) if SCISSORS in lines else len(lines)
    # boc: first line of the trailing run of comments; 0 means none, as in git (so a comment on
    # the very first line never starts the run)
    boc = 0
    in_conflicts = False
    for i in range(cutoff):
        line = lines[i]
        if line.startswith(COMMENT) or line == "\n":
            if not boc:
                boc = i
        elif line == "Conflicts:\n":
            in_conflicts = True
            if not boc:
                boc = i
        elif in_conflicts and line.startswith("\t"):
            pass
        elif boc:
            boc = 0
            in_conflicts = False
    return boc if boc else cutoff


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
        elif find_separator(line) >= 1 and not _starts_with_space(line):
            trailer_lines += 1
            possible_continuation = 0
        elif _starts_with_space(line):
            possible_continuation += 1
        else:
            non_trailer_lines += 1 + possible_continuation
            possible_continuation = 0
    return len(lines)


def _unfold(value: str) -> str:
    """git's ``unfold_value``: each ``\\n`` and the whitespace after it become one space; trimmed."""
    return re.sub(r"\n[ \t\n\r]*", " ", value).strip(GIT_SPACE)


def parse_trailers(message: str) -> list[tuple[str, str]]:
    """``[(key, value)]`` of the message's trailers, in order, as git prints them with ``--parse``.

    ``message`` is the whole text git would read (``pr_message``); keys and values are str, keys
    without the ``:``, both trimmed; git prints each pair as ``f"{key}: {value}\\n"``.
    """
    lines = _lines(message.split("\0", 1)[0])
    lines = lines[: _end_of_message(lines)]
    strings: list[str] = []
    last: int | None = None  # index in strings of the trailer an indented line continues
    for line in lines[_trailer_block_start(lines):]:
        if last is not None and _starts_with_space(line):
            strings[last] += line
            continue
        strings.append(line)
        last = len(strings) - 1 if find_separator(line) >= 1 else None  # a comment line ends the trailer
    trailers = []
    for s in strings:
        pos = find_separator(s)
        if pos >= 1 and not s.startswith(COMMENT):
            trailers.append((s[:pos].strip(GIT_SPACE), _unfold(s[pos + 1:])))
    return trailers


def format_trailers(pairs: list[tuple[str, str]]) -> str:
    """The pairs as ``git interpret-trailers --parse`` prints them: one ``key: value\\n`` line each."""
    return "".join(f"{key}: {value}\n" for key, value in pairs)


def pr_message(title: str | None, body: str | None) -> str:
    """The text git would see for a PR: ``<title>\\n\\n<body>``; None counts as empty; CRLF and lone
    ``\\r`` are kept (``parse_trailers`` treats ``\\r`` as git does)."""
    return f"{title or ''}\n\n{body or ''}"


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
