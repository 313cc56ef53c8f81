"""A tiny domain of our own (3 tasks, 4 tools): the smoke test's, needing no τ² data.

A switch board and a wallet: ``toggle_switch`` flips a switch (a repeat flips it back),
``add_credit`` adds to a balance (a repeat adds twice); ``get_switch`` and
``get_balance`` read them.
"""

from __future__ import annotations

from typing import Any

from .core import Action, Domain, DomainError, Env, Task, ToolSpec


def get_switch(env: Env, name: str) -> dict[str, Any]:
    if name not in env.db["switches"]:
        raise DomainError(f"no switch named {name!r}")
    return {"name": name, "on": env.db["switches"][name]}


def toggle_switch(env: Env, name: str) -> str:
    if name not in env.db["switches"]:
        raise DomainError(f"no switch named {name!r}")
    env.db["switches"][name] = not env.db["switches"][name]
    return f"switch {name} is now {'on' if env.db['switches'][name] else 'off'}"


def get_balance(env: Env, account: str) -> dict[str, Any]:
    return {"account": account, "balance": env.db["wallet"].get(account, 0)}


def add_credit(env: Env, account: str, amount: int) -> str:
    if amount <= 0:
        raise DomainError("amount must be positive")
    env.db["wallet"][account] = env.db["wallet"].get(account, 0) + amount
    return f"added {amount} to {account}"


def domain() -> Domain:
    start = {"switches": {"lamp": False, "fan": True}, "wallet": {"alice": 10}}
    tasks = [
        Task("lamp_on", start, (Action("toggle_switch", {"name": "lamp"}),)),
        Task(
            "top_up",
            start,
            (
                Action("get_balance", {"account": "alice"}),
                Action("add_credit", {"account": "alice", "amount": 5}),
            ),
        ),
        Task(
            "both",
            start,
            (
                Action("toggle_switch", {"name": "fan"}),
                Action("add_credit", {"account": "bob", "amount": 3}),
            ),
        ),
    ]
    specs = [
        ToolSpec("get_switch", get_switch, "Whether a switch is on.", write=False),
        ToolSpec("toggle_switch", toggle_switch, "Flip a switch.", write=True),
        ToolSpec("get_balance", get_balance, "The balance of an account.", write=False),
        ToolSpec("add_credit", add_credit, "Add credit to an account.", write=True),
    ]
    checks = {
        "toggle_switch": lambda a: Action("get_switch", {"name": a["name"]}),
        "add_credit": lambda a: Action("get_balance", {"account": a["account"]}),
    }
    return Domain("synthetic", specs, tasks, checks, source="built in (bench/tasks/synthetic.py)")
