"""The Countdown answer checker: an ``ast`` whitelist with exact rational arithmetic.

An answer is an arithmetic expression over the instance's numbers, optionally followed
by ``= <target>``.  The grammar (spec: ``docs/envs/countdown.md``, "Action grammar")::

    answer     := expression [ "=" integer ]
    expression := integer | expression op expression | "(" expression ")"
    op         := "+" | "-" | "*" | "/"        (aliases: "×" for "*", "÷" for "/",
                                                 "−" U+2212 for "-")

with the usual precedence (``*`` and ``/`` bind tighter than ``+`` and ``-``, left
associative).  The text is parsed by :func:`ast.parse` after a character whitelist and
a length bound, and the tree is accepted only if it is made of binary ``+ - * /`` nodes
over non-negative integer literals (``ast.Constant`` of type ``int``).  Everything else is
rejected with a reason: ``**``, ``//``, ``%``, unary ``+``/``-``, decimals, names,
calls, comparisons, and so on.

The literals must be exactly the instance's numbers as a multiset (each given number
used once, all of them).  Only then is the tree evaluated, with
:class:`fractions.Fraction` (exact, so ``7/2`` is ``7/2``, never ``3`` and never a
rounding artefact; RAGEN compares floats with a 1e-5 tolerance, RAGEN-AI/RAGEN ragen/env/), and by
a recursion whose depth is bounded by the number of literals.  Because the leaves are
the given numbers, intermediate values are bounded by products of them: no blow-up.

RAGEN evaluates the answer with Python ``eval`` and no time limit (our reading of RAGEN-AI/RAGEN);
nothing here calls ``eval`` or ``compile`` on model text, and :func:`check_answer`
never raises on any input.
"""

from __future__ import annotations

import ast
import enum
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "ALIASES",
    "AnswerStatus",
    "CheckResult",
    "DEFAULT_MAX_CHARS",
    "check_answer",
    "format_value",
]

#: Accepted spellings of the operators, mapped to the ASCII ones.
ALIASES: dict[str, str] = {"×": "*", "÷": "/", "−": "-"}

#: Default bound on the answer length in characters (config ``max_answer_chars``).
DEFAULT_MAX_CHARS = 200

_ALLOWED_CHARS = frozenset("0123456789+-*/() =\t\n\r")
_DISALLOWED_RE = re.compile("[^" + re.escape("".join(sorted(_ALLOWED_CHARS))) + "]")
_RHS_RE = re.compile(r"[0-9]+")

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_FORBIDDEN_BINOPS: dict[type, str] = {
    ast.Pow: "**",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.BitXor: "^",
}


class AnswerStatus(str, enum.Enum):
    """Outcome of checking one answer."""

    #: well-formed, uses every number once, equals the target.
    CORRECT = "correct"
    #: well-formed, uses every number once, but its value is not the target.
    WRONG = "wrong"
    #: not an answer under the grammar (see :attr:`CheckResult.reason`).
    INVALID = "invalid"


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check_answer` found.

    Attributes:
        status: correct, wrong or invalid.
        reason: why the answer is invalid (``None`` otherwise); a short sentence of ours
            that never quotes more than a few characters of the answer.
        value: the exact value of the expression (``None`` when invalid).
        expression: the expression in canonical form (``ast.unparse``: ASCII
            operators, single spaces, only the parentheses precedence needs), ``None``
            when invalid.
    """

    status: AnswerStatus
    reason: str | None = None
    value: Fraction | None = None
    expression: str | None = None


_CORRECT, _WRONG = AnswerStatus.CORRECT, AnswerStatus.WRONG


def _valid_result(status: AnswerStatus, value: Fraction, expression: str) -> CheckResult:
    """``CheckResult(status, value=value, expression=expression)``, built in one step.

    The frozen dataclass's ``__init__`` sets each field by ``object.__setattr__``; this
    fills the new instance's ``__dict__`` at once (same fields, same object)."""
    result = _new_result(CheckResult)
    result.__dict__.update(status=status, reason=None, value=value, expression=expression)
    return result


_new_result = object.__new__


def format_value(value: Fraction) -> str:
    """``Fraction(7, 2) -> "7/2"``, ``Fraction(6) -> "6"``."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def _invalid(reason: str) -> CheckResult:
    return CheckResult(AnswerStatus.INVALID, reason=reason)


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.BinOp):
        sym = _FORBIDDEN_BINOPS.get(type(node.op), type(node.op).__name__)
        return f"the operator {sym} is not allowed (only + - * /)"
    if isinstance(node, ast.UnaryOp):
        return "unary + and - are not allowed (every operator needs two operands)"
    if isinstance(node, ast.Constant):
        return "only non-negative integer literals are allowed"
    if isinstance(node, ast.Call):
        return "calls are not allowed (write * between a number and a parenthesis)"
    return f"{type(node).__name__} expressions are not allowed"


def _leaves(tree: ast.expr) -> list[int] | str:
    """The integer literals of ``tree`` in order, or the reason it is not allowed.

    Iterative (explicit stack), so a deep tree cannot exhaust the Python stack.
    """
    leaves: list[int] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            stack.append(node.right)
            stack.append(node.left)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            leaves.append(node.value)
        else:
            return _describe(node)
    return leaves


def _evaluate(node: ast.expr) -> Fraction:
    """Exact value of a whitelisted tree (depth <= number of literals).

    Raises:
        ZeroDivisionError: a divisor evaluates to zero.
    """
    if isinstance(node, ast.Constant):
        assert type(node.value) is int  # the whitelist admits int literals only
        return Fraction(node.value)
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left), _evaluate(node.right)
    op = type(node.op)
    if op is ast.Add:
        return left + right
    if op is ast.Sub:
        return left - right
    if op is ast.Mult:
        return left * right
    return left / right  # ast.Div; Fraction raises ZeroDivisionError on 0


# ------------------------------------------------------------- the common path
# Most answers are plain ``+ - * /`` expressions over integer literals.  For those,
# :func:`_check_fast` does in one linear pass what ``ast.parse`` + :func:`_leaves` +
# :func:`_evaluate` (``Fraction`` arithmetic) + ``ast.unparse`` do, about four times
# faster, and returns exactly the same :class:`CheckResult`.  It accepts only the strict
# grammar below, on which Python's parser builds the same left-associative tree; on
# anything else (unary signs, ``**``, ``1 2``, ``2(3)``, a leading-zero literal, ...) it
# returns ``None`` and :func:`_check` takes the ``ast`` path, so every invalid answer
# keeps its reason.  (Equality with the ``ast`` path is tested on random and adversarial
# expressions in ``tests/envs/test_countdown.py``.)
#
#     expr := term (("+" | "-") term)*      term := atom (("*" | "/") atom)*
#     atom := INT | "(" expr ")"             INT  := "0" | [1-9][0-9]{0,31}
#
# (spaces between tokens are ignored, as Python's tokenizer does).

_TOKEN_RE = re.compile(r"[0-9]+|[-+*/()]")  # after the whitelist, everything but spaces
#: Any character besides digits, ``+ - * / ( )`` and the space: absent from most answers,
#: which then need none of the normalisation steps (aliases, tabs, ``=``) of :func:`_check`.
_NOT_PLAIN_RE = re.compile(r"[^0-9+\-*/() ]")
_FAST_MAX_CHARS = 200  # the default max_answer_chars
_ARITH, _TERM, _ATOM = 0, 1, 2  # ast.unparse's precedence levels: + -, * /, literals
_PREC = {"+": _ARITH, "-": _ARITH, "*": _TERM, "/": _TERM}


def _reduce(ops: list[str], vals: list[tuple[int, int, str, int]]) -> None:
    """Pop one operator and its two operands, push ``left op right`` (see :func:`_check_fast`)."""
    op = ops.pop()
    rn, rd, rt, rp = vals.pop()
    ln, ld, lt, lp = vals.pop()
    level = _PREC[op]
    if lp < level:
        lt = f"({lt})"
    if rp <= level:
        rt = f"({rt})"
    if ld == 0 or rd == 0:
        num, den = 0, 0
    elif op == "+":
        num, den = ln * rd + rn * ld, ld * rd
    elif op == "-":
        num, den = ln * rd - rn * ld, ld * rd
    elif op == "*":
        num, den = ln * rn, ld * rd
    else:  # "/": a zero divisor gives den 0
        num, den = ln * rd, ld * rn
    vals.append((num, den, f"{lt} {op} {rt}", level))


def _check_fast(text: str, numbers: Sequence[int], target: int) -> CheckResult | None:
    """:func:`_check` after normalisation, for the strict grammar above; ``None`` outside it.

    Operator precedence parsing with two stacks, one pass over the tokens (no recursion).
    An operand is ``(numerator, denominator, ast.unparse text, precedence)``; rationals
    stay unreduced until one ``Fraction`` at the end, and a zero denominator marks a
    division by zero (it stays zero through every later operation).  Parentheses are
    put back as ``ast.unparse`` puts them: around a left operand of lower precedence and
    a right operand of lower or equal precedence (the operators are left-associative).
    """
    if len(text) > _FAST_MAX_CHARS:
        # Longer texts may meet Python's parser limits (200 nested parentheses): the ast
        # path rules there.  Within the bound, balanced nesting is at most 100 deep.
        return None
    vals: list[tuple[int, int, str, int]] = []
    ops: list[str] = []
    leaves: list[int] = []
    want_operand = True
    prec = _PREC.get
    for tok in _TOKEN_RE.findall(text):
        if want_operand:
            if tok == "(":
                ops.append(tok)
            elif tok.isdigit() and (tok[0] != "0" or len(tok) == 1) and len(tok) <= 32:
                literal = int(tok)
                leaves.append(literal)
                vals.append((literal, 1, tok, _ATOM))
                want_operand = False
            else:
                return None  # a sign, an operator where an operand goes, a leading zero
        elif tok == ")":
            while ops and ops[-1] != "(":
                _reduce(ops, vals)
            if not ops:
                return None
            ops.pop()
        else:
            level = prec(tok)
            if level is None:
                return None  # two operands in a row ("1 2", "2(3)")
            while ops and ops[-1] != "(" and _PREC[ops[-1]] >= level:
                _reduce(ops, vals)
            ops.append(tok)
            want_operand = True
    if want_operand:
        return None
    while ops:
        if ops[-1] == "(":
            return None
        _reduce(ops, vals)
    num, den, expression, _ = vals[0]
    if sorted(leaves) != sorted(map(int, numbers)):
        return _invalid(
            f"the expression uses {_numbers_text(leaves)} but must use each of "
            f"{_numbers_text([int(n) for n in numbers])} exactly once"
        )
    if den == 0:
        return _invalid("the expression divides by zero")
    value = Fraction(num, den)
    if type(target) is int:  # num/den == target iff num == target * den (den != 0), in ints
        status = _CORRECT if num == target * den else _WRONG
    else:
        status = _CORRECT if value == target else _WRONG
    return _valid_result(status, value, expression)


def _numbers_text(values: Sequence[int]) -> str:
    shown = sorted(values)
    if len(shown) > 8:
        return f"{len(shown)} numbers"
    return "[" + ", ".join(str(v) for v in shown) + "]"


def check_answer(
    answer: object, numbers: Sequence[int], target: int, *, max_chars: int = DEFAULT_MAX_CHARS
) -> CheckResult:
    """Check a Countdown answer.

    Args:
        answer: the action text (anything; non-strings are invalid).
        numbers: the instance's numbers (non-negative ints), each to be used once.
        target: the integer the expression must equal.
        max_chars: answers longer than this (before any normalisation) are invalid.

    Returns:
        A :class:`CheckResult`.  Rules, in the order they are checked:

        1. a string of at most ``max_chars`` characters, not blank;
        2. only digits, ``+ - * / ( ) =``, whitespace and the :data:`ALIASES`;
        3. at most one ``=``; if present, the right-hand side is an integer literal
           equal to ``target``;
        4. the left-hand side parses (``ast.parse(mode="eval")``) to binary
           ``+ - * /`` nodes over integer literals only;
        5. the literals are ``numbers`` as a multiset;
        6. no division by zero.

        Then the status is correct when the exact value equals ``target``, else wrong.

    Never raises.
    """
    try:
        return _check(answer, numbers, target, max_chars)
    except Exception as exc:  # pragma: no cover - defence in depth, no known path
        return _invalid(f"the answer could not be checked ({type(exc).__name__})")


def _check(answer: object, numbers: Sequence[int], target: int, max_chars: int) -> CheckResult:
    if not isinstance(answer, str):
        return _invalid(f"the answer must be a string, got {type(answer).__name__}")
    if len(answer) > max_chars:
        return _invalid(f"the answer is too long ({len(answer)} characters; at most {max_chars})")
    if _NOT_PLAIN_RE.search(answer) is None:
        # Only digits, + - * / ( ) and spaces: rules 1-3 below reduce to "not blank".
        text = answer.strip()
        if text:
            fast = _check_fast(text, numbers, target)
            return fast if fast is not None else _check_ast(text, numbers, target)
    text = answer
    if not text.isascii():  # the aliases are the only non-ASCII characters allowed
        for alias, ascii_op in ALIASES.items():
            text = text.replace(alias, ascii_op)
    if not text.strip():
        return _invalid("the answer is empty")
    bad = _DISALLOWED_RE.search(text)  # the first character outside the whitelist, in one C scan
    if bad is not None:
        ch = bad.group()
        if ch == ".":
            return _invalid("decimals are not allowed (only integers)")
        if ch == "%":
            return _invalid("the operator % is not allowed (only + - * /)")
        shown = ch if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}"
        return _invalid(f"the character {shown!r} is not allowed (only digits, + - * / ( ) and =)")
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    if text.count("=") > 1:
        return _invalid("at most one '=' is allowed")
    if "=" in text:
        text, rhs = text.split("=")
        rhs = rhs.strip()
        if not _RHS_RE.fullmatch(rhs):
            return _invalid("the right-hand side of '=' must be the target number")
        if len(rhs) > 32 or int(rhs) != target:
            return _invalid(f"the right-hand side of '=' must be the target {target}")
    text = text.strip()
    if not text:
        return _invalid("the expression is empty")
    fast = _check_fast(text, numbers, target)
    return fast if fast is not None else _check_ast(text, numbers, target)


def _check_ast(text: str, numbers: Sequence[int], target: int) -> CheckResult:
    """Rules 4-6 of :func:`check_answer` on the normalised left-hand side, by ``ast``."""
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return _invalid("not a well-formed arithmetic expression")
    leaves = _leaves(tree)
    if isinstance(leaves, str):
        return _invalid(leaves)
    if Counter(leaves) != Counter(int(n) for n in numbers):
        return _invalid(
            f"the expression uses {_numbers_text(leaves)} but must use each of "
            f"{_numbers_text([int(n) for n in numbers])} exactly once"
        )
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        return _invalid("the expression divides by zero")
    status = AnswerStatus.CORRECT if value == target else AnswerStatus.WRONG
    return CheckResult(status, value=value, expression=ast.unparse(tree))
