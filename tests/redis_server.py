"""A throwaway Redis server for the tests (Debian's ``redis-server``), as `tests.pg` is
for PostgreSQL.

Started on a free localhost port in a temporary directory, with nothing kept on disk
(``--save "" --appendonly no``); `start` returns the reason instead (a string) only when
a server truly cannot be started (not installed: .ci/run installs it from Debian). Each
test session (each pytest-xdist worker) starts its own; a test that kills a server
starts one of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from tests.support.net import free_port

STARTUP_S = 20.0
"""How long a server may take to answer its first PING (a loaded machine)."""


@dataclass
class Server:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    root: str

    def kill(self) -> None:
        """SIGKILL the server (what a crash or a lost machine looks like to a client)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start() -> Server | str:
    """A running server, or the reason it could not start."""
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if binary is None:
        return "redis-server is not installed (.ci/run installs Debian's package redis-server)"
    reason = "redis-server did not start"
    for _ in range(3):  # a port taken between choosing it and binding it: another one
        root = tempfile.mkdtemp(prefix="lrt-redis-")
        port = free_port()
        cmd = [
            binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", root,
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--logfile", os.path.join(root, "log"),
        ]  # fmt: skip
        with open(os.path.join(root, "out"), "wb") as out:  # what it says before its log
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_S
        while process.poll() is None and time.monotonic() < deadline:
            if _answers(port):
                return Server(f"redis://127.0.0.1:{port}/0", port, process, root)
            time.sleep(0.02)
        if process.poll() is None:
            process.kill()
        process.wait(30)
        said = ""
        for name in ("out", "log"):
            path = os.path.join(root, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    said += f.read()
        reason = f"redis-server failed: {said.strip()[-300:]}"
        shutil.rmtree(root, ignore_errors=True)
    return reason


def pass_time(client: Any, seconds: float) -> None:
    """Time passing for the keys on a server: every key's remaining TTL shortened by
    `seconds` (a key whose TTL runs out is deleted), as if the server's clock had moved
    on. Only a backend whose expiry is the server's own notices."""
    for key in client.scan_iter(count=1000):
        left = client.pttl(key)
        if left < 0:
            continue  # no expiry (or gone meanwhile)
        rest = left - int(seconds * 1000)
        if rest > 0:
            client.pexpire(key, rest)
        else:
            client.delete(key)
