"""Ports for the throwaway servers the tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A localhost port nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
