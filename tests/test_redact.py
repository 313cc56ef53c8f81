"""Tests for `langchain_resilient_tools.text.redact`: secrets, tracebacks, paths and reprs never
reach the model, while the human-readable part of a message survives."""

from __future__ import annotations

import json
import re
import time
from typing import Annotated, Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, ToolException

from langchain_resilient_tools import Output
from langchain_resilient_tools.text.redact import looks_secret_key, mask_value, redact

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

# (message, secret text that must disappear, words that must survive)
SECRET_CASES = [
    ("login failed: password=hunter2, user=bob", "hunter2", ["login failed", "password", "bob"]),
    ("password: hunter2 was rejected", "hunter2", ["password", "was rejected"]),
    ('bad config {"password": "hunter2", "city": "Paris"}', "hunter2", ["password", "Paris"]),
    ("bad config {'apiKey': 'k3y-v4lue', 'city': 'Paris'}", "k3y-v4lue", ["apiKey", "Paris"]),
    ("api_key='abc123' refused", "abc123", ["api_key", "refused"]),
    ("client_secret = s3cr3tValue; retry", "s3cr3tValue", ["client_secret", "retry"]),
    ("X-Api-Key: zz9-top-secret rejected", "zz9-top-secret", ["X-Api-Key", "rejected"]),
    ("session_id=abcdef0123 expired", "abcdef0123", ["session_id", "expired"]),
    ("cookie: sid=938af7 was stale", "938af7", ["cookie", "was stale"]),
    ("run with --password=hunter2 failed", "hunter2", ["--password", "failed"]),
    ("export OPENAI_API_KEY=sk-abc123 first", "sk-abc123", ["OPENAI_API_KEY", "first"]),
    ("Authorization: Bearer xyz was rejected", "xyz", ["Authorization: Bearer", "rejected"]),
    ("Authorization: Basic dXNlcjpwYXNz denied", "dXNlcjpwYXNz", ["Authorization", "denied"]),
    ("upstream said Bearer abc.DEF-123_456 is invalid", "abc.DEF-123_456", ["Bearer", "invalid"]),
    ("sent Basic dXNlcjpwYXNz to proxy", "dXNlcjpwYXNz", ["sent Basic", "to proxy"]),
    (
        "key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL is invalid",
        "abcdefghijklmnop",
        ["key", "is invalid"],
    ),
    ("key sk-proj-Ab3dEf6hIj9kLm2nOp5q-rS8tUv_w invalid", "Ab3dEf6hIj9kLm2n", ["key", "invalid"]),
    ("key sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm denied", "Zx9Yw8Vu7Ts6Rq5Po4Nm", ["key", "denied"]),
    ("AWS key AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", ["AWS key", "denied"]),
    ("github ghp_16C7e42F292c6912E7710c838347Ae178B4a bad", "16C7e42F292c", ["github", "bad"]),
    ("github gho_16C7e42F292c6912E7710c838347Ae178B4a bad", "16C7e42F292c", ["github", "bad"]),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop x", "11ABCDEFG0123456789", ["pat"]),
    ("slack xoxb-123456789012-abcdefghij failed", "123456789012", ["slack", "failed"]),
    ("google AIzaSyA1234567890abcdefghijklmnopqrstuv bad", "SyA1234567890", ["google", "bad"]),
    (f"jwt {JWT} expired", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ["jwt", "expired"]),
    ("token a8f5f167f44f4964e6c998dee827110c rejected", "a8f5f167f44f4964", ["rejected"]),
    ("blob Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg== ignored", "Zm9vYmFy", ["blob", "ignored"]),
    (
        "could not connect to postgresql://admin:s3cr3t@db.internal:5432/app",
        "s3cr3t",
        ["could not connect to postgresql://admin:", "@db.internal:5432/app"],
    ),
    (
        "GET https://api.example.com/v1/x?api_key=abc123&token=zzz9&q=paris failed",
        "abc123",
        ["https://api.example.com/v1/x?api_key=", "q=paris", "failed"],
    ),
    ("GET https://api.example.com/v1/x?api_key=abc123&token=zzz9&q=paris", "zzz9", ["token="]),
    (
        "key -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1\n-----END RSA PRIVATE KEY----- ok",
        "MIIEpAIBAAKCAQEA1",
        ["key", "ok"],
    ),
    ("wrapped ValueError('password=hunter2') here", "hunter2", ["password", "here"]),
    ("failed: pwd=hunter2", "hunter2", ["failed", "pwd="]),
]


@pytest.mark.parametrize(("message", "secret", "kept"), SECRET_CASES)
def test_secret_is_masked_and_words_remain(message: str, secret: str, kept: list[str]) -> None:
    out = redact(message)
    assert secret not in out
    assert "***" in out
    for word in kept:
        assert word in out


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("password=hunter2", "password=***"),
        ("password: hunter2", "password: ***"),
        ('{"password": "hunter2"}', '{"password": "***"}'),
        ("token='abc'", "token='***'"),
        ("Authorization: Bearer xyz", "Authorization: Bearer ***"),
        ("Bearer abc123def456", "Bearer ***"),
        ("postgresql://user:pass@host/db", "postgresql://user:***@host/db"),
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("AKIAIOSFODNN7EXAMPLE", "***"),
    ],
)
def test_exact_masking(message: str, expected: str) -> None:
    assert redact(message) == expected


TRACEBACK = """Traceback (most recent call last):
  File "/home/u/app/tools/weather.py", line 42, in get_weather
    data = fetch(city, api_key="sk-abcdefghijklmnopqrstu123")
  File "/home/u/app/tools/http.py", line 7, in fetch
    raise ValueError(f"city {city!r} not found")
ValueError: city 'Paris' not found"""

CHAINED = """Traceback (most recent call last):
  File "/srv/app/x.py", line 3, in f
    return table[key]
KeyError: 'Paris'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/x.py", line 5, in f
    raise LookupError("city not found")
LookupError: city not found"""


def test_traceback_reduced_to_final_message() -> None:
    assert redact(TRACEBACK) == "ValueError: city 'Paris' not found"


def test_chained_traceback_keeps_only_exception_lines() -> None:
    assert redact(CHAINED) == "KeyError: 'Paris' LookupError: city not found"


@pytest.mark.parametrize(
    "message",
    [
        'tool failed File "/x/y.py", line 3, in f: boom',
        '  File "/x/y.py", line 3, in f\n    boom()\ntool failed: boom',
        "Error while calling: Traceback (most recent call last): tool failed: boom",
    ],
)
def test_frame_lines_dropped(message: str) -> None:
    out = redact(message)
    assert "File" not in out and "/x/y.py" not in out and "line 3" not in out
    assert "Traceback" not in out
    assert "boom" in out


@pytest.mark.parametrize(
    ("message", "hidden"),
    [
        ("cannot open /home/u/app/secrets.py now", "/home/u/app/secrets.py"),
        ("cannot open /etc/x now", "/etc/x"),
        ("cannot open ~/project/.env now", "project/.env"),
        ("cannot open ./data/input.csv now", "data/input.csv"),
        ("cannot open C:\\Users\\x\\y.txt now", "Users\\x\\y.txt"),
        ("cannot open C:/Users/x/y.txt now", "Users/x/y.txt"),
        ("cannot open \\\\server\\share\\f.txt now", "server\\share"),
        ("cannot open file:///var/lib/data.db now", "/var/lib/data.db"),
        ("[Errno 2] No such file or directory: '/tmp/cache/abc.json'", "/tmp/cache"),
    ],
)
def test_paths_are_hidden(message: str, hidden: str) -> None:
    out = redact(message)
    assert hidden not in out
    assert "<path>" in out
    assert out.startswith(message.split(" ")[0])
    assert out.endswith("now") or "No such file" in out


@pytest.mark.parametrize(
    "message",
    [
        "city 'Paris' not found",
        "see https://api.example.com/v1/weather/forecast?city=Paris&days=3 for details",
        "contact bob.smith+ops@example.com for access",
        "ratio 3/4 exceeded on 2024/01/02 and/or later",
        "max_tokens=500 is too large; token_count: 12",
        "Bearer token missing; Basic Auth required",
        "model gpt-4o-mini-2024-07-18 is unavailable",
        "author: Victor Hugo, keyword: misérables",
        "HTTP 404 from api.example.com/v1/items",
        "order 1234567890123456789012345678901234567890 (digits only) unknown",
    ],
)
def test_harmless_text_is_kept(message: str) -> None:
    assert redact(message) == message


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("ValueError('city not found')", "city not found"),
        ('KeyError("x")', "x"),
        (
            "error: requests.exceptions.HTTPError('503 Service Unavailable')",
            "error: 503 Service Unavailable",
        ),
        ("OSError(2, 'No such file or directory')", "No such file or directory"),
        ("ValueError()", "ValueError"),
        ("got <app.Client object at 0x7f3a2b4c5d6e>", "got <app.Client object at 0x…>"),
    ],
)
def test_exception_reprs_and_addresses(message: str, expected: str) -> None:
    assert redact(message) == expected


def test_whitespace_and_control_characters_collapse() -> None:
    assert redact("  a\n\n\tb \x00 c\x1b[31m d\u200b  ") == "a b c d"


@pytest.mark.parametrize("limit", [1, 2, 10, 50, 300])
def test_truncation_respects_limit(limit: int) -> None:
    out = redact("word " * 200, limit=limit)
    assert len(out) <= limit
    assert out.endswith("…")


def test_truncation_never_reveals_a_masked_secret() -> None:
    text = "x" * 95 + " password=hunter2 and more text after it"
    for limit in range(90, 130):
        out = redact(text, limit=limit)
        assert "hunter" not in out and len(out) <= limit
        assert redact(out, limit=limit) == out


def test_short_text_untouched_and_zero_limit() -> None:
    assert redact("ok", limit=2) == "ok"
    assert redact("ok", limit=0) == ""
    assert redact("") == ""


@pytest.mark.parametrize(
    "message",
    [
        "a" * 1_000_000,
        "password=" * 100_000,
        "/a" * 200_000,
        "ValueError('" * 50_000,
        "Traceback (most recent call last):\n" + "  x\n" * 100_000,
        "A1" * 500_000,
        "http://a:b" + "@" * 100_000,
    ],
)
@pytest.mark.realtime
def test_huge_and_adversarial_input_is_bounded(message: str) -> None:
    """No catastrophic backtracking: each takes ~40 ms of CPU; a blow-up takes minutes.
    CPU time, so that other processes on a busy machine do not count; the cost per
    call is a benchmark (``python -m bench.bench_redact``), not a test."""
    start = time.process_time()
    out = redact(message)
    assert time.process_time() - start < 5.0
    assert len(out) <= 300


texts = st.one_of(
    st.text(),
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "password",
                    "=",
                    ": ",
                    " ",
                    "\n",
                    "'",
                    '"',
                    "Bearer ",
                    "token",
                    "sk-",
                    "/",
                    "\\",
                    "://",
                    "@",
                    "ValueError(",
                    ")",
                    "Traceback (most recent call last):",
                    'File "/a.py", line 1',
                    "0x7f3a2b4c",
                    "…",
                    "*",
                    "C:",
                    "api_key",
                    "A1b2C3d4E5",
                    "-----BEGIN PRIVATE KEY-----",
                    "eyJ",
                    ".",
                ]
            ),
            st.text(max_size=4),
        ),
        max_size=40,
    ).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=0, max_value=400))
def test_never_raises_and_respects_limit(text: str, limit: int) -> None:
    out = redact(text, limit=limit)
    assert isinstance(out, str)
    assert len(out) <= limit
    assert redact(out, limit=limit) == out
    assert len(mask_value(text, limit=max(limit, 1))) <= max(limit, 1)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=30))
def test_password_value_never_survives(secret: str) -> None:
    for template in ("password={}", "password: {}", '{{"password": "{}"}}', "token='{}'"):
        # A "secret" that is one of the words around it (e.g. "failed") proves nothing.
        assume(secret not in "failed " + template.format("") + " end")
        assert secret not in redact("failed " + template.format(secret) + " end")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("five", "'five'"),
        ("it's", '"it\'s"'),
        (5, "5"),
        (2.5, "2.5"),
        (None, "null"),
        (True, "true"),
        ([1, "a", None], '[1, "a", null]'),
        ({"user": "bob", "password": "hunter2"}, '{"user": "bob", "password": "***"}'),
        ({"auth": {"token": "abc"}}, '{"auth": "***"}'),
        ({"q": "sk-proj-Ab3dEf6hIj9kLm2nOp5qrS8tUvw"}, '{"q": "***"}'),
        ("sk-proj-Ab3dEf6hIj9kLm2nOp5qrS8tUvw", "'***'"),
        ("AKIAIOSFODNN7EXAMPLE", "'***'"),
        ("/home/u/.ssh/id_rsa", "'<path>'"),
    ],
)
def test_mask_value(value: object, expected: str) -> None:
    assert mask_value(value) == expected


def test_mask_value_truncates() -> None:
    out = mask_value("x" * 500)
    assert len(out) <= 80 and out.startswith("'xxx") and out.endswith("…'")
    assert len(mask_value(list(range(10_000)), limit=40)) <= 40
    assert len(mask_value({str(i): "v" * 50 for i in range(100)}, limit=60)) <= 60
    assert mask_value("anything", limit=0) == ""


def test_mask_value_odd_objects() -> None:
    class Boom:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert mask_value(Boom()) == "<unprintable value>"
    assert mask_value(10**5000) == "<int>"
    nested: list[object] = []
    nested.append(nested)
    assert len(mask_value(nested)) <= 80
    assert "0x…" in mask_value(object())


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "PASSWORD",
        "passwd",
        "pwd",
        "DB_PWD",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh-token",
        "csrftoken",
        "api_key",
        "apiKey",
        "APIKey",
        "X-Api-Key",
        "access_key",
        "authorization",
        "Proxy-Authorization",
        "auth",
        "oauth",
        "credential",
        "credentials",
        "private_key",
        "privateKey",
        "session_id",
        "sessionId",
        "cookie",
        "Set-Cookie",
        "db.password",
    ],
)
def test_secret_key_names(name: str) -> None:
    assert looks_secret_key(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "city",
        "name",
        "author",
        "authority",
        "authentication",
        "max_tokens",
        "token_count",
        "tokenizer",
        "keyword",
        "key",
        "monkey",
        "primary_key",
        "public_key",
        "passport",
        "bypass",
        "session_timeout",
    ],
)
def test_ordinary_key_names(name: str) -> None:
    assert not looks_secret_key(name)


# -- what the model sent may come back; what the tool wrote for the model passes -------


def test_kept_values_survive_and_other_paths_do_not() -> None:
    text = "path '/srv/x/y' is outside '/home/app/repo' (password=hunter2)"
    out = redact(text, keep=["/srv/x/y"])
    assert "/srv/x/y" in out and "/home/app/repo" not in out and "hunter2" not in out
    assert redact(text, keep=["password=hunter2"]).count("hunter2") == 0  # a secret is never kept
    assert "/home/app/repo" in redact(text, paths=False)
    assert "hunter2" not in redact(text, paths=False)


def test_errors_echo_the_models_arguments_through_every_adapter(harness: Any) -> None:
    from langchain_core.tools import ToolException

    from langchain_resilient_tools import ToolPolicy
    from langchain_resilient_tools.testing import tool_call
    from tests.tools import counted

    def read_file(path: str, token: str) -> str:
        raise ToolException(f"{path} is not under /var/lib/app/data (token {token} ok)")

    def get_log(name: str) -> str:
        raise RuntimeError(f"cannot open /var/lib/app/logs/{name}")

    result = harness.run(
        [counted("read_file", read_file), counted("get_log", get_log)],
        [
            tool_call("read_file", {"path": "/etc/shadow", "token": "s3cr3t-T0ken"}, id="c1"),
            tool_call("get_log", {"name": "app.log"}, id="c2"),
        ],
        policy=ToolPolicy(output=Output(expose_error_details=False)),
    )
    message = json.loads(result["c1"].content)["message"]
    assert "/etc/shadow" in message  # which argument was wrong
    assert "/var/lib/app/data" not in message and "s3cr3t-T0ken" not in message
    opaque = json.loads(result["c2"].content)["message"]
    assert "/var/lib" not in opaque and "RuntimeError" in opaque


def test_expose_error_details_shows_text_not_paths_or_secrets(harness: Any) -> None:
    from langchain_resilient_tools import ToolPolicy
    from langchain_resilient_tools.testing import tool_call
    from tests.tools import counted

    def get_log(name: str) -> str:
        raise RuntimeError(
            f"cannot open /var/lib/app/logs/{name} (api_key=sk-live-1234567890abcdefXYZ)"
        )

    result = harness.run(
        [counted("get_log", get_log)],
        [tool_call("get_log", {"name": "app.log"}, id="c1")],
        policy=ToolPolicy(output=Output(expose_error_details=True)),
    )
    message = json.loads(result["c1"].content)["message"]
    assert "cannot open" in message  # the text of an unexpected error, redacted
    assert "/var/lib" not in message and "sk-live" not in message


# -- text a server wrote: names are no keys, values end where they end, internals go ---

SERVER_SECRET = "sk-live-abcdef1234567890abcdef"
SERVER_TEXT = (
    "Error executing tool fail_with_secret: backend rejected /srv/data/q3.csv "
    f"(api_key={SERVER_SECRET}) at /srv/mcp/tools.py line 12. "
    "Allowed directories: /srv/data, /tmp/work"
)
SERVER_SHOWN = (
    "Error executing tool fail_with_secret: backend rejected /srv/data/q3.csv "
    "(api_key=***). Allowed directories: /srv/data, /tmp/work"
)


@pytest.mark.parametrize(
    ("message", "names", "expected"),
    [
        (
            "Error executing tool fail_with_secret: backend rejected",
            ["fail_with_secret"],
            "Error executing tool fail_with_secret: backend rejected",
        ),
        ("secret_name: must not be empty", ["secret_name"], "secret_name: must not be empty"),
        (
            '{"auth_mode": "oauth"} is not supported',
            ["auth_mode"],
            '{"auth_mode": "oauth"} is not supported',
        ),
        # A name the tool does not use is still a key; a named key's neighbours are not spared.
        ("fail_with_secret: backend rejected", [], "fail_with_secret: *** rejected"),
        (
            "fail_with_secret: backend rejected, password=hunter2",
            ["fail_with_secret"],
            "fail_with_secret: backend rejected, password=***",
        ),
        ("token a8f5f167f44f4964e6c998dee827110c rejected", ["token"], "token *** rejected"),
    ],
)
def test_names_the_tool_uses_are_not_keys(message: str, names: list[str], expected: str) -> None:
    assert redact(message, names=names) == expected


def test_values_the_model_sent_under_secret_names_are_masked_anywhere() -> None:
    out = redact("password: hunter2-pw rejected for hunter2-pw", names=["password"],
                 secrets=["hunter2-pw"])  # fmt: skip
    assert out == "password: *** rejected for ***"
    assert redact("pin 12 or 123 wrong", secrets=["12", "123"]) == "pin 12 or *** wrong"
    assert redact("user bobby rejected", secrets=["bob"]) == "user bobby rejected"  # words only


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (f"(api_key={SERVER_SECRET}) at the gateway", "(api_key=***) at the gateway"),
        ("[password=hunter2] denied", "[password=***] denied"),
        ("{token=abc123}", "{token=***}"),
        ("<secret=s3cr3t>", "<secret=***>"),
        ("((password=hunter2))", "((password=***))"),
        ("password=hunter2. Try again", "password=***. Try again"),
        ("password=a(b) denied", "password=*** denied"),  # a bracket the value opened is its own
        ("password=ab)cd denied", "password=*** denied"),  # inside the value: masked with it
        ("password=) denied", "password=) denied"),
    ],
)
def test_masked_value_ends_where_the_value_ends(message: str, expected: str) -> None:
    assert redact(message) == expected


@pytest.mark.parametrize("paths", [True, "internal"])
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("backend failed at /srv/mcp/tools.py line 12", "backend failed"),
        ("backend failed in /srv/mcp/tools.py:12:4", "backend failed in <path>"),
        ("backend failed in tools.py:12", "backend failed in <path>"),
        ('backend failed ("C:\\srv\\tools.py", line 12)', "backend failed (<path>)"),
        (
            "boom\n    at read (/app/node_modules/x/index.js:12:3)\n    at node:internal/main:1:2",
            "boom",
        ),
        ("boom at Object.<anonymous> (file:///app/main.mjs:3:9) then", "boom then"),
        ("NullPointerException at com.acme.Repo.find(Repo.java:42)", "NullPointerException"),
        ('File "/srv/app/x.py", line 3, in f\n    boom()\nValueError: bad', "ValueError: bad"),
        # A code location is never a place the call may go.
        (
            "allowed directories: /srv/data; see /srv/mcp/tools.py:12",
            "allowed directories: /srv/data; see <path>",
        ),
    ],
)
def test_code_locations_and_frames_go(message: str, expected: str, paths: Any) -> None:
    out = redact(message, paths=paths)
    if paths is True:  # exception text loses every path
        expected = expected.replace("/srv/data", "<path>")
    assert out == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (  # the reference filesystem server
            "Access denied - path outside allowed directories: /etc/passwd not in /srv/data, /tmp/w",
            "Access denied - path outside allowed directories: /etc/passwd not in /srv/data, /tmp/w",
        ),
        (  # mcp-server-git
            "Repository path '/x/y' is outside the allowed repository '/tmp/repo'",
            "Repository path '<path>' is outside the allowed repository '/tmp/repo'",
        ),
        ("not found; did you mean /srv/data/q3.csv?", "not found; did you mean /srv/data/q3.csv?"),
        (
            "path must be under /srv/data or C:\\data\\in",
            "path must be under /srv/data or C:\\data\\in",
        ),
        ("valid roots are one of: /srv/a, /srv/b", "valid roots are one of: /srv/a, /srv/b"),
        ("Permitted: file:///srv/data/x.csv", "Permitted: file:///srv/data/x.csv"),
        # Everything else a server names about itself goes, as in exception text.
        (
            "[Errno 2] No such file or directory: '/home/u/.config/app.toml'",
            "[Errno 2] No such file or directory: '<path>'",
        ),
        ("writing /etc/hosts is not allowed: /etc/hosts", "writing <path> is not allowed: <path>"),
        ("it isn't allowed to read /etc/x/y", "it isn't allowed to read <path>"),
        (
            "allowed to run. Config at /etc/app/cfg.yaml broken",
            "allowed to run. Config at <path> broken",
        ),
        ("an invalid config /etc/app/cfg.yaml", "an invalid config <path>"),
        ("unavailable: /srv/cache/db", "unavailable: <path>"),
    ],
)
def test_server_text_keeps_the_paths_it_names_as_where_the_call_may_go(
    message: str, expected: str
) -> None:
    assert redact(message, paths="internal") == expected
    assert redact(message, paths=False) == message  # a person's note: secrets only


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "allowed: /tmp/pytest-23/test_read_names_i0/data",
            "allowed: /tmp/pytest-23/test_read_names_i0/data",
        ),
        ("allowed: /home/u/my_project_v2_backup", "allowed: /home/u/my_project_v2_backup"),
        (
            "allowed: /srv/data/a8f5f167f44f4964e6c998d/x",
            "allowed: /srv/data/***/x",
        ),  # a token in a path
    ],
)
def test_words_with_a_number_in_a_path_are_no_token(message: str, expected: str) -> None:
    assert redact(message, paths="internal") == expected


def test_server_text_keeps_what_the_model_sent() -> None:
    out = redact(
        SERVER_TEXT, paths="internal", keep=["/srv/data/q3.csv"], names=["fail_with_secret"]
    )
    assert out == SERVER_SHOWN
    # Without `keep`, the path the model sent goes too (no "allowed" before it).
    assert "/srv/data/q3.csv" not in redact(SERVER_TEXT, paths="internal")
    # As exception text, every host path goes but the model's own.
    assert redact(SERVER_TEXT, keep=["/srv/data/q3.csv"], names=["fail_with_secret"]) == (
        SERVER_SHOWN.replace("/srv/data,", "<path>,").replace("/tmp/work", "<path>")
    )


paths_modes = st.sampled_from([True, False, "internal"])
server_texts = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "allowed directories: ",
                "not ",
                "did you mean ",
                "/srv/data",
                "/srv/mcp/tools.py",
                " line 12",
                ":12",
                ":3:4",
                "(",
                ")",
                "[",
                "]",
                " at ",
                "x.js",
                "api_key=",
                "password=",
                "fail_with_secret",
                ": ",
                ". ",
                "; ",
                "\n    ",
                "C:\\srv\\a.py",
                "file:///x/y",
                "node:internal/main:1:2",
                "Error executing tool ",
                "hunter2",
            ]
        ),
        st.text(max_size=3),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(server_texts, paths_modes)
def test_redaction_is_idempotent_whoever_wrote_the_text(text: str, paths: Any) -> None:
    rules: dict[str, Any] = {
        "paths": paths, "names": ["fail_with_secret"], "secrets": ["hunter2"],
        "keep": ["/srv/data"],
    }  # fmt: skip
    once = redact(text, **rules)
    assert redact(once, **rules) == once
    assert re.search(r"(?<![A-Za-z0-9_])hunter2(?![A-Za-z0-9_])", once) is None


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["/srv/mcp/tools.py", "tools.py", "C:\\app\\x.js", "/app/dist/index.mjs"]),
    st.sampled_from([" line 12", ":12", ":12:4", '", line 12']),
    st.sampled_from(["", "allowed directories: ", "did you mean ", "valid: ", "at "]),
    paths_modes.filter(lambda p: p is not False),
)
def test_a_code_location_never_survives(file: str, line: str, before: str, paths: Any) -> None:
    out = redact(f"backend failed; {before}{file}{line} (retry)", paths=paths)
    assert file not in out and "12" not in out
    assert out.startswith("backend failed;") and out.endswith("(retry)")


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["api_key", "password", "token", "client_secret"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=6, max_size=30),
    st.sampled_from([("(", ")"), ("[", "]"), ("{", "}"), ("", "."), ("", "")]),
)
def test_a_masked_value_keeps_what_closes_it(
    key: str, secret: str, brackets: tuple[str, str]
) -> None:
    opened, closed = brackets
    assume(secret not in f"{key} at the gateway")
    out = redact(f"{opened}{key}={secret}{closed} at the gateway", paths="internal")
    assert out == f"{opened}{key}=***{closed} at the gateway"


# -- through every adapter: a tool's own error answer, an error text, an exception -----

FAIL_ARGS = {"path": "/srv/data/q3.csv", "password": "hunter2-pw"}


def _server_text(path: str, password: str) -> str:
    """What a server's error says: its tool's name, the model's path, a key, the model's
    password, its code location and the directories it serves."""
    return (
        f"Error executing tool fail_with_secret: backend rejected {path} "
        f"(api_key={SERVER_SECRET}) for password: {password}\n"
        "  at /srv/mcp/tools.py line 12. Allowed directories: /srv/data, /tmp/work"
    )


SHOWN_FOR_MODEL = (
    "Error executing tool fail_with_secret: backend rejected /srv/data/q3.csv (api_key=***) "
    "for password: ***. Allowed directories: /srv/data, /tmp/work"
)


def _fail_with_secret(how: str) -> Any:
    """The tool `fail_with_secret`, answering with `_server_text` `how`: with its own
    ``handle_tool_error``, as a ``ToolMessage(status="error")`` (a text or MCP-like content
    blocks), as a returned error text, or as a raised ``ToolException``."""

    def raises(path: str, password: str = "") -> str:
        raise ToolException(_server_text(path, password))

    def answers(
        path: str, tool_call_id: Annotated[str, InjectedToolCallId], password: str = ""
    ) -> ToolMessage:
        text = _server_text(path, password)
        content: Any = [{"type": "text", "text": text}] if how == "blocks" else text
        return ToolMessage(content, tool_call_id=tool_call_id, status="error")

    def returns(path: str, password: str = "") -> str:
        return _server_text(path, password)

    fn = {"handler": raises, "raises": raises, "message": answers, "blocks": answers}.get(
        how, returns
    )
    return StructuredTool.from_function(
        fn, name="fail_with_secret", description="Fails as a server does.",
        handle_tool_error=how == "handler",
    )  # fmt: skip


def _text_of(message: Any) -> str:
    content = message.content
    if isinstance(content, list):
        return " ".join(b["text"] if isinstance(b, dict) else str(b) for b in content)
    return str(content)


@pytest.mark.parametrize("how", ["handler", "message", "blocks"])
def test_a_tools_own_error_answer_loses_internals_not_help(harness: Any, how: str) -> None:
    from langchain_resilient_tools.testing import tool_call

    result = harness.run(
        [_fail_with_secret(how)], [tool_call("fail_with_secret", FAIL_ARGS, id="c1")]
    )
    message = result["c1"]
    assert message.status == "error"
    assert _text_of(message) == SHOWN_FOR_MODEL  # the tool's own words, not an envelope
    if how == "blocks":  # the tool's blocks stay blocks
        assert isinstance(message.content, list) and message.content[0]["type"] == "text"
    assert harness.stats()["fail_with_secret"]["errors_by_type"] == {"tool_error": 1}


def test_an_error_text_loses_internals_not_help(harness: Any) -> None:
    from langchain_resilient_tools.testing import tool_call

    result = harness.run(
        [_fail_with_secret("text")], [tool_call("fail_with_secret", FAIL_ARGS, id="c1")]
    )
    body = json.loads(result["c1"].content)
    assert body["error"] == "tool_error"
    assert SHOWN_FOR_MODEL in body["message"]


def test_an_exception_loses_every_path_the_model_did_not_send(harness: Any) -> None:
    from langchain_resilient_tools.testing import tool_call

    result = harness.run(
        [_fail_with_secret("raises")], [tool_call("fail_with_secret", FAIL_ARGS, id="c1")]
    )
    body = json.loads(result["c1"].content)
    assert body["error"] == "tool_error"
    shown = SHOWN_FOR_MODEL.replace("/srv/data,", "<path>,").replace("/tmp/work", "<path>")
    assert shown in body["message"]  # the names are no keys here either
