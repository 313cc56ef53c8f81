"""The Makefile's entry points work where CI and containers run them: as root."""

from __future__ import annotations

import os
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
