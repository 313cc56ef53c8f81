"""The MCP reference servers from PyPI and npm, each installed in a folder of its own.

They are separate programs, as ``uvx`` and ``npx`` run them: their pins never meet ours
(today's mcp-server-git needs mcp 2.x, which langchain-mcp-adapters 0.3 does not speak as
a client library; mcp-server-sqlite breaks on mcp 2.x). Each is installed once under
``.venv-mcp-servers/`` (``LRT_MCP_SERVERS_DIR`` moves it): the Python ones in a venv
made with uv where there is one (beside this Python, as the Makefile installs it, or on
``PATH``), else with ``python -m venv`` and pip, the Node ones (the filesystem server) with npm; a
server that cannot be installed (no network, no registry, no Node) makes its tests skip
with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(
    os.environ.get("LRT_MCP_SERVERS_DIR", Path(__file__).parent.parent / ".venv-mcp-servers")
)

SERVERS: dict[str, tuple[str, ...]] = {
    "mcp-server-git": ("mcp-server-git==2026.10.19",),
    "mcp-server-time": ("mcp-server-time==2026.10.19",),
    "mcp-server-sqlite": ("mcp-server-sqlite==2025.4.25", "mcp[cli]>=1.6,<2"),
}
"""Console script -> the pinned requirements of its own venv (versions that were tested)."""

NPM_SERVERS: dict[str, str] = {
    "mcp-server-filesystem": "@modelcontextprotocol/server-filesystem@2026.8.31",
}
"""Console script -> the pinned npm package of a Node server (a version that was tested)."""


def _bin(env: Path, script: str) -> Path:
    return env / ("Scripts" if sys.platform == "win32" else "bin") / script


def install(script: str) -> Path:
    """The path of `script`, installing its server in its own venv first if needed.

    One process installs at a time (a lock file beside the servers): parallel test
    workers, or two test runs in one checkout, find each server installed once."""
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "w") as lock:
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        return _install(script)


def _install(script: str) -> Path:
    if script in NPM_SERVERS:
        return _install_npm(script)
    env = ROOT / script
    exe = _bin(env, script)
    marker = env / ".lrt-installed"
    wanted = "\n".join(SERVERS[script])
    if exe.exists() and marker.exists() and marker.read_text() == wanted:
        return exe
    if not (_uv_install(env, SERVERS[script]) and exe.exists()):
        venv.create(env, with_pip=True, clear=True)
        pip = [str(_bin(env, "python")), "-m", "pip", "install", "-q"]
        done = subprocess.run(
            [*pip, "--disable-pip-version-check", *SERVERS[script]],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode != 0 or not exe.exists():
            raise RuntimeError(f"pip install {' '.join(SERVERS[script])} failed: {done.stderr[-500:]}")  # fmt: skip
    marker.write_text(wanted)
    return exe


def _uv_install(env: Path, requirements: tuple[str, ...]) -> bool:
    """A venv at `env` with `requirements`, made with uv (the one beside this Python, as
    the Makefile installs it, or on PATH); False when there is no uv or it failed (pip
    then does it)."""
    beside = Path(sys.executable).parent / ("uv.exe" if sys.platform == "win32" else "uv")
    uv = str(beside) if beside.exists() else shutil.which("uv")
    if uv is None:
        return False
    steps = (
        [uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(env)],
        [uv, "pip", "install", "--quiet", "--python", str(_bin(env, "python")), *requirements],
    )
    for step in steps:
        if subprocess.run(step, capture_output=True, text=True, timeout=600).returncode != 0:
            return False
    return True


def _install_npm(script: str) -> Path:
    """The path of the Node server `script`, installed with npm in its own folder."""
    folder = ROOT / script
    exe = folder / "node_modules" / ".bin" / script
    marker = folder / ".lrt-installed"
    wanted = NPM_SERVERS[script]
    if exe.exists() and marker.exists() and marker.read_text() == wanted:
        return exe
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError("Node.js and npm are not installed")
    folder.mkdir(parents=True, exist_ok=True)
    args = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), wanted]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not exe.exists():
        raise RuntimeError(f"npm install {wanted} failed: {done.stderr[-500:]}")
    marker.write_text(wanted)
    return exe


def server_or_skip(script: str) -> Path:
    """`install`, or skip the test with the reason it could not be installed."""
    import pytest  # not at the top: `python -m tests.refservers` needs no pytest

    try:
        return install(script)
    except Exception as exc:  # no network, no registry, no venv module ...
        pytest.skip(f"the MCP reference server {script} could not be installed: {exc}")


if __name__ == "__main__":  # pre-install (.ci/run): python -m tests.refservers
    for name in [*SERVERS, *NPM_SERVERS]:
        try:
            print(install(name))
        except Exception as exc:  # its tests skip, saying why
            print(f"{name}: {exc}", file=sys.stderr)
