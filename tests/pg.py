"""A throwaway PostgreSQL cluster for the integration tests (session-scoped).

Found at ``/usr/local/bin/initdb`` or ``/usr/lib/postgresql/*/bin``; started with
``pg_ctl`` on a free localhost port, data and socket in a temporary directory. As root,
the server runs as the ``postgres`` user (``runuser``), which PostgreSQL requires.
`start` returns `None` with the reason only when a server truly cannot be started.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from tests.support.net import free_port


@dataclass
class Cluster:
    url: str
    datadir: str
    pg_ctl: str
    prefix: list[str]

    def stop(self) -> None:
        cmd = [*self.prefix, self.pg_ctl, "-D", self.datadir, "-m", "immediate", "stop"]
        subprocess.run(cmd, capture_output=True, check=False, timeout=60)
        shutil.rmtree(os.path.dirname(self.datadir), ignore_errors=True)


def _bindir() -> str | None:
    for initdb in ("/usr/local/bin/initdb", *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))):
        if os.path.exists(initdb):
            return os.path.dirname(os.path.realpath(initdb))
    found = shutil.which("initdb")
    return os.path.dirname(os.path.realpath(found)) if found else None


def start(*, fsync: bool = False) -> Cluster | str:
    """A running cluster, or the reason it could not start (without ``fsync``, as the
    tests want it: a commit then never waits for the disk; the benchmarks ask for it)."""
    bindir = _bindir()
    if bindir is None:
        return "PostgreSQL is not installed (no initdb; .ci/run installs it from Debian)"
    prefix: list[str] = []
    root = tempfile.mkdtemp(prefix="lrt-pg-")
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            return "running as root without runuser: cannot start PostgreSQL as another user"
        prefix = [runuser, "-u", "postgres", "--"]
        try:
            shutil.chown(root, user="postgres")
        except (LookupError, OSError) as exc:
            return f"running as root and there is no usable 'postgres' user ({exc})"
    datadir, port = os.path.join(root, "data"), free_port()
    pg_ctl = os.path.join(bindir, "pg_ctl")
    steps = [
        [
            *prefix,
            os.path.join(bindir, "initdb"),
            "-D",
            datadir,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        [
            *prefix,
            pg_ctl,
            "-D",
            datadir,
            "-l",
            os.path.join(root, "log"),
            "-w",
            "-o",
            f"-p {port} -k {root} -h 127.0.0.1 -c fsync={'on' if fsync else 'off'}",
            "start",
        ],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            return f"{os.path.basename(cmd[len(prefix)])} failed: {done.stderr.strip()[-300:]}"
    return Cluster(f"postgresql://postgres@127.0.0.1:{port}/postgres", datadir, pg_ctl, prefix)
