"""The parent side of the crash-safety harness: start workers, kill them, resume, count.

`Chaos` starts worker processes (`tests.chaos.worker`) from a multiprocessing
forkserver that imported the worker module once, so a worker starts in milliseconds.
`Chaos.run` plays one `Kill`:

- a worker kill point (`worker.POINTS`): the first worker kills itself there;
- ``"random"``: the parent SIGKILLs the first worker after a seeded random delay, in
  ``[0, T)`` where T is how long an unkilled run of the same configuration took
  (measured once, `Chaos.calibrate`; that run is reported as the point ``"none"``);
- ``"replicas"``: the first worker hangs (SIGSTOP) right after the effect; a second
  worker resumes the thread while it is stopped (waiting out the hung one's journal
  lease, `REPLICA_LEASE_S`), then the first is SIGKILLed;

then a fresh worker resumes the thread (or sends the input again when nothing was
saved), and `count` reads what happened from the outbox, the lookups, the person's
decisions and the final messages (`Outcome`). `summarise` aggregates them per
configuration, storage and kill point.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import signal
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos import worker

PARENT_POINTS: tuple[str, ...] = ("random", "replicas")
"""Kill points the parent plays (the others are the worker's own, `worker.POINTS`)."""

WAIT_S = 120.0
"""Longest a worker may take before the harness gives up on it (a hang is a finding)."""
REPLICA_LEASE_S = 2.0
"""The journal's lease in a ``"replicas"`` kill (the default is 10 s): the resuming
replica finds the hung one's write running and waits its lease out before it takes the
outcome for unknown; a shorter lease changes when it decides, not what."""


@dataclass(frozen=True)
class Kill:
    """One kill: the configuration, its storage, where it dies, and the random seed."""

    config: str
    storage: str
    point: str
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.config}-{self.storage}-{self.point}-{self.seed}"


@dataclass
class Outcome:
    """What one kill led to, per logical call (a tool call id of the model)."""

    kill: Kill
    killed: bool
    """The first worker died by SIGKILL (a kill point it never reached leaves it alive)."""
    resent_input: bool
    effects: dict[str, int] = field(default_factory=dict)
    """Emails sent per call id."""
    unanswered: int = 0
    silent_duplicates: int = 0
    """Effects beyond the first that no lookup and no person allowed."""
    false_answers: int = 0
    """``duplicate_call`` / "still running" about the model's own call, or a success
    (or "do not repeat") for an email that was never sent."""
    settled: Counter[str] = field(default_factory=Counter)
    """How each call was answered in the end (`settlement`)."""
    key_changes: int = 0
    """Calls whose emails and lookups did not all carry one idempotency key: a resumed
    step must send (and look up) the key the killed worker sent."""
    error: str | None = None
    """The harness or a worker failed (not a finding about the package)."""

    @property
    def calls(self) -> int:
        return len(self.effects)

    @property
    def duplicates(self) -> int:
        """Calls with two or more effects (silent or not)."""
        return sum(1 for n in self.effects.values() if n > 1)


# -- counting: pure, over what the workers left behind ---------------------------------


def _body(message: dict[str, Any]) -> dict[str, Any]:
    if message["status"] != "error":
        return {}
    try:
        body = json.loads(message["content"])
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def settlement(message: dict[str, Any] | None, person: Sequence[str], lookups: Sequence[bool]) -> str:  # fmt: skip
    """How a call was answered: ``unanswered``, ``person:<choice>``, ``receipt``,
    ``verify_found``, ``verify_not_found+rerun``, ``unknown_outcome``, ``duplicate_call``,
    ``ledger_result`` (the dedup ledger's copy of the finished call's result), ``ran``
    (the tool's own answer), or ``error:<type>`` / the record's ``served_by``."""
    if message is None:
        return "unanswered"
    body, record = _body(message), message.get("resilience") or {}
    served = record.get("served_by", "tool")
    if person:
        return f"person:{person[-1]}"
    if served in ("journal", "receipt") or "before a restart" in message["content"]:
        return "receipt"
    if served == "verify":
        return "verify_found"
    if served == "dedup" and not body:
        return "ledger_result"  # the finished call's result, kept by the dedup ledger
    if body:
        return str(body.get("error")) if body.get("error") in ("unknown_outcome", "duplicate_call") else f"error:{body.get('error')}"  # fmt: skip
    if served == "tool":
        return "verify_not_found+rerun" if lookups and not any(lookups) else "ran"
    return str(served)


def is_false(message: dict[str, Any] | None, effects: int) -> bool:
    """The model was told something untrue about its own call."""
    if message is None:
        return False
    if _body(message).get("error") == "duplicate_call" or "still running" in message["content"]:
        return True
    return message["status"] != "error" and effects == 0


def count(
    kill: Kill,
    killed: bool,
    report: dict[str, Any],
    outbox: Sequence[dict[str, Any]],
    lookups: Sequence[dict[str, Any]],
    decisions: Sequence[dict[str, Any]],
) -> Outcome:
    """The `Outcome` of one kill from the last worker's report and the logs."""
    out = Outcome(kill, killed, bool(report.get("resent_input")), error=report.get("error"))
    messages = report.get("messages") or []
    asked = [c for m in messages if m["type"] == "ai" for c in m["tool_calls"]]
    answers: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m["type"] == "tool":
            answers[m["tool_call_id"]] = m
    for cid in dict.fromkeys([*asked, *(r["call_id"] for r in outbox)]):
        effects = sum(1 for r in outbox if r["call_id"] == cid)
        person = [d["choice"] for d in decisions if d["call_id"] == cid]
        looked = [bool(v["found"]) for v in lookups if v["call_id"] == cid]
        allowed = person.count("run_again") + looked.count(False)
        message = answers.get(cid)
        out.effects[cid] = effects
        out.unanswered += message is None
        out.silent_duplicates += max(0, effects - 1 - allowed)
        out.false_answers += is_false(message, effects)
        out.settled[settlement(message, person, looked)] += 1
        keys = {r.get("key") for r in (*outbox, *lookups) if r["call_id"] == cid}
        out.key_changes += len(keys) > 1
    return out


# -- running kills ------------------------------------------------------------------------


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


class Chaos:
    """Runs kills; one forkserver (the worker module imported once) for all of them."""

    def __init__(self, root: Path, *, pg_url: str | None = None, tool_delay: float = 0.01) -> None:
        self.root, self.pg_url, self.tool_delay = root, pg_url, tool_delay
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["tests.chaos.worker"])
        self.calibrated: dict[tuple[str, str], float] = {}
        self.controls: list[Outcome] = []
        """The unkilled runs made by `calibrate` (kill point ``"none"``)."""

    def _start(self, sc: dict[str, Any], role: str) -> tuple[Any, Any]:
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=worker.run, args=(sc, role, send), daemon=True)
        proc.start()
        send.close()
        return proc, recv

    @staticmethod
    def _wait(proc: Any, timeout: float = WAIT_S) -> None:
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join(10)
            raise TimeoutError(f"a worker did not finish within {timeout} s")

    @staticmethod
    def _ready(recv: Any) -> bool:
        """Wait for the worker's "ready" (False: it died before)."""
        try:
            return bool(recv.poll(WAIT_S)) and recv.recv()[0] == "ready"
        except EOFError:
            return False

    def _scenario(self, kill: Kill, armed: str | None) -> dict[str, Any]:
        folder = self.root / kill.name
        folder.mkdir(parents=True, exist_ok=True)
        return {
            "config": kill.config, "storage": kill.storage, "dir": str(folder),
            "thread_id": f"{kill.name}-{uuid.uuid4().hex[:8]}", "pg_url": self.pg_url,
            "kill": armed, "tool_delay": self.tool_delay,
            "lease_s": REPLICA_LEASE_S if kill.point == "replicas" else None,
        }  # fmt: skip

    def calibrate(self, config: str, storage: str) -> float:
        """Seconds an unkilled run of the configuration takes from "ready" to its end."""
        key = (config, storage)
        if key not in self.calibrated:
            kill = Kill(config, storage, "none")
            sc = self._scenario(kill, None)
            proc, recv = self._start(sc, "first")
            self._ready(recv)
            start = time.perf_counter()
            self._wait(proc)
            self.calibrated[key] = time.perf_counter() - start
            self.controls.append(self._count(kill, sc, killed=False))
        return self.calibrated[key]

    def run(self, kill: Kill) -> Outcome:
        """Play one kill, resume, and count."""
        try:
            return self._run(kill)
        except Exception as exc:  # a harness failure is reported, not raised mid-run
            return Outcome(kill, False, False, error=f"{type(exc).__name__}: {exc}")

    def _run(self, kill: Kill) -> Outcome:
        if kill.point in worker.POINTS:
            armed: str | None = kill.point
        elif kill.point == "replicas":
            armed = "stop_after_effect"
        elif kill.point == "random":
            armed = None
        else:
            raise ValueError(f"unknown kill point {kill.point!r}")
        span = self.calibrate(kill.config, kill.storage) if kill.point == "random" else 0.0
        sc = self._scenario(kill, armed)
        first, recv = self._start(sc, "first")
        if kill.point == "random":
            if self._ready(recv):
                time.sleep(random.Random(kill.seed).uniform(0, span))
            first.kill()
        elif kill.point == "replicas":
            self._ready(recv)
            deadline = time.monotonic() + WAIT_S
            while first.exitcode is None and not _stopped(first.pid):
                if time.monotonic() > deadline:
                    raise TimeoutError("the first replica never reached its stop")
                time.sleep(0.005)
            if first.exitcode is not None:  # it ran to its end, or could not hang (`worker.reach`)
                raise RuntimeError(f"the first replica ended (exit code {first.exitcode}) instead of hanging")  # fmt: skip
            try:
                replica, _ = self._start(sc, "resume")
                self._wait(replica)
            finally:
                first.kill()
                self._wait(first)
            return self._count(kill, sc, killed=True)
        self._wait(first)
        killed = first.exitcode == -signal.SIGKILL
        if killed:
            resume, _ = self._start(sc, "resume")
            self._wait(resume)
        return self._count(kill, sc, killed=killed)

    def _count(self, kill: Kill, sc: dict[str, Any], *, killed: bool) -> Outcome:
        folder = Path(sc["dir"])
        reports = worker.read_lines(folder / "report-resume.jsonl") or worker.read_lines(
            folder / "report-first.jsonl"
        )
        report = reports[-1] if reports else {"error": "no worker report"}
        return count(
            kill, killed, report,
            worker.read_lines(folder / "outbox.jsonl"),
            worker.read_lines(folder / "verify.jsonl"),
            worker.read_lines(folder / "person.jsonl"),
        )  # fmt: skip


def plan(configs: Iterable[str], storages: Iterable[str], points: Iterable[str], *, random_kills: int = 0, seed: int = 0) -> list[Kill]:  # fmt: skip
    """Every configuration x storage x point once, plus `random_kills` random ones each."""
    kills = []
    for config in configs:
        for storage in storages:
            kills += [Kill(config, storage, p, seed) for p in points]
            kills += [Kill(config, storage, "random", seed + i) for i in range(random_kills)]
    return kills


# -- reporting ----------------------------------------------------------------------------

COLUMNS = ("config", "storage", "point", "kills", "died", "effects/call", "duplicated", "silent dup", "unanswered", "false", "settled")  # fmt: skip


def summarise(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """One row per (config, storage, point): the sums over its kills."""
    groups: dict[tuple[str, str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.kill.config, o.kill.storage, o.kill.point), []).append(o)
    order = {
        name: i for i, name in enumerate((*worker.CONFIGS, *worker.STORAGES, "none", *worker.POINTS, *PARENT_POINTS))
    }  # fmt: skip
    rows = []
    for (config, storage, point), group in sorted(groups.items(), key=lambda g: [order.get(k, 99) for k in g[0]]):  # fmt: skip
        effects = [n for o in group for n in o.effects.values()]
        settled: Counter[str] = sum((o.settled for o in group), Counter())
        rows.append({
            "config": config, "storage": storage, "point": point, "kills": len(group),
            "died": sum(o.killed for o in group),
            "effects/call": round(statistics.fmean(effects), 2) if effects else 0.0,
            "duplicated": sum(o.duplicates for o in group),
            "silent dup": sum(o.silent_duplicates for o in group),
            "unanswered": sum(o.unanswered for o in group),
            "false": sum(o.false_answers for o in group),
            "settled": ", ".join(f"{k} {v}" for k, v in sorted(settled.items())),
            "errors": [o.error for o in group if o.error],
        })  # fmt: skip
    return rows
