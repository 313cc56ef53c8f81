"""The pipeline's own view of one tool call, independent of the adapter that made it.

Adapters convert LangGraph's request (or a plain invocation) into a `Call`; stages read
and annotate it; the formatter turns the outcome into a `ToolMessage`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.tools import BaseTool

from .errors import OutcomeStillUnknown, ToolErrorType
from .policy import ResolvedPolicy
from .probe import Probe

DIRECT_CALL_PREFIX = "direct-"
"""The id of a call made with plain arguments (no tool call, so no id of the model's):
`ResilientTool.invoke({...})` makes one up with this prefix."""


@dataclass(slots=True)
class CallRecord:
    """What happened to one call: kept in ``response_metadata["resilience"]``."""

    tool: str
    call_id: str
    attempts: int = 0
    outcome: str = "pending"
    """``success`` or ``error``."""
    error: ToolErrorType | None = None
    served_by: str = "tool"
    """``tool``, or what answered instead (``dedup``, ``cache``, ``stale_cache``, ``fallback``;
    ``drain``: not started, the run is shutting down)."""
    repairs: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """Short sentences shown to the model before a successful result."""
    duration_ms: float = 0.0
    started_at: float = field(default_factory=time.time)
    queued_ms: float = 0.0
    """Time spent waiting for a slot or a token of the tool's client-side limits."""
    hedges: int = 0
    """Extra attempts sent beside a slow one (hedged reads; counted in `attempts` too)."""
    hedge_won: bool = False
    """Whether a hedge, not the attempt it was sent beside, gave the answer."""
    hedge_winner: int = 0
    """Which attempt of the race gave the answer (0: the first; n: the n-th hedge)."""
    classified_as: str = ""
    """What the call was taken for: ``read``, ``idempotent_write`` or ``write``."""
    classified_by: str = ""
    """What decided it: ``explicit`` (the policy), ``annotations`` (the tool's) or ``name``."""
    breaker: str | None = None
    """Written by the breaker stage: the state of the tool's breaker (in this process)
    after its last attempt; `None` when the call did not reach a breaker."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "call_id": self.call_id,
            "attempts": self.attempts,
            "outcome": self.outcome,
            "error": self.error.value if self.error else None,
            "served_by": self.served_by,
            "repairs": list(self.repairs),
            "duration_ms": round(self.duration_ms, 3),
            "started_at": self.started_at,
            "classified_as": self.classified_as,
            "classified_by": self.classified_by,
            **({"queued_ms": round(self.queued_ms, 3)} if self.queued_ms else {}),
            **({"hedges": self.hedges, "hedge_won": self.hedge_won} if self.hedges else {}),
        }


@dataclass(slots=True)
class Call:
    """One tool call on its way through the pipeline."""

    id: str
    name: str
    args: dict[str, Any]
    """The arguments as the model sent them (after repair, once repaired)."""
    tool: BaseTool | None
    resolved: ResolvedPolicy
    record: CallRecord
    raw_args: str | None = None
    """For a call the model could not format: its raw argument text."""
    parse_error: str | None = None
    """For a call the model could not format: why it did not parse."""
    thread_id: str | None = None
    state: Any = None
    """The graph state, when the call came through a graph."""
    valid_tools: tuple[str, ...] = ()
    injected: dict[str, Any] = field(default_factory=dict)
    """Arguments injected by the runtime (state, store, ...): passed on, never shown."""
    run: Callable[[Call], Any] | None = None
    """Sync execution of the tool with ``call.args``, supplied by the adapter."""
    arun: Callable[[Call], Awaitable[Any]] | None = None
    """Async execution of the tool with ``call.args``, supplied by the adapter."""
    offload: bool = False
    """In async mode, run the sync `run` on the worker pool instead of `arun`."""
    passthrough_unknown: bool = False
    """Let a call to an unknown tool reach `run` (a user wrapper may answer it)."""
    schemaless: bool = False
    """The input is not an argument dict (a plain string to a one-input tool): repair
    and validation leave it alone."""
    config: Any = None
    """The `RunnableConfig` the call runs under (its ``configurable`` and runtime), if any."""
    context: Any = None
    """LangGraph's runtime context (``ToolRuntime.context``), when the adapter has it."""
    store: Any = None
    """The graph's `BaseStore` (``runtime.store``), if the call came through a graph with one."""
    twinless: bool = False
    """No call identical to this one is in its step (the node knows its siblings): with
    no thread and no ledger in the state, dedup has nothing to decide for it."""
    step: str | None = None
    """The step the call belongs to, as its adapter knows it (one run of a node's step,
    the AIMessage of an agent's turn, the graph task of a wrapped tool), if any."""
    twin_of: str | None = None
    """The id of the first call identical to this one in its step (its AIMessage), when
    the adapter knows the step's calls and this one is not that first: it waits for that
    call and shares its outcome (`pipeline.dedup.twins`)."""
    tool_validates: bool = False
    """The tool's own argument validation answers, not the pipeline's: its errors then
    reach the adapter's error handling as the tool raised them (a node with its own
    ``handle_tool_errors``, or a tool with ``handle_validation_error``)."""
    deadline: float | None = None
    """Absolute `policy.clock` time by which the whole call must be answered, if any."""
    started: float | None = None
    """`policy.clock` time at which the call started (set with its deadline)."""
    node: Any = None
    """The timed LangGraph attempt the call runs in (`runtime.graphnode.NodeRun`: a node
    with a `TimeoutPolicy`), set with the deadline; `None` for any other call."""
    deadline_by_node: bool = False
    """Whether `deadline` is the node's (its run timeout, less the time to answer): the
    earliest of the call's deadlines."""
    hedge: int = 0
    """Which attempt of a hedge race this copy of the call runs (0: the first one; set
    by `pipeline.hedge`). A hedge never waits for a slot or a token (`pipeline.limit`)."""
    span: Any = None
    """The call's OpenTelemetry span while it runs, when tracing is on (`observe.otel`)."""

    # -- what the stages tell one another (and the adapter) about this call ------------
    # Declared here, once: no stage imports another. Each says who writes and who reads.
    repair_notice: str | None = None
    """Written by repair: the notice it showed the model. Read by `ResilientTool`, which
    has no ToolMessage to carry it to a plain caller (it logs it)."""
    dropped: tuple[str, ...] = ()
    """Written by repair (and `create_agent`'s ``after_model`` repair): the unknown
    arguments it dropped. Read by the envelope of a call that still fails validation."""
    journaled: bool = False
    """Written by the journal on a write it let run (a first run, or a resumed one it
    settled). Read by dedup's shared ledger: a dead owner's pending entry of this very
    call then runs."""
    unsettled: OutcomeStillUnknown | None = None
    """Written by the journal on a write whose earlier run it cannot settle: orphaned
    (`OrphanedWrite`: its worker died before the receipt) or unreadable
    (`JournalUnreadable`: its store failed). Read, once, by verify, which looks the
    write up before anything runs (and answers this when the lookup fails)."""
    ledger: dict[str, Any] | None = None
    """Written by dedup: the ledger entries the graph state should keep (by key). Read
    by the graph adapters, which write them at the end of the step (`adapters.rollback`)."""
    idempotency_key: str | None = None
    """The call's idempotency key once built (`core.idempotency.key_for`): every attempt
    sends the same one."""
    probe: Probe | None = None
    """Written by hedge on each attempt of a race. Read by the attempt stage, which runs
    the tool through it, and by hedge: when the tool began and answered (`core.probe`)."""
    attempt_timeout: float | None = None
    """Written by the attempt stage: the timeout of the attempt it runs (the policy's or
    the adaptive one, capped by the deadline; `None`: unbounded). Read by the runners of
    an async-only tool called from sync code (`runtime.offload.BridgedTool`,
    `ResilientTool`), which cancel its coroutine then rather than at the policy's timeout."""
    job: Any = None
    """Written by `runtime.offload.OffloadedTool` (a sync tool that an adapter's handler
    runs on the pipeline's workers: `create_agent`'s, or a node's behind a user's
    wrapper): the job running this attempt of a write (never a read's), once submitted.
    Read, and dropped, by the attempt stage, which gives an attempt that timed out while
    the job ran its `AttemptTimeout.late` (as the pipeline's own runner does), so that a re-send waits
    for it (`pipeline.dedup`)."""
    result_key: str | Literal[False] | None = False
    """The call's result key once built (`core.key.result_key`; `None`: it shares
    nothing), read by the result cache and the stale fallback; `False` until built."""

    @property
    def idempotent(self) -> bool:
        return self.resolved.idempotent

    @property
    def malformed(self) -> bool:
        return self.parse_error is not None
