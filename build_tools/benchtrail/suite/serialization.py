"""Serialize suite definitions to ``{root_obj, keyed_obj_map}`` JSON and back (IREE's ``serialization.py``).

Each dataclass with an ``id`` is written once into ``keyed_obj_map`` and referenced by id elsewhere.
Reading follows the type hints and rejects unknown or missing keys; an ``omit_if_default`` field is not
written while it holds its default, so older code still reads the export.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, TypeVar

from benchtrail.errors import UserError


def serialize_and_pack(objs: typing.Sequence[Any]) -> dict[str, Any]:
    """Return ``{"root_obj": [ids...], "keyed_obj_map": {id: fields}}`` for keyed dataclasses.

    Raises:
        ValueError: two different objects share one id.
    """
    keyed = {}
    return {"root_obj": [_serialize(obj, keyed) for obj in objs], "keyed_obj_map": keyed}


def unpack_and_deserialize(data: Any, root_type: type, *, where: str = "export") -> tuple[Any, ...]:
    """Inverse of ``serialize_and_pack``: ``root_type`` objects.

    Raises:
        UserError: not ``{root_obj, keyed_obj_map}``, an id missing from the map, or unknown or missing
            fields; the message names ``where``.
    """
    if not isinstance(data, dict) or set(data) != {"root_obj", "keyed_obj_map"}:
        raise UserError(f"{where}: expected an object with keys root_obj and keyed_obj_map")
    if not isinstance(data["root_obj"], list) or not isinstance(data["keyed_obj_map"], dict):
        raise UserError(f"{where}: root_obj must be a list and keyed_obj_map an object")
    cache = {}
    return tuple(
        _deserialize(item, root_type, data["keyed_obj_map"], cache, where) for item in data["root_obj"]
    )


def _serialize(obj: Any, keyed: dict[str, Any]) -> Any:
    if dataclasses.is_dataclass(obj):
        fields = {
            f.name: _serialize(getattr(obj, f.name), keyed)
            for f in dataclasses.fields(obj)
            if not (f.metadata.get("omit_if_default") and getattr(obj, f.name) == f.default)
        }
        if "id" not in fields:
            return fields
        previous = keyed.setdefault(obj.id, fields)
        if previous != fields:
            raise ValueError(f"two different objects share id {obj.id}: {previous} and {fields}")
        return obj.id
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (tuple, list)):
        return [_serialize(v, keyed) for v in obj]
    return obj


def _deserialize(value: Any, tp: Any, keyed: dict[str, Any], cache: dict[str, Any], where: str) -> Any:
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected an object, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _deserialize(value, inner, keyed, cache, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise UserError(f"{where}: expected a list for {tp}, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_deserialize(v, args[0], keyed, cache, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise UserError(f"{where}: expected {len(args)} items for {tp}, got {value!r}")
        return tuple(_deserialize(v, a, keyed, cache, where) for v, a in zip(value, args))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise UserError(
                f"{where}: {value!r} is not a valid {tp.__name__} (allowed: {', '.join(m.value for m in tp)})"
            ) from None
    if dataclasses.is_dataclass(tp):
        return _deserialize_dataclass(value, tp, keyed, cache, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise UserError(
                f"{where}: {str(value)[:20]}... ({len(str(value))} digits) is beyond a float's "
                "range; allowed: numbers up to about 1.8e308"
            ) from None
    if not isinstance(value, tp):
        raise UserError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


def _deserialize_dataclass(
    value: Any, tp: type, keyed: dict[str, Any], cache: dict[str, Any], where: str
) -> Any:
    key = None
    if isinstance(value, str):
        key = value
        if key in cache:
            return cache[key]
        if key not in keyed:
            raise UserError(f"{where}: id {key} is referenced but not in keyed_obj_map")
        value = keyed[key]
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected an object for {tp.__name__}, got {value!r}")
    label = f"{tp.__name__} {key}" if key else tp.__name__
    hints = typing.get_type_hints(tp)
    fields = {f.name: f for f in dataclasses.fields(tp)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise UserError(f"{where}: {label} has unknown field(s) {unknown}; allowed: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _deserialize(
                value[name], hints[name], keyed, cache, f"{where}: {tp.__name__}.{name}"
            )
        elif f.default is dataclasses.MISSING:
            raise UserError(f"{where}: {label} lacks field {name!r}")
    try:
        obj = tp(**kwargs)
    except UserError as exc:  # a refused name (BadName)
        raise UserError(f"{where}: {label}: {exc}") from exc
    if key is not None:
        cache[key] = obj
    return obj


_T = TypeVar("_T")


def from_plain(value: Any, tp: type[_T], *, where: str) -> _T:
    """Dataclass ``tp`` from plain JSON (no keyed map), every field's type checked.

    Raises:
        UserError: unknown or missing fields, or a value of the wrong type; names ``where``.
    """
    return _deserialize(value, tp, {}, {}, where)
