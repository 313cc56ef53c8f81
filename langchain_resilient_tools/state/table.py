"""A state backend in one SQL table of its own: the statements and the operations,
written once for `state.postgres` and `state.sqlite`.

The table (`TABLE`, created on first use beside the user's own tables)::

    ns, key, kind, data (the value, serialized), expires_at, PRIMARY KEY (ns, key)

Every operation is one statement, so each is atomic by itself. `claim` is
``INSERT ... ON CONFLICT (ns, key) DO UPDATE ... WHERE <the row has expired> RETURNING
1``: of any number of workers claiming the same key, exactly one gets a row back.
Expired rows are ignored on read and deleted now and then by `put`. A database supplies
its connection (`_run`), its parameter style and its column types.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from .backend import TABLE, guard_store

_serde = JsonPlusSerializer()
SWEEP_EVERY = 500
"""`put`s between two deletions of expired rows."""

_STATEMENTS = {
    "get": f"SELECT kind, data FROM {TABLE} WHERE ns = {{p}} AND key = {{p}} AND expires_at > {{p}}",
    "put": f"""INSERT INTO {TABLE} (ns, key, kind, data, expires_at)
    VALUES ({{p}}, {{p}}, {{p}}, {{p}}, {{p}})
    ON CONFLICT (ns, key) DO UPDATE SET kind = excluded.kind, data = excluded.data,
    expires_at = excluded.expires_at""",
    "delete": f"DELETE FROM {TABLE} WHERE ns = {{p}} AND key = {{p}}",
    "sweep": f"DELETE FROM {TABLE} WHERE expires_at <= {{p}}",
}
_STATEMENTS["claim"] = _STATEMENTS["put"] + f" WHERE {TABLE}.expires_at <= {{p}} RETURNING 1"
_STATEMENTS["put_unsynced"] = _STATEMENTS["put"]
"""A database that can commit one statement without waiting for the disk says so in its
own form of this statement (`state.postgres`) or around it (`state.sqlite`)."""


def statements(placeholder: str, **own: str) -> dict[str, str]:
    """The statements with `placeholder` (``%s``, ``?``) for their parameters, and the
    database's `own` forms of some of them."""
    made = {name: sql.replace("{p}", placeholder) for name, sql in _STATEMENTS.items()}
    return {**made, **own}


class TableBackend:
    """A `StateBackend` over one table; subclasses run a statement (`_run`)."""

    durable = True
    sql: dict[str, str]
    """The statements in the database's parameter style (`statements`)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._puts = 0

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        """Run one statement; its first row, if it returns rows."""
        raise NotImplementedError

    def _ready(self) -> None:
        """Make sure the table exists (before the first statement)."""

    def get(self, ns: str, key: str) -> Any | None:
        self._ready()
        with guard_store():
            row = self._run(self.sql["get"], (ns, key, self.clock()))
            return None if row is None else _serde.loads_typed((row[0], bytes(row[1])))

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        self._put("put", ns, key, value, ttl)

    def put_unsynced(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        """`put`, committed without waiting for the disk where the database can
        (`state.backend.put_unsynced`)."""
        self._put("put_unsynced", ns, key, value, ttl)

    def _put(self, statement: str, ns: str, key: str, value: Any, ttl: float) -> None:
        self._ready()
        now = self.clock()
        with guard_store():
            self._run(self.sql[statement], (ns, key, *_serde.dumps_typed(value), now + ttl))
            self._puts += 1
            if self._puts % SWEEP_EVERY == 0:
                self._run(self.sql["sweep"], (now,))

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        self._ready()
        now = self.clock()
        with guard_store():
            params = (ns, key, *_serde.dumps_typed(value), now + ttl, now)
            return self._run(self.sql["claim"], params) is not None

    def delete(self, ns: str, key: str) -> None:
        self._ready()
        with guard_store():
            self._run(self.sql["delete"], (ns, key))
