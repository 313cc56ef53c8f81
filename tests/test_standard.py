"""LangChain's standard tool tests (`langchain-tests`) on `ResilientTool`-wrapped tools.

Integration packages run `ToolsUnitTests` and `ToolsIntegrationTests` on their tools;
a wrapped tool must pass them as the tool it wraps does: a sync function tool, an
async-only tool, a `StructuredTool` with an explicit schema, and a subclassed `BaseTool`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import BaseModel, Field

from langchain_resilient_tools import ResilientTool, ToolPolicy

POLICY = ToolPolicy(timeout=5.0)
EXAMPLE = {"city": "Paris", "days": 2}


@tool
def get_forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city, for the next `days` days."""
    return f"{city}: sunny for {days} day(s)"


async def _aforecast(city: str, days: int = 1) -> str:
    return f"{city}: sunny for {days} day(s)"


class ForecastInput(BaseModel):
    city: str = Field(description="The city.")
    days: int = Field(default=1, ge=1, le=14, description="How many days ahead.")


class ForecastTool(BaseTool):
    """A subclassed BaseTool with its own schema."""

    name: str = "get_forecast_subclass"
    description: str = "The weather forecast for a city."
    args_schema: type[BaseModel] = ForecastInput

    def _run(self, city: str, days: int = 1, **kwargs: Any) -> str:
        return f"{city}: sunny for {days} day(s)"


def _tools() -> dict[str, BaseTool]:
    return {
        "sync": get_forecast,
        "async": StructuredTool.from_function(
            coroutine=_aforecast, name="get_forecast_async", description="The forecast."
        ),
        "structured": StructuredTool.from_function(
            func=lambda city, days=1: f"{city}: sunny for {days} day(s)",
            name="get_forecast_structured",
            description="The forecast.",
            args_schema=ForecastInput,
        ),
        "subclass": ForecastTool(),
    }


def _wrapped(kind: str) -> BaseTool:
    return ResilientTool.wrap(_tools()[kind], policy=POLICY)


class _Standard:
    kind = "sync"

    @property
    def tool_constructor(self) -> BaseTool:
        return _wrapped(self.kind)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return dict(EXAMPLE)


class TestSyncToolUnit(_Standard, ToolsUnitTests):
    kind = "sync"


class TestSyncToolIntegration(_Standard, ToolsIntegrationTests):
    kind = "sync"


class TestAsyncToolUnit(_Standard, ToolsUnitTests):
    kind = "async"


class TestAsyncToolIntegration(_Standard, ToolsIntegrationTests):
    kind = "async"


class TestStructuredToolUnit(_Standard, ToolsUnitTests):
    kind = "structured"


class TestStructuredToolIntegration(_Standard, ToolsIntegrationTests):
    kind = "structured"


class TestSubclassedToolUnit(_Standard, ToolsUnitTests):
    kind = "subclass"


class TestSubclassedToolIntegration(_Standard, ToolsIntegrationTests):
    kind = "subclass"
