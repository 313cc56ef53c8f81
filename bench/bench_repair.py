"""Argument repair over real function schemas written by others: repaired, refused, wrong.

Run: ``.venv/bin/python -m bench.bench_repair [--max-per-kind N] [--seed S] [--quick]``

Data: ``bench/data/bfcl_schemas.json``, a sample of the function schemas of the Berkeley
Function Calling Leaderboard (Apache-2.0, see ``bench/data/NOTICE``) with a valid call of
each, built from the leaderboard's ground truth. Every schema becomes a tool twice: a
Python tool with a pydantic argument model (what ``@tool`` makes of a typed function;
schemas whose names pydantic cannot take are left out of this form) and a tool with the
JSON schema itself (as MCP tools are). The body of every tool records what it receives.

For each valid call, then for the same call with one realistic mistake
(`bench.repair_cases`), the call goes through `ResilientToolNode` (default policy, no
timeout) and through a plain `ToolNode`, in one step each. An outcome is:

- ``repaired``: the body received exactly what it receives for the intended call (for
  ``valid``: and nothing was reported repaired: the call was not altered);
- ``refused``: the body did not run, and the answer is ``invalid_arguments`` or
  ``malformed_call`` naming the problem (the argument at fault, for a name or a missing
  argument) and every valid name (``refused_unclear`` otherwise);
- ``wrong``: the body received anything else;
- ``crash``: the step raised; for ``ToolNode`` also ``unanswered``: no message for the
  call (it never answers a call whose text did not parse).

The nodes run a seeded sample (``--schemas``, ``--max-per-kind``), to stay near two
minutes; every case of the data (about 22,000) also goes through the repair logic alone
(`repair_call`, then the JSON schema), which takes seconds.

Writes ``bench/results/repair.json`` and prints the table. Targets: ``wrong`` = 0 for
every kind, no valid call altered, no crash, >= 90% repaired for every repairable kind.
"""

from __future__ import annotations

import argparse
import json
import keyword
import random
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import jsonschema
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from langchain_resilient_tools import ResilientToolNode, ToolPolicy
from langchain_resilient_tools.pipeline.repair.logic import repair_call, schema_facts

from . import _util
from .repair_cases import KINDS, REPAIRABLE, Case, mistakes

DATA = Path(__file__).parent / "data" / "bfcl_schemas.json"
RESULT = _util.RESULTS_DIR / "repair.json"
FORMS = ("pydantic", "json_schema")
TOOLNODE_OUTCOMES = ("repaired", "refused", "wrong", "unanswered", "crash")
OUTCOMES = ("repaired", "refused", "refused_unclear", "wrong", "crash")
_CONFIG: RunnableConfig = {"configurable": {"__pregel_runtime": Runtime()}}
_RESERVED = frozenset(dir(BaseModel))

received: list[dict[str, Any]] = []
"""What the tool bodies received, in order (cleared before each call)."""


# -- tools ---------------------------------------------------------------------------


def _annotation(sub: Any) -> Any:
    if not isinstance(sub, dict):
        return Any
    enum = sub.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, str | int) for e in enum):
        return Literal[tuple(enum)]  # type: ignore[valid-type]
    kind = sub.get("type")
    if kind == "array":
        return list[_annotation(sub.get("items"))]  # type: ignore[misc]
    return {"string": str, "integer": int, "number": float, "boolean": bool}.get(
        kind, dict[str, Any] if kind == "object" else Any
    )


def pydantic_model(name: str, schema: dict[str, Any]) -> type[BaseModel] | None:
    """A pydantic model for `schema`, as a typed Python function would have (None when a
    parameter name cannot be a field)."""
    props: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {}
    for prop, sub in props.items():
        if not prop.isidentifier() or keyword.iskeyword(prop) or prop.startswith("_"):
            return None
        if prop in _RESERVED or prop.startswith("model_"):
            return None
        default = ... if prop in required else None
        fields[prop] = (_annotation(sub), Field(default=default))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_model(name, **fields)


def _body(**kwargs: Any) -> str:
    received.append(kwargs)
    return "ok"


def make_tool(form: str, name: str, schema: dict[str, Any]) -> BaseTool | None:
    if form == "json_schema":
        return StructuredTool(name=name, description=name, args_schema=schema, func=_body)
    model = pydantic_model(name, schema)
    if model is None:
        return None
    return StructuredTool.from_function(
        func=_body, name=name, description=name, args_schema=model, infer_schema=False
    )


# -- one call through one node ---------------------------------------------------------


def _message(node: Any, tool: str, sent: dict[str, Any] | str) -> tuple[Any, ToolMessage | None]:
    """(what the body received or None, the call's ToolMessage or None); raises on a crash."""
    if isinstance(sent, str):
        bad = {"name": tool, "args": sent, "id": "c1", "error": "bad JSON"}
        ai = AIMessage("", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}])
    else:
        ai = AIMessage("", tool_calls=[{"name": tool, "args": sent, "id": "c1"}])
    received.clear()
    out = node.invoke({"messages": [ai]}, _CONFIG)
    messages = out.get("messages", []) if isinstance(out, dict) else out
    answer = next(
        (m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c1"), None
    )
    return (received[0] if received else None), answer


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(
        b, sort_keys=True, default=repr
    )


def _fixable(answer: ToolMessage, schema: dict[str, Any], case: Case) -> bool:
    """Whether a refusal says what is wrong and what the valid names are."""
    try:
        data = json.loads(str(answer.content))
    except ValueError:
        return False
    if data.get("error") not in ("invalid_arguments", "malformed_call") or not data.get("message"):
        return False
    text = f"{data.get('message')} {data.get('suggestion')}"
    if not all(name in text for name in schema["properties"]):
        return False
    if case.name is not None:
        return any(f.get("name") == case.name for f in data.get("fields", ()))
    return True


def outcome(
    node: Any, tool: str, schema: dict[str, Any], case: Case, intended: Any, *, ours: bool
) -> str:
    try:
        body, answer = _message(node, tool, case.sent)
    except Exception:
        return "crash"
    if body is not None:
        if not _same(body, intended):
            return "wrong"
        record = answer.response_metadata.get("resilience", {}) if answer is not None else {}
        if ours and case.kind == "valid" and record.get("repairs"):
            return "wrong"  # a valid call reported as repaired: altered
        return "repaired"
    if answer is None:
        return "unanswered" if not ours else "crash"
    if not ours:
        return "refused" if answer.status == "error" else "wrong"
    return "refused" if _fixable(answer, schema, case) else "refused_unclear"


# -- the run -------------------------------------------------------------------------------


def load(path: Path = DATA) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text())
    return data


MIN_PER_KIND = 30
"""A sample of schemas is grown until every kind has this many cases (where there are)."""


def cases(
    items: Sequence[dict[str, Any]],
    seed: int,
    per_kind: int | None,
    schemas: int | None = None,
    min_per_kind: int = MIN_PER_KIND,
) -> list[tuple[int, Case]]:
    """The cases of a seeded sample of `schemas` schemas (grown so that every kind has
    `min_per_kind` cases where the data has them), at most `per_kind` of each kind."""
    rng = random.Random(seed)
    every: dict[str, list[tuple[int, Case]]] = {k: [] for k in KINDS}
    for i, item in enumerate(items):
        for call in item["calls"]:
            for case in mistakes(item["parameters"], call, rng):
                every[case.kind].append((i, case))
    order = list(range(len(items)))
    rng.shuffle(order)
    chosen = set(order[:schemas] if schemas else order)
    for found in every.values():
        inside = [c for c in found if c[0] in chosen]
        outside = [c for c in found if c[0] not in chosen]
        rng.shuffle(outside)
        for i, _ in outside[: max(0, min_per_kind - len(inside))]:
            chosen.add(i)
    out: list[tuple[int, Case]] = []
    for kind in KINDS:
        found = [c for c in every[kind] if c[0] in chosen]
        if per_kind is not None and len(found) > per_kind:
            found = rng.sample(found, per_kind)
        out.extend(found)
    return out


def _empty() -> dict[str, Any]:
    return {
        "n": 0,
        **dict.fromkeys(OUTCOMES, 0),
        "toolnode": dict.fromkeys(TOOLNODE_OUTCOMES, 0),
        "wrong_examples": [],
        "not_repaired": [],
    }


def run_form(
    form: str, items: Sequence[dict[str, Any]], chosen: Iterable[tuple[int, Case]]
) -> dict[str, Any]:
    chosen = list(chosen)
    tools: dict[int, BaseTool] = {}
    for i in sorted({i for i, _ in chosen}):
        name = f"f{i}_{items[i]['name'].replace('.', '_')}"[:64]
        tool = make_tool(form, name, items[i]["parameters"])
        if tool is not None:
            tools[i] = tool
    policy = ToolPolicy(timeout=None, dedup="off")
    ours = ResilientToolNode(list(tools.values()), policy=policy, errors_key=None)
    plain = ToolNode(list(tools.values()))
    kinds: dict[str, dict[str, Any]] = {k: _empty() for k in KINDS}
    intended: dict[str, Any] = {}
    for i, case in chosen:
        if i not in tools:
            continue
        tool, schema = tools[i], items[i]["parameters"]
        key = f"{i}:{json.dumps(case.meant, sort_keys=True)}"
        if key not in intended:  # what the body receives for the intended call
            body, _ = _message(plain, tool.name, case.meant)
            intended[key] = body
        if intended[key] is None:
            continue  # the intended call itself does not run (a schema pydantic reads otherwise)
        row = kinds[case.kind]
        row["n"] += 1
        got = outcome(ours, tool.name, schema, case, intended[key], ours=True)
        row[got] += 1
        if got == "wrong" and len(row["wrong_examples"]) < 5:
            row["wrong_examples"].append({"tool": items[i]["name"], "sent": case.sent})
        if got != "repaired" and case.kind in REPAIRABLE and len(row["not_repaired"]) < 10:
            row["not_repaired"].append({"tool": items[i]["name"], "sent": case.sent})
        row["toolnode"][outcome(plain, tool.name, schema, case, intended[key], ours=False)] += 1
    return {"tools": len(tools), "kinds": kinds}


def logic_only(
    items: Sequence[dict[str, Any]], chosen: Iterable[tuple[int, Case]]
) -> dict[str, Any]:
    """The repair logic alone (`repair_call`, then the schema) over `chosen`: cheap enough
    for every case of the data. An outcome is repaired (exactly the intended arguments,
    and a valid call untouched), refused (unreadable, an unknown name kept for
    validation to reject, or arguments the schema rejects) or wrong."""
    kinds: dict[str, dict[str, int]] = {
        k: dict.fromkeys(("n", "repaired", "refused", "wrong"), 0) for k in KINDS
    }
    facts: dict[int, Any] = {}
    validators: dict[int, Any] = {}
    for i, case in chosen:
        schema = items[i]["parameters"]
        if i not in facts:
            facts[i] = schema_facts(schema)
            validators[i] = jsonschema.validators.validator_for(schema)(schema)
        row = kinds[case.kind]
        row["n"] += 1
        r = repair_call(case.sent, facts[i])
        if r.args is None or r.unknown or not validators[i].is_valid(r.args):
            row["refused"] += 1
        elif _same(r.args, case.meant) and not (case.kind == "valid" and r.repairs):
            row["repaired"] += 1
        else:
            row["wrong"] += 1
    return kinds


def _share(row: dict[str, Any], key: str) -> float:
    return round(100 * row[key] / row["n"], 1) if row["n"] else 0.0


def targets(forms: dict[str, dict[str, Any]]) -> dict[str, bool]:
    rows = [(kind, row) for f in forms.values() for kind, row in f["kinds"].items()]
    return {
        "wrong_is_zero": all(row["wrong"] == 0 for _, row in rows),
        "no_valid_call_altered": all(
            row["repaired"] == row["n"] for kind, row in rows if kind == "valid"
        ),
        "no_crash": all(row["crash"] == 0 for _, row in rows),
        "refusals_name_the_problem": all(row["refused_unclear"] == 0 for _, row in rows),
        "repaired_90_percent": all(
            _share(row, "repaired") >= 90 for kind, row in rows if kind in REPAIRABLE and row["n"]
        ),
    }


def run(
    *,
    seed: int = 32,
    per_kind: int | None = 200,
    schemas: int | None = 250,
    min_per_kind: int = MIN_PER_KIND,
    logic_all: bool = True,
) -> dict[str, Any]:
    """Run the sample through both nodes, and (`logic_all`) every case through the repair
    logic alone."""
    items = load()
    chosen = cases(items, seed, per_kind, schemas, min_per_kind)
    start = time.perf_counter()
    forms = {form: run_form(form, items, chosen) for form in FORMS}
    result = {
        "meta": _util.run_metadata(["bench_repair"]),
        "data": {
            "source": "Berkeley Function Calling Leaderboard (ShishirPatil/gorilla), Apache-2.0",
            "file": str(DATA.relative_to(Path(__file__).parent.parent)),
            "schemas": len(items),
            "calls": sum(len(i["calls"]) for i in items),
        },
        "settings": {
            "seed": seed,
            "schemas_sampled": schemas,
            "schemas_used": len({i for i, _ in chosen}),
            "max_per_kind": per_kind,
            "seconds": 0.0,
        },
        "repairable": list(REPAIRABLE),
        "forms": forms,
    }
    result["settings"]["seconds"] = round(time.perf_counter() - start, 1)
    every = cases(items, seed, None, None, 0) if logic_all else chosen
    result["all_cases_logic"] = logic_only(items, every)
    result["targets"] = targets(forms)
    result["targets"]["all_cases_logic_wrong_is_zero"] = all(
        row["wrong"] == 0 for row in result["all_cases_logic"].values()
    )
    result["targets_met"] = all(result["targets"].values())
    return result


# -- reporting -------------------------------------------------------------------------------

HEADERS = ["mistake", "n", "repaired", "refused", "wrong", "crash", "ToolNode r/ref/w/unans"]


def rows(result: dict[str, Any], form: str) -> list[list[Any]]:
    out = []
    for kind, row in result["forms"][form]["kinds"].items():
        if not row["n"]:
            continue
        tn = row["toolnode"]
        refused = row["refused"] + row["refused_unclear"]
        out.append(
            [
                kind + (" *" if kind in REPAIRABLE else ""),
                row["n"],
                f"{row['repaired']} ({_share(row, 'repaired'):g}%)",
                str(refused)
                + (f" ({row['refused_unclear']} unclear)" if row["refused_unclear"] else ""),
                row["wrong"],
                row["crash"],
                f"{tn['repaired']}/{tn['refused']}/{tn['wrong']}/{tn['unanswered'] + tn['crash']}",
            ]
        )
    return out


def table(result: dict[str, Any]) -> str:
    parts = []
    for form in FORMS:
        tools = result["forms"][form]["tools"]
        parts.append(f"{form} tools ({tools} schemas; * = a kind the package repairs)")
        parts.append(_util.format_table(HEADERS, rows(result, form)))
    logic = result["all_cases_logic"]
    parts.append(
        f"the repair logic alone over every case ({sum(r['n'] for r in logic.values())}): "
        + ", ".join(
            f"{k} {r['repaired']}/{r['refused']}/{r['wrong']}" for k, r in logic.items() if r["n"]
        )
        + " (repaired/refused/wrong)"
    )
    parts.append("targets: " + ", ".join(f"{k}={v}" for k, v in result["targets"].items()))
    return "\n\n".join(parts)


def markdown(result: dict[str, Any], form: str = "pydantic") -> str:
    """One form's table in Markdown (for the docs)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows(result, form)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, quick: bool = False) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", type=int, default=250, help="schemas sampled (0: all)")
    parser.add_argument("--max-per-kind", type=int, default=200, help="cases per kind (0: all)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="a smoke run (no results file)")
    args = parser.parse_args(list(argv or []))
    quick = quick or args.quick
    if quick:
        result = run(seed=args.seed, per_kind=10, schemas=30, min_per_kind=3, logic_all=False)
    else:
        result = run(
            seed=args.seed, per_kind=args.max_per_kind or None, schemas=args.schemas or None
        )
    print(table(result))
    if not quick:
        _util.save_json(result, RESULT)
        print(f"\nresults: {RESULT}")
    return result


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
