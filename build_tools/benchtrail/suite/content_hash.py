"""The content hash of a module or run config: equal ids with different hashes mean the definition
changed under the same id. Torch-free at import: the model module is imported only to hash it.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib
import inspect
import json
import textwrap
from typing import Any

from benchtrail.suite.definitions import Model
from benchtrail.suite.functions import FunctionBenchmark, callable_name

#: Version of the hash's scheme, recorded in results files (``environment.hash_scheme``; absent: 1).
#:   2 — a function benchmark's hash leaves out its own name (its model's name and entry point, the names
#:       made from them, the name in its ``def`` line), which ``renamed_from`` may change under one id.
HASH_SCHEME = 2
#: The name and entry point a function benchmark's config is hashed under (scheme 2).
_ANONYMOUS = ("benchmark", "benchmark:benchmark")


def model_source_digest(model: Model) -> str:
    """sha256 (hex) of the model's source: a function benchmark's function, input factory and reference
    (an edit elsewhere in its module leaves it comparable), else its factory and reference modules' files.

    Raises:
        ImportError: a module named by the model's entry points cannot be imported.
    """
    module_name, _, attr = model.entry_point.partition(":")
    module = importlib.import_module(module_name)
    bench = getattr(module, attr, None)
    if isinstance(bench, FunctionBenchmark):
        texts = [
            _source(part, module, anonymous=part is bench.fn)
            for part in (bench.fn, bench.inputs, bench.reference)
            if part is not None
        ]
    else:
        texts = [
            inspect.getsource(importlib.import_module(entry.partition(":")[0]))
            for entry in filter(None, (model.entry_point, model.reference_entry_point))
        ]
    return hashlib.sha256("".join(texts).encode()).hexdigest()


def _source(obj: Any, module: Any, depth: int = 0, anonymous: bool = False) -> str:
    """A benchmark's function, input factory or reference as text equal in every process (never a repr):
    a function or class as ``ast.unparse`` writes it without decorators (``anonymous``: nor its name),
    then what it wraps or its closure holds; a builtin's qualified name; else ``module``'s source.
    ``ast.unparse`` drops comments and layout, and may write otherwise on another Python version.
    """
    if inspect.isbuiltin(obj):
        return f"{getattr(obj, '__module__', None)}.{obj.__qualname__}"
    if inspect.isfunction(obj) or inspect.isclass(obj):
        try:
            source = inspect.getsource(obj)
            text = _lambdas(source) if obj.__name__ == "<lambda>" else _without_decorators(source, anonymous)
        except (OSError, TypeError):
            text = None
        if text is not None:
            inner = [
                getattr(obj, "__wrapped__", None),
                *(c.cell_contents for c in getattr(obj, "__closure__", None) or () if _filled(c)),
            ]
            return text + "".join(
                _source(f, module, depth + 1)
                for f in inner
                if depth < 3 and (inspect.isfunction(f) or inspect.isclass(f))
            )
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return f"{module.__name__}:{getattr(obj, '__module__', '')}.{callable_name(obj)}"


def _without_decorators(source: str, anonymous: bool = False) -> str:
    """``source`` of one definition unparsed without decorators (``anonymous``: nor its name); else as is."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.decorator_list = []
            if anonymous:
                node.name = _ANONYMOUS[0]
    return ast.unparse(tree)


def _lambdas(source: str) -> str:
    """The lambdas of ``source`` as ``ast.unparse`` writes them: of a decorated definition only the
    decorators' lambdas (the function is hashed as itself); a fragment that does not parse as it is."""
    text = textwrap.dedent(source)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        try:
            tree = ast.parse(text.strip().removeprefix("@"), mode="eval")
        except SyntaxError:
            return source
    decorated = [n for n in getattr(tree, "body", ()) if getattr(n, "decorator_list", None)]
    roots = [d for n in decorated for d in n.decorator_list] or [tree]
    found = [ast.unparse(node) for root in roots for node in ast.walk(root) if isinstance(node, ast.Lambda)]
    return "\n".join(found) if found else source


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def content_hash(config: Any, torch_version: str) -> str:
    """sha256 (hex) over a module or run config's fields (less presets and, for a function benchmark, its
    own name), ``torch_version`` and model source."""
    from benchtrail.suite.serialization import serialize_and_pack

    gen = getattr(config, "module_generation_config", config)
    names = {"name": _ANONYMOUS[0]} if "function" in gen.model.tags else {}  # scheme 2: not its own name
    model = dataclasses.replace(gen.model, entry_point=_ANONYMOUS[1], **names) if names else gen.model
    bare_gen = dataclasses.replace(gen, presets=(), model=model, **names)
    bare = (
        bare_gen
        if config is gen
        else dataclasses.replace(config, presets=(), module_generation_config=bare_gen, **names)
    )
    return hashlib.sha256(
        (
            json.dumps(serialize_and_pack([bare]), sort_keys=True)
            + torch_version
            + model_source_digest(gen.model)
        ).encode()
    ).hexdigest()
