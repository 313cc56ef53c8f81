"""Randomised fault injection through every adapter, sync and async.

Each hypothesis example is one AIMessage mixing valid, malformed, unknown, duplicate and
non-idempotent calls against tools that hang, flap, raise, return garbage or interrupt;
`check_scenario` verifies DESIGN.md's invariants on what came back. Set
``RELIABILITY_EXAMPLES`` to change the examples per adapter and mode (default 200).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, assume, given, settings

from tests.conftest import Harness
from tests.reliability.faults import CallSpec, Scenario, ToolSpec, scenarios
from tests.reliability.invariants import STATS, check_scenario

EXAMPLES = int(os.environ.get("RELIABILITY_EXAMPLES", "200"))
MIDDLEWARE_ASYNC_HUNG_THREADS = 2
"""Known limitation (see `test_middleware_async_hung_sync_tools_starve_the_loop`): under
``create_agent`` in async mode a sync tool runs on the event loop's default executor
(``min(32, cpus + 4)`` threads), so hung sync attempts beyond that starve their siblings
and the model call. Scenarios for that combination stay below it until it is fixed."""


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@given(scenario=scenarios())
def test_invariants_hold_under_faults(harness: Harness, scenario: Scenario) -> None:
    if (harness.adapter, harness.mode) == ("middleware", "async"):
        assume(scenario.hung_sync_threads() <= MIDDLEWARE_ASYNC_HUNG_THREADS)
    violations = check_scenario(harness, scenario)
    assert not violations, "\n".join(violations)


@pytest.mark.xfail(strict=True, reason="middleware async: hung sync tools fill the loop executor")
def test_middleware_async_hung_sync_tools_starve_the_loop() -> None:
    """Eight hung attempts of a sync tool hold every default-executor thread on a small
    machine: the sibling call and the agent's next model call wait for the hung threads
    (5 s) instead of the 0.1 s timeout. ResilientToolNode avoids this by offloading sync
    tools to the pipeline's own counted workers; the middleware cannot yet."""
    tools = (ToolSpec("get_hang_0", "hang", True, False), ToolSpec("get_ok_1", "ok", True, False))
    calls = tuple(CallSpec(f"h{i}", "valid", "get_hang_0", f"q{i}") for i in range(8))
    scenario = Scenario(tools, (*calls, CallSpec("ok", "valid", "get_ok_1", "q")), 1)
    before = STATS.violations
    violations = check_scenario(Harness("middleware", "async"), scenario)
    STATS.add(violations=before - STATS.violations)  # a known issue: not counted
    assert not violations, "\n".join(violations)
