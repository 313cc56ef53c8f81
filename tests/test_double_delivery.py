"""The same write delivered twice at once goes out once, on every durable storage.

Two real worker processes (`tests._delivery`, started once per storage from a
multiprocessing forkserver) resume the same thread at the same moment, round after
round: a duplicated queue delivery, a double click. Each round runs on fresh storage
(SQLite: new files, so the package's table is first used by both workers at once;
PostgreSQL: the table dropped), with the adapters and modes taking turns. The effect is
counted in a file the tool appends to; every answer is checked against it.

Held: 0 double effects, exactly one effect per round, and every answer true: "sent" from
the worker that sent it, or from the journal's receipt, or the other worker's answer
found in the thread (it had finished the whole run before this one started), or ``unknown_outcome`` (true:
the other worker's write had not confirmed within the call's deadline), or dedup's
``duplicate_call`` (true: the identical call ran on the other worker).
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import _delivery

ROUNDS = 50
WAIT_S = 120.0


@dataclass
class Tally:
    rounds: int = 0
    doubles: int = 0
    """Effects beyond the first in a round."""
    missing: int = 0
    """Rounds in which the email was never sent."""
    false_answers: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    """How the callers were answered: ``tool`` (this worker sent it), ``journal`` (from
    the other's receipt), ``finished`` (the other had finished the whole thread before
    this one read it: its answer, in the thread), or an error."""

    def add(self, answers: list[dict[str, Any]], senders: list[int]) -> None:
        self.rounds += 1
        self.doubles += max(0, len(senders) - 1)
        self.missing += not senders
        for a in answers:
            how, true = _judge(a, senders)
            self.answers[how] += 1
            self.false_answers += not true


def _judge(answer: dict[str, Any], senders: list[int]) -> tuple[str, bool]:
    """How a caller was answered, and whether that is true given who sent the email."""
    if answer["status"] == "success" and str(answer["content"]).endswith("sent to ann"):
        how = answer.get("served_by") or "tool"
        if how == "tool":
            return ("tool", True) if answer["pid"] in senders else ("finished", bool(senders))
        return how, how == "journal" and bool(senders)
    if answer["status"] == "error":
        error = json.loads(answer["content"]).get("error")
        if error == "duplicate_call":  # "the identical call ran / still runs elsewhere"
            return str(error), bool(senders)
        return str(error), error == "unknown_outcome"
    return answer["status"], False


class Pair:
    """Two worker processes that resume one thread together, round after round."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["tests._delivery"])
        self.barrier = ctx.Barrier(2)
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(2):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_delivery.serve, args=(theirs, self.barrier), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)

    def play(self, backend: str, rounds: int, pg_url: str | None = None) -> Tally:
        tally = Tally()
        for r in range(rounds):
            folder = self.root / f"{backend}-{r}"
            folder.mkdir()
            sc = {"backend": backend, "dir": str(folder), "thread": uuid.uuid4().hex}
            if pg_url is not None:
                sc["pg_url"] = pg_url
                _drop_table(pg_url)
            _delivery.prepare(sc, r)
            for conn in self.conns:
                conn.send((sc, r))
            answers = []
            for conn in self.conns:
                assert conn.poll(WAIT_S), f"round {r}: a worker did not answer"
                answers.append(conn.recv())
            crashed = [a["error"] for a in answers if a["status"] == "crashed"]
            assert not crashed, crashed[0]
            tally.add(answers, _delivery.effects(folder))
        return tally

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(30)
            if proc.exitcode is None:
                proc.kill()


def _drop_table(url: str) -> None:
    import psycopg

    from langchain_resilient_tools.state.backend import TABLE

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with tempfile.TemporaryDirectory(prefix="lrt-delivery-") as root:
        workers = Pair(Path(root))
        try:
            yield workers
        finally:
            workers.close()


def _held(tally: Tally) -> None:
    print(f"\n{tally}")  # the figures, with -s
    assert tally.rounds == ROUNDS
    assert (tally.doubles, tally.missing, tally.false_answers) == (0, 0, 0), tally
    assert tally.answers["tool"] == ROUNDS  # in each round one caller sent it


@pytest.mark.parametrize("backend", ["sqlite_store", "sqlite_saver"])
def test_a_write_delivered_twice_at_once_goes_out_once_on_sqlite(pair: Pair, backend: str) -> None:
    _held(pair.play(backend, ROUNDS))


def test_a_write_delivered_twice_at_once_goes_out_once_on_postgres(pair: Pair, pg_url: str) -> None:
    _held(pair.play("postgres", ROUNDS, pg_url))
