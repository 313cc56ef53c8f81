"""A cache of what was computed once per object, for objects that cannot be dict keys.

Tools are pydantic models, unhashable, so what the layer reads from a tool once (its
schema, its injected arguments, what it declares it reads) is kept by the tool's
identity. `IdentityCache` holds the tool *weakly*: an entry goes when its tool is
collected, so a tool built per request (closing over whatever it uses) is freed with
the request, however many are made (DESIGN invariant 18). An object that cannot be
referenced weakly is simply not cached. The values must not refer to their object.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """`object -> V`, by identity, holding each object weakly."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[Any], V]] = {}

    def get(self, obj: object) -> V | None:
        """The value kept for `obj`, or `None`."""
        hit = self._data.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj else None

    def put(self, obj: object, value: V) -> None:
        """Keep `value` for `obj` until `obj` is collected."""
        key, data = id(obj), self._data

        def gone(ref: weakref.ref[Any]) -> None:
            entry = data.get(key)
            if entry is not None and entry[0] is ref:  # not a newer object with that id
                data.pop(key, None)

        with contextlib.suppress(TypeError):  # not weakly referenceable: not cached
            data[key] = (weakref.ref(obj, gone), value)

    def __len__(self) -> int:
        return len(self._data)
