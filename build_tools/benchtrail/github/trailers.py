"""Git trailers in a PR description, parsed exactly as ``git interpret-trailers --parse --no-divider``.

A port of git 2.39's ``trailer.c`` (``find_trailer_start``, ``find_separator``, ``trailer_info_get``,
``unfold_value``) and ``commit.c`` (``ignored_log_message_bytes``) with git's default settings
(separator ``:``, comment character ``#``). The text is ``<title>\\n\\n<body>`` byte for byte: lines end
at ``\\n`` only, ``\\r`` is whitespace, a NUL ends the text. The rules, line ends and benchtrail's own
(case-insensitive ``benchmarks`` key, comma or space separated values): docs/trailers.md.
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
    """Split on ``\\n`` only, keeping each line's ``\\n`` as git does."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _starts_with_space(line: str) -> bool:
    return line[:1] != "" and line[0] in GIT_SPACE


def _is_blank(line: str) -> bool:
    """git's ``is_blank_line``: only spaces, tabs and ``\\r`` before the ``\\n`` (or the end)."""
    return line.strip(GIT_SPACE) == ""


def find_separator(line: str) -> int:
    """Index of the ``:`` that ends a trailer key, or -1 (git's ``find_separator``); 0: an empty key."""
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
        elif boc and not (in_conflicts and line.startswith("\t")):  # a tab line continues Conflicts:
            boc, in_conflicts = 0, False
    return boc or cutoff


def _trailer_block_start(lines: list[str]) -> int:
    """Index of the first line of the trailer block, or ``len(lines)`` when there is none."""
    end_of_title = next(
        (i for i, line in enumerate(lines) if not line.startswith(COMMENT) and _is_blank(line)), len(lines)
    )
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
    """``[(key, value)]`` of the trailers of ``message`` (:func:`pr_message`), in order, trimmed, as git
    prints them with ``--parse``."""
    lines = _lines(message.split("\0", 1)[0])
    lines = lines[: _end_of_message(lines)]
    strings: list[str] = []
    continued = False  # whether an indented line continues the trailer strings[-1]
    for line in lines[_trailer_block_start(lines) :]:
        if continued and _starts_with_space(line):
            strings[-1] += line
        else:
            strings.append(line)
            continued = find_separator(line) >= 1  # a comment line ends the trailer
    return [
        (s[:pos].strip(GIT_SPACE), _unfold(s[pos + 1 :]))
        for s in strings
        if not s.startswith(COMMENT) and (pos := find_separator(s)) >= 1
    ]


def format_trailers(pairs: list[tuple[str, str]]) -> str:
    """One ``key: value\\n`` line per pair, as ``git interpret-trailers --parse`` prints them."""
    return "".join(f"{key}: {value}\n" for key, value in pairs)


def pr_message(title: str | None, body: str | None) -> str:
    """``<title>\\n\\n<body>``, None as empty, ``\\r`` kept: the text git would see for a PR."""
    return f"{title or ''}\n\n{body or ''}"


def benchmark_presets(title: str | None, body: str | None) -> list[str] | None:
    """Presets of every ``benchmarks:`` trailer, in order, without duplicates; None without a trailer."""
    found = [v for k, v in parse_trailers(pr_message(title, body)) if k.lower() == BENCHMARKS_KEY]
    return list(dict.fromkeys(split_presets(" ".join(found)))) if found else None


def accepted_regressions(title: str | None, body: str | None) -> list[str]:
    """Series names or globs from every ``benchmarks-accept:`` trailer, comma-separated, in order."""
    return list(
        dict.fromkeys(
            item.strip()
            for key, value in parse_trailers(pr_message(title, body))
            if key.lower() == ACCEPT_KEY
            for item in value.split(",")
            if item.strip()
        )
    )
