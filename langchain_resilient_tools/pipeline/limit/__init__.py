"""Client-side limits per tool: at most N attempts in flight, at most R attempts per second.

Each attempt (retries too) first takes a slot (`Limits.max_concurrency`, `runtime.slots`)
and then a token (`Limits.rate_limit`). Per adapter by default: the slots are this
process's, the tokens come from langchain-core's `InMemoryRateLimiter` (or any
`BaseRateLimiter` the user shares between tools). When the tool's state is shared
(`pipeline.shared.backend_for`) in a store that decides limits atomically
(`state.limits.LimitBackend`), the limits hold across every worker: after its local slot
an attempt takes a lease on one of the tool's `max_concurrency` slots in the store, and
its token from the tool's bucket there (`shared`). A store that cannot (any other
`BaseStore`) keeps them per process, and the tool's first call says so once.

The wait counts against the call's deadline: a call that gets no slot or token in time
is answered ``timeout`` without running the tool. The time spent waiting is kept in the
call record (``queued_ms``). A hedge (`Call.hedge`, `pipeline.hedge`) never waits: when
no slot or token is free at once it is not sent (``AttemptTimeout(started=False)``).

One core decides (`core.Queue`: how long to wait for a slot, which store operation to
make, how long to pause before asking again, when the attempt is out of time); the
stage's two drivers, sync and async (`stage`), only wait and run store operations as it
says, then run the attempt.
"""
