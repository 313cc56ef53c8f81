"""`Options`: the base of every policy and options group.

Frozen, keyword-only pydantic models, validated when built, with a docstring on every
field. What they add to pydantic:

- a misspelt option fails at construction with a `UsageError` naming the closest valid
  one (``RetryPolicy(max_attempt=3)``: "Did you mean 'max_attempts'?");
- the old flat names of `policy_compat.RENAMED` are folded into their groups;
- ``help(cls)`` lists every option with its type, default and description (appended to
  the class docstring when the class is made);
- ``repr(options)`` shows only what differs from the defaults.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from . import policy_compat
from .errors import UsageError

_FOLD_STACKLEVEL = 4
"""Frames between `policy_compat.fold` and the code that built the options: the
validator, pydantic's ``__init__`` and ours."""


class Options(BaseModel):
    """Base of the option groups: frozen, keyword-only, validated when built."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True
    )

    _accepted: ClassVar[frozenset[str]] = frozenset()
    """The keyword arguments the class takes: its fields and its old names."""
    _groups: ClassVar[dict[str, type[Options]]] = {}
    _old_readers: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    """How to read each old name (`policy_compat.readers`)."""

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic's fields give

        def __init__(self, /, **data: Any) -> None:
            if not data.keys() <= self._accepted:
                name = min(data.keys() - self._accepted)
                raise UsageError(policy_compat.unknown_option(type(self), name))
            super().__init__(**self.prepare(data))

        def __getattr__(self, name: str) -> Any:  # only when no attribute has the name
            reader = type(self)._old_readers.get(name)
            if reader is not None:
                return reader(self)
            return super().__getattr__(name)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._accepted = frozenset(cls.model_fields) | frozenset(policy_compat.rows_for(cls))
        cls._groups = {}
        cls._old_readers = policy_compat.readers(cls)
        cls.__signature__ = signature(cls)
        cls.__doc__ = f"{inspect.cleandoc(cls.__doc__ or '')}\n\n{describe(cls)}"

    @model_validator(mode="before")
    @classmethod
    def _fold_old_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.keys() <= cls.model_fields.keys():
            return policy_compat.fold(cls, data, stacklevel=_FOLD_STACKLEVEL)
        return data

    @classmethod
    def prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments `cls` is built with, before pydantic reads them (a
        class whose options moved between its groups settles them here)."""
        return data

    # -- groups held by fields -----------------------------------------------------

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """`value` given where an instance of `cls` is expected, as one (or `None`).
        Groups with shorthands (``cache=60``) override it; a `dict` is keyword arguments."""
        if isinstance(value, dict):
            return cls(**value)
        return value

    @classmethod
    def group_class(cls, group: str) -> type[Options]:
        """The options class of the field `group` (``"cache"`` -> `Cache`)."""
        found = cls._groups.get(group)
        if found is None:
            annotation = cls.model_fields[group].annotation
            found = next(
                t
                for t in (annotation, *get_args(annotation))
                if isinstance(t, type) and issubclass(t, Options)
            )
            cls._groups[group] = found
        return found

    @classmethod
    def coerce_group(cls, group: str, value: Any) -> Any:
        """`value` given for the field `group`, shorthands read (``cache=60``)."""
        return cls.group_class(group).coerce(value)

    # -- what people read ------------------------------------------------------------

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:  # type: ignore[override]
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if not _same(value, info.get_default(call_default_factory=True)):
                yield name, value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # e.g. an array as fallback data
        return False


def _default_text(value: Any) -> str:
    if callable(value) and not isinstance(value, type | BaseModel):
        module = getattr(value, "__module__", None)
        name = getattr(value, "__qualname__", None)
        if module and name:
            return f"{module}.{name}"
    return repr(value)


def _source_annotations(cls: type[Options]) -> dict[str, Any]:
    """Each field's annotation as written (``"Cache"``, not the class's full path)."""
    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    return annotations


def signature(cls: type[Options]) -> inspect.Signature:
    """The signature ``help()`` and notebooks show: keyword-only, as the source spells it."""
    annotations = _source_annotations(cls)
    return inspect.Signature(
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_Shown(_default_text(info.get_default(call_default_factory=True))),
                annotation=_Shown(_type_text(annotations.get(name, info.annotation))),
            )
            for name, info in cls.model_fields.items()
        ],
        return_annotation=None,
    )


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return str(getattr(annotation, "__name__", annotation))


class _Shown:
    """A default as ``help()`` should print it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def describe(cls: type[Options]) -> str:
    """The "Options" section of `cls`'s docstring: each field's type, default and
    description (its docstring in the source)."""
    annotations = _source_annotations(cls)
    lines = ["Options (keyword-only; repr() shows those that differ from the defaults):", ""]
    for name, info in cls.model_fields.items():
        kind = _type_text(annotations.get(name, info.annotation))
        default = _default_text(info.get_default(call_default_factory=True))
        lines.append(f"{name}: {kind} = {default}")
        for line in (info.description or "").splitlines():
            lines.append(f"    {line}".rstrip())
    return "\n".join(lines)
