"""Final-answer extraction for math word problems (spec: ``docs/envs/metamathqa.md``).

:func:`extract_answer` finds the final answer in a piece of text — the agent's
``<answer>`` block, or a data set's worked solution — and :func:`normalize_answer`
puts it in a canonical spelling.  The rules, in priority order (the first that applies
wins):

1. ``boxed``: the content of the **last** ``\\boxed{…}`` (or ``\\fbox{…}``), braces
   matched, so ``\\boxed{\\frac{1}{3}}`` gives ``\\frac{1}{3}``.
2. ``answer_is``: the text after the last "The answer is" / "The final answer is"
   (case-insensitive, optional colon) up to the end of that line (MetaMathQA's gold
   format, ``The answer is: 72``).
3. ``hashes``: the text after the last ``####`` up to the end of that line (GSM8K's gold
   format, ``#### 72``).
4. ``whole``: otherwise the whole text.

The candidate is then normalised (:func:`normalize_answer`): math delimiters
(``$…$``, ``\\(…\\)``), ``\\left``/``\\right``, LaTeX spacing (``\\,`` ``\\!`` ``~``),
currency signs (``$ \\$ € £ ¥``), grouping ``{,}`` and thousands separators
(``8,000`` → ``8000``; a comma is a thousands separator only between a digit and
exactly three digits), degree signs, a trailing ``%``, ``\\text{…}`` wrappers and
trailing punctuation are removed (but ``!`` after a digit, a letter, a closing
bracket or another ``!``, spaces between or not, is a factorial and stays:
``\\boxed{210000!}``, ``\\boxed{210000 !}`` and ``\\boxed{210000 \\text{!}}`` are not
``210000``; outside ``\\boxed`` the answer ends a sentence, so a final ``!`` there is an
exclamation mark: ``The answer is 3/4!`` gives ``3/4``); ``\\dfrac``/``\\tfrac`` become ``\\frac``; a simple
``x = 5`` becomes ``5``.

**Last-number fallback.**  For rules 2–4 (never for ``\\boxed``, which is an explicit
answer), if the normalised candidate still contains a word — a run of two or more
letters outside a LaTeX command, other than ``pi``, ``sqrt``, ``sin``, ``cos``, ``tan``,
``log``, ``ln``, ``exp``, ``inf`` — or unbalanced braces (an unclosed ``\\boxed{`` of a
cut-off answer), it is prose, and the answer is the **last number**
in it (integers, decimals, ``a/b`` fractions, thousands separators allowed).  So
``The total is 72 clips, altogether.`` gives ``72`` (source ``last_number``).
Limits of this rule: prose that mentions another number after the answer ("72 clips, 3
more than yesterday") yields the later number; a symbolic answer written in prose
("the answer is x plus one") is not recovered; ``2^{10}`` written in prose outside
``\\boxed`` gives ``10``.  Wrap symbolic answers in ``\\boxed{}``.

Nothing here is RAGEN's: RAGEN compares the lower-cased, whitespace-free strings
(RAGEN-AI/RAGEN ragen/env/), so ``8,000`` ≠ ``8000`` and ``752.0`` ≠ ``752`` there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ExtractedAnswer", "extract_answer", "last_boxed", "last_number", "normalize_answer"]

_ANSWER_IS = re.compile(r"(?:the\s+)?(?:final\s+)?answer\s+is\s*:?", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?(?![\w])"
    r"|(?<![\w.])[-+]?\.\d+"
)
_WORD = re.compile(r"[A-Za-z]{2,}")
_LATEX_CMD = re.compile(r"\\[A-Za-z]+")
_MATH_WORDS = {"pi", "sqrt", "sin", "cos", "tan", "log", "ln", "exp", "inf", "infty"}
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|textit)\s*\{([^{}]*)\}")
_SIMPLE_EQ = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?P<rhs>[^=]+)$")


@dataclass(frozen=True)
class ExtractedAnswer:
    """An extracted final answer.

    Attributes:
        text: the normalised answer (:func:`normalize_answer`).
        source: which rule found it: ``boxed``, ``answer_is``, ``hashes``, ``whole`` or
            ``last_number``.
        raw: the candidate before normalisation.
    """

    text: str
    source: str
    raw: str


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` / ``\\fbox{…}`` with nested braces matched.

    Returns ``None`` when there is none or its braces never close.
    """
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


def _after_last(pattern: re.Pattern[str] | str, text: str) -> str | None:
    if isinstance(pattern, str):
        idx = text.rfind(pattern)
        if idx < 0:
            return None
        rest = text[idx + len(pattern) :]
    else:
        matches = list(pattern.finditer(text))
        if not matches:
            return None
        rest = text[matches[-1].end() :]
    return rest.strip().split("\n", 1)[0]


def _strip_outer(s: str) -> str:
    s = s.strip()
    changed = True
    while changed and s:
        changed = False
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : len(s) - len(right)].strip()
                changed = True
    return s


def _unwrap_text(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        return m.group(1)

    prev = None
    while prev != s:
        prev = s
        s = _TEXT_CMD.sub(repl, s)
    return s


_TRAILING = frozenset(" \t\r\n.,;:!?")


def _strip_trailing_punctuation(s: str) -> str:
    """``s`` without trailing spaces and ``. , ; : ! ?``, except a factorial's ``!``.

    An ``!`` after a digit, a letter, a closing bracket or another ``!`` — with or without
    spaces between, since spaces mean nothing in math mode — is the factorial operator
    and stays: ``210000!``, ``210000 !`` and ``210000 \text{!}`` (unwrapped before this)
    are not ``210000``.  Linear in ``len(s)``.
    """
    end = len(s)
    while end and s[end - 1] in _TRAILING:
        if s[end - 1] == "!":
            before = s[: end - 1].rstrip(" \t\r\n")
            if before and (before[-1].isalnum() or before[-1] in ")}]!"):
                break
        end -= 1
    return s[:end]


def normalize_answer(answer: str) -> str:
    """Canonical spelling of an answer candidate (rules in the module docstring)."""
    s = _strip_outer(str(answer))
    s = _unwrap_text(s)
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\:", ""),
        ("\\ ", " "),
        ("~", " "),
        ("{,}", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        ("^\\circ", ""),
        ("^{\\circ}", ""),
        ("°", ""),
        ("\\%", ""),
        ("\\$", ""),
        ("\\displaystyle", ""),
    ):
        s = s.replace(old, new)
    s = re.sub(r"[$€£¥]", "", s)
    s = _THOUSANDS.sub("", s)
    s = s.strip()
    s = _strip_trailing_punctuation(s)
    s = s.rstrip("%").strip()
    m = _SIMPLE_EQ.match(s)
    if m:
        s = m.group("rhs").strip()
    s = re.sub(r"\s+", " ", s)
    if s.startswith("+") and len(s) > 1 and (s[1].isdigit() or s[1] == "."):
        s = s[1:]
    return s


def _is_prose(s: str) -> bool:
    if s.count("{") != s.count("}"):
        return True  # e.g. an unclosed \boxed{ of a truncated answer: not an expression
    stripped = _LATEX_CMD.sub(" ", s)
    return any(w.lower() not in _MATH_WORDS for w in _WORD.findall(stripped))


def last_number(text: str) -> str | None:
    """The last number in ``text`` (thousands separators removed), or ``None``."""
    matches = _NUMBER.findall(text)
    if not matches:
        return None
    value = matches[-1].replace(" ", "")
    value = _THOUSANDS.sub("", value)
    return value[1:] if value.startswith("+") else value


def extract_answer(text: str) -> ExtractedAnswer | None:
    """Extract the final answer from ``text`` (rules in the module docstring).

    Returns:
        The :class:`ExtractedAnswer`, or ``None`` when the text is empty or holds
        prose without any number.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        norm = normalize_answer(boxed)
        return ExtractedAnswer(norm, "boxed", boxed) if norm else None
    for source, pattern in (("answer_is", _ANSWER_IS), ("hashes", "####")):  # noqa: B007 - read after the loop
        cand = _after_last(pattern, text)
        if cand is not None and cand.strip():
            break
    else:
        source, cand = "whole", text.strip()
    # Outside \boxed an answer ends a sentence: its final "!" is an exclamation mark.
    norm = normalize_answer(cand.rstrip(" \t\r\n.!?"))
    if norm and not _is_prose(norm):
        return ExtractedAnswer(norm, source, cand)
    num = last_number(norm)
    if num is None:
        return None
    return ExtractedAnswer(num, "last_number", cand)
