"""The backend for an adapter's ``store=``: in-process, a LangGraph store, Postgres,
SQLite or Redis; and the backend in a checkpointer's own database (for the write journal).

Optional packages (psycopg, redis-py, ``langgraph-checkpoint-redis``) are recognized by
their classes' module names and imported only when one of their objects is given."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langgraph.store.base import BaseStore

from ..core.errors import UsageError
from .backend import MemoryBackend, StateBackend, StoreBackend
from .inmemory import InMemoryStoreBackend, in_place


def _is_a(obj: Any, modules: tuple[str, ...], name: str | None = None) -> bool:
    """Whether `obj`'s class, or a class it derives from, comes from one of `modules`
    (and is called `name`): checked without importing optional packages."""
    return any(
        cls.__module__.startswith(modules) and (name is None or cls.__name__ == name)
        for cls in type(obj).__mro__
    )


def _sqlite_file(store_or_saver: Any) -> str | None:
    """The database file of a LangGraph SQLite store or saver, or of a subclass (`None`:
    not one, or in memory)."""
    if not _is_a(store_or_saver, ("langgraph.store.sqlite", "langgraph.checkpoint.sqlite")):
        return None
    from .sqlite import database_file

    return database_file(getattr(store_or_saver, "conn", None))


_REDIS_STORES = ("langgraph.store.redis", "langgraph.checkpoint.redis")
"""``langgraph-checkpoint-redis``: its stores and savers keep their client as ``_redis``."""


def redis_client(obj: Any) -> Any:
    """The redis-py client of `obj`: a client itself (``redis.Redis``, ``RedisCluster``,
    ``redis.asyncio.Redis``), or the client of a ``langgraph-checkpoint-redis`` store or
    saver; `None` for anything else."""
    if _is_a(obj, ("redis.",), "Redis") or _is_a(obj, ("redis.",), "RedisCluster"):
        return obj
    if _is_a(obj, _REDIS_STORES):
        return getattr(obj, "_redis", None)
    return None


def as_backend(store: Any, *, clock: Callable[[], float] = time.time) -> StateBackend | None:
    """The backend for an adapter's ``store=`` argument (`None` stays in-process). A
    Redis client or store gets a `state.redis.RedisBackend`, timed by the server's clock
    (`clock` is for the other backends)."""
    if store is None or isinstance(store, StateBackend):
        return store
    client = redis_client(store)
    if client is not None:
        from .redis import RedisBackend

        return RedisBackend(client)
    if not isinstance(store, BaseStore):
        raise UsageError(
            "store must be a langgraph BaseStore, a redis-py client (redis.Redis) or a "
            f"StateBackend, not {type(store).__name__}"
        )
    path = _sqlite_file(store)
    if path is not None:
        from .sqlite import SqliteBackend

        return SqliteBackend(path, clock=clock)
    if in_place(store):  # LangGraph's InMemoryStore: its items, read and written in place
        return InMemoryStoreBackend(store, clock=clock)
    try:
        from .postgres import is_postgres_store, store_backend
    except ImportError:  # langgraph-checkpoint-postgres is not installed
        return StoreBackend(store, clock=clock)
    if is_postgres_store(store):
        return store_backend(store, clock=clock)
    return StoreBackend(store, clock=clock)


def is_durable(backend: StateBackend) -> bool:
    """Whether what `backend` keeps outlives this process and a restart of its server
    (a database, not memory; Redis only when its ``durable=True`` says so)."""
    if isinstance(backend, MemoryBackend):
        return False
    if isinstance(backend, StoreBackend):
        from langgraph.store.memory import InMemoryStore

        return not isinstance(backend.store, InMemoryStore)
    return bool(getattr(backend, "durable", True))


def kept_in(backend: StateBackend) -> str | None:
    """Where `backend` keeps state when it outlives this process but a restart of its
    server may lose the last writes (a `state.redis.RedisBackend` not marked durable):
    e.g. ``"Redis at 10.0.0.5:6379 (db 0)"``; `None` for every other backend."""
    where = getattr(backend, "where", None)
    return where if isinstance(where, str) and not is_durable(backend) else None


def blocks(backend: StateBackend) -> bool:
    """Whether `backend`'s operations may block (I/O, or a store bound to an event loop):
    an async caller then runs them on a worker thread. In-process state (a
    `MemoryBackend`, LangGraph's own ``InMemoryStore``) takes microseconds and is used
    in place."""
    if isinstance(backend, MemoryBackend):
        return False
    if isinstance(backend, StoreBackend):
        from langgraph.store.memory import InMemoryStore

        return type(backend.store) is not InMemoryStore
    return True


def in_process(backend: StateBackend) -> bool:
    """Whether only this process ever reads what `backend` keeps (a `MemoryBackend`,
    LangGraph's own ``InMemoryStore`` read in place): no other worker can see it, so
    nothing need be renewed there for another worker to read (a write's lease)."""
    return type(backend) is MemoryBackend or type(backend) is InMemoryStoreBackend


def checkpointer_backend(saver: Any) -> StateBackend | None:
    """A backend in the database of checkpointer `saver`, when it has one we can reach
    (``SqliteSaver``, ``PostgresSaver``, ``RedisSaver`` and their async kinds); `None`
    otherwise."""
    client = redis_client(saver)
    if client is not None:
        from .redis import RedisBackend

        return RedisBackend(client)
    path = _sqlite_file(saver)
    if path is not None:
        from .sqlite import SqliteBackend

        return SqliteBackend(path)
    pg = ("langgraph.checkpoint.postgres",)
    if _is_a(saver, pg, "PostgresSaver") or _is_a(saver, pg, "AsyncPostgresSaver"):
        try:
            from .postgres import OwnConnection, PostgresBackend
        except ImportError:  # pragma: no cover - the saver comes with the package
            return None
        return PostgresBackend(OwnConnection(saver.conn))
    return None
