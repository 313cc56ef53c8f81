"""The grouped `ToolPolicy` (issue 33): the old flat names, one table; shorthands;
misspelt options; per-tool policies merged group by group; help() and repr()."""

from __future__ import annotations

import pydoc
import warnings
from typing import Any

import pytest

from langchain_resilient_tools import (
    AdaptiveTimeout,
    Args,
    BreakerPolicy,
    Cache,
    Dedup,
    Fallback,
    Hedge,
    Journal,
    Limits,
    Output,
    ResilientToolNode,
    ResultChecks,
    RetryBudget,
    RetryPolicy,
    Shared,
    Timeouts,
    ToolPolicy,
    UnknownOutcome,
    UsageError,
)
from langchain_resilient_tools.core.policy import PolicyResolver, overlay
from langchain_resilient_tools.core.policy_compat import RENAMED
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, ok_tool

GROUPS = [
    Args, Journal, Dedup, Cache, Fallback, UnknownOutcome, RetryPolicy, RetryBudget, Hedge,
    BreakerPolicy, ResultChecks, Limits, Timeouts, AdaptiveTimeout, Output, Shared, ToolPolicy,
]  # fmt: skip

OLD_TOOL_POLICY_FIELDS = (
    "timeout", "idempotent", "idempotency_key", "retry", "breaker", "aliases", "unknown_args",
    "dedup", "dedup_key", "dedup_ttl", "dedup_max_entries", "dedup_looping_after",
    "result_checks", "on_low_quality", "max_consecutive_rollbacks", "fallback",
    "max_result_chars", "detect_error_text", "expose_error_details", "verify",
    "verify_timeout", "on_unknown_outcome", "journal", "journal_ttl_s", "journal_lease_s",
    "attach_record", "max_abandoned_threads", "cache_ttl_s", "stale_max_age_s",
    "cache_max_entries", "cache_scope", "cache_key", "fallback_order", "adaptive_timeout",
    "deadline_s", "max_concurrency", "rate_limit", "isolate", "hedge", "max_hedges",
    "hedge_budget", "hedge_min_delay", "state_backend", "on_backend_error", "clock",
)  # fmt: skip
"""Every option of the flat `ToolPolicy` of 0.1 (45 of them)."""


def _check(result: Any) -> str | None:
    return None


def _key(args: dict[str, Any]) -> Any:
    return args.get("q")


def _verify(info: Any) -> None:
    return None


LIMITER_RATE = 7.0
SAMPLE: dict[str, Any] = {
    # a value of each old name that differs from its default
    "aliases": {"query": ("q",)}, "unknown_args": "drop", "journal": False,
    "journal_ttl_s": 60.0, "journal_lease_s": 3.0, "dedup": "block", "dedup_key": ("q",),
    "dedup_ttl": 5.0, "dedup_max_entries": 7, "dedup_looping_after": 4, "cache_ttl_s": 60.0,
    "stale_max_age_s": 300.0, "cache_max_entries": 9, "cache_scope": "global",
    "cache_key": _key, "fallback_order": ("fallback", "stale_cache"), "verify": _verify,
    "verify_timeout": 2.0, "on_unknown_outcome": "interrupt", "hedge": 0.2, "max_hedges": 2,
    "hedge_budget": 0.5, "hedge_min_delay": 0.1, "result_checks": (_check,),
    "on_low_quality": "retry", "max_consecutive_rollbacks": 1, "detect_error_text": False,
    "max_concurrency": 3, "rate_limit": LIMITER_RATE, "deadline_s": 12.0,
    "adaptive_timeout": AdaptiveTimeout(factor=3.0), "max_abandoned_threads": 2,
    "isolate": True, "max_result_chars": 100, "attach_record": True,
    "expose_error_details": True, "state_backend": "local", "on_backend_error": "closed",
    "budget_ratio": 0.2, "budget_min": 3, "budget_window": 30.0,
}  # fmt: skip
ROWS = [row for rows in RENAMED.values() for row in rows.values()]


def _new_spelling(row: Any, value: Any) -> Any:
    owner = ToolPolicy if row.owner == "ToolPolicy" else RetryPolicy
    group = owner.group_class(row.group)
    return owner(**{row.group: group(**{row.field: value})})


# -- the table of old names -----------------------------------------------------------


def test_the_table_covers_every_old_option() -> None:
    names = set(ToolPolicy.model_fields) | set(RENAMED["ToolPolicy"])
    assert set(OLD_TOOL_POLICY_FIELDS) <= names
    assert set(SAMPLE) == {row.old for row in ROWS}  # a sample for every row
    for row in ROWS:  # every row points at a real field of a real group
        owner = ToolPolicy if row.owner == "ToolPolicy" else RetryPolicy
        group = owner.group_class(row.group)
        assert group.__name__ == row.group_class and row.field in group.model_fields


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.owner}.{r.old}" for r in ROWS])
def test_an_old_name_builds_what_its_new_spelling_builds(row: Any) -> None:
    value = SAMPLE[row.old]
    owner = ToolPolicy if row.owner == "ToolPolicy" else RetryPolicy
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = owner(**{row.old: value})
    new = _new_spelling(row, value)
    assert old == new
    # it sets that one field of its group, so that it merges as the new spelling does
    assert getattr(old, row.group).model_fields_set == {row.field}
    if row.kind == "deprecated":
        assert [w.category for w in caught] == [DeprecationWarning]
        message = str(caught[0].message)
        assert row.old in message and row.spelling in message
        assert caught[0].filename == __file__  # points at the code that used it
    else:  # the names DESIGN.md gives users, and the groups' own shorthands
        assert caught == []


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.owner}.{r.old}" for r in ROWS])
def test_an_old_attribute_still_reads(row: Any) -> None:
    policy = _new_spelling(row, SAMPLE[row.old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(policy, row.old)
    if row.kind == "shorthand":  # the name is the group's now: it reads the group
        assert value == getattr(policy, row.group) and caught == []
        return
    assert value == getattr(getattr(policy, row.group), row.field)
    if row.kind == "deprecated":
        assert [w.category for w in caught] == [DeprecationWarning]
        assert f".{row.path}" in str(caught[0].message)
        assert caught[0].filename == __file__
    else:
        assert caught == []


def test_old_names_of_one_group_fold_together_and_into_a_group_given() -> None:
    with pytest.warns(DeprecationWarning):
        policy = ToolPolicy(cache_ttl_s=60, cache_scope="global", dedup="off")
    assert policy.cache == Cache(ttl_s=60, scope="global")
    assert policy.cache.model_fields_set == {"ttl_s", "scope"}
    with pytest.warns(DeprecationWarning):
        policy = ToolPolicy(cache=Cache(ttl_s=30), cache_scope="global")
    assert policy.cache == Cache(ttl_s=30, scope="global")
    with pytest.warns(DeprecationWarning):
        assert ToolPolicy(hedge=0.3, max_hedges=2).hedge == Hedge(delay=0.3, max_hedges=2)
    with pytest.warns(DeprecationWarning):
        assert RetryPolicy(budget_ratio=None, budget_min=3).budget is None  # off, as before
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="give it once"):
        ToolPolicy(cache=Cache(ttl_s=5), cache_ttl_s=60)


def test_the_journal_group_is_no_bool() -> None:
    """``policy.journal`` was a bool; read as one now, it would always be true."""
    with pytest.raises(TypeError, match="enabled"):
        bool(ToolPolicy(journal=False).journal)


# -- shorthands and misspellings --------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "group", "expected"),
    [
        ({"cache": 60}, "cache", Cache(ttl_s=60)),
        ({"cache": None}, "cache", Cache(ttl_s=None)),
        ({"dedup": "block"}, "dedup", Dedup(mode="block")),
        ({"hedge": "auto"}, "hedge", Hedge(delay="auto")),
        ({"hedge": 0.2}, "hedge", Hedge(delay=0.2)),
        ({"journal": False}, "journal", Journal(enabled=False)),
        ({"retry": 3}, "retry", RetryPolicy(max_attempts=3)),
        ({"retry": None}, "retry", RetryPolicy(max_attempts=1)),
        ({"unknown_outcome": "interrupt"}, "unknown_outcome", UnknownOutcome(action="interrupt")),
        ({"aliases": {"a": ["b"]}}, "args", Args(aliases={"a": ["b"]})),
        ({"result_checks": [_check]}, "results", ResultChecks(checks=[_check])),
        ({"on_low_quality": "retry"}, "results", ResultChecks(on_low_quality="retry")),
        ({"max_result_chars": 10}, "output", Output(max_chars=10)),
    ],
)
def test_a_shorthand_sets_one_field_of_its_group(
    given: dict[str, Any], group: str, expected: Any
) -> None:
    policy = ToolPolicy(**given)
    assert getattr(policy, group) == expected
    assert getattr(policy, group).model_fields_set == expected.model_fields_set


@pytest.mark.parametrize(
    ("build", "closest"),
    [
        (lambda: ToolPolicy(retires=3), "'retry'"),
        (lambda: ToolPolicy(timout=3), "'timeout'"),
        (lambda: ToolPolicy(result_check=[]), "'result_checks'"),
        (lambda: ToolPolicy(cache_tll_s=60), "'cache_ttl_s' (now cache=Cache(ttl_s=...))"),
        (lambda: ToolPolicy(cache=Cache(ttl=60)), "'ttl_s'"),
        (lambda: RetryPolicy(max_attempt=2), "'max_attempts'"),
        (lambda: RetryBudget(ratios=0.1), "'ratio'"),
        (lambda: BreakerPolicy(failure_treshold=2), "'failure_threshold'"),
    ],
)
def test_a_misspelt_option_names_the_closest_one(build: Any, closest: str) -> None:
    with pytest.raises(UsageError, match=r"has no option .*Did you mean") as info:
        build()
    assert closest in str(info.value)


def test_an_option_nothing_like_a_valid_one_lists_them() -> None:
    with pytest.raises(UsageError, match=r"Cache has no option 'zzz'\. Its options: "):
        Cache(zzz=1)


# -- per-tool policies merge group by group ------------------------------------------


def test_a_per_tool_group_changes_only_the_fields_it_sets() -> None:
    resolver = PolicyResolver(
        ToolPolicy(cache=Cache(scope="global"), fallback=Fallback(stale_s=300), timeout=5),
        {"search": ToolPolicy(cache=Cache(ttl_s=60), fallback="stub")},
    )
    policy = resolver.resolve("search").policy
    assert (policy.cache.ttl_s, policy.cache.scope) == (60, "global")
    assert policy.fallback == Fallback(stale_s=300, stub="stub")  # the shorthand: the stub
    assert resolver.resolve("search").policy.timeout == 5
    assert resolver.resolve("other").policy.cache.ttl_s is None


def test_a_shorthand_in_a_per_tool_policy_sets_one_field() -> None:
    base = ToolPolicy(cache=Cache(scope="global"), retry=RetryPolicy(initial_delay=2, max_delay=20))
    merged = overlay(base, ToolPolicy(cache=60, retry=5))
    assert merged.cache == Cache(ttl_s=60, scope="global")
    assert merged.retry == RetryPolicy(max_attempts=5, initial_delay=2, max_delay=20)
    assert overlay(base, ToolPolicy(retry=None)).retry.max_attempts == 1


def test_groups_merge_through_every_layer_and_nested_groups_too() -> None:
    resolver = PolicyResolver(
        ToolPolicy(retry=RetryPolicy(budget=RetryBudget(ratio=0.1)), hedge="auto"),
        {"search_docs": ToolPolicy(retry=RetryPolicy(budget=RetryBudget(min=2)))},
        patterns={"search_*": ToolPolicy(hedge=Hedge(max_hedges=2), retry=RetryPolicy(jitter=0))},
    )
    policy = resolver.resolve("search_docs").policy
    assert policy.retry == RetryPolicy(jitter=0, budget=RetryBudget(ratio=0.1, min=2))
    assert policy.hedge == Hedge(delay="auto", max_hedges=2)
    assert resolver.resolve("search_web").policy.retry.budget == RetryBudget(ratio=0.1)
    # a group set to None replaces it; a group over None is taken whole
    off = PolicyResolver(ToolPolicy(hedge=0.5), {"a": ToolPolicy(hedge=None)})
    assert off.resolve("a").policy.hedge is None
    on = PolicyResolver(None, {"a": ToolPolicy(breaker=BreakerPolicy(failure_threshold=2))})
    assert on.resolve("a").policy.breaker == BreakerPolicy(failure_threshold=2)


def test_policies_that_do_not_combine_fail_when_the_adapter_is_built() -> None:
    with pytest.raises(UsageError, match=r"'get_weather' do not combine: RetryPolicy\.max_delay"):
        ResilientToolNode(
            [ok_tool()],
            policy=ToolPolicy(retry=RetryPolicy(initial_delay=5, max_delay=20)),
            policies={"get_weather": ToolPolicy(retry=RetryPolicy(max_delay=1))},
        )


def test_a_per_tool_cache_ttl_keeps_the_defaults_scope(harness: Harness) -> None:
    """Through an adapter: the default's ``scope="global"`` survives the tool's own TTL,
    so a second thread is served the first thread's result."""
    default = ToolPolicy(
        cache=Cache(scope="global"), fallback=Fallback(stale_s=300), dedup="off", clock=FakeClock()
    )
    call = [tool_call("get_weather", {"city": "Oslo"}, id="c1")]
    results = harness.run_turns(
        [ok_tool()], [call, call], policy=default,
        policies={"get_weather": ToolPolicy(cache=Cache(ttl_s=60))}, thread_per_turn=True,
    )  # fmt: skip
    assert CALLS["get_weather"] == 1
    assert results[1]["c1"].response_metadata["resilience"]["served_by"] == "cache"


# -- what people read --------------------------------------------------------------


@pytest.mark.parametrize("cls", GROUPS, ids=[g.__name__ for g in GROUPS])
def test_help_shows_every_option_with_its_description(cls: Any) -> None:
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    for name, info in cls.model_fields.items():
        assert info.description, f"{cls.__name__}.{name} has no docstring"
        assert f"{name}: " in text
        first = info.description.splitlines()[0]
        assert first in text, f"{cls.__name__}.{name}: {first!r} not in help()"


def test_repr_shows_only_what_differs_from_the_defaults() -> None:
    assert repr(ToolPolicy()) == "ToolPolicy()"
    policy = ToolPolicy(timeout=5, cache=Cache(ttl_s=60, scope="thread"), dedup="block")
    assert repr(policy) == (
        "ToolPolicy(dedup=Dedup(mode='block'), cache=Cache(ttl_s=60.0), timeout=5.0)"
    )
    assert repr(RetryPolicy(budget=None)) == "RetryPolicy(budget=None)"
    assert repr(ToolPolicy(hedge="auto")) == "ToolPolicy(hedge=Hedge(delay='auto'))"
    assert repr(ToolPolicy(fallback=_Uncomparable())).startswith("ToolPolicy(fallback=")


class _Uncomparable:
    """Fallback data whose ``==`` raises (an array, say)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("ambiguous")

    __hash__ = object.__hash__
