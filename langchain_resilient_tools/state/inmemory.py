"""LangGraph's own ``InMemoryStore``, read and written in place.

A `StoreBackend` goes through a store's public API: each ``put`` and ``get`` builds an
operation, validates its namespace and runs a one-operation ``batch``, a few
microseconds each. On LangGraph's ``InMemoryStore`` itself (that class, not a subclass,
with no search index) `InMemoryStoreBackend` reads and writes the store's item table
(``InMemoryStore._data``, which LangGraph keeps under that name for its in-memory
server) directly: the same `Item` under the same namespace and key as the store's own
``put`` makes, seen by its ``get``, ``search`` and ``list_namespaces``, without the
round of the batch API. Nothing else changes: values, expiry, the claim (a get then a
put under the backend's lock: atomic within the process, the only one the store has).
Such a store is process memory, lost with the process (`state.choose.is_durable`); a
write's journal kept in it protects within the process only, wherever it is written.

`in_place` tells whether a store qualifies; any other store keeps `StoreBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeGuard

from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore

from .backend import StoreBackend

_ITEM_FIELDS = ("value", "key", "namespace", "created_at", "updated_at")
"""An `Item`'s fields (its ``__slots__``), all of which `InMemoryStoreBackend` sets."""
_new = object.__new__
_now = datetime.now  # bound once (a classmethod): not on every put


def in_place(store: BaseStore) -> TypeGuard[InMemoryStore]:
    """Whether `store` is LangGraph's ``InMemoryStore`` itself (a subclass may persist,
    count or index its writes in its own ``batch``), without a search index, with its
    item table where this module reads it, and items of the fields it writes."""
    return (
        type(store) is InMemoryStore
        and not store.index_config
        and isinstance(getattr(store, "_data", None), dict)
        and getattr(Item, "__slots__", None) == _ITEM_FIELDS
    )


class InMemoryStoreBackend(StoreBackend):
    """A `StoreBackend` over an ``InMemoryStore`` (`in_place`) that reads and writes its
    items in place, as its ``batch`` does for one ``get`` or ``put`` (``index=False``)."""

    def __init__(self, store: InMemoryStore, *, clock: Callable[[], float]) -> None:
        super().__init__(store, clock=clock)
        self._items: dict[tuple[str, ...], dict[str, Item]] = store._data

    def _get(self, ns: str, key: str) -> Any | None:
        items = self._items.get(self._ns.get(ns) or self._where(ns))
        item = None if items is None else items.get(key)
        return None if item is None else self._live(item)

    def _put(self, ns: str, key: str, value: Any, ttl: float) -> None:
        """The `Item` the store's own ``put`` makes, its fields set as its constructor
        sets them from values of their types (`_ITEM_FIELDS`, checked by `in_place`),
        without the constructor's checks for values read back from JSON."""
        where = self._ns.get(ns) or self._where(ns)
        item = _new(Item)
        item.value, item.key, item.namespace = self._stored(value, ttl), key, where
        item.created_at = item.updated_at = _now(UTC)
        self._items.setdefault(where, {})[key] = item
