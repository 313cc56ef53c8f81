"""Rebuild ``bfcl_schemas.json`` from a checkout of ShishirPatil/gorilla (Apache-2.0).

Run: ``python bench/data/extract_bfcl.py PATH/TO/gorilla [--max N]``

Reads the question files (``BFCL_v4_<category>.json``) and their ground truth
(``possible_answer/``) of the Berkeley Function Calling Leaderboard, and writes one
compact JSON file: for every distinct function schema that has a ground-truth call, the
schema converted to JSON Schema (BFCL's ``dict``/``float``/``tuple``/``any`` become
``object``/``number``/``array``/no type; descriptions are dropped) and up to two valid
calls built from the ground truth (the first acceptable value of each argument; an
argument whose only acceptable value is "absent" is left out). Calls that do not
validate against their schema, or that name an argument it does not declare, are left
out. The sample is seeded, so a rebuild from the
same checkout gives the same file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import jsonschema

CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
DATA = "berkeley-function-call-leaderboard/bfcl_eval/data"
OUT = Path(__file__).parent / "bfcl_schemas.json"
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}
_KEEP = ("enum", "default")


def convert(node: Any) -> dict[str, Any]:
    """One BFCL parameter schema as JSON Schema (descriptions dropped)."""
    if not isinstance(node, dict):
        return {}
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, str) and kind != "any":
        out["type"] = _TYPES.get(kind, kind)
    for key in _KEEP:
        if key in node:
            out[key] = node[key]
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: convert(v) for k, v in node["properties"].items()}
    if isinstance(node.get("required"), list):
        out["required"] = [r for r in node["required"] if r in out.get("properties", {})]
    if isinstance(node.get("items"), dict):
        out["items"] = convert(node["items"])
    return out


_ABSENT = object()


def choose(options: Any, schema: dict[str, Any]) -> Any:
    """The first acceptable value of one argument (`_ABSENT` when it may only be left out)."""
    if not isinstance(options, list):
        return _ABSENT
    for value in options:
        if value == "" and schema.get("type") != "string":
            continue
        if value == "" and len(options) > 1:
            continue
        if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
            return build(value, schema)
        return value
    return _ABSENT


def build(truth: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {})
    out = {}
    for name, options in truth.items():
        value = choose(options, props.get(name, {}))
        if value is not _ABSENT:
            out[name] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("gorilla", type=Path)
    parser.add_argument("--max", type=int, default=2000, help="schemas kept (a seeded sample)")
    args = parser.parse_args()
    root = args.gorilla / DATA
    seen: dict[str, dict[str, Any]] = {}
    for category in CATEGORIES:
        questions = (root / f"BFCL_v4_{category}.json").read_text().splitlines()
        answers = (root / "possible_answer" / f"BFCL_v4_{category}.json").read_text().splitlines()
        truth_by_id = {}
        for line in answers:
            entry = json.loads(line)
            truth_by_id[entry["id"]] = entry["ground_truth"]
        for line in questions:
            entry = json.loads(line)
            functions = {f["name"]: f for f in entry["function"]}
            for call in truth_by_id.get(entry["id"], []):
                for name, truth in call.items():
                    fn = functions.get(name)
                    if fn is None:
                        continue
                    schema = convert({**fn["parameters"], "type": "dict"})
                    schema["type"] = "object"
                    valid = build(truth, schema)
                    if not set(valid) <= set(schema.get("properties", {})):
                        continue  # an argument the schema does not declare
                    try:
                        jsonschema.validate(valid, schema)
                    except jsonschema.ValidationError:
                        continue
                    key = json.dumps([name, schema], sort_keys=True)
                    item = seen.setdefault(
                        key, {"name": name, "source": category, "parameters": schema, "calls": []}
                    )
                    if valid not in item["calls"] and len(item["calls"]) < 2:
                        item["calls"].append(valid)
    items = [i for i in seen.values() if i["parameters"].get("properties")]
    random.Random(32).shuffle(items)
    items = sorted(items[: args.max], key=lambda i: (i["source"], i["name"]))
    OUT.write_text(json.dumps(items, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{len(items)} schemas ({len(seen)} distinct with a valid call) -> {OUT}")


if __name__ == "__main__":
    main()
