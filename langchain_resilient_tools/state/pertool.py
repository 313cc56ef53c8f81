"""Per-tool state of one pipeline, created on first use (thread-safe)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerTool(Generic[T]):
    """A lazily filled ``tool name -> T`` map; `factory` runs at most once per name."""

    __slots__ = ("_items", "_lock")

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, name: str, factory: Callable[[], T]) -> T:
        item = self._items.get(name)
        if item is None:
            with self._lock:
                item = self._items.get(name)
                if item is None:
                    item = self._items[name] = factory()
        return item

    def peek(self, name: str) -> T | None:
        """The item for `name`, if one was made."""
        return self._items.get(name)
