"""Where a write's journal is kept: the most durable place the call can reach.

In order: the adapter's ``store=``, the graph's store (``runtime.store``), the database
of the graph's checkpointer (``SqliteSaver``, ``PostgresSaver``: the journal then lives
beside the checkpoints it protects, in a table of its own). The first of them that
outlives the process wins; if none does, the first that exists (an ``InMemoryStore``,
or this pipeline's memory for an ``InMemorySaver``: both are lost with the process, as
the checkpoints are, so they protect within one process only). A write in a
checkpointed graph with nowhere durable to keep its journal (e.g. an async-only
checkpointer and no store) runs unjournaled, with a one-time warning naming the fix.

Redis (a client or ``langgraph-checkpoint-redis`` store as ``store=``, the graph's
``RedisStore``, a ``RedisSaver``) outlives the worker but may lose its last writes when
the Redis server restarts: when nothing durable is there, the journal keeps its records
in Redis (rather than in anything lost with the process) and says so once per tool and
server (`JOURNAL_IN_REDIS`), naming what that promises and the fix; a
``RedisBackend(client, durable=True)`` (a Redis that fsyncs every write) is durable and
is used without a word.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ...core.call import Call
from ...state.backend import MemoryBackend, StateBackend
from ...state.choose import as_backend, checkpointer_backend, is_durable, kept_in
from ..stage import Env

log = logging.getLogger(__name__)

_CHECKPOINTER = "__pregel_checkpointer"
_MEMORIES: dict[int, tuple[Any, StateBackend]] = {}
"""The in-process journal of each checkpointer that has no database we can reach."""
_warned: set[str] = set()
_lock = threading.Lock()

NO_DURABLE_JOURNAL = (
    "%s is a write in a graph with a checkpointer (%s) but no durable place for its write "
    "journal: if this worker dies mid-call, a resume may run it again. Give the graph or "
    "the adapter a durable store (PostgresStore, SqliteStore), or use SqliteSaver / "
    "PostgresSaver; ToolPolicy(journal=False) silences this."
)
JOURNAL_IN_REDIS = (
    "%s is a write whose journal is kept in %s, which outlives this worker (a resume "
    "after the worker dies answers the write from its receipt) but acknowledges writes "
    "before they are on disk: if the Redis server itself restarts, the last records "
    "(up to a second with appendfsync everysec, minutes with snapshots alone) can be "
    "lost, and a resume may then run the write again. For a journal that survives that, "
    "give the graph a durable checkpointer (SqliteSaver, PostgresSaver) or store "
    "(PostgresStore, SqliteStore); if this Redis fsyncs every write (appendonly yes, "
    "appendfsync always), say so: store=RedisBackend(client, durable=True) "
    "(langchain_resilient_tools.state.redis)."
)


Made = dict[Any, tuple[Any, "StateBackend | None"]]
"""The journal stage's own backends: of each store or saver object it met, by its id,
and the one chosen for each (store, saver) pair, by their ids (each kept with its
objects, so that the ids stay unique)."""


def _made(made: Made, owner: Any, make: Any) -> StateBackend | None:
    """One backend per store or saver object (kept with it, so its id stays unique)."""
    with _lock:
        hit = made.get(id(owner))
        if hit is None:
            hit = made[id(owner)] = (owner, make(owner))
    return hit[1]


def checkpointer_of(call: Call) -> Any:
    return ((call.config or {}).get("configurable") or {}).get(_CHECKPOINTER)


def journal_backend(env: Env, call: Call, made: Made) -> StateBackend | None:
    """The backend of `call`'s journal, or `None` (no journal: nowhere to keep it);
    `made`: the journal stage's backends of the stores and savers it met."""
    store, saver = call.store, checkpointer_of(call)
    pair = (id(store), id(saver))
    hit = made.get(pair)
    if hit is not None:
        return hit[1]
    chosen, for_good = _choose(env, call, made)
    if for_good:  # the next call of the pair skips the choice
        with _lock:
            made[pair] = ((store, saver), chosen)
    return chosen


def _choose(env: Env, call: Call, made: Made) -> tuple[StateBackend | None, bool]:
    """`call`'s journal backend, and whether every call with its store and saver gets it
    without choosing again (not when a warning names each tool once: a journal in Redis,
    or a checkpointer's in-process journal)."""
    candidates: list[StateBackend] = []
    if env.backend is not None:
        candidates.append(env.backend)
    if call.store is not None:
        store = _made(made, call.store, as_backend)
        if store is not None:
            candidates.append(store)
    saver = checkpointer_of(call)
    if saver is not None:
        found = _made(made, saver, checkpointer_backend)
        if found is not None:
            candidates.append(found)
    for backend in candidates:
        if is_durable(backend):
            return backend, True
    for backend in candidates:  # outlives the worker, not a restart of its server
        where = kept_in(backend)
        if where is not None:  # said once per tool: chosen again for the next call
            _say_once(f"{call.name}@{where}", JOURNAL_IN_REDIS, call.name, where)
            return backend, False
    if candidates:
        return candidates[0], True
    if saver is None:
        return None, True  # no checkpointer: nothing can resume this call after a crash
    if not any(cls.__name__ == "InMemorySaver" for cls in type(saver).__mro__):
        _warn_once(call, saver)
    with _lock:  # one per checkpointer, for every adapter of the process that uses it
        hit = _MEMORIES.get(id(saver))
        if hit is None or hit[0] is not saver:
            hit = _MEMORIES[id(saver)] = (saver, MemoryBackend())
    return hit[1], False


def _warn_once(call: Call, saver: Any) -> None:
    _say_once(f"{call.name}:{type(saver).__name__}", NO_DURABLE_JOURNAL, call.name, type(saver).__name__)  # fmt: skip


def _say_once(key: str, message: str, *args: Any) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message, *args)
