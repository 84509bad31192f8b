"""Is a predicted final answer equal to the gold answer?  (spec: ``docs/envs/metamathqa.md``)

:func:`answers_equal` compares two answers (already extracted, see
:mod:`ragen_envs.envs.metamathqa.extract`) in three stages; the first that decides wins:

1. **Canonical text**: equal after :func:`~ragen_envs.envs.metamathqa.extract.normalize_answer`.
2. **Exact numbers**: when both are plain numbers — integers, decimals, ``a/b``,
   ``\\frac{a}{b}`` (signs allowed) — they are compared as exact rationals
   (:class:`fractions.Fraction`): ``752`` = ``752.0``, ``1/3`` = ``\\frac{1}{3}``,
   ``0.5`` = ``\\frac{1}{2}``, but ``0.333`` ≠ ``1/3``.
3. **Symbolic**, by the configured checker:

   ``"math_verify"`` (default; extra ``math``)
       Hugging Face's ``math-verify`` (``parse`` with LaTeX extraction only — its
       expression extractor evaluates text with ``sympy.parse_expr`` — then ``verify``,
       gold first), with its ``signal.alarm`` timeouts (5 s to parse, 5 s to verify).
       Those work only in a process's main thread, so from any other thread (the bench
       runs envs in threads) the comparison runs in a worker process
       (:mod:`._verify_worker`, one per process, shared under a lock) that is killed
       when it does not answer within :data:`WORKER_TIMEOUT_S` (a
       ``\\binom{10^{9}}{5\\cdot 10^{8}}`` answer took > 60 s in a thread).
   ``"sympy"`` (extra ``math``; needs only ``sympy``)
       our small LaTeX subset parser (numbers, one-letter variables, ``+ - * / ^``,
       ``\\cdot``, ``\\times``, ``\\frac``, ``\\sqrt``, ``\\pi``, parentheses and braces,
       implicit products) that builds ``sympy`` objects directly — never ``eval`` —
       and tests ``simplify(a - b) == 0``.
   ``"numeric"`` (standard library only)
       no symbolic stage: stages 1–2 only.

   **Decimals are exact numbers** in every stage: ``1.4142136`` is the rational
   14142136/10^7, so it equals ``\\sqrt{2}`` no more than ``0.3333333`` equals
   ``\\frac{1}{3}`` (stage 2) or ``3.1415927`` equals ``\\pi``; ``0.5\\sqrt{2}`` does equal
   ``\\frac{\\sqrt{2}}{2}``.  A problem that asks for a rounded decimal has that decimal as
   its gold answer, so the requested rounding is what matches.  This is the MATH
   benchmark's convention (Hendrycks et al. 2021: exact equivalence after normalisation;
   PRM800K's ``grader.py``: sympy ``simplify(a - b) == 0``), not math-verify's default
   (``verify(..., float_rounding=6)`` compares a float rounded to 6 places, on purpose
   "so that 1/3 == 0.333333"): before math-verify sees them, decimal literals in both
   answers are rewritten as exact fractions (:func:`exact_decimals`), so its rounding
   never applies.  (Before, math-verify accepted ``1.4142136`` for ``\\sqrt{2}`` while
   stage 2 refused ``0.3333333`` for ``1/3``.)

   Before stage 3, an answer that could make ``sympy`` run for long — longer than 200
   characters, more than 3 powers, a power inside an exponent, an integer exponent
   above 1000 in absolute value, a literal of more than 50 digits, more than two ``!`` or
   the factorial of a number above 1000 — is compared by
   stages 1–2 only (so model output cannot stall the environment).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from fractions import Fraction
from typing import Any

from ...data.loaders import MissingExtraError
from .extract import normalize_answer

__all__ = ["CHECKERS", "answers_equal", "exact_decimals", "parse_number", "require_checker"]

#: Symbolic checkers (config field ``equivalence``).
CHECKERS = ("math_verify", "sympy", "numeric")

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(rf"^{_NUM}$")
_SLASH = re.compile(rf"^({_NUM})\s*/\s*({_NUM})$")
_FRAC = re.compile(r"^([-+]?)\\frac\s*\{\s*(" + _NUM + r")\s*\}\s*\{\s*(" + _NUM + r")\s*\}$")
_FRAC_SHORT = re.compile(r"^([-+]?)\\frac(\d)(\d)$")  # \frac12


def parse_number(text: str) -> Fraction | None:
    """Parse a plain number (integer, decimal, ``a/b``, ``\\frac{a}{b}``) exactly; else ``None``.

    The input should already be normalised (no thousands separators or currency).
    A zero denominator gives ``None``.
    """
    s = text.strip()
    try:
        if _PLAIN.match(s):
            return Fraction(s)
        m = _SLASH.match(s)
        if m:
            den = Fraction(m.group(2))
            return None if den == 0 else Fraction(m.group(1)) / den
        m = _FRAC.match(s) or _FRAC_SHORT.match(s)
        if m:
            den = Fraction(m.group(3))
            if den == 0:
                return None
            value = Fraction(m.group(2)) / den
            return -value if m.group(1) == "-" else value
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _too_costly(s: str) -> bool:
    if len(s) > 200 or s.count("^") > 3 or re.search(r"\d{51,}", s):
        return True
    if s.count("!") > 2 or any(int(m) > 1000 for m in re.findall(r"(\d+)\s*!", s)):
        return True  # a factorial of a large number (210000! has ~1e6 digits)
    for m in re.finditer(r"\^\s*(\{[^{}]*\}|[-+]?\d+|.)", s):
        exp = m.group(1).strip("{}")
        if "^" in exp:
            return True
        digits = re.fullmatch(r"\s*[-+]?\d+\s*", exp)
        if digits and abs(int(exp)) > 1000:
            return True
    # a power whose braced exponent itself contains braces with a power
    return bool(re.search(r"\^\s*\{[^}]*\^", s))


_DECIMAL = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?![\d.])")


def exact_decimals(text: str) -> str:
    """``text`` with every decimal literal written as an exact LaTeX fraction:
    ``1.25\\sqrt{2}`` -> ``\\frac{125}{100}\\sqrt{2}`` (module docstring, "Decimals are exact
    numbers"); integers and anything else unchanged."""
    return _DECIMAL.sub(
        lambda m: f"\\frac{{{int(m.group(1) + m.group(2))}}}{{{10 ** len(m.group(2))}}}", text
    )


def require_checker(checker: str) -> None:
    """Check that ``checker``'s optional packages are importable.

    Raises:
        ValueError: unknown checker.
        MissingExtraError: ``math-verify`` / ``sympy`` is not installed (extra ``math``).
    """
    if checker not in CHECKERS:
        raise ValueError(f"unknown equivalence checker {checker!r}; known: {', '.join(CHECKERS)}")
    if checker == "math_verify":
        try:
            import math_verify  # noqa: F401
        except ImportError:
            raise MissingExtraError(
                "math-verify", "math", "the math_verify answer checker"
            ) from None
    if checker in ("math_verify", "sympy"):
        try:
            import sympy  # noqa: F401
        except ImportError:
            raise MissingExtraError("sympy", "math", f"the {checker} answer checker") from None


def answers_equal(pred: str, gold: str, *, checker: str = "math_verify") -> bool:
    """True when ``pred`` and ``gold`` denote the same answer (stages in the module docstring).

    Args:
        pred: the extracted predicted answer.
        gold: the extracted gold answer.
        checker: ``"math_verify"``, ``"sympy"`` or ``"numeric"``.

    Never raises on odd input (a checker failure counts as "not equal"), except
    :class:`MissingExtraError` when the checker's package is missing.
    """
    a, b = normalize_answer(pred), normalize_answer(gold)
    if not a or not b:
        return False
    if a == b or a.replace(" ", "") == b.replace(" ", ""):
        return True
    na, nb = parse_number(a), parse_number(b)
    if na is not None and nb is not None:
        return na == nb
    if checker not in CHECKERS:
        raise ValueError(f"unknown equivalence checker {checker!r}; known: {', '.join(CHECKERS)}")
    if checker == "numeric" or _too_costly(a) or _too_costly(b):
        return False
    require_checker(checker)
    if checker == "math_verify":
        return _math_verify_bounded(exact_decimals(a), exact_decimals(b))
    return _sympy_equal(a, b)  # its parser reads decimals as exact rationals


# ------------------------------------------------------------------ math-verify
@functools.lru_cache(maxsize=4096)
def _mv_parse(text: str) -> Any:
    from math_verify import LatexExtractionConfig, parse

    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    return parse(f"${text}$", extraction_config=[LatexExtractionConfig()], parsing_timeout=timeout)


#: Seconds a comparison may take in the worker process before it is killed (its own
#: math-verify alarms stop at 5 s to parse each side plus 5 s to verify).
WORKER_TIMEOUT_S = 20.0
#: Seconds the worker may take to start (importing math-verify and sympy).
WORKER_START_S = 120.0


class _VerifyWorker:
    """The :mod:`._verify_worker` process: started on first use, restarted after a kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""

    def _readline(self, timeout: float) -> bytes | None:
        """One line from the worker, or ``None`` on timeout or end of output."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _start(self) -> bool:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "ragen_envs.envs.metamathqa._verify_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._buf = b""
        if self._readline(WORKER_START_S) != b"ready":
            self.stop()
            return False
        return True

    def stop(self) -> None:
        """Kill the worker (it is started again on the next comparison)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()

    def equal(self, pred: str, gold: str) -> bool:
        """The worker's verdict; ``False`` when it fails or runs past :data:`WORKER_TIMEOUT_S`."""
        with self._lock:
            if self._proc is None and not self._start():
                return False
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(json.dumps([pred, gold]).encode() + b"\n")
                self._proc.stdin.flush()
            except OSError:
                self.stop()
                return False
            line = self._readline(WORKER_TIMEOUT_S)
            if line is None:
                self.stop()  # too slow (or dead): kill it, answer "not equal"
                return False
            return line == b"1"


_WORKER = _VerifyWorker()
atexit.register(_WORKER.stop)


def _math_verify_bounded(pred: str, gold: str) -> bool:
    """:func:`_math_verify_equal`, bounded in time from any thread (module docstring)."""
    if threading.current_thread() is threading.main_thread():
        return _math_verify_equal(pred, gold)
    return _WORKER.equal(pred, gold)


def _math_verify_equal(pred: str, gold: str) -> bool:
    from math_verify import verify

    try:
        g, p = _mv_parse(gold), _mv_parse(pred)
        if not g or not p:
            return False
        timeout = 5 if threading.current_thread() is threading.main_thread() else None
        return bool(verify(g, p, timeout_seconds=timeout))
    except Exception:  # noqa: BLE001 - a checker failure is "not equal"
        return False


# ------------------------------------------------------------- sympy fallback
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<cmd>\\[A-Za-z]+)|(?P<var>[A-Za-z])|(?P<op>[-+*/^(){}\[\]]))"
)


class _Parser:
    """Recursive-descent parser for a small LaTeX subset, building sympy objects (no eval)."""

    def __init__(self, text: str, sympy: Any):
        self.sp = sympy
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"unexpected character at {pos}: {text[pos : pos + 10]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ValueError(f"expected {value!r}, got {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        expr = self.expr()
        if self.peek() is not None:
            raise ValueError(f"trailing tokens from {self.peek()!r}")
        return expr

    def expr(self) -> Any:
        value = self.term()
        while (tok := self.peek()) is not None and tok[1] in "+-" and tok[0] == "op":
            self.take()
            rhs = self.term()
            value = self.sp.Add(
                value,
                rhs if tok[1] == "+" else self.sp.Mul(-1, rhs, evaluate=False),
                evaluate=False,
            )
        return value

    def term(self) -> Any:
        value = self.unary()
        while (tok := self.peek()) is not None:
            if tok[1] in ("*", "\\cdot", "\\times"):
                self.take()
                value = self.sp.Mul(value, self.unary(), evaluate=False)
            elif tok[1] in ("/", "\\div"):
                self.take()
                value = self.sp.Mul(
                    value, self.sp.Pow(self.unary(), -1, evaluate=False), evaluate=False
                )
            elif tok[0] in ("num", "var") or tok[1] in ("(", "{", "\\frac", "\\sqrt", "\\pi"):
                value = self.sp.Mul(value, self.unary(), evaluate=False)  # implicit product
            else:
                break
        return value

    def unary(self) -> Any:
        tok = self.peek()
        if tok is not None and tok[1] in "+-" and tok[0] == "op":
            self.take()
            inner = self.unary()
            return inner if tok[1] == "+" else self.sp.Mul(-1, inner, evaluate=False)
        return self.power()

    def power(self) -> Any:
        base = self.atom()
        tok = self.peek()
        if tok is not None and tok[1] == "^":
            self.take()
            exponent = self.unary()
            if exponent.is_Integer and abs(int(exponent)) > 1000:
                raise ValueError("exponent too large")
            return self.sp.Pow(base, exponent, evaluate=False)
        return base

    def group(self) -> Any:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    def atom(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end")
        kind, val = tok
        if kind == "num":
            self.take()
            return self.sp.Rational(val) if "." not in val else self.sp.Rational(str(Fraction(val)))
        if kind == "var":
            self.take()
            return self.sp.Symbol(val)
        if val in ("(", "{", "["):
            self.take()
            inner = self.expr()
            self.take({"(": ")", "{": "}", "[": "]"}[val])
            return inner
        if val == "\\frac":
            self.take()
            num, den = self.group(), self.group()
            return self.sp.Mul(num, self.sp.Pow(den, -1, evaluate=False), evaluate=False)
        if val == "\\sqrt":
            self.take()
            index = None
            if (nxt := self.peek()) is not None and nxt[1] == "[":
                self.take("[")
                index = self.expr()
                self.take("]")
            radicand = (
                self.group() if (n2 := self.peek()) is not None and n2[1] == "{" else self.atom()
            )
            return self.sp.root(radicand, index) if index is not None else self.sp.sqrt(radicand)
        if val == "\\pi":
            self.take()
            return self.sp.pi
        raise ValueError(f"unsupported token {val!r}")


def _sympy_parse(text: str) -> Any:
    import sympy

    return _Parser(text, sympy).parse()


def _sympy_equal(pred: str, gold: str) -> bool:
    import sympy

    try:
        a, b = _sympy_parse(pred), _sympy_parse(gold)
        diff = sympy.simplify(a - b)
        return bool(diff == 0)
    except Exception:  # noqa: BLE001 - unparseable or unsupported: not equal
        return False
