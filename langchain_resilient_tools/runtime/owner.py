"""Who runs a call: this worker's identity, and whether another worker is still alive.

A journaled write (`pipeline.journal`) and a pending dedup entry name their owner: the
host, its boot, the process id and the process's start time (so that a reused pid is
not mistaken for the worker that died). Whether an owner is alive is decided here:

- on the same host (same host name and boot), by the process table: a process that is
  gone, or whose pid now belongs to a process started at another time, is dead at once;
- elsewhere it cannot be seen, and its lease (renewed while its call runs, see
  `runtime.lease`) decides: an owner whose lease ran out is taken for dead.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Mapping
from typing import Any


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The start time of process `pid` in clock ticks since boot (Linux), else ``""``."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


@functools.cache
def _host() -> tuple[str, str]:
    return socket.gethostname(), _read("/proc/sys/kernel/random/boot_id")


_ME: list[dict[str, Any]] = []
"""This process's owner record once made (read from /proc once; forgotten in the child
of a fork, `_forget_me`, so that asking for it costs no system call per write)."""


def _forget_me() -> None:
    _ME.clear()


os.register_at_fork(after_in_child=_forget_me)


def me() -> dict[str, Any]:
    """This worker (process) as an owner record (it changes after a fork)."""
    if not _ME:
        pid = os.getpid()
        host, boot = _host()
        _ME.append({"host": host, "boot": boot, "pid": pid, "start": _start_ticks(pid)})
    return dict(_ME[0])


def gone(owner: Mapping[str, Any]) -> bool:
    """Whether `owner` is certainly dead: a process of this host that no longer runs.
    `False` means alive, or on another host (then its lease decides)."""
    host, boot = _host()
    if owner.get("host") != host or owner.get("boot") != boot:
        return False
    try:
        pid = int(owner.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        pass
    start = str(owner.get("start") or "")
    return bool(start) and _start_ticks(pid) not in ("", start)  # pid reused


def alive(owner: Mapping[str, Any] | None, lease_until: float, now: float) -> bool:
    """Whether the owner of an entry still holds it: not `gone`, and its lease runs."""
    if not owner:
        return False
    return not gone(owner) and now < lease_until
