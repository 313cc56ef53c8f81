"""A tool's model-visible schema, read once per tool: what repair and validation share.

`tool_schema` compiles a tool's schema once (cached per tool object): the JSON schema
the model sees, its `SchemaFacts` (argument names and the JSON types each accepts),
and what to validate with (the tool's pydantic model, or a `jsonschema` validator for a
schema that is a plain dict). Repair (`pipeline.repair`) reads the facts; validation
(`pipeline.validate`) checks arguments against the rest. Neither stage imports the other.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from ..core.identity import IdentityCache
from ..core.tools import injected_keys

_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_CHUNKS = re.compile(r"[\W_]+")
_HUMPS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> tuple[str, ...]:
    """The lower-case words of a parameter name (``"userID"`` -> ``("user", "id")``)."""
    out: list[str] = []
    for chunk in _CHUNKS.split(name):
        if not chunk:
            continue
        parts = _HUMPS.findall(chunk) if chunk.isascii() else [chunk]
        out.extend(p.lower() for p in parts)
    return tuple(out)


def norm(name: str) -> str:
    """An argument name as its words, lower case, joined (``userId``, ``user-id``: ``userid``)."""
    return "".join(words(name))


@dataclass(frozen=True, slots=True)
class SchemaFacts:
    """What repair needs from a tool's JSON schema, computed once per tool."""

    props: frozenset[str]
    """The argument names the model may send."""
    known: bool
    """Whether the schema lists its properties at all (else names are left alone)."""
    open: bool
    """Whether the schema accepts arguments it does not list (explicit
    ``additionalProperties``/``patternProperties``)."""
    kinds: Mapping[str, frozenset[str]]
    """Per argument, the JSON types it accepts (empty: unknown, no type repair)."""
    by_norm: Mapping[str, str]
    """Normalised name (its words, lower case, joined) -> argument, for unambiguous ones."""
    names: tuple[str, ...]
    """The argument names, in the schema's order (for `repair.names.closest`)."""


def _kinds(sub: Any, defs: Mapping[str, Any], depth: int = 0) -> frozenset[str]:
    if not isinstance(sub, Mapping) or depth > 8:
        return frozenset()
    ref = sub.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return _kinds(target, defs, depth + 1) if target is not None else frozenset()
    t = sub.get("type")
    if isinstance(t, str):
        return frozenset({t}) & _JSON_TYPES
    if isinstance(t, list):
        return frozenset(x for x in t if isinstance(x, str)) & _JSON_TYPES
    for key in ("anyOf", "oneOf", "allOf"):
        options = sub.get(key)
        if isinstance(options, list) and options:
            parts = [_kinds(o, defs, depth + 1) for o in options]
            if any(not p for p in parts):
                return frozenset()  # one option of unknown type: anything may be meant
            return frozenset().union(*parts)
    if "properties" in sub:
        return frozenset({"object"})
    return frozenset()


def schema_facts(schema: Mapping[str, Any]) -> SchemaFacts:
    """Analyse a model-visible JSON schema once (cache the result per tool)."""
    props_raw = schema.get("properties") if isinstance(schema, Mapping) else None
    known = isinstance(props_raw, Mapping)
    props: Mapping[str, Any] = props_raw if isinstance(props_raw, Mapping) else {}
    defs = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            defs.update(schema[key])
    # Absent ``additionalProperties`` counts as closed: pydantic's default ignores extras.
    extra = schema.get("additionalProperties", False) if known else True
    norms = {name: norm(name) for name in props}
    counts: dict[str, int] = {}
    for n in norms.values():
        counts[n] = counts.get(n, 0) + 1
    return SchemaFacts(
        props=frozenset(props),
        known=known,
        open=extra is True or isinstance(extra, Mapping) or bool(schema.get("patternProperties")),
        kinds={name: _kinds(sub, defs) for name, sub in props.items()},
        by_norm={n: name for name, n in norms.items() if n and counts[n] == 1},
        names=tuple(props),
    )


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
    plain: Mapping[str, frozenset[type]] | None = None
    """For a `model` that can refuse a value only for its type (`plain_fields`): per
    argument, the exact types it takes as they are. `None`: no such shortcut."""
    required: frozenset[str] = frozenset()
    """The arguments `plain` needs present."""


_PLAIN_TYPES = {
    str: frozenset({str}),
    int: frozenset({int}),
    float: frozenset({float, int}),
    bool: frozenset({bool}),
}
"""Annotations whose validation accepts every value of these exact types, unchanged."""

_QUIET_CONFIG = frozenset(
    {
        "title",
        "json_schema_extra",
        "arbitrary_types_allowed",
        "protected_namespaces",
        "extra",
        "frozen",
        "defer_build",
        "use_attribute_docstrings",
    }
)
"""Model settings that never refuse a value (``strict``, ``str_max_length``,
``validate_default``, ``allow_inf_nan`` and the rest can: they rule the shortcut out)."""


def plain_fields(
    model: type[BaseModel],
) -> tuple[dict[str, frozenset[type]], frozenset[str]] | None:
    """When `model` can refuse a value only for its type: per field, the exact types it
    accepts unchanged, and the required fields. `None` when anything else could refuse
    one (a validator, a constraint, an alias, a setting, an annotation other than `str`,
    `int`, `float`, `bool` or one of them or `None`)."""
    decorators = model.__pydantic_decorators__
    if (
        decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.model_validators
        or model.__pydantic_post_init__ is not None
        or getattr(model, "__pydantic_root_model__", False)
        or _own(model, "model_validate")
        or _own(model, "__get_pydantic_core_schema__")
        or not set(model.model_config) <= _QUIET_CONFIG
    ):
        return None
    accepted: dict[str, frozenset[type]] = {}
    required: set[str] = set()
    for name, info in model.model_fields.items():
        if info.metadata or info.alias or info.validation_alias or info.discriminator:
            return None
        types_ = _plain_annotation(info.annotation)
        if types_ is None:
            return None
        accepted[name] = types_
        if info.is_required():
            required.add(name)
    return accepted, frozenset(required)


def _own(model: type[BaseModel], name: str) -> bool:
    """Whether `model` (or a base of it) replaces pydantic's own classmethod `name`."""
    ours = getattr(getattr(model, name, None), "__func__", None)
    return ours is not getattr(BaseModel, name).__func__


def _plain_annotation(annotation: Any) -> frozenset[type] | None:
    if annotation in _PLAIN_TYPES:
        return _PLAIN_TYPES[annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if type(None) in options and len(options) == 2:
            other = next(o for o in options if o is not type(None))
            if other in _PLAIN_TYPES:
                return _PLAIN_TYPES[other] | {type(None)}
    return None


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
        plain = plain_fields(model) if model is not None else None
        if plain is not None:
            return ToolSchema(schema, schema_facts(schema), model, None, hidden, *plain)
    return ToolSchema(schema, schema_facts(schema), model, validator, hidden)


def _allows_extra(model: Any) -> bool:
    """Whether `model` is a pydantic model that keeps arguments it does not declare."""
    return (
        isinstance(model, type)
        and issubclass(model, BaseModel)
        and model.model_config.get("extra") == "allow"
    )


_CACHE: IdentityCache[ToolSchema] = IdentityCache()
"""`compile_tool` per tool object (held weakly: `core.identity`)."""


def tool_schema(tool: BaseTool) -> ToolSchema:
    """`compile_tool(tool)`, cached per tool object."""
    hit = _CACHE.get(tool)
    if hit is not None:
        return hit
    compiled = compile_tool(tool)
    _CACHE.put(tool, compiled)
    return compiled
