"""The README stays short and true: it names the commands the Makefile has, lists every
extra, and every page it links to exists. Its Python examples are run by
tests/test_docs.py, with those of the documentation site."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 200, "the rest belongs on the documentation site"


def test_readme_has_the_commands_and_the_makefile_has_them_too() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "notebook", "docs"):
        assert f"make {target}" in README
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    demo_rule = re.search(r"^demo: (.*)$", makefile, flags=re.M)
    assert demo_rule and "DEV" not in demo_rule.group(1)  # the demo skips the dev tools


def test_readme_lists_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in extras:
        assert f"| `{extra}` |" in README, extra


def test_every_page_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (ROOT / link).is_file(), link


def test_the_task_table_is_the_committed_results() -> None:
    """The README's task table is `bench.bench_tasks.readme_table` of
    ``bench/results/tasks.json`` (``python -m bench.bench_tasks`` writes both)."""
    import json

    from bench.bench_tasks import readme_table

    data = json.loads((ROOT / "bench" / "results" / "tasks.json").read_text())
    table = readme_table(data)
    assert f"<!-- tasks: careful agent -->\n{table}\n<!-- /tasks -->" in README
