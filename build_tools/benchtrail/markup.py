"""Names are data: escape them for the format they are shown in.

An adopter's names (models, compile and execution configs, devices, the run config and module names
made of them) may hold any printable character: ``|``, backticks, ``<``/``>``/``&``, ``*``/``_``,
``$``, ``[``/``]``, spaces, non-ASCII. Every writer that puts a name (or other text from results) into
Markdown, HTML, plotly text, matplotlib labels or rich console markup goes through one of these
helpers, so the text shows literally and never becomes markup:

- :func:`md_text`: plain Markdown text (also safe in a table cell);
- :func:`code_span`: a Markdown code span with a fence longer than any backtick run in the text
  (``in_table=True`` also escapes ``|`` for a table cell);
- :func:`html_text`: HTML text or attribute value;
- :func:`plotly_text`: plotly's pseudo-HTML labels (titles, legend, hover), where ``$…$`` is LaTeX;
- :func:`mpl_text`: matplotlib labels, where ``$`` starts mathtext;
- :func:`rich_text`: rich console markup.

Where names must be short (a terminal column, a plot label), :func:`shared_module` finds the module path
that all of them share (:func:`mpl_label` shows it as ``…``) and :func:`shared_tail` their shared end
(compile config and task); the terminal table leaves both out and says so in one line.

All take any object (``str()`` of it), return ``str`` and never raise. A Markdown line or table row
is one line: :func:`md_text` makes each run of whitespace one space (as HTML shows it), and
:func:`code_span` each run of line breaks one space (other spaces kept).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence

#: ASCII punctuation that Markdown (GFM) or GitHub gives a meaning inline: escapes, code, emphasis,
#: links and images, raw HTML and entities, table cells, headings, strikethrough, @mentions, and
#: ``$`` (GitHub renders ``$…$`` and ``$$…$$`` as math).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~@&!$])")


def md_text(text: object) -> str:
    """``text`` as literal Markdown text on one line: every Markdown-special ASCII character is
    backslash-escaped (``a|b`` → ``a\\|b``, ``*x*`` → ``\\*x\\*``, ``<b>`` → ``\\<b\\>``), so it is
    also safe inside a table cell."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def code_span(text: object, *, in_table: bool = False) -> str:
    """``text`` as one Markdown code span on one line (line breaks as spaces): fenced by one backtick
    more than its longest backtick run, padded by a space when it starts or ends with a backtick or a
    space (CommonMark strips one space each side). ``in_table``: ``|`` is escaped as ``\\|`` (GFM splits
    table cells before code spans; the cell's ``\\|`` shows as ``|``). An empty text gives ``""``."""
    text = re.sub(r"[\r\n\v\f\x85\u2028\u2029]+", " ", str(text))
    if not text:
        return ""
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def html_text(text: object) -> str:
    """``text`` escaped for HTML text and quoted attribute values (``&``, ``<``, ``>``, ``"``, ``'``)."""
    return html.escape(str(text), quote=True)


def plotly_text(text: object) -> str:
    """``text`` for a plotly label (subplot title, legend entry, hover text): HTML-escaped (plotly reads
    its labels as a subset of HTML and decodes entities), and ``$`` as ``&#36;`` (a label that starts and
    ends with ``$`` is LaTeX to plotly)."""
    return html_text(text).replace("$", "&#36;")


#: Most characters of a series label (tick, legend) and of a title in our matplotlib figures: a longer name
#: keeps its start and end around "…" (:func:`mpl_text`), so that one long name cannot squeeze a panel to
#: nothing (a 5-inch panel at 100 DPI holds about 75 characters of an 8-point title). The full names are in
#: the comment, the reports and the dashboard.
MPL_LABEL_CHARS = 60
MPL_TITLE_CHARS = 70


def mpl_text(text: object, limit: int | None = None) -> str:
    """``text`` for a matplotlib label: every ``$`` escaped as ``\\$``, so no mathtext is parsed and
    the text shows as given (backslashes included). With ``limit``, a text of more than ``limit``
    characters keeps its start and its end around ``…`` (``limit`` characters in all, before escaping):
    a label wider than its figure would squeeze the axes to nothing (constrained layout gives up)."""
    text = str(text)
    if limit is not None and len(text) > limit:
        tail = (limit - 1) // 2
        text = text[:limit - 1 - tail] + "…" + text[len(text) - tail:]
    return text.replace("$", r"\$")


def mpl_label(name: str, common: str, limit: int) -> str:
    """``name`` for a matplotlib label of at most ``limit`` characters: a longer one first loses the module
    path ``common`` that the figure's names share (:func:`shared_module`), shown as ``…``, then its middle
    (:func:`mpl_text`), so that names differing in their parameters stay apart as long as they can."""
    if common and len(name) > limit and name.startswith(common):
        name = "…" + name[len(common):]
    return mpl_text(name, limit)


def shared_module(names: Sequence[str]) -> str:
    """The leading dotted components all of ``names`` share (``"mypkg.benchmarks."``, dot included), such that
    every name keeps at least 3 components after it (a function benchmark's name is
    ``module.function[params]``, then its compile config and task: 3 leaves those); ``""`` for fewer
    than two names. A dot inside ``[parameters]`` is no boundary."""
    shared = _shared(list(map(_components, names)), 3)
    return ".".join(shared) + "." if shared else ""


def shared_tail(names: Sequence[str]) -> str:
    """The trailing dotted components all of ``names`` share (``".eager.inference"``, dot included), such that
    every name keeps at least one component before it; ``""`` for fewer than two names. A dot inside
    ``[parameters]`` is no boundary."""
    shared = _shared([_components(name)[::-1] for name in names], 1)
    return "." + ".".join(reversed(shared)) if shared else ""


def _shared(parts: list[list[str]], keep: int) -> list[str]:
    """The leading items all of ``parts`` (the components of each name) share, leaving each at least ``keep``
    others; none for fewer than two names."""
    if len(parts) < 2:
        return []
    # commonprefix compares item by item, so it takes lists as well as strings
    return os.path.commonprefix(parts)[:max(0, min(map(len, parts)) - keep)]


def _components(name: str) -> list[str]:
    """``name`` split at its dots outside ``[...]``."""
    depth, out, start = 0, [], 0
    for i, char in enumerate(name):
        depth += (char == "[") - (char == "]")
        if char == "." and depth == 0:
            out.append(name[start:i])
            start = i + 1
    return [*out, name[start:]]


def rich_text(text: object) -> str:
    """``text`` for rich console markup: ``[`` that would open a tag escaped (``rich.markup.escape``)."""
    from rich.markup import escape

    return escape(str(text))
