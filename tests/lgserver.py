"""`langgraph dev` serving examples/langgraph_server, for the server tests.

`start(app_dir)` runs the CLI in a subprocess on a free localhost port, with `app_dir`
(a copy of the example) as its working directory: the in-memory runtime keeps its
threads, checkpoints and store under ``app_dir/.langgraph_api``, so a server started
again in the same folder finds them. The subprocess imports this checkout first
(``PYTHONPATH``), talks to nothing outside the machine (tracing, analytics, the version
check and the metadata loop are off), and writes every call that reaches a service to
``app_dir/calls.log`` (``SERVICE_CALL_LOG``, see the example's ``travel_services``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "langgraph_server"
TROUBLE = (
    "state store failed",
    "journal: ",
    "no durable place for its write journal",
    "BlockingError",
    "Synchronous calls to",
    "Traceback",
)
"""Server log lines that mean a call fell back from the server's store (shared state or
the write journal), or blocked its loop."""
READY_TIMEOUT_S = 90.0
"""How long a server may take to answer ``/ok`` (imports on a loaded CI machine)."""

_OFFLINE = {
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
}
_DROPPED = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


def copy_example(dest: Path) -> Path:
    """A fresh copy of the example app in `dest` (its own ``.langgraph_api``)."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api"))
    return dest


@dataclass
class Server:
    app_dir: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.app_dir / "server.log"

    def calls(self, thread_id: str, tool: str) -> int:
        """How many calls of `tool` on `thread_id` reached its service."""
        path = self.app_dir / "calls.log"
        if not path.exists():
            return 0
        lines = path.read_text().splitlines()
        return sum(line == f"{thread_id}\t{tool}" for line in lines)

    def trouble(self) -> list[str]:
        """The server log's lines that name a `TROUBLE` (none is expected)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line for line in lines if any(word in line for word in TROUBLE)]

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: the runtime saves its state), killed if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start(app_dir: Path, *, jobs: int = 10) -> Server:
    """`langgraph dev` in `app_dir`, answering on a free port (raises if it does not)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(_OFFLINE)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["SERVICE_CALL_LOG"] = str(app_dir / "calls.log")
    cmd = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload"]
    cmd += ["--port", str(port), "--n-jobs-per-worker", str(jobs)]
    cmd += ["--config", str(app_dir / "langgraph.json")]
    with open(app_dir / "server.log", "ab") as log:
        proc = subprocess.Popen(
            cmd, cwd=app_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    server = Server(app_dir, port, proc)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{server.url}/ok", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    server.stop()
    tail = server.log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"langgraph dev did not start on port {port}:\n{tail}")
