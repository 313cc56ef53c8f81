"""The suite does not depend on the machine's speed: a check of the tests' own source.

Read with `ast`, every ``assert`` in ``tests/`` that bounds a real clock reading from
above (``time.monotonic()``, ``time.perf_counter()``, ``time.time()``,
``time.process_time()``, or a name computed from one, e.g. ``elapsed = time.monotonic()
- start``) by a number must

- bound it by 2 s or more (a busy machine stretches a 0.2 s operation past 1 s), and
- sit in a test marked ``@pytest.mark.realtime`` (the few tests where only a real clock
  proves the point: a hung tool answering on time, a process exiting promptly).

Everything else runs on the injected clock (`tests.clock.FakeClock`, ``ToolPolicy(clock=
...)``), counts instead of timing, or is a benchmark in ``bench/``. The check is rough
by design (it reads names, not values) but does not guess: a bound it cannot evaluate
(a name that is not a module-level number) is left alone.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parent
MIN_BOUND_S = 2.0
CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns"}


def _is_clock_call(node: ast.AST) -> bool:
    """``time.monotonic()`` and friends (``time.time()`` included)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _reads_clock(node: ast.AST, derived: set[str]) -> bool:
    return any(
        _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in derived) for n in ast.walk(node)
    )


def _value(node: ast.AST, constants: dict[str, float]) -> float | None:
    """A number written in the source (``2 * 0.2 + 2.0``, a module-level constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, constants), _value(node.right, constants)
        if left is None or right is None:
            return None
        ops: dict[type, Any] = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a / b if b else None,
        }
        op = ops.get(type(node.op))
        return None if op is None else op(left, right)
    return None


def _constants(tree: ast.Module) -> dict[str, float]:
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _value(node.value, {})
            for t in targets:
                if isinstance(t, ast.Name) and value is not None:
                    out[t.id] = value
    return out


def _marked_realtime(node: ast.AST) -> bool:
    """A ``realtime`` mark among `node`'s decorators or in a ``pytestmark`` value."""
    return any(isinstance(n, ast.Attribute) and n.attr == "realtime" for n in ast.walk(node))


def _upper_bounds(test: ast.AST, derived: set[str], constants: dict[str, float]) -> list[Any]:
    """``(line, bound)`` of each assert in `test` that bounds a clock reading from above
    (`bound` is None when it is not a number written in the source)."""
    found = []
    for node in ast.walk(test):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [cmp.left, *cmp.comparators]
            for i, op in enumerate(cmp.ops):
                left, right = sides[i], sides[i + 1]
                if isinstance(op, (ast.Gt, ast.GtE)):
                    left, right = right, left
                elif not isinstance(op, (ast.Lt, ast.LtE)):
                    continue
                if _reads_clock(left, derived) and not _reads_clock(right, derived):
                    found.append((node.lineno, _value(right, constants)))
    return found


def _derived_names(func: ast.AST) -> set[str]:
    """Names assigned (in `func`) from a clock reading, or from such a name, and nested
    functions that return one (``asyncio.run(main()) < 0.5``)."""
    derived: set[str] = set()
    for _ in range(3):  # elapsed = time.monotonic() - start; late = elapsed - 1 ...
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and _reads_clock(node.value, derived):
                derived.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not func:
                returns = [n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
                if any(_reads_clock(r.value, derived) for r in returns if r.value):
                    derived.add(node.name)
    return derived


def problems(source: str, name: str = "<test>") -> list[str]:
    """What `source` (a test module) breaks of the rules above."""
    tree = ast.parse(source)
    constants = _constants(tree)
    module_realtime = any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
        and _marked_realtime(n.value)
        for n in tree.body
    )
    out = []
    for func in tree.body:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        realtime = module_realtime or any(_marked_realtime(d) for d in func.decorator_list)
        for line, bound in _upper_bounds(func, _derived_names(func), constants):
            where = f"{name}:{line} ({func.name})"
            if bound is not None and bound < MIN_BOUND_S:
                out.append(f"{where}: a real-clock bound of {bound:g} s (< {MIN_BOUND_S:g} s)")
            if func.name.startswith("test") and not realtime:
                out.append(f"{where}: bounds a real clock but is not marked realtime")
    return out


def test_no_test_bounds_the_real_clock_below_two_seconds_or_unmarked() -> None:
    found = [
        p
        for path in sorted(TESTS.rglob("*.py"))
        for p in problems(path.read_text(), str(path.relative_to(TESTS.parent)))
    ]
    assert not found, "\n".join(found)


def test_the_check_sees_what_it_should() -> None:
    flagged = """
import time, pytest
SLACK = 1.5
def test_a():
    start = time.monotonic()
    run()
    elapsed = time.monotonic() - start
    assert elapsed < 2 * 0.2 + 1.0
@pytest.mark.realtime
def test_b():
    start = time.perf_counter()
    assert time.perf_counter() - start < SLACK
@pytest.mark.realtime
def test_c():
    gone = time.time()
    assert 0.5 > gone - 3
@pytest.mark.realtime
def test_d():
    async def main():
        start = time.monotonic()
        return time.monotonic() - start
    assert asyncio.run(main()) < 0.5
"""
    assert [p.split(": ", 1)[1] for p in problems(flagged)] == [
        "a real-clock bound of 1.4 s (< 2 s)",
        "bounds a real clock but is not marked realtime",
        "a real-clock bound of 1.5 s (< 2 s)",
        "a real-clock bound of 0.5 s (< 2 s)",
        "a real-clock bound of 0.5 s (< 2 s)",
    ]
    fine = """
import time, pytest
pytestmark = [pytest.mark.realtime]
def test_a(deadline):
    start = time.monotonic()
    elapsed = time.monotonic() - start
    assert elapsed < 10
    assert elapsed >= 0.1  # a lower bound holds however slow the machine
    assert time.monotonic() < deadline  # not a number written here
    while time.monotonic() < start + 1:  # a wait, not an assertion
        pass
def test_fake(clock):
    assert clock() - 1000 < 0.5  # a fake clock
"""
    assert problems(fine) == []
