"""Which parameter an unknown argument name stands for, when only one can be meant.

A name is compared word by word: ``startDate``, ``start_date``, ``Start-Date`` are the
words ``start``, ``date`` (case, separators and camel humps split words; digits are
words of their own). An unknown name is a *spelling variant* of a parameter when it is

- the same words written otherwise (case, separators: ``userId`` for ``user_id``);
- the same words with one of them in the plural or the singular (``tag`` for ``tags``);
- the same words but one, which has one typo inside, in a word of at least
  `TYPO_MIN_WORD` letters: a missing, extra or doubled letter, two neighbours swapped, or
  one vowel for another (``adress``, ``quantiy``, ``strat_date``, ``seperator``), never
  at the word's first letter.

A different word is never a typo: ``begin_date`` is no variant of ``start_date`` nor
of ``end_date``; ``min``/``max``, ``from``/``to``, ``src``/``source`` are too short or
too different to be one. The name maps only when it is a variant of exactly one
parameter and no other parameter is a plausible target (`plausible`: a looser likeness,
word for word), so that a long shared part (``_date``, ``_available_date``) never makes
two siblings look alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..schema import words

TYPO_MIN_WORD = 5
"""Letters a word needs before one typo in it is read as that word."""

_VOWELS = frozenset("aeiouy")


def _forms(word: str) -> set[str]:
    """`word` in the plural and in the singular (English suffix rules only)."""
    if not word.isalpha():
        return set()
    out = {word + "s"}
    if word.endswith(("s", "x", "z", "ch", "sh")):
        out.add(word + "es")
    if len(word) > 2 and word.endswith("y") and word[-2] not in _VOWELS:
        out.add(word[:-1] + "ies")
    if word.endswith("ies") and len(word) > 4:
        out.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        out.add(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        out.add(word[:-1])
    out.discard(word)
    return {w for w in out if len(w) >= 2}


def _plural_of(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether `a` is `b` with exactly one word in its other number."""
    if len(a) != len(b):
        return False
    diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    return len(diff) == 1 and diff[0][0] in _forms(diff[0][1])


def _edit(a: str, b: str) -> tuple[str, int] | None:
    """The one edit that turns `b` into `a` (``("sub"|"swap"|"ins"|"del", index in b)``),
    or None when they are equal or more than one edit apart."""
    la, lb = len(a), len(b)
    if abs(la - lb) > 1 or a == b:
        return None
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if la == lb:
        if a[i + 1 :] == b[i + 1 :]:
            return ("sub", i)
        if i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]:
            return ("swap", i)
        return None
    if la > lb:
        return ("ins", i) if a[i + 1 :] == b[i:] else None
    return ("del", i) if a[i:] == b[i + 1 :] else None


def _osa(a: str, b: str, limit: int) -> int:
    """Edit distance with swaps of neighbours (optimal string alignment), capped at
    ``limit + 1``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return min(prev[-1], limit + 1)


def _typo_of(name: tuple[str, ...], param: tuple[str, ...]) -> bool:
    """Whether `name` is `param` word for word but one, which has one typo inside."""
    if len(name) != len(param):
        return False
    diff = [(x, y) for x, y in zip(name, param, strict=True) if x != y]
    if len(diff) != 1:
        return False
    a, b = diff[0]
    edit = _edit(a, b)
    if edit is None or len(b) < TYPO_MIN_WORD:
        return False
    kind, at = edit
    if at == 0:
        return False  # a word's first letter: another word (date/rate, dtart)
    # One vowel for another is a typo; a consonant for another makes a different word
    # (state/stage, count/court).
    return kind != "sub" or (a[at] in _VOWELS and b[at] in _VOWELS)


def variant_of(name: str, param: str) -> bool:
    """Whether the unknown `name` is a spelling variant of `param` (see the module)."""
    a, b = words(name), words(param)
    if not a or not b:
        return False  # no letters or digits to compare
    if "".join(a) == "".join(b):
        return True
    return _plural_of(a, b) or _typo_of(a, b)


def plausible(name: str, param: str) -> bool:
    """Whether `param` is a plausible target of `name` at all: a looser likeness than
    `variant_of`, which keeps a rename from choosing between two close parameters."""
    a, b = words(name), words(param)
    if not a or not b:
        return False
    if _osa("".join(a), "".join(b), 1) <= 1:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y or x in _forms(y):
            continue
        shortest = min(len(x), len(y))
        # Two typos only in long words, and never at the first letter (weight/height).
        limit = 2 if shortest >= TYPO_MIN_WORD and x[0] == y[0] else 1 if shortest >= 3 else 0
        if _osa(x, y, limit) > limit:
            return False
    return True


def closest(name: str, params: Iterable[str]) -> str | None:
    """The one parameter `name` is a spelling variant of, when no other is a plausible
    target; else None."""
    found = None
    for param in params:
        if variant_of(name, param):
            if found is not None:
                return None
            found = param
    if found is None:
        return None
    for param in params:
        if param != found and plausible(name, param):
            return None
    return found
