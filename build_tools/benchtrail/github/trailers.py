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

from benchtrail.suite.presets import split_presets

COMMENT = "#"
GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
SCISSORS = "# ------------------------ >8 ------------------------\n"
#: git's ``isspace`` (``sane_ctype``): not ``\v``, ``\f`` or anything outside ASCII.
GIT_SPACE = " \t\n\r"
#: The trailer keys benchtrail reads (matched case-insensitively).
BENCHMARKS_KEY = "benchmarks"
ACCEPT_KEY = "benchmarks-accept"
#: git's key: ASCII letters, digits and ``-``, then spaces or tabs (not first), then the ``:``.
_SEPARATOR = re.compile(r"(?:[A-Za-z0-9-]+[ \t]*)?:")


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (not on ``\\r`` or other line breaks), keeping each line's ``\\n`` as git
    does."""
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
    m = _SEPARATOR.match(line)
    return m.end() - 1 if m else -1


def _end_of_message(lines: list[str]) -> int:
    """Number of leading lines before the ignored tail (git's ``ignored_log_message_bytes``)."""
    cutoff = lines.index(SCISSORS) if SCISSORS in lines else len(lines)
    # boc: first line of the trailing run of comments; 0 means none, as in git (so a comment on
    # the very first line never starts the run)
    boc, in_conflicts = 0, False
    for i, line in enumerate(lines[:cutoff]):
        if line.startswith(COMMENT) or line in ("\n", "Conflicts:\n"):
            boc = boc or i
            in_conflicts = in_conflicts or line == "Conflicts:\n"
        elif boc and not (in_conflicts and line.startswith("\t")):  # a tab line continues a Conflicts: block
            boc, in_conflicts = 0, False
    return boc or cutoff


def _trailer_block_start(lines: list[str]) -> int:
    """Index of the first line of the trailer block, or ``len(lines)`` when there is none."""
    end_of_title = next((i for i, line in enumerate(lines)
                         if not line.startswith(COMMENT) and _is_blank(line)), len(lines))
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
            return i + 1 if trailer_lines and not non_trailer_lines else len(lines)
        only_spaces = False
        if _starts_with_space(line):  # (a git-generated prefix never starts with whitespace)
            possible_continuation += 1
            continue
        if line.startswith(GIT_GENERATED_PREFIXES) or find_separator(line) >= 1:
            trailer_lines += 1
            recognized_prefix = recognized_prefix or line.startswith(GIT_GENERATED_PREFIXES)
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
    continued = False  # whether an indented line continues the trailer strings[-1]
    for line in lines[_trailer_block_start(lines):]:
        if continued and _starts_with_space(line):
            strings[-1] += line
        else:
            strings.append(line)
            continued = find_separator(line) >= 1  # a comment line ends the trailer
    return [(s[:pos].strip(GIT_SPACE), _unfold(s[pos + 1:])) for s in strings
            if not s.startswith(COMMENT) and (pos := find_separator(s)) >= 1]


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
    return list(dict.fromkeys(split_presets(" ".join(found)))) if found else None


def accepted_regressions(title: str | None, body: str | None) -> list[str]:
    """Series names or globs from every ``benchmarks-accept:`` trailer, comma-separated, in order."""
    return list(dict.fromkeys(item.strip() for key, value in parse_trailers(pr_message(title, body))
                              if key.lower() == ACCEPT_KEY for item in value.split(",") if item.strip()))
