"""Randomised fault injection through every adapter, sync and async.

Each hypothesis example is one AIMessage mixing valid, malformed, unknown, duplicate and
non-idempotent calls against tools that hang, flap, raise, return garbage or interrupt;
`check_scenario` verifies DESIGN.md's invariants on what came back. Set
``RELIABILITY_EXAMPLES`` to change the examples per adapter and mode (default 200).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings

from tests.conftest import Harness
from tests.reliability.faults import CallSpec, Scenario, ToolSpec, scenarios
from tests.reliability.invariants import check_scenario

EXAMPLES = int(os.environ.get("RELIABILITY_EXAMPLES", "200"))


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
    violations = check_scenario(harness, scenario)
    assert not violations, "\n".join(violations)


def test_middleware_async_hung_sync_tools_do_not_starve_the_loop() -> None:
    """Eight hung attempts of a sync tool would hold every default-executor thread on a
    small machine, and the sibling call and the agent's next model call would wait for
    them (`HANG_LIMIT`) instead of the 0.1 s timeout. The middleware runs sync tools on the
    pipeline's own counted workers (`OffloadedTool`), as ResilientToolNode does."""
    tools = (ToolSpec("get_hang_0", "hang", True, False), ToolSpec("get_ok_1", "ok", True, False))
    calls = tuple(CallSpec(f"h{i}", "valid", "get_hang_0", f"q{i}") for i in range(8))
    scenario = Scenario(tools, (*calls, CallSpec("ok", "valid", "get_ok_1", "q")), 1)
    violations = check_scenario(Harness("middleware", "async"), scenario)
    assert not violations, "\n".join(violations)
