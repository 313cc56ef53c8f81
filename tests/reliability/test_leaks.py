"""Leak fuzzer: secrets in tool exceptions never reach a ToolMessage or ``tool_errors``.

Every example builds exception messages that carry API keys, bearer tokens, passwords,
connection strings, file paths and a real traceback, raises them as ValueError,
ToolException, KeyError, RuntimeError (also with ``Output(expose_error_details=True)``) and as a
transient ConnectionError, through every adapter, sync and async.
"""

from __future__ import annotations

import json
import string
import traceback
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from langchain_resilient_tools import Output, RetryPolicy, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.reliability.invariants import STATS

ALNUM = string.ascii_letters + string.digits


@st.composite
def token(draw: st.DrawFn, size: int = 24, alphabet: str = ALNUM) -> str:
    """A random-looking credential: mixed letters and digits, as real ones are."""
    body = draw(st.text(alphabet, min_size=size, max_size=size + 8))
    return "Zq" + body + "7"


@st.composite
def secret_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """(an exception message, the secret substrings it carries)."""
    user = "u" + draw(st.text(string.ascii_lowercase, min_size=4, max_size=8))
    pw = draw(token(10, ALNUM + "!#$%^*_-+"))
    t = draw(token())
    upper = draw(st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16))
    jwt_payload = "eyJ" + draw(token(20, ALNUM + "_-"))
    kinds = {
        "openai": (f"sk-proj-{t}", [t]),
        "aws": (f"AKIA{upper}", [upper]),
        "github": (f"ghp_{t}{t}"[:40], [t[:20]]),
        "slack": (f"xoxb-1234567890-{t}", [t]),
        "jwt": (f"eyJhbGciOiJIUzI1NiJ9.{jwt_payload}.{t}", [jwt_payload, t]),
        "bearer": (f"Authorization: Bearer {t}", [t]),
        "password": (f"password={pw}", [pw]),
        "pwd_json": (f'{{"user": "{user}", "pwd": "{pw}"}}', [pw]),
        "postgres": (f"postgresql://{user}:{pw}@db.internal:5432/prod", [pw]),
        "redis": (f"redis://:{pw}@cache.internal:6379/0", [pw]),
        "posix_path": (f"/home/{user}/app/secrets.py", [f"/home/{user}", "secrets.py"]),
        "windows_path": (f"C:\\Users\\{user}\\key.pem", [f"Users\\{user}", "key.pem"]),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=3, unique=True))
    template = draw(
        st.sampled_from(
            (
                "{}",
                "request failed: {}",
                "config error ({}) while loading",
                "upstream said '{}'; retry",
            )
        )
    )
    text = " ".join(template.format(kinds[k][0]) for k in chosen)
    if draw(st.booleans()):
        text += "\n" + _traceback_text()
    return text, [s for k in chosen for s in kinds[k][1]]


def _inner_secret_frame() -> None:
    raise OSError("disk quota exceeded")


def _traceback_text() -> str:
    try:
        _inner_secret_frame()
    except OSError:
        return traceback.format_exc()
    raise AssertionError("unreachable")


TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "', "_inner_secret_frame", __file__)

RAISERS: dict[str, Any] = {
    "get_value": ValueError,
    "get_tool_exc": ToolException,
    "get_key": KeyError,
    "get_runtime": RuntimeError,
    "get_exposed": RuntimeError,  # with Output(expose_error_details=True)
    "get_transient": ConnectionError,  # retried, then a transient failure
    "create_transient": ConnectionError,  # not retried: unknown outcome
}


def raising_tool(name: str, exc_type: type[BaseException], message: str) -> BaseTool:
    def run(query: str = "") -> str:
        raise exc_type(message)

    return StructuredTool.from_function(func=run, name=name, description=f"The {name} tool.")


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=secret_texts())
def test_no_secret_reaches_the_model(harness: Harness, secret: tuple[str, list[str]]) -> None:
    text, needles = secret
    tools = [raising_tool(name, exc, text) for name, exc in RAISERS.items()]
    calls = [tool_call(name, {"query": "x"}, id=name) for name in RAISERS]
    policy = ToolPolicy(timeout=5.0, retry=RetryPolicy(max_attempts=2))
    policies = {"get_exposed": ToolPolicy(output=Output(expose_error_details=True))}
    graph = Harness(harness.adapter, harness.mode).build(
        tools, policy=policy, policies=policies, ai=AIMessage("", tool_calls=calls)
    )
    payload = {"messages": [AIMessage("", tool_calls=calls)]}
    if harness.adapter == "middleware":
        from langchain_core.messages import HumanMessage

        payload = {"messages": [HumanMessage("go")]}
    state = harness.invoke(graph, payload)
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    seen = [str(m.content) for m in answers]
    seen += [json.dumps(m.response_metadata, default=str) for m in answers]
    seen += [json.dumps(r, default=str) for r in state.get("tool_errors", [])]
    leaks = [
        (needle, blob[:300])
        for blob in seen
        for needle in (*needles, *(TRACEBACK_MARKERS if "Traceback" in text else ()))
        if needle in blob
    ]
    STATS.add(scenarios=1, calls=len(calls), faults=len(calls), violations=len(leaks))
    assert len(answers) == len(calls)
    assert not leaks, f"secrets reached the model: {leaks}"
