"""The shared backend on Redis (``redis-py``): breaker, dedup ledger, caches and limits.

Given as an adapter's ``store=``: a ``redis.Redis`` (or ``redis.RedisCluster``) client;
a ``redis.asyncio.Redis`` (then a sync client of our own to the same server: stages
reach shared state from a worker thread, `pipeline.shared.off_loop`); or
``langgraph-checkpoint-redis``'s ``RedisStore`` / ``AsyncRedisStore`` and its savers
(their client: none of the store's own search indexes is needed). See `state.choose`.

Each entry is one Redis string at ``{prefix}:{ns}:{key}``, the value as `encode`
writes it (JSON), with its expiry on the server (``PX``): Redis forgets it, no worker's
clock decides.

======== ==============================================================
get      ``GET``: the live value (Redis never returns an expired key)
put      ``SET key value PX ttl``: last write wins
claim    ``SET key value NX PX ttl``: of any number of workers exactly one wins
delete   ``DEL``
======== ==============================================================

Limits (`state.limits.LimitBackend`): each decision is one Lua script, atomic on the
server and one round trip, timed by the server's ``TIME``: a token bucket in a hash at
``{prefix}:bucket:{key}`` (``tokens``, ``ts``), leases in a sorted set at
``{prefix}:lease:{key}`` (holder -> expiry; expired leases are dropped before each
count). Both keys expire on the server once nothing in them is live.

`clock` is the server's: this machine's wall time plus its offset from the server's
``TIME``, measured on first use and again every `CLOCK_SYNC_S` (no round trip per read).

What may be lost: Redis acknowledges a write before it is on disk (by default it
snapshots now and then; with ``appendonly yes`` it fsyncs once a second), so a restart
of the Redis server can lose the last writes: a circuit reads closed again, a dedup
entry or a cached result is gone. `is_durable` is therefore `False` unless the user says
otherwise (``durable=True``, for a Redis that fsyncs every write), and the write
journal, which must not lose a record, says where it keeps its records when it has
nothing more durable (`pipeline.journal.where`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

from ..core.errors import UsageError
from .backend import NAMESPACE, decode, encode, guard_store

log = logging.getLogger(__name__)

CLOCK_SYNC_S = 60.0
"""Seconds between two readings of the server's ``TIME`` (`RedisBackend.clock`)."""
CLOCK_RETRY_S = 10.0
"""Seconds before a failed reading of the server's ``TIME`` is tried again."""

_NOW = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) + tonumber(t[2]) / 1000000\n"
_EXPIRE_WITH_LAST = """
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(last[2]) - now) * 1000) + 1000)
return 1
"""
TAKE_TOKEN = (
    _NOW
    + """local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local got = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(got[1]), tonumber(got[2])
if tokens == nil or ts == nil then tokens, ts = burst, now end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
if tokens < 1 then return string.format('%.17g', (1 - tokens) / rate) end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens - 1),
    'ts', string.format('%.6f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return '0'
"""
)
"""KEYS: the bucket; ARGV: rate, burst. ``'0'`` when a token was taken, else the
seconds until one will be there. A bucket left alone refills: once full its key expires."""
ACQUIRE_LEASE = (
    _NOW
    + """local cap, holder, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now))
if not redis.call('ZSCORE', KEYS[1], holder) and redis.call('ZCARD', KEYS[1]) >= cap then
    return 0
end
redis.call('ZADD', KEYS[1], string.format('%.6f', now + ttl), holder)"""
    + _EXPIRE_WITH_LAST
)
"""KEYS: the leases; ARGV: cap, holder, ttl. 1 when `holder` holds a slot now, else 0."""
RENEW_LEASE = (
    _NOW
    + """local holder, ttl = ARGV[1], tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now))
if not redis.call('ZSCORE', KEYS[1], holder) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', string.format('%.6f', now + ttl), holder)"""
    + _EXPIRE_WITH_LAST
)
"""KEYS: the leases; ARGV: holder, ttl. 1 when `holder`'s live lease was extended."""

_SYNC_KEYS = (
    "host", "port", "path", "db", "username", "password", "credential_provider",
    "socket_timeout", "socket_connect_timeout", "socket_keepalive", "client_name",
    "encoding", "encoding_errors", "decode_responses", "health_check_interval",
)  # fmt: skip
"""What an async client's connections are made with that a sync client takes too."""


def sync_client(client: Any) -> Any:
    """`client` itself when it is a sync redis-py client; for a ``redis.asyncio.Redis``,
    a sync client of our own to the same server (same address, database, credentials,
    timeouts and TLS settings)."""
    module = type(client).__module__
    if not module.startswith("redis.asyncio"):
        return client
    import redis

    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs"):
        raise UsageError(
            "an async Redis Cluster client cannot be shared from worker threads: pass "
            "a redis.RedisCluster (sync) client to the same cluster as store="
        )
    kind = {
        "SSLConnection": redis.SSLConnection,
        "UnixDomainSocketConnection": redis.UnixDomainSocketConnection,
    }.get(pool.connection_class.__name__, redis.Connection)
    theirs = pool.connection_kwargs
    kwargs = {k: v for k, v in theirs.items() if k in _SYNC_KEYS or k.startswith("ssl_")}
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=kind, **kwargs))


def describe(client: Any) -> str:
    """Which Redis `client` talks to, for a message (no credentials)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return "a Redis Cluster" if "Cluster" in type(client).__name__ else "Redis"
    where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return f"Redis at {where} (db {kwargs.get('db', 0)})"


def _ms(ttl: float) -> int:
    """A TTL in whole milliseconds, at least 1 (Redis refuses 0)."""
    return max(1, math.ceil(ttl * 1000))


class RedisBackend:
    """A `StateBackend` and `LimitBackend` on Redis (see the module docstring).

    Args:
        client: a ``redis.Redis`` / ``redis.RedisCluster`` client, or a
            ``redis.asyncio.Redis`` one (a sync client to its server is made).
        prefix: the first part of every key this backend writes.
        durable: ``True`` only when the server loses no acknowledged write (``appendonly
            yes`` with ``appendfsync always``, and no failover that drops writes): then
            the write journal may keep its records here (`state.choose.is_durable`).
    """

    def __init__(self, client: Any, *, prefix: str = NAMESPACE, durable: bool = False) -> None:
        if not prefix or not isinstance(prefix, str):
            raise UsageError("RedisBackend(prefix=...) must be a non-empty string")
        self.client = sync_client(client)
        self.prefix = prefix
        self.durable = durable
        self.where = describe(self.client)
        """Which server this is, for messages (`state.choose.kept_in`)."""
        self._offset = 0.0
        self._next_sync = 0.0
        self._sync_lock = threading.Lock()
        self.clock = self._clock
        self._take = self.client.register_script(TAKE_TOKEN)
        self._acquire = self.client.register_script(ACQUIRE_LEASE)
        self._renew = self.client.register_script(RENEW_LEASE)

    def __repr__(self) -> str:
        return f"RedisBackend({self.where}, prefix={self.prefix!r}, durable={self.durable})"

    def key(self, ns: str, key: str) -> str:
        """The Redis key of entry (`ns`, `key`)."""
        return f"{self.prefix}:{ns}:{key}"

    # -- clock ---------------------------------------------------------------------------

    def _clock(self) -> float:
        now = time.time()
        if now >= self._next_sync and self._sync_lock.acquire(blocking=False):
            try:
                self._sync(now)
            finally:
                self._sync_lock.release()
            now = time.time()
        return now + self._offset

    def _sync(self, before: float) -> None:
        """Read the server's ``TIME``; on failure keep the last offset (the operations
        that need the server fail on their own) and try again in `CLOCK_RETRY_S`."""
        self._next_sync = before + CLOCK_RETRY_S
        try:
            seconds, micros = self.client.time()
        except Exception as exc:  # the server is unreachable: its operations say so
            log.debug("could not read the Redis server's time: %s", type(exc).__name__)
            return
        after = time.time()
        self._offset = seconds + micros / 1e6 - (before + after) / 2
        self._next_sync = after + CLOCK_SYNC_S

    def now(self) -> float:
        """The server's ``TIME``, read now (one round trip)."""
        with guard_store():
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    # -- StateBackend ----------------------------------------------------------------------

    def get(self, ns: str, key: str) -> Any | None:
        with guard_store():
            raw = self.client.get(self.key(ns, key))
            return None if raw is None else decode(json.loads(raw))

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        data = json.dumps(encode(value))
        with guard_store():
            self.client.set(self.key(ns, key), data, px=_ms(ttl))

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        data = json.dumps(encode(value))
        with guard_store():
            return bool(self.client.set(self.key(ns, key), data, px=_ms(ttl), nx=True))

    def delete(self, ns: str, key: str) -> None:
        with guard_store():
            self.client.delete(self.key(ns, key))

    # -- LimitBackend ----------------------------------------------------------------------

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        with guard_store():
            wait = self._take(keys=[self.key("bucket", key)], args=[repr(rate), repr(burst)])
        return float(wait)

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        with guard_store():
            took = self._acquire(keys=[self.key("lease", key)], args=[cap, holder, repr(ttl)])
        return bool(int(took))

    def renew_lease(self, key: str, *, holder: str, ttl: float) -> bool:
        with guard_store():
            kept = self._renew(keys=[self.key("lease", key)], args=[holder, repr(ttl)])
        return bool(int(kept))

    def release_lease(self, key: str, *, holder: str) -> None:
        with guard_store():
            self.client.zrem(self.key("lease", key), holder)
