"""The backend for an adapter's ``store=``: in-process, a LangGraph store, or Postgres."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langgraph.store.base import BaseStore

from ..core.errors import UsageError
from .backend import StateBackend, StoreBackend


def as_backend(store: Any, *, clock: Callable[[], float] = time.time) -> StateBackend | None:
    """The backend for an adapter's ``store=`` argument (`None` stays in-process)."""
    if store is None or isinstance(store, StateBackend):
        return store
    if not isinstance(store, BaseStore):
        raise UsageError("store must be a langgraph BaseStore (or a StateBackend)")
    try:
        from .postgres import PostgresBackend, is_postgres_store
    except ImportError:  # langgraph-checkpoint-postgres is not installed
        return StoreBackend(store, clock=clock)
    if is_postgres_store(store):
        return PostgresBackend(store, clock=clock)
    return StoreBackend(store, clock=clock)
