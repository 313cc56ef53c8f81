"""Scrub error text before a language model sees it.

``redact`` masks credentials (secret-looking ``key=value`` pairs, auth schemes, provider API
keys, JWTs, URL passwords, PEM private keys, long random tokens), unwraps exception reprs and
drops traceback frames, code locations, file paths and memory addresses, then collapses
whitespace and cuts. It is idempotent, bounds its work and never raises. ``mask_value``
renders one argument value briefly and safely; ``looks_secret_key`` tells whether a field
name denotes a secret.

What is taken out of a text depends on who wrote it (``paths``, see `Paths`):

- **Exception text** (``paths=True``): every host path, code location and traceback.
- **Text a server or tool wrote for the model** (``paths="internal"``: an MCP ``isError``
  result, a tool's own ``handle_tool_error`` answer, an answer that reads as an error
  report): what is an internal of the server goes, what helps the model fix its call
  stays. Internals: code locations (a source file with a line number, such as
  ``/srv/mcp/tools.py line 12`` or ``tools.py:12``), traceback and stack frames
  (``File "...", line N``, ``at fn (/app/x.js:3:9)``), and host paths as in exception
  text. A path stays when the clause that names it says where the call may go (after
  "allowed", "permitted", "accessible", "available", "valid", "did you mean", "one of",
  "must be in/under/within/inside"; not after "not allowed"): a filesystem server's
  "path outside allowed directories: /x not in /srv/data, /tmp", mcp-server-git's
  "outside the allowed repository '/repo'". A code location never stays.
- **A person's note** (``paths=False``): secrets only.

Whoever wrote it: the texts the model sent (``keep``: a path it asked for) stay unless
one holds a secret; the values the model sent under secret-looking names (``secrets``)
are masked wherever they appear; and the names the model and the tool use (``names``:
the tool's name, its declared argument names) are not secrets: ``"Error executing tool
fail_with_secret: backend rejected"`` keeps "backend". A masked value ends where the
value ends: ``"(api_key=sk-live-...) at"`` becomes ``"(api_key=***) at"`` (a closing
bracket the value did not open, or a final full stop, is not part of it).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal, TypeAlias

__all__ = ["Paths", "looks_secret_key", "mask_value", "redact"]

Paths: TypeAlias = bool | Literal["internal"]
"""Which paths `redact` takes out: ``True`` every host path (exception text),
``"internal"`` the server's internals only (text a server or tool wrote for the model),
``False`` none (a person's note). See the module docstring."""

_MAX_INPUT = 20_000
_MASK, _ELL = "***", "…"
_HINTS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "session", "bearer")
_PARTS = re.compile(
    r"passw(?:or)?d|passphrase|passkey|secret|credential|cookie|bearer|authorization|sessionid"
    r"|sessiontoken|(?:api|access|private|signing|encryption|master|auth|session)key"
)
_ANY_WORDS, _LAST_WORDS = frozenset({"pwd", "auth", "jwt"}), frozenset({"token", "pass", "session"})
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_KEY_CHARS = _ALNUM | {".", "-"}
_EXC_WORDS = ("Error(", "Exception(", "Warning(", "Exit(", "Interrupt(", "Timeout(")
_NAME_CACHE: dict[str, bool] = {}

_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_CTRL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_TB_LINE = re.compile(
    r"Traceback \(most recent call last\):?|File \"[^\"\n]{0,500}\", line \d+(?:, in [^\s,]{1,99})?"
    r"|During handling of the above exception, another exception occurred:?"
    r"|The above exception was the direct cause of the following exception:?"
)
_EXC_REPR = re.compile(
    r"\b(?:[A-Za-z_]\w{0,60}\.){0,6}(?P<cls>[A-Z]\w{0,60}?(?:Error|Exception|Warning|Exit"
    r"|Interrupt|Timeout))\((?:\s*-?\d+,)?\s*(?:'(?P<sq>(?:[^'\\]|\\.){0,2000})'"
    r"|\"(?P<dq>(?:[^\"\\]|\\.){0,2000})\")?(?:\s*,[^()]{0,200})?\s*\)"
)
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----.*?"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----|\Z)",
    re.DOTALL,
)
_URL_CREDS = re.compile(r"(?P<pre>://[^\s:/@]{0,200}:)[^\s/]{0,500}@")
_KEY_AT = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,63})[\"']?\s*(?:=>|[:=])\s*")
_VALUE = re.compile(
    r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|(?P<open>[\"']?)"
    r"(?P<scheme>(?i:bearer|basic|digest|token|bot)\s+)?[^\s,;&'\"…]+"
)
_SCHEME_AT = re.compile(r"(?i:bearer|basic|token)\s+(?P<t>[A-Za-z0-9\-._~+/]{3,}=*)")
_PROVIDER_HINT = re.compile(
    r"sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox|AIza|k_(?:live|test)_|glpat-"
    r"|hf_|eyJ"
)
_PROVIDER = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:sk-(?=[A-Za-z_\-]*[0-9])[A-Za-z0-9_\-]{16,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abprse]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{30,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}|glpat-[A-Za-z0-9_\-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*)"
)  # last one: JWT
_FILE_URL = re.compile(r"\bfile://[^\s\"'<>]*")
_POSIX_PATH = re.compile(r"/(?<![\w/\\\-]/)[\w.\-~+@%]+(?:/[\w.\-~+@%]*)+")  # not in URLs/ratios
_WIN_PATH = re.compile(r"(?<!\w)(?:[A-Za-z]:[\\/]|\\\\)[^\s\"'<>|*?:,;…]*")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+/])[A-Za-z0-9_\-+/]{32,}=*(?![A-Za-z0-9_\-+/@])")
_MEMADDR = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_CODE_EXT = (
    r"py[cdiwx]?|ipynb|[cm]?[jt]sx?|go|rb|java|kts?|scala|rs|c|cc|cpp|cxx|h|hpp|cs|php|pl|pm"
    r"|lua|swift|exs?|erl|clj|dart|sh"
)
_FILE = r"(?:file://)?(?:[A-Za-z]:)?(?:[\w.\-+@%~]*[/\\])*[\w.\-+@%]*\.(?:" + _CODE_EXT + ")"
_LOC = (  # a source file (a path or a bare name) with a line number; a node: internal
    rf"(?<![\w.\-+@%~/\\])(?:\"{_FILE}\",?\sline\s\d+|{_FILE}(?:\"?,?\s(?:at\s)?line\s\d+"
    r"|:\d+(?::\d+)?|\s?\(line\s\d+\)))|\bnode:[\w/\-]+:\d+(?::\d+)?"
)
_CODE_LOC = re.compile(_LOC)
_LOC_HINT = re.compile(rf"\.(?:{_CODE_EXT})(?:\"?,?\s(?:at\s)?line\s\d|:\d|\s?\(line\s\d)")
_FRAME = re.compile(  # a stack frame: "at fn (/app/x.js:3:9)", "at a.B.c(B.java:4)", "at x.py:2"
    rf"[ \t]*\bat (?:(?:new |async )?[\w.$<>\[\]]{{1,120}} ?)?\(\s*(?:{_LOC})\s*\)"
    rf"|[ \t]*\bat (?:{_LOC})"
)
_CUE = re.compile(  # words that say where a call may go: the paths after them help the model
    r"(?<!not )(?<!n't )\b(?:allowed|permitted|accessible|available|valid|did you mean|one of"
    r"|must be (?:in|under|within|inside|below))\b",
    re.IGNORECASE,
)
_CUE_HINTS = ("allow", "permit", "accessible", "available", "valid", "did you", "one of", "must be")
_CLAUSE_END = re.compile(r"[.;!?](?=\s|$)|\n")
_VALUE_END = {")": "(", "]": "[", "}": "{", ">": "<"}


@dataclass(frozen=True, slots=True)
class _Rules:
    """What one `redact` call takes out, beside what it always takes out."""

    paths: Paths = True
    names: frozenset[str] = frozenset()
    """Names that are not keys: the next word after one is not masked."""
    secrets: re.Pattern[str] | None = None
    """The values the model sent under secret-looking names, masked wherever they are."""


def looks_secret_key(name: str) -> bool:
    """True for argument/field names like password, passwd, pwd, secret, token, api_key, apiKey,
    access_key, authorization, auth, credential(s), private_key, session_id, cookie
    (case/separator-insensitive)."""
    try:
        raw = str(name)[:100]
        if raw not in _NAME_CACHE:
            if len(_NAME_CACHE) >= 4096:
                _NAME_CACHE.clear()
            words = [w.lower() for w in _NAME_WORDS.findall(raw)]
            last = words[-1] if words else ""
            _NAME_CACHE[raw] = bool(
                _PARTS.search("".join(words))
                or not _ANY_WORDS.isdisjoint(words)
                or last in _LAST_WORDS
                or last.endswith(("token", "pwd", "auth"))
            )
        return _NAME_CACHE[raw]
    except Exception:
        return False


def _mixed(tok: str) -> bool:
    return any(c.isdigit() for c in tok) and any(c.isalpha() for c in tok)


def _strip_traceback(s: str) -> str:
    if "\n" in s:  # drop header/frame lines and every line indented under them
        out: list[str] = []
        skip_deeper: int | None = None
        for line in s.split("\n"):
            indent = len(line) - len(line.lstrip())
            if skip_deeper is not None and (not line.strip() or indent > skip_deeper):
                continue
            head = _TB_LINE.search(line)
            skip_deeper, line = (indent, line[: head.start()]) if head else (None, line)
            out.append(line)
        s = "\n".join(out)
    return _TB_LINE.sub(" ", s)


def _untraced(s: str) -> str:
    """`s` without a traceback's header and frame lines (a repr'd one too)."""
    if "Traceback" in s or 'File "' in s or "above exception" in s:
        if "\\n" in s:  # a repr'd traceback (e.g. str(KeyError(text))): restore its lines
            s = s.replace("\\r\\n", "\n").replace("\\n", "\n")
        s = _strip_traceback(s)
    return s


def _random(part: str) -> bool:
    """A path segment that reads as a token (``a8f5f167f44f4964``), not as words with a
    number (``my_project_v2``, ``test_read_i0``): letters and digits alternate often."""
    flips = sum(
        a.isdigit() != b.isdigit() for a, b in pairwise(part) if a.isalnum() and b.isalnum()
    )
    return flips >= 4 and _mixed(part)


def _token_sub(m: re.Match[str]) -> str:
    tok = m.group(0)
    if "/" not in tok:
        return _MASK if _mixed(tok) else tok
    # Slash-separated runs are usually URL/path segments: mask only the random-looking ones.
    return "/".join(_MASK if len(p) >= 16 and _random(p) else p for p in tok.split("/"))


def _value_end(val: str) -> int:
    """Where an unquoted value ends: before the closing brackets it did not open and a
    final full stop (``(api_key=abc)`` masks ``abc``)."""
    unmatched = {c: val.count(c) - val.count(o) for c, o in _VALUE_END.items() if c in val}
    n = len(val)
    while n > 0 and (val[n - 1] == "." or unmatched.get(val[n - 1], 0) > 0):
        n -= 1
        if val[n] in unmatched:
            unmatched[val[n]] -= 1
    return n


def _span_at(s: str, i: int, pairs: bool, names: frozenset[str]) -> tuple[int, int, str] | None:
    """What to mask around hint word `i`: a secret key's value, or an auth scheme's token."""
    if not pairs:
        m = None if i and s[i - 1] in _ALNUM else _SCHEME_AT.match(s, i)
        core = m.group("t").rstrip(".") if m else ""
        if not m or (core.isalpha() and (core.isupper() or core[1:].islower())):
            return None  # no token, or a plain word as in "Bearer token missing", "Basic Auth"
        return m.start("t"), m.start("t") + len(core), _MASK
    j = i  # walk back from the hint to the start of the key that contains it
    while j > 0 and i - j < 64 and s[j - 1] in _KEY_CHARS:
        j -= 1
    while j < i and s[j] in "-.0123456789":
        j += 1
    k = None if j and s[j - 1] in _ALNUM else _KEY_AT.match(s, j)
    key = k.group("key") if k else ""
    v = _VALUE.match(s, k.end()) if k and key not in names and looks_secret_key(key) else None
    if k is None or v is None:
        return None
    val, opened = v.group(0), v.group("open") or ""
    if len(val) > 1 and val[0] in "\"'" and val[-1] == val[0] and not opened:
        return k.end(), v.end(), val[0] + _MASK + val[0]
    keep = (v.group("scheme") or "") if "auth" in key.lower() else ""
    end = v.start() + _value_end(val)
    if end <= v.start() + len(opened) + len(keep):
        return None  # no value: "password=)"
    return k.end(), end, opened + keep + _MASK  # "Authorization: Bearer ***"


def _rewrite(
    s: str, low: str, words: tuple[str, ...], pairs: bool, names: frozenset[str] = frozenset()
) -> str:
    hits: set[int] = set()  # str.find per hint word is far cheaper than one big regex scan
    for w in words:
        i = low.find(w)
        while i != -1 and len(hits) < 1000:
            hits.add(i)
            i = low.find(w, i + 1)
    out: list[str] = []
    pos = 0
    for i in sorted(hits):
        span = _span_at(s, i, pairs, names) if i >= pos else None
        if span is not None and span[0] >= pos:
            out += [s[pos : span[0]], span[2]]
            pos = span[1]
    return "".join([*out, s[pos:]])


def _paths_sub(pattern: re.Pattern[str], s: str, paths: Paths) -> str:
    """`s` with the matches of `pattern` (paths) masked, as `paths` says."""
    low = s.lower()
    if paths is True or not any(w in low for w in _CUE_HINTS):
        return pattern.sub("<path>", s)
    cues = [m.end() for m in _CUE.finditer(s)]
    if not cues:
        return pattern.sub("<path>", s)
    ends = [m.start() for m in _CLAUSE_END.finditer(s)]

    def named_as_target(m: re.Match[str]) -> str:
        i = bisect_left(cues, m.start() + 1) - 1  # the last cue before the path
        if i < 0:
            return "<path>"
        j = bisect_left(ends, m.start()) - 1  # the last clause end before the path
        return m.group(0) if j < 0 or ends[j] < cues[i] else "<path>"

    return pattern.sub(named_as_target, s)


def _code_sub(s: str) -> str:
    """`s` without stack frames and code locations (always internals, whoever wrote it)."""
    if "node:" not in s and not _LOC_HINT.search(s):
        return s
    if "at " in s:
        s = _FRAME.sub("", s)
    return _CODE_LOC.sub("<path>", s)


def _one_pass(s: str, rules: _Rules) -> str:
    # Each step is guarded by a cheap substring test: most messages skip most regexes.
    paths = rules.paths
    if rules.secrets is not None:
        s = rules.secrets.sub(_MASK, s)
    if not s.isprintable():
        s = _CTRL.sub(" ", _ANSI.sub("", s))
    s = _untraced(s)
    if paths and "." in s:
        s = _code_sub(s)
    if "(" in s and any(w in s for w in _EXC_WORDS):
        s = _EXC_REPR.sub(lambda m: m.group("sq") or m.group("dq") or m.group("cls"), s)
    if "-----BEGIN" in s:
        s = _PEM.sub(_MASK, s)
    if "://" in s and "@" in s:
        s = _URL_CREDS.sub(r"\g<pre>***@", s)
    low = s.lower()
    if any(h in low for h in _HINTS):
        s = _rewrite(s, low, _HINTS, True, rules.names)
        low = s.lower()
    if "bearer" in low or "basic" in low or "token" in low:
        s = _rewrite(s, low, ("bearer", "basic", "token"), False)
    if _PROVIDER_HINT.search(s):
        s = _PROVIDER.sub(_MASK, s)
    if paths and "/" in s:
        s = _paths_sub(_FILE_URL, s, paths) if "file:" in s else s
        s = _paths_sub(_POSIX_PATH, s, paths)
    if paths and ("\\" in s or s.count(":/") > s.count("://")):
        s = _paths_sub(_WIN_PATH, s, paths)
    if len(s) >= 32:
        s = _TOKEN.sub(_token_sub, s)
    if "0x" in s:
        s = _MEMADDR.sub("0x" + _ELL, s)
    return " ".join(s.split())


def _fixed(s: str, rules: _Rules) -> str:
    for _ in range(4):  # run to a fixed point: this is what makes redact idempotent
        out = _one_pass(s, rules)
        if out == s:
            break
        s = out
    return s


def _cut(s: str, limit: int) -> str:
    """Cut already-redacted text to `limit`, never inside a "***" mask."""
    return s[: max(limit - 1, 0)].rstrip().rstrip("*").rstrip() + _ELL


def redact(
    text: str,
    *,
    limit: int = 300,
    keep: Sequence[str] = (),
    paths: Paths = True,
    names: Sequence[str] = (),
    secrets: Sequence[str] = (),
) -> str:
    """Mask secrets, strip tracebacks, code locations and file paths, collapse whitespace,
    cut to `limit` chars (with a trailing '…' when cut).

    `keep`: texts that stay as they are wherever they occur (the values a model sent in
    its call: echoing them back tells it nothing new), unless one holds a secret.
    `paths`: which paths go (`Paths`): ``True`` all (exception text), ``"internal"`` the
    server's internals only (text a server or tool wrote for the model), ``False`` none.
    `names`: names that are not secrets (the tool's name, its argument names): the word
    after one is not masked. `secrets`: values masked wherever they occur (what the
    model sent under secret-looking names). The module docstring states the rule.
    """
    try:
        s = text if isinstance(text, str) else str(text)
        if len(s) > _MAX_INPUT:
            s = s[:_MAX_INPUT] + _ELL
        rules = _Rules(paths, frozenset(names), _secrets_pattern(secrets) if secrets else None)
        kept = _echoable(keep, rules) if keep else []
        if kept:
            return _redact_keeping(s, kept, limit, rules)
        for _ in range(4):
            s = _fixed(s, rules)
            if len(s) <= limit:
                return s
            s = _cut(s, limit)
        return s[: max(limit, 0)]
    except Exception:
        return "[unprintable message]"[: limit if isinstance(limit, int) and limit > 0 else 0]


def _secrets_pattern(values: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern for the `values` worth masking (a whole word or more, any spacing)."""
    words = set()
    for v in list(values)[:50]:
        parts = v.split() if isinstance(v, str) and len(v) <= 1000 else []
        if sum(map(len, parts)) >= 3:
            words.add(r"\s+".join(map(re.escape, parts)))
    if not words:
        return None
    alternatives = "|".join(sorted(words, key=len, reverse=True))
    return re.compile(r"(?<![A-Za-z0-9_])(?:" + alternatives + r")(?![A-Za-z0-9_])")


def _echoable(values: Sequence[str], rules: _Rules) -> list[str]:
    """The values worth shielding: long enough to mean something, free of secrets."""
    out = []
    secrets_only = replace(rules, paths=False)
    for v in values:
        flat = " ".join(v.split()) if isinstance(v, str) else ""
        if not 3 <= len(flat) <= 1000 or "\u27e6" in flat or _fixed(flat, secrets_only) != flat:
            continue  # too short to mean anything, or it holds a secret
        if flat != _fixed(flat, rules):  # only what redaction would change
            out.append(flat)
    return sorted(set(out), key=len, reverse=True)


def _redact_keeping(s: str, kept: list[str], limit: int, rules: _Rules) -> str:
    s = " ".join(_untraced(s).split())  # (frames are lines: drop them before joining lines)
    for i, v in enumerate(kept):
        s = s.replace(v, f"\u27e6{i}\u27e7")
    s = _fixed(s, rules)
    for i, v in enumerate(kept):
        s = s.replace(f"\u27e6{i}\u27e7", v)
    return s if len(s) <= limit else _cut(s, limit)


def _render(value: object, depth: int, budget: int) -> str:
    if isinstance(value, str):
        return '"' + redact(value, limit=budget).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, (int, float)):  # (a huge int cannot even be converted to str)
        return repr(value) if not isinstance(value, int) or value.bit_length() < 4000 else "<int>"
    if not isinstance(value, (dict, list, tuple, set, frozenset)):
        return redact(str(value), limit=budget)
    parts: list[str] = []
    used = 0
    for item in value.items() if isinstance(value, dict) else value:
        if depth >= 3 or used > budget:
            parts.append(_ELL)
            break
        if isinstance(value, dict):  # the values of secret-looking keys are never shown
            hide = isinstance(item[0], str) and looks_secret_key(item[0])
            shown = '"***"' if hide else _render(item[1], depth + 1, budget)
            parts.append(_render(str(item[0]), depth, 40) + ": " + shown)
        else:
            parts.append(_render(item, depth + 1, budget))
        used += len(parts[-1]) + 2
    return ("{%s}" if isinstance(value, dict) else "[%s]") % ", ".join(parts)


def mask_value(value: object, *, limit: int = 80) -> str:
    """Short, safe rendering of one argument value received from a model, for feedback like
    "received 'five'": repr-like for str (quoted), json-ish for others, secrets masked,
    truncated."""
    if limit <= 0:
        return ""
    try:
        if not isinstance(value, str):
            out = _render(value, 0, limit)
            return out if len(out) <= limit else out[: limit - 1] + _ELL
        s = redact(value, limit=limit)
        n = len(s)
        while True:  # shorten until the quoted, escaped form fits
            out = repr(s if n >= len(s) else s[:n].rstrip().rstrip("*") + _ELL)
            if len(out) <= limit or n <= 0:
                return out[:limit]
            n -= max(1, len(out) - limit)
    except Exception:
        return "<unprintable value>"[:limit]
