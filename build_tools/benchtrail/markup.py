"""Names are data (docs/formats.md): escape them for the format they are shown in.

An adopter's names may hold any printable character; every writer that puts one into Markdown, HTML,
plotly, matplotlib or rich markup goes through a helper here, so it shows literally. All take any object
(``str()`` of it), return ``str`` and never raise. Markdown output is one line: :func:`md_text` makes each
whitespace run one space, :func:`code_span` each run of line breaks.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence

#: ASCII punctuation that GFM or GitHub gives a meaning inline (``$…$`` is math on GitHub).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~@&!$])")


def md_text(text: object) -> str:
    """Literal Markdown text on one line, special characters backslash-escaped (``a|b`` → ``a\\|b``);
    safe in a table cell."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def code_span(text: object, *, in_table: bool = False) -> str:
    """One Markdown code span, fenced longer than any backtick run in ``text``; ``""`` for an empty text.

    ``in_table`` escapes ``|`` as ``\\|`` (GFM splits table cells before code spans)."""
    text = re.sub(r"[\r\n\v\f\x85\u2028\u2029]+", " ", str(text))
    if not text:
        return ""
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def html_text(text: object) -> str:
    """``text`` escaped for HTML text and quoted attribute values."""
    return html.escape(str(text), quote=True)


def plotly_text(text: object) -> str:
    """``text`` for a plotly label: HTML-escaped, ``$`` as ``&#36;`` (``$…$`` is LaTeX to plotly)."""
    return html_text(text).replace("$", "&#36;")


#: Most characters of a matplotlib series label and title; one long name must not squeeze a panel to
#: nothing (a 5-inch panel at 100 DPI holds about 75 characters of an 8-point title).
MPL_LABEL_CHARS = 60
MPL_TITLE_CHARS = 70


def mpl_text(text: object, limit: int | None = None) -> str:
    """``text`` for a matplotlib label, ``$`` escaped (no mathtext); over ``limit`` characters, its start and
    end around ``…`` (``limit`` in all, before escaping)."""
    text = str(text)
    if limit is not None and len(text) > limit:
        tail = (limit - 1) // 2
        text = text[: limit - 1 - tail] + "…" + text[len(text) - tail :]
    return text.replace("$", r"\$")


def mpl_label(name: str, common: str, limit: int) -> str:
    """``name`` in at most ``limit`` characters: a longer one loses the shared prefix ``common`` (shown as
    ``…``), then its middle, so names differing in their parameters stay apart."""
    if common and len(name) > limit and name.startswith(common):
        name = "…" + name[len(common) :]
    return mpl_text(name, limit)


def shared_module(names: Sequence[str]) -> str:
    """The leading dotted components all ``names`` share (``"mypkg.benchmarks."``), leaving each at least 3
    (function, compile config, task); ``""`` for fewer than two names. Dots inside ``[...]`` do not split."""
    shared = _shared(list(map(_components, names)), 3)
    return ".".join(shared) + "." if shared else ""


def shared_tail(names: Sequence[str]) -> str:
    """The trailing dotted components all ``names`` share (``".eager.inference"``), leaving each at least one;
    ``""`` for fewer than two names. Dots inside ``[...]`` do not split."""
    shared = _shared([_components(name)[::-1] for name in names], 1)
    return "." + ".".join(reversed(shared)) if shared else ""


def _shared(parts: list[list[str]], keep: int) -> list[str]:
    """The leading items all ``parts`` share, leaving each at least ``keep``; none for fewer than two."""
    if len(parts) < 2:
        return []
    # commonprefix compares item by item, so it takes lists as well as strings
    shared = os.path.commonprefix(parts)  # noqa: RUF071
    return shared[: max(0, min(map(len, parts)) - keep)]


def _components(name: str) -> list[str]:
    depth, out, start = 0, [], 0
    for i, char in enumerate(name):
        depth += (char == "[") - (char == "]")
        if char == "." and depth == 0:
            out.append(name[start:i])
            start = i + 1
    return [*out, name[start:]]


def rich_text(text: object) -> str:
    """``text`` for rich console markup, ``[`` that would open a tag escaped."""
    from rich.markup import escape

    return escape(str(text))
