"""The README and the documentation site stay true: every Python example runs as written,
every JSON example parses, every ``make`` target they name exists, the policy reference
covers every options class, and the benchmark tables come from the results files.

Examples run page by page, in order, in one namespace per page (a later block may use
what an earlier one defined). A block is left out only when the line before its fence is
``<!-- not-run: REASON -->``; keep those rare (a real LLM key, a database server, a
running LangGraph server) and say where the same code is exercised instead.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import types
from pathlib import Path
from types import ModuleType

import pytest

import langchain_resilient_tools as lrt

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not-run: (.+?) -->\s*$")
MAX_NOT_RUN = 4
"""Blocks left out in all pages together: an exception needs a reason and room."""
RUN_ELSEWHERE = {
    "docs/builtins.md": "tests/test_builtins.py",
    "docs/state-records.md": "tests/test_state_records.py",
}
"""Pages whose Python blocks a test of their subject runs, each block on its own (a
stronger check than one namespace per page): run there, not twice."""


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def blocks(page: Path, lang: str = "python") -> list[tuple[int, str, str | None]]:
    """The fenced blocks of `page` in language `lang`: (first line of code, code, the
    reason it is not run, if it is marked so)."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) != lang:
            continue
        line = text.count("\n", 0, match.start(2)) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        found.append((line, match.group(2), reason.group(1) if reason else None))
    return found


def _with_code(lang: str) -> list[Path]:
    return [p for p in PAGES if blocks(p, lang)]


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
@pytest.mark.parametrize(
    "page", [p for p in _with_code("python") if _rel(p) not in RUN_ELSEWHERE], ids=_rel
)
def test_page_examples_run(
    page: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if "REDIS_URL" in page.read_text():  # its examples run on a throwaway Redis server
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_url"))
    # A module of its own in sys.modules, as a user's script is: type hints that name the
    # page's imports (a state's `Annotated[...]` fields) resolve in it.
    module = types.ModuleType("docs_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for line, code, reason in blocks(page):
        if reason is not None:
            continue
        # Padded so that a traceback names the line of the page.
        compiled = compile("\n" * (line - 1) + code, _rel(page), "exec")
        exec(compiled, namespace)


def test_pages_run_elsewhere_are_run_there() -> None:
    for page, test in RUN_ELSEWHERE.items():
        assert blocks(ROOT / page), page
        assert page in (ROOT / test).read_text(), f"{test} does not run {page}"


def test_blocks_left_out_are_few_and_say_why() -> None:
    left_out = [(p, line, why) for p in PAGES for line, _, why in blocks(p) if why is not None]
    assert len(left_out) <= MAX_NOT_RUN, left_out
    assert all(len(why) > 20 for _, _, why in left_out), "say why, and what runs it instead"


@pytest.mark.parametrize("page", _with_code("json"), ids=_rel)
def test_json_examples_parse(page: Path) -> None:
    for line, code, _ in blocks(page, "json"):
        try:
            json.loads(code)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{_rel(page)}:{line + exc.lineno - 1}: {exc.msg}")


def test_every_make_target_named_in_the_docs_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for page in PAGES:
        for _, code, _ in blocks(page, "bash"):
            for target in re.findall(r"^\s*make (\w[\w-]*)", code, flags=re.M):
                assert re.search(rf"^{target}:", makefile, flags=re.M), (_rel(page), target)


def test_every_name_the_examples_import_from_the_package_root_is_public() -> None:
    for page in PAGES:
        for _, code, _ in blocks(page):
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and node.module == "langchain_resilient_tools":
                    for alias in node.names:
                        assert alias.name in lrt.__all__, (_rel(page), alias.name)


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_policy_reference_covers_every_options_class_and_every_field_is_described() -> None:
    hooks = _hooks()
    classes = hooks.policy_classes()
    assert {c.__name__ for c in classes} >= {"ToolPolicy", "RetryPolicy", "BreakerPolicy"}
    text = hooks.expand((ROOT / "docs" / "reference" / "policy.md").read_text())
    for model in classes:
        assert model.__name__ in lrt.__all__, model
        assert f"::: langchain_resilient_tools.{model.__name__}\n" in text
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


def test_benchmark_tables_and_figures_come_from_the_results_files(tmp_path: Path) -> None:
    hooks = _hooks()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert not re.search(r"^\|", page, flags=re.M), "tables are rendered from bench/results"
    rendered = hooks.expand(page)
    results = ROOT / "bench" / "results"
    latest = json.loads((results / "latest.json").read_text())
    for cell in latest["overhead"]["cells"]:  # a row per cell of the saved run
        assert f"| {cell['mode']} | {cell['context']} | {cell['calls_per_message']} |" in rendered
    for path in results.glob("*.json"):  # every results file present is shown
        shown = f"<!-- results: {path.name}" in page or f"### `{path.name}`" in rendered
        assert shown, path.name
    # Without the files, every table and figure says so, and the page still builds.
    assert "not measured yet" in hooks.expand("<!-- results: tail.json -->", tmp_path)
    assert hooks.expand("{{ tail.json: verdict/sync/extra_share | .1% }}", tmp_path) == (
        "*not measured yet*"
    )
    with pytest.raises(KeyError):  # a figure that names what the file lacks fails the build
        hooks.expand("{{ tail.json: verdict/nowhere }}")


def test_every_page_of_the_site_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs").rglob("*.md"):
        assert f": {page.relative_to(ROOT / 'docs')}\n" in config, page
