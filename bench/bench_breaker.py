"""Circuit breaker and retry budget against a down and a flaky service, vs ToolRetryMiddleware.

Run: ``.venv/bin/python -m bench.bench_breaker``. Every variant is a `create_agent` agent
driven by a scripted model that emits `WAVES` AI messages of `WAVE` parallel calls each,
so the calls of one wave are concurrent and the waves follow each other, as in a busy
agent. The service is a sync tool with short real delays:

- down: sleeps 5 ms, then raises `ConnectionError`, every time;
- flaky: sleeps 5 ms, then raises `ConnectionError` on 30% of calls (seeded).

Variants: `ToolRetryMiddleware` (langchain, 2 retries = 3 attempts, 10 ms initial
delay, no jitter), this package with the same retry settings without and with its
retry budget (the default: 10 + 50% of calls per 10 s), and with the budget plus a
breaker (opens after 5 consecutive failed attempts).
We report wall time, how many calls reached the service, and the share of calls that
got a result. Results go to ``bench/results/breaker.json``.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from bench._util import RESULTS_DIR, format_table, run_metadata, save_json
from langchain_resilient_tools import (
    BreakerPolicy,
    ResilientToolsMiddleware,
    RetryBudget,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call

WAVE = 20
"""Concurrent calls per AI message."""
WAVES = 10
"""AI messages in a row: 200 calls in all."""
DELAY = 0.005
"""Seconds the service takes before it answers or fails."""
FLAKY_RATE = 0.3


class Service:
    """A fake downstream service that counts the calls that reached it."""

    def __init__(self, failure_rate: float, seed: int = 7) -> None:
        self.failure_rate = failure_rate
        self.reached = 0
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    def tool(self) -> StructuredTool:
        def get_quote(symbol: str) -> str:
            """Get a stock quote."""
            with self._lock:
                self.reached += 1
                fail = self._random.random() < self.failure_rate
            time.sleep(DELAY)
            if fail:
                raise ConnectionError("service unavailable")
            return f"{symbol}: 101.5"

        return StructuredTool.from_function(get_quote)


def _script() -> list[AIMessage]:
    script = []
    for w in range(WAVES):
        calls = [
            tool_call("get_quote", {"symbol": f"S{w}-{i}"}, id=f"w{w}c{i}") for i in range(WAVE)
        ]
        script.append(AIMessage("", tool_calls=calls))
    return [*script, AIMessage("done")]


def _middleware(variant: str) -> list[Any]:
    if variant == "ToolRetryMiddleware":
        return [
            ToolRetryMiddleware(max_retries=2, initial_delay=0.01, backoff_factor=2, jitter=False)
        ]
    budget = None if variant.endswith("no budget") else RetryBudget()
    retry = RetryPolicy(max_attempts=3, initial_delay=0.01, multiplier=2, jitter=0, budget=budget)
    breaker = (
        BreakerPolicy(failure_threshold=5, recovery_time=30)
        if variant.endswith("breaker")
        else None
    )
    policy = ToolPolicy(timeout=5.0, retry=retry, breaker=breaker, dedup="off")
    return [ResilientToolsMiddleware(policy=policy)]


def run(variant: str, failure_rate: float) -> dict[str, Any]:
    service = Service(failure_rate)
    agent = create_agent(
        ScriptedChatModel(script=_script()), tools=[service.tool()], middleware=_middleware(variant)
    )
    start = time.perf_counter()
    state = agent.invoke({"messages": [HumanMessage("go")]})
    wall = time.perf_counter() - start
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    ok = sum(1 for m in answers if m.status == "success" and "unavailable" not in str(m.content))
    return {
        "variant": variant,
        "wall_s": round(wall, 3),
        "service_calls": service.reached,
        "answered": len(answers),
        "success_rate": round(ok / (WAVE * WAVES), 3),
    }


VARIANTS = ("ToolRetryMiddleware", "lrt retry, no budget", "lrt retry", "lrt retry+breaker")


def main() -> None:
    results: dict[str, Any] = {"meta": run_metadata(["bench.bench_breaker"]), "calls": WAVE * WAVES}
    for name, rate in (("down", 1.0), ("flaky", FLAKY_RATE)):
        rows = [run(v, rate) for v in VARIANTS]
        results[name] = rows
        print(
            f"\nservice {name} ({WAVES} waves x {WAVE} concurrent calls, {DELAY * 1000:.0f} ms each)"
        )
        print(
            format_table(
                ["variant", "wall s", "calls reaching service", "success rate"],
                [[r["variant"], r["wall_s"], r["service_calls"], r["success_rate"]] for r in rows],
            )
        )
    path = save_json(results, RESULTS_DIR / "breaker.json")
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
