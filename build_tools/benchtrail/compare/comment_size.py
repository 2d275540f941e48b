"""The size caps of comment.md and how a body over them is cut (rows left out and counted).

GitHub refuses an issue comment over its limits; full.md always holds every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from benchtrail.errors import UserError

#: Code points comment.md (and comment.json's ``body``) may hold. GitHub's REST API refuses a longer issue
#: comment with 422 "Body is too long (maximum is 65536 characters)" (reported in e.g. danger/danger#424,
#: telia-oss/github-pr-resource#259); 5,536 (about 8%) of the 65,536 is kept as a margin.
MAX_COMMENT_CHARS = 60_000
#: UTF-8 bytes comment.md (and comment.json's ``body``) may hold. Bisections stored 262,144 bytes and refused
#: 262,145 (dead-claudia/github-limits#13, 2025; objectstack-ai/objectstack#18826, 2026): GitHub may count
#: bytes. The same ~8% margin is kept. It binds only once MAX_COMMENT_CHARS exceeds a quarter of it (a code
#: point is at most 4 UTF-8 bytes).
MAX_COMMENT_BYTES = 240_000


#: A body's size, or the limits on it: (code points, UTF-8 bytes).
Size = tuple[int, int]


class Block(NamedTuple):
    """One section of comment.md: ``before`` (its title and table header), its table's row lines, ``after``;
    ``priority``, said where the section is made: when comment.md must be cut, sections keep their rows
    in this order (0 first), and the last loses rows first."""

    before: list[str]
    rows: list[str]
    after: list[str]
    priority: int


def body_size(lines: Sequence[str]) -> Size:
    """Code points and UTF-8 bytes of ``"\\n".join(lines) + "\\n"``, the body those lines make."""
    return (
        sum(map(len, lines)) + len(lines),
        sum(len(line.encode("utf-8", "surrogatepass")) for line in lines) + len(lines),
    )


def fits(size: Size, limits: Size) -> bool:
    """Whether a body of ``size`` is within ``limits``."""
    return size[0] <= limits[0] and size[1] <= limits[1]


def _fitting(lines: Sequence[str], used: Size, limits: Size) -> tuple[int, Size]:
    """How many of ``lines`` a body of ``used`` size takes within ``limits``, and its size with them."""
    n = 0
    for line in lines:
        chars, n_bytes = body_size([line])
        grown = used[0] + chars, used[1] + n_bytes
        if not fits(grown, limits):
            break
        used, n = grown, n + 1
    return n, used


def left_out_line(left_out: int, total: int) -> str:
    """The line a cut comment.md ends with: the rows none of its tables shows, and where every row is."""
    return (
        f"{left_out} of {total} rows left out to fit GitHub's comment size limit: see full.md in the "
        "run's artifacts for every row."
    )


def _table_cut_line(left_out: int, kept: int) -> str:
    s = "s" if left_out != 1 else ""
    return (
        f"… and {left_out} more row{s} left out here: see full.md."
        if kept
        else f"{left_out} row{s} left out here: see full.md."
    )


def cut_to_fit(top: list[str], blocks: list[Block], footer: list[str], total: int, limits: Size) -> list[str]:
    """comment.md's lines when the whole body is over ``limits`` (code points, UTF-8 bytes): rows go from
    the end of the highest-``priority`` section back; a cut table ends with a line counting its rows left
    out, the body with :func:`left_out_line`. If even the text around the tables does not fit, the
    sections go, then the top lines from the last, then the footer but its marker.

    Raises: UserError when the marker alone does not fit.
    """
    reserve = [*top, left_out_line(total, total), "", *footer]
    for b in blocks:
        reserve += [*b.before, *b.after, *(["", _table_cut_line(len(b.rows), 1)] if b.rows else [])]
    used = body_size(reserve)
    if not fits(used, limits):
        return _cut_text(top, footer, total, limits)
    kept = dict.fromkeys(map(id, blocks), 0)  # rows kept, by block
    for b in sorted(blocks, key=lambda b: b.priority):
        kept[id(b)], used = _fitting(b.rows, used, limits)
        if kept[id(b)] < len(b.rows):
            break  # the rows of less important sections go before any more of this one's
    lines = list(top)
    for b in blocks:
        k = kept[id(b)]
        lines += b.before if k or not b.rows else b.before[:1]  # no table header over no rows
        lines += b.rows[:k]
        if k < len(b.rows):
            lines += ["", _table_cut_line(len(b.rows) - k, k)]
        lines += b.after
    return [*lines, left_out_line(total - sum(kept.values()), total), "", *footer]


def _cut_text(top: list[str], footer: list[str], total: int, limits: Size) -> list[str]:
    """Last resort of :func:`cut_to_fit`: no sections, the top lines that fit, then the footer or marker."""
    tail = ["", left_out_line(total, total), "Lines above were cut as well.", "", *footer]
    if not fits(body_size(tail), limits):
        tail = tail[: -len(footer)] + footer[-1:]
        if not fits(body_size(tail), limits):
            raise UserError(
                f"the comment's marker alone is {len(footer[-1])} characters; the comment may "
                f"hold {limits[0]} characters and {limits[1]} bytes"
            )
    return top[: _fitting(top, body_size(tail), limits)[0]] + tail
