"""MkDocs hook (``hooks:`` in mkdocs.yml): what the pages cannot type by hand.

- ``<!-- results: tail.json -->`` lines and ``{{ tail.json: path | spec }}`` figures become
  tables and values read from ``bench/results/*.json`` (`bench.report`), so no measured
  figure in the docs is typed by hand;
- ``<!-- reference: policy -->`` becomes one mkdocstrings directive per options class of
  `ToolPolicy` (every pydantic model its fields take, and the ones those take), in the
  order of its fields, so a new group is documented without editing the page.

The tests import this file too (tests/test_docs.py).
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# This checkout's `bench` and package, imported now: MkDocs puts back `sys.path` once the
# hook is loaded, and an installed copy of the package may be elsewhere (a worktree).
sys.path.insert(0, str(ROOT))
try:
    from pydantic import BaseModel

    import langchain_resilient_tools as lrt
    from bench import report
finally:
    sys.path.remove(str(ROOT))

RESULTS = re.compile(r"^<!-- results: (\S+) -->$", re.M)
FIGURE = re.compile(
    r"(^```.*?^```|`[^`\n]*`)"  # code is left as it is (so a page can show the syntax)
    r"|\{\{\s*([\w.-]+\.json)\s*:\s*([^|}]+?)\s*(?:\|\s*([^}]*?)\s*)?\}\}",
    re.S | re.M,
)
REFERENCE = re.compile(r"^<!-- reference: policy -->$", re.M)


def _tasks(data: dict[str, Any]) -> str:
    """``tasks.json`` (the task benchmark), as `bench.bench_tasks.markdown` renders it."""
    from bench import bench_tasks  # imported when used: it loads LangGraph and the fault kit

    return bench_tasks.markdown(data)


report.RENDERERS.setdefault("tasks.json", _tasks)


def expand(markdown: str, results_dir: Path = report.RESULTS_DIR) -> str:
    """`markdown` with its results markers, figures and reference marker expanded."""
    named = [ref for ref in RESULTS.findall(markdown) if ref != "others"]

    def table(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref == "others":
            return report.others(named, results_dir) or "No other results."
        return report.render(ref, results_dir)

    markdown = RESULTS.sub(table, markdown)

    def figure(match: re.Match[str]) -> str:
        code, name, path, spec = match.groups()
        return code or report.figure(name, path, spec or "", results_dir)

    markdown = FIGURE.sub(figure, markdown)
    return REFERENCE.sub(lambda _: policy_reference(), markdown)


def policy_classes() -> list[type]:
    """`ToolPolicy` and every options model it takes, depth first in field order."""
    found: list[type] = []

    def models(annotation: Any) -> list[type]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in typing.get_args(annotation) for m in models(arg)]

    def visit(model: type) -> None:
        if model in found:
            return
        found.append(model)
        for field in model.model_fields.values():  # type: ignore[attr-defined]
            for sub in models(field.annotation):
                visit(sub)

    visit(lrt.ToolPolicy)
    return found


def policy_reference() -> str:
    lines = []
    for model in policy_classes():
        public = model.__name__ in lrt.__all__
        where = "langchain_resilient_tools" if public else model.__module__
        lines.append(f"::: {where}.{model.__name__}\n")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    try:
        return expand(markdown)
    except (KeyError, ValueError) as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: {exc}") from exc
