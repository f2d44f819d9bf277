"""Verdicts to JSON and back, generically over the dataclasses in types.py.

Writing uses dataclasses.asdict with enums as their values, so a field added to a dataclass is stored
without touching this module. Reading is tolerant by design: records outlive code versions, so unknown
keys are ignored and missing keys take the field's default; a timing's facts stored as the `extra`
key-value list are read into their typed groups (types.timing_record).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from functools import cache
from typing import Any

from kbench.errors import KbenchError
from kbench.types import TimingStats, Verdict, timing_record


class RecordError(KbenchError):
    """A stored record cannot be read back (the message names the field)."""


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None  # NaN is not JSON; a missing number reads back as the field default
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """A dataclass instance as JSON-ready data (enums as values, tuples as lists)."""
    return _plain(dataclasses.asdict(obj))  # type: ignore[no-any-return]


def dumps(obj: Any) -> str:
    return json.dumps(to_dict(obj), sort_keys=True, default=str)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any or value is None:
        return value
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(options[0], value, where) if len(options) == 1 else value
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, where) for v in value)
        return tuple(_convert(a, v, where) for a, v in zip(args, value, strict=False))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise RecordError(f"{where}: {value!r} is not a known {tp.__name__}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def from_dict(cls: type, data: dict[str, Any], where: str = "record") -> Any:
    """Rebuild dataclass `cls` from `data`: unknown keys ignored, missing keys take their default."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object for {cls.__name__}, got {type(data).__name__}")
    if cls is TimingStats:
        data = timing_record(data)
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(f"{where}: required field {f.name!r} of {cls.__name__} is missing")
    return cls(**kwargs)


def verdict_from_json(text: str, where: str = "verdict") -> Verdict:
    return from_dict(Verdict, json.loads(text), where)  # type: ignore[no-any-return]
