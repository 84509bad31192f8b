"""Exhaustive Countdown solver (the oracle) and the expression trees it shares with the generator.

:func:`solve` decides whether the numbers, each used exactly once, combine with binary
``+ - * /`` into the target, and returns one such expression.  It is the classic
recursive search: pick two of the remaining values, replace them by one result of an
operation, recurse until one value is left.  Values are exact
:class:`fractions.Fraction` (intermediate results may be negative or fractional, as the
checker allows).  Multisets of remaining values already shown not to reach the target
are memoised, so each multiset is expanded once per call.  The search is complete:
every binary expression tree has two sibling leaves that are combined first, so every
tree is one path of the search.

Cost: with ``n`` numbers at most ``prod_{k=2..n} 6*C(k,2)`` expansions before
memoisation (3 888 for four numbers, about 2.3e5 for five); the env limits instances
to :data:`MAX_SOLVER_NUMBERS` numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Union

__all__ = ["MAX_SOLVER_NUMBERS", "Tree", "apply_op", "is_solvable", "render", "solve"]

#: Largest instance the solver is used on (cost grows ~36x per extra number).
MAX_SOLVER_NUMBERS = 5

#: An expression tree: an ``int`` leaf or ``(op, left, right)`` with ``op`` in ``"+-*/"``.
Tree = Union[int, tuple[str, "Tree", "Tree"]]


def apply_op(op: str, a: Fraction, b: Fraction) -> Fraction | None:
    """``a op b`` exactly, or ``None`` for a division by zero.

    Raises:
        ValueError: ``op`` is not one of ``+ - * /``.
    """
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return None if b == 0 else a / b
    raise ValueError(f"unknown operator {op!r}")


def render(tree: Tree) -> str:
    """Text of ``tree`` in the checker's grammar (ASCII operators, spaces around them).

    A compound operand is parenthesised except where left-associative parsing already
    gives the intended value: both operands of ``+`` and the left operand of ``-``.
    Recursive; the depth is the number of leaves minus one.
    """
    if isinstance(tree, int):
        return str(tree)
    op, left, right = tree
    lt, rt = render(left), render(right)
    if not isinstance(left, int) and op in "*/":
        lt = f"({lt})"
    if not isinstance(right, int) and op in "-*/":
        rt = f"({rt})"
    return f"{lt} {op} {rt}"


_Item = tuple[Fraction, Tree]


def _results(a: _Item, b: _Item) -> list[_Item]:
    """Every result of one operation on ``a`` and ``b`` (both orders of ``-`` and ``/``)."""
    (va, ta), (vb, tb) = a, b
    out: list[_Item] = [
        (va + vb, ("+", ta, tb)),
        (va - vb, ("-", ta, tb)),
        (vb - va, ("-", tb, ta)),
        (va * vb, ("*", ta, tb)),
    ]
    if vb != 0:
        out.append((va / vb, ("/", ta, tb)))
    if va != 0:
        out.append((vb / va, ("/", tb, ta)))
    return out


def solve(numbers: Sequence[int], target: int) -> str | None:
    """One expression that uses every number once and equals ``target``, or ``None``.

    Args:
        numbers: the instance's numbers (non-negative ints), ideally at most
            :data:`MAX_SOLVER_NUMBERS` of them (more work, but slowly).
        target: the integer to reach.

    Returns:
        An expression in the checker's grammar (ASCII operators, no unary minus), or
        ``None`` when no expression reaches ``target`` (or ``numbers`` is empty).
    """
    goal = Fraction(int(target))
    pool0: list[_Item] = [(Fraction(int(n)), int(n)) for n in numbers]
    if not pool0:
        return None
    dead: set[tuple[Fraction, ...]] = set()

    def search(pool: list[_Item]) -> Tree | None:
        if len(pool) == 1:
            return pool[0][1] if pool[0][0] == goal else None
        key = tuple(sorted(v for v, _ in pool))
        if key in dead:
            return None
        n = len(pool)
        for i in range(n - 1):
            for j in range(i + 1, n):
                rest = [pool[k] for k in range(n) if k != i and k != j]
                for item in _results(pool[i], pool[j]):
                    rest.append(item)
                    found = search(rest)
                    rest.pop()
                    if found is not None:
                        return found
        dead.add(key)
        return None

    tree = search(pool0)
    return None if tree is None else render(tree)


def is_solvable(numbers: Sequence[int], target: int) -> bool:
    """True when :func:`solve` finds an expression."""
    return solve(numbers, target) is not None
