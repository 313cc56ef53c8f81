"""A `Call` made by hand, as the pipeline makes one: for tests of a stage's pure core."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

from langchain_resilient_tools import ToolPolicy
from langchain_resilient_tools.core.call import Call, CallRecord
from langchain_resilient_tools.core.policy import ResolvedPolicy


def make_call(
    name: str,
    args: dict[str, Any] | None = None,
    policy: ToolPolicy | None = None,
    *,
    id: str = "c1",
    tool: BaseTool | None = None,
    **fields: Any,
) -> Call:
    """The call `id` to `name` with `args` (``{}``) under `policy` (the default one), its
    record new; `fields` set the rest (``thread_id``, ``state``...)."""
    resolved = ResolvedPolicy(policy or ToolPolicy(), name)
    return Call(
        id, name, {} if args is None else args, tool, resolved, CallRecord(name, id), **fields
    )
