"""Cost of `redact` (what every error message goes through before the model reads it).

Run: ``.venv/bin/python -m bench.bench_redact [--reps N]``

Rows: a typical tool error (a URL, a bearer token, a password) and the adversarial
inputs of ``tests/test_redact.py`` (a megabyte of one character, repeated ``password=``,
paths, tracebacks, ...), whose cost the input cut (`redact._MAX_INPUT`) bounds.

Times are microseconds per call, the best of 5 runs of ``--reps`` repetitions each
(`time.perf_counter`; fewer repetitions for the big inputs). Nothing is asserted: the
numbers are for reading (the tests hold only a generous CPU-time bound on the big inputs).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from langchain_resilient_tools.text.redact import redact

from ._util import format_table, per_call_us

TYPICAL = (
    "Tool 'get_weather' failed: upstream returned 401 for https://api.example.com/v1/weather"
    "?city=Paris with Authorization: Bearer abc123def456 and password=hunter2; check "
    "the credentials and retry later"
)
ADVERSARIAL: dict[str, str] = {
    "1 MB of 'a'": "a" * 1_000_000,
    "'password=' x 100k": "password=" * 100_000,
    "'/a' x 200k": "/a" * 200_000,
    '"ValueError(\'" x 50k': "ValueError('" * 50_000,
    "traceback, 100k frames": "Traceback (most recent call last):\n" + "  x\n" * 100_000,
    "'A1' x 500k": "A1" * 500_000,
    "URL with 100k '@'": "http://a:b" + "@" * 100_000,
}


def run(reps: int = 2000) -> dict[str, Any]:
    """Per-call microseconds of `redact` on the typical message and each adversarial one."""
    rows = [
        {"input": "typical tool error", "us_per_call": per_call_us(lambda: redact(TYPICAL), reps)}
    ]
    big_reps = max(reps // 200, 1)
    for name, text in ADVERSARIAL.items():
        rows.append({"input": name, "us_per_call": per_call_us(lambda t=text: redact(t), big_reps)})
    return {"reps": reps, "rows": rows}


def table(result: dict[str, Any]) -> str:
    return format_table(
        ["input", "us/call"],
        [[r["input"], f"{r['us_per_call']:.1f}"] for r in result["rows"]],
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    result = run(parser.parse_args(argv).reps)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
