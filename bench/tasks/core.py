"""What every domain of the task benchmark is made of: tasks, an environment, tools.

A `Domain` holds the tasks (each a list of ground-truth `Action`s and the state the
environment starts from) and the tools, written as plain functions of an `Env` and the
model's arguments. `Domain.tools(env)` turns them into LangChain tools over one episode's
environment. The ground truth of a task is the environment after its actions were applied
once each, in order, with no faults (`Domain.expected`); a task passes when the episode's
environment ends equal to it.

Every write whose body went through (no `DomainError`) counts in `Env.runs` (by tool
name), so a write that took effect more often than the ground truth needs is seen
whatever the fault kit logged.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import pickle
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import create_model

from langchain_resilient_tools.core.policy import READ_PREFIXES, WRITE_PREFIXES, infer_idempotent


class DomainError(ValueError):
    """A tool refused the request on the domain's own terms (an unknown id, a line that
    is not suspended): what the service would answer with a 4xx."""


@dataclass(frozen=True)
class Action:
    """One ground-truth tool call: a name and its arguments."""

    name: str
    args: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args)}


@dataclass(frozen=True)
class Task:
    """One task: an id, the state it starts from, and its ground-truth actions."""

    id: str
    db: Mapping[str, Any]
    """The environment's state before the first action (deep-copied per episode)."""
    actions: tuple[Action, ...]


@dataclass
class Env:
    """One episode's environment: its state and how often each write's body ran."""

    db: dict[str, Any]
    runs: Counter[str] = field(default_factory=Counter)
    on_write: Callable[[str], None] | None = None
    """Called after each write went through (the crash run saves the state there)."""


ToolFn = Callable[..., Any]


@dataclass(frozen=True)
class ToolSpec:
    """A tool of a domain: its body (``fn(env, **args)``), description and kind."""

    name: str
    fn: ToolFn
    description: str
    write: bool


def _schema(spec: ToolSpec) -> Any:
    """A pydantic model of the body's parameters after ``env`` (from its signature)."""
    fields: dict[str, Any] = {}
    params = list(inspect.signature(spec.fn).parameters.values())[1:]
    for p in params:
        annotation = p.annotation if p.annotation is not inspect.Parameter.empty else Any
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    return create_model(f"{spec.name}_args", **fields)


def _odd(spec: ToolSpec) -> bool:
    """Whether `spec`'s name does not say what it is: its first word is on neither of the
    package's prefix lists, or on the wrong one."""
    head = spec.name.split("_", 1)[0].lower()
    if head not in READ_PREFIXES and head not in WRITE_PREFIXES:
        return True
    return infer_idempotent(spec.name) == spec.write


def render(value: Any) -> str:
    """A tool result as the model reads it: JSON for data, text as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class Domain:
    """Tasks and tools of one domain (telecom, banking_knowledge, a synthetic one)."""

    name: str
    specs: Sequence[ToolSpec]
    tasks: Sequence[Task]
    checks: Mapping[str, Callable[[Mapping[str, Any]], Action | None]] = field(default_factory=dict)
    """Per write tool: the read a sensible model runs to see whether the write happened
    (from the write's arguments), or `None` when nothing can show it."""
    odd_names: Mapping[str, bool] = field(default_factory=dict)
    """Tools whose name does not say what they are (``run_speed_test`` reads, a
    ``log_verification`` writes): their idempotency, given to the arms that take policies."""
    source: str = ""
    left_out: Mapping[str, int] = field(default_factory=dict)
    """Tasks of the source not used, by reason."""

    def __post_init__(self) -> None:
        self._schemas = {s.name: _schema(s) for s in self.specs}
        self._by_name = {s.name: s for s in self.specs}
        self._shadows: dict[tuple[str, int], Env] = {}
        if not self.odd_names:
            self.odd_names = {s.name: not s.write for s in self.specs if _odd(s)}

    @property
    def writes(self) -> frozenset[str]:
        return frozenset(s.name for s in self.specs if s.write)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._by_name)

    def new_env(self, task: Task) -> Env:
        return Env(pickle.loads(pickle.dumps(dict(task.db))))  # a deep copy, faster

    def call(self, env: Env, name: str, args: Mapping[str, Any]) -> str:
        """Run tool `name` on `env` directly (no LangChain, no faults): its text."""
        spec = self._by_name[name]
        out = render(spec.fn(env, **args))
        if spec.write:  # counted once the body went through (a refused request did nothing)
            env.runs[name] += 1
            if env.on_write is not None:
                env.on_write(name)
        return out

    def tools(self, env: Env) -> list[BaseTool]:
        """The domain's tools over `env`, as LangChain tools."""

        def make(spec: ToolSpec) -> BaseTool:
            def run(**kwargs: Any) -> str:
                return self.call(env, spec.name, kwargs)

            return StructuredTool.from_function(
                func=run,
                name=spec.name,
                description=spec.description,
                args_schema=self._schemas[spec.name],
            )

        return [make(s) for s in self.specs]

    def replay(self, task: Task, upto: int | None = None) -> Env:
        """The environment after the task's first `upto` actions (all by default), each
        applied once (a domain error is the action's result, as in a real run)."""
        env = self.new_env(task)
        for action in task.actions[:upto]:
            with contextlib.suppress(DomainError):
                self.call(env, action.name, action.args)
        return env

    def expected(self, task: Task) -> Env:
        return self.replay(task)

    def shadow(self, task: Task, upto: int) -> Env:
        """`replay` up to `upto`, kept per task (read only: callers must not change it)."""
        key = (task.id, upto)
        if key not in self._shadows:
            self._shadows[key] = self.replay(task, upto)
        return self._shadows[key]

    def check_for(self, action: Action) -> Action | None:
        make = self.checks.get(action.name)
        return make(action.args) if make else None


def needed_writes(domain: Domain, task: Task) -> Counter[str]:
    """How often each write's body runs in the ground truth."""
    return domain.expected(task).runs
