"""GitHub Actions expressions (``${{ … }}`` and ``if:``), evaluated as the Actions runner does.

The grammar and rules of https://docs.github.com/actions/learn-github-actions/expressions:
literals (``null``, booleans, numbers, ``'strings'`` with ``''`` for a quote), property access
(``a.b``, ``a['b']``, the object filter ``a.*.b``), ``!``, ``< <= > >=``, ``== !=``, ``&&``,
``||`` (which return an operand, not a boolean), loose equality (strings case-insensitively,
other mixed types as numbers) and the functions ``contains``, ``startsWith``, ``endsWith``,
``format``, ``join``, ``toJSON``, ``fromJSON``, ``success``, ``failure``, ``always`` and
``cancelled``. A missing property is ``null``. Used by ``tests/helpers/workflow_harness.py``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<str>'(?:[^']|'')*')
  | (?P<num>0x[0-9a-fA-F]+|-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\],.*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.VERBOSE)

STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")


class ExpressionError(ValueError):
    """An expression that does not parse, or calls an unknown function."""


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "space":
            continue
        value = m.group(kind)
        if kind == "str":
            value = value[1:-1].replace("''", "'")
        elif kind == "num":
            value = int(value, 16) if value.startswith("0x") else float(value)
        out.append((kind, value))
    return out


def truthy(value: Any) -> bool:
    """Actions' falsy values: false, 0, -0, '', null, NaN."""
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return True


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return a is b if isinstance(a, (dict, list)) else a == b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return _number(a) == _number(b)


def _compare(a: Any, b: Any, op: str) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x, y = a.lower(), b.lower()
    else:
        x, y = _number(a), _number(b)
        if math.isnan(x) or math.isnan(y):
            return False
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def to_string(value: Any) -> str:
    """How ``${{ }}`` puts a value into text: null → '', booleans lower case, whole numbers without .0."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2)
    return str(value)


def _contains(haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, list):
        return any(_equal(item, needle) for item in haystack)
    return to_string(needle).lower() in to_string(haystack).lower()


def _format(template: Any, *args: Any) -> str:
    return re.sub(r"\{\{|\}\}|\{(\d+)\}",
                  lambda m: m.group(0)[0] if m.group(1) is None else to_string(args[int(m.group(1))]),
                  to_string(template))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "contains": _contains,
    "startswith": lambda s, p: to_string(s).lower().startswith(to_string(p).lower()),
    "endswith": lambda s, p: to_string(s).lower().endswith(to_string(p).lower()),
    "format": _format,
    "join": lambda seq, sep=",": to_string(sep).join(to_string(x) for x in seq) if isinstance(seq, list)
    else to_string(seq),
    "tojson": lambda v: json.dumps(v, indent=2),
    "fromjson": lambda s: json.loads(to_string(s)),
}


class _Parser:
    """Recursive descent over the tokens; evaluates as it goes, skipping the side not taken."""

    def __init__(self, text: str, context: Mapping[str, Any], status: Mapping[str, bool]) -> None:
        self.text, self.tokens, self.pos = text, _tokens(text), 0
        self.context, self.status = context, status

    def peek(self, value: str | None = None, kind: str = "op") -> bool:
        if self.pos >= len(self.tokens):
            return False
        k, v = self.tokens[self.pos]
        return k == kind and (value is None or v == value)

    def take(self, value: str) -> None:
        if not self.peek(value):
            raise ExpressionError(f"expected {value!r} at token {self.pos} of {self.text!r}")
        self.pos += 1

    def parse(self) -> Any:
        value = self.or_(True)
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {self.text!r}")
        return value

    def or_(self, live: bool) -> Any:
        value = self.and_(live)
        while self.peek("||"):
            self.pos += 1
            right = self.and_(live and not truthy(value))
            if live and not truthy(value):
                value = right
        return value

    def and_(self, live: bool) -> Any:
        value = self.equality(live)
        while self.peek("&&"):
            self.pos += 1
            right = self.equality(live and truthy(value))
            if live and truthy(value):
                value = right
        return value

    def equality(self, live: bool) -> Any:
        value = self.comparison(live)
        while self.peek("==") or self.peek("!="):
            op = self.tokens[self.pos][1]
            self.pos += 1
            right = self.comparison(live)
            value = _equal(value, right) == (op == "==") if live else None
        return value

    def comparison(self, live: bool) -> Any:
        value = self.unary(live)
        while any(self.peek(op) for op in ("<", "<=", ">", ">=")):
            op = self.tokens[self.pos][1]
            self.pos += 1
            right = self.unary(live)
            value = _compare(value, right, op) if live else None
        return value

    def unary(self, live: bool) -> Any:
        if self.peek("!"):
            self.pos += 1
            return not truthy(self.unary(live))
        return self.postfix(live)

    def postfix(self, live: bool) -> Any:
        value = self.primary(live)
        while True:
            if self.peek("."):
                self.pos += 1
                if self.peek("*"):
                    self.pos += 1
                    value = _star(value)
                    continue
                kind, name = self.tokens[self.pos]
                if kind != "name":
                    raise ExpressionError(f"expected a property name after '.' in {self.text!r}")
                self.pos += 1
                value = _get(value, name)
            elif self.peek("["):
                self.pos += 1
                if self.peek("*"):
                    self.pos += 1
                    self.take("]")
                    value = _star(value)
                    continue
                key = self.or_(live)
                self.take("]")
                value = _get(value, key)
            else:
                return value

    def primary(self, live: bool) -> Any:
        if self.pos >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.text!r}")
        kind, value = self.tokens[self.pos]
        self.pos += 1
        if kind in ("str", "num"):
            return value
        if kind == "op" and value == "(":
            inner = self.or_(live)
            self.take(")")
            return inner
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r} in {self.text!r}")
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if self.peek("("):
            self.pos += 1
            args = []
            while not self.peek(")"):
                args.append(self.or_(live))
                if not self.peek(")"):
                    self.take(",")
            self.take(")")
            return self.call(value, args) if live else None
        return _get(self.context, value)

    def call(self, name: str, args: list[Any]) -> Any:
        lowered = name.lower()
        if lowered in STATUS_FUNCTIONS:
            return self.status[lowered]
        if lowered not in FUNCTIONS:
            raise ExpressionError(f"unknown function {name}() in {self.text!r}")
        return FUNCTIONS[lowered](*args)


def _get(value: Any, key: Any) -> Any:
    if isinstance(value, Mapping):
        if isinstance(key, str):
            for k, v in value.items():  # property names are case-insensitive
                if k.lower() == key.lower():
                    return v
        return None
    if isinstance(value, list):
        if isinstance(key, list):  # a filtered list: the property of each item
            return None
        if isinstance(key, str):
            return [_get(item, key) for item in value]  # after `.*`: a.*.b
        index = _number(key)
        return value[int(index)] if not math.isnan(index) and 0 <= index < len(value) else None
    return None


def _star(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return list(value.values())
    return list(value) if isinstance(value, list) else []


def evaluate(text: str, context: Mapping[str, Any], status: Mapping[str, bool] | None = None) -> Any:
    """The value of the expression ``text`` (without ``${{ }}``) over ``context``.

    ``status`` gives the values of success(), failure(), always() and cancelled().

    Raises:
        ExpressionError: the text does not parse or calls an unknown function.
    """
    return _Parser(text, context, status or {"success": True, "failure": False, "always": True,
                                             "cancelled": False}).parse()


_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


def interpolate(value: Any, context: Mapping[str, Any], status: Mapping[str, bool] | None = None) -> Any:
    """``value`` with every ``${{ expr }}`` replaced; a string that is one whole expression keeps the
    expression's type (as ``strategy.matrix.include: ${{ fromJSON(…) }}`` needs). Lists and dicts are
    interpolated item by item."""
    if isinstance(value, dict):
        return {k: interpolate(v, context, status) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, context, status) for v in value]
    if not isinstance(value, str):
        return value
    whole = _TEMPLATE.fullmatch(value.strip())
    if whole and value.strip().count("${{") == 1:
        return evaluate(whole.group(1), context, status)
    return _TEMPLATE.sub(lambda m: to_string(evaluate(m.group(1), context, status)), value)


def condition(text: Any, context: Mapping[str, Any], status: Mapping[str, bool]) -> bool:
    """An ``if:`` value: with no status function in it, ``success() && (…)`` is implied."""
    if isinstance(text, bool):
        return text and status["success"]
    expr = str(text).strip()
    whole = _TEMPLATE.fullmatch(expr)
    if whole:
        expr = whole.group(1).strip()
    if not re.search(r"\b(success|failure|always|cancelled)\s*\(", expr, re.IGNORECASE):
        expr = f"success() && ({expr})"
    return truthy(evaluate(expr, context, status))
