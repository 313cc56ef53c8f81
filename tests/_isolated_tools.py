"""Module-level (so picklable) tools for the process-isolation tests."""

from __future__ import annotations

import time

from langchain_core.tools import StructuredTool


def _lookup(query: str) -> str:
    return f"found {query}"


def _hang(query: str) -> str:
    time.sleep(30)
    return "late"


lookup_tool = StructuredTool.from_function(_lookup, name="lookup_docs", description="Look up.")
hang_tool = StructuredTool.from_function(_hang, name="get_hang", description="Hang.")
