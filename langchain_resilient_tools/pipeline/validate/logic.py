"""Client-side validation of a call's arguments, with feedback a model can act on.

Arguments are checked against the schema the model sees: the tool's pydantic model
(its own ``args_schema`` when nothing is injected, so cross-field validators run too),
or, for tools whose schema is a plain JSON Schema dict (MCP tools, `StructuredTool`
from a dict), with the `jsonschema` package. Every problem becomes one entry of the
envelope's ``fields`` (see `text.fields`, where the feedback is worded).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from ...core.tools import injected_keys
from ...text.fields import arg_path, field_problem, from_jsonschema, from_pydantic
from ..repair.logic import SchemaFacts, schema_facts


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What repair and validation need from one tool, computed once per tool."""

    schema: dict[str, Any]
    """The model-visible JSON schema (injected arguments excluded)."""
    facts: SchemaFacts
    model: type[BaseModel] | None
    """The pydantic model to validate with, if the tool has one."""
    validator: Any
    """A `jsonschema` validator, for tools whose schema is a plain dict."""
    hidden: frozenset[str]
    """Injected argument names, never reported."""


def compile_tool(tool: BaseTool) -> ToolSchema:
    """Gather `tool`'s schema facts (use `tool_schema`, which caches them)."""
    hidden = injected_keys(tool)
    model: type[BaseModel] | None = None
    validator: Any = None
    try:
        visible: Any = tool.tool_call_schema
    except Exception:
        visible = {}
    if isinstance(visible, dict):
        schema = visible
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = cls(schema)
        except Exception:  # a schema jsonschema cannot use: no client-side validation
            validator = None
    else:
        own = tool.args_schema
        # The tool's own model keeps its cross-field validators; the subset model
        # LangChain builds when arguments are injected does not.
        if not hidden and isinstance(own, type) and issubclass(own, BaseModel):
            model = own
        elif isinstance(visible, type) and issubclass(visible, BaseModel):
            model = visible
        try:
            schema = dict(visible.model_json_schema())
        except Exception:
            schema, model = {}, None
        if _allows_extra(own) and schema:  # LangChain's subset model forgets it
            return ToolSchema(
                schema,
                schema_facts({**schema, "additionalProperties": True}),
                model,
                validator,
                hidden,
            )
    return ToolSchema(schema, schema_facts(schema), model, validator, hidden)


def _allows_extra(model: Any) -> bool:
    """Whether `model` is a pydantic model that keeps arguments it does not declare."""
    return (
        isinstance(model, type)
        and issubclass(model, BaseModel)
        and model.model_config.get("extra") == "allow"
    )


_CACHE: dict[int, tuple[BaseTool, ToolSchema]] = {}
_LOCK = threading.Lock()


def tool_schema(tool: BaseTool) -> ToolSchema:
    """`compile_tool(tool)`, cached per tool object."""
    hit = _CACHE.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    compiled = compile_tool(tool)
    with _LOCK:
        if len(_CACHE) >= 2048:
            _CACHE.clear()
        _CACHE[id(tool)] = (tool, compiled)
    return compiled


def check(ts: ToolSchema, args: Mapping[str, Any], *, reject_unknown: bool) -> list[dict[str, Any]]:
    """Every problem of `args` against the tool's schema (empty list: valid)."""
    problems: list[dict[str, Any]] = []
    if ts.model is not None:
        try:
            ts.model.model_validate(dict(args))
        except ValidationError as exc:
            problems = from_pydantic(exc.errors(), ts.schema, ts.hidden)
        except Exception:  # a validator that fails oddly: leave it to the tool itself
            problems = []
    elif ts.validator is not None:
        try:
            problems = from_jsonschema(ts.validator.iter_errors(dict(args)))
        except Exception:
            problems = []
    if reject_unknown:
        named = {p["name"] for p in problems if p["problem"] == "unexpected"}
        problems.extend(p for p in unexpected(ts, args) if p["name"] not in named)
    return problems


def unexpected(ts: ToolSchema, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A problem for every argument the tool's (closed) schema does not know, each
    listing the valid names."""
    facts = ts.facts
    if not facts.known or facts.open:
        return []
    return [
        field_problem(arg_path([key]), "unexpected", "no such argument", valid=facts.names)
        for key in args
        if key not in facts.props and key not in ts.hidden
    ]
