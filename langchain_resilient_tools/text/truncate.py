"""Cutting huge results down to `Output.max_chars`, visibly and validly.

Plain text is cut with a marker (``... [truncated 12345 chars]``). Content that parses
as a JSON object or array stays valid JSON: long strings and long lists inside it are
shortened, each with its own marker, and the structure is kept. If the structure alone
is over the cap, the JSON text is cut and wrapped as ``{"truncated_json": "..."}``.
"""

from __future__ import annotations

import json
from typing import Any

TEXT_MARKER = "\n... [truncated {n} chars]"
FIELD_MARKER = "... [truncated {n} chars]"
LIST_MARKER = "... [truncated {n} items]"
_MIN_STRING = 16


def text_of(content: Any) -> str:
    """Message content (a string or a list of content blocks) as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def cut_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters (marker included, when it fits)."""
    if len(text) <= limit:
        return text
    marker = TEXT_MARKER.format(n=len(text))  # the longest the marker can be
    keep = max(limit - len(marker), 0)
    return text[:keep] + TEXT_MARKER.format(n=len(text) - keep)


def _shrink(value: Any, max_str: int, max_items: int) -> Any:
    if isinstance(value, str):
        if len(value) <= max_str:
            return value
        return value[:max_str] + FIELD_MARKER.format(n=len(value) - max_str)
    if isinstance(value, list):
        items = [_shrink(v, max_str, max_items) for v in value[:max_items]]
        if len(value) > max_items:
            items.append(LIST_MARKER.format(n=len(value) - max_items))
        return items
    if isinstance(value, dict):
        return {k: _shrink(v, max_str, max_items) for k, v in value.items()}
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def cut_json(data: dict[str, Any] | list[Any], text: str, limit: int) -> str:
    """The JSON `data` (parsed from `text`) shortened to at most `limit` characters."""
    max_str, max_items = limit, limit
    while True:
        out = _dumps(_shrink(data, max_str, max_items))
        if len(out) <= limit:
            return out
        if max_str <= _MIN_STRING and max_items <= 1:
            break
        max_str, max_items = max(_MIN_STRING, max_str // 2), max(1, max_items // 2)
    budget = limit - len(_dumps({"truncated_json": ""}))
    while budget > 0:
        out = _dumps({"truncated_json": cut_text(text, budget)})
        if len(out) <= limit:
            return out
        budget -= len(out) - limit
    return cut_text(text, limit)


def truncate_text(text: str, limit: int) -> str:
    """`text` within `limit` characters, JSON kept valid when it is JSON."""
    if len(text) <= limit:
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, (dict, list)):
            return cut_json(data, text, limit)
    return cut_text(text, limit)


def truncate(content: Any, limit: int | None) -> Any:
    """Message content (string or content blocks) within `limit` characters of text."""
    if limit is None:
        return content
    if isinstance(content, str):
        return truncate_text(content, limit)
    if isinstance(content, list):
        budget, out = limit, []
        for block in content:
            if isinstance(block, str):
                block = truncate_text(block, max(budget, 0))
                budget -= len(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                text = truncate_text(block["text"], max(budget, 0))
                block = {**block, "text": text}
                budget -= len(text)
            out.append(block)
        return out
    return content
