"""What one `ResilientToolNode` step tells the calls it runs, through context variables
(tasks, workers and LangGraph's own tasks run in a copy of the step's context)."""

from __future__ import annotations

import contextvars
from typing import Literal

INPUT_TYPE: contextvars.ContextVar[Literal["list", "dict", "tool_calls"]] = contextvars.ContextVar(
    "lrt_input_type", default="dict"
)
"""The step's input form, read by the async wrapper for sync tools (tasks copy it)."""
RERUN: contextvars.ContextVar[bool] = contextvars.ContextVar("lrt_rerun", default=False)
"""Set while a write runs once more because a person chose so (see `adapters.review`)."""
