"""Walking and editing decoded JSON state records, for the corruption tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import strategies as st

from tests.reliability.strategies import ODD_NUMBERS, json_values


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path in ``obj`` (keys and list indices; the first three items of a list)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from paths(v, (*prefix, i))


def replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced (``obj`` is not changed)."""
    if not path:
        return value
    out = dict(obj) if isinstance(obj, dict) else list(obj)
    out[path[0]] = replaced(obj[path[0]], path[1:], value)
    return out


def arrays(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...],
                                                                     dict[str, Any]]]:
    """``(path, encoded array)`` of every ``{"dtype", "shape", "b64"}`` object in ``obj``."""
    if isinstance(obj, dict):
        if set(obj) == {"dtype", "shape", "b64"}:
            yield prefix, obj
            return
        for k, v in obj.items():
            yield from arrays(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from arrays(v, (*prefix, i))


#: What corruption tests draw a replacement from: odd number literals (as JSON text) or
#: any JSON value.
ODD_LITERALS = st.sampled_from(ODD_NUMBERS) | json_values.map(lambda v: orjson.dumps(v).decode())


def with_literal(record: Any, path: tuple[Any, ...], literal: str) -> bytes:
    """``record`` as JSON bytes with the value at ``path`` replaced by the JSON text
    ``literal`` verbatim (so that literals no encoder would write, such as ``1e999`` or
    20-digit integers, reach the decoder)."""
    marker = "__CORRUPT__"
    return orjson.dumps(replaced(record, path, marker)).replace(orjson.dumps(marker),
                                                                  literal.encode())
