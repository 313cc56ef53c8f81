"""The Makefile's entry points work where CI and containers run them: as root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_notebook_lets_jupyter_start_as_root() -> None:
    """Jupyter refuses to start as root ("Use --allow-root to bypass"): the target tells
    it it may, and only when it runs as root."""
    dry = subprocess.run(
        ["make", "-n", "notebook", "VENV=.venv-dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (line,) = [cmd for cmd in dry.splitlines() if "jupyter lab" in cmd]
    assert ("--allow-root" in line) == (os.geteuid() == 0), line


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_suite_mcp2_runs_every_test_file_marked_mcp2() -> None:
    """The mcp 2.x tests run in a venv of their own (the `mcp2` extra), and only there: a
    file marked `mcp2` that the target does not list would run nowhere."""
    dry = subprocess.run(
        ["make", "-n", "suite-mcp2", "MCP2_VENV=.venv-dry-run-mcp2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-e '.[mcp2]'" in dry
    (line,) = [cmd for cmd in dry.splitlines() if "-m pytest" in cmd]
    assert line.startswith(".venv-dry-run-mcp2/bin/python -m pytest") and "-m mcp2" in line
    marked = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if re.search(
            r"^pytestmark = .*pytest\.mark\.mcp2|^@pytest\.mark\.mcp2", p.read_text(), re.M
        )
    }
    assert marked and marked <= set(line.split()), line
