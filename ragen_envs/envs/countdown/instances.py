"""Countdown instances: generation from a seed and loading from JSONL.

An instance is a list of numbers (presentation order) and a target.  Its canonical key
(:func:`canonical_key`) is the sorted numbers and the target: instances that differ
only in the order of their numbers are the same instance.  Its **split key**
(:func:`split_key`) is the sorted numbers alone, and
:func:`ragen_envs.seeding.instance_split` of the split key decides the split.  So the
splits are disjoint not only as instances but as number multisets: a test puzzle never
reuses the numbers of a training puzzle with another target, and seed ``i`` of two
splits never shows the same numbers (both would otherwise start from the same draws).

**Generation** (:func:`generate_attempt`, one attempt; the env retries through
:func:`ragen_envs.seeding.sample_instance`): draw the count ``n`` uniformly from
``count_range``, draw ``n`` numbers uniformly from ``number_range`` (repeats allowed),
then build up to :data:`TREES_PER_ATTEMPT` random expression trees over *all* of them
(:func:`random_tree`: while more than one value is left, pick an ordered pair of
distinct values uniformly and an operator uniformly from ``+ - * /`` and replace the
pair by the result; exact fractions, so intermediate values may be negative or
fractional; a division by zero spoils that tree).  The first tree whose value is an
integer inside ``target_range`` gives the target; if none does, the attempt fails.
The tree is kept as the *witness*: every generated instance has a solution that uses
each number exactly once, by construction.

**JSONL** (:func:`load_split`): one JSON object per line with ``nums`` (list of 1 to
:data:`~.solver.MAX_SOLVER_NUMBERS` non-negative integers) and ``target`` (a
non-negative integer); other keys are ignored, blank lines skipped.  The items of a
split are those whose split key :func:`~ragen_envs.seeding.instance_split` assigns to
it, in file order, without duplicates (by canonical key) and without unsolvable
items (checked with the exhaustive solver; RAGEN keeps only the items of its parquet
data solvable with + and - alone, RAGEN-AI/RAGEN ragen/env/; we keep every item solvable with
+ - * /).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ...seeding import in_split, instance_split
from .solver import MAX_SOLVER_NUMBERS, Tree, apply_op, render, solve

__all__ = [
    "DataError",
    "Instance",
    "SplitData",
    "canonical_key",
    "generate_attempt",
    "load_split",
    "random_tree",
    "split_key",
]

#: Largest number or target accepted from a JSONL file.
MAX_DATA_VALUE = 10**9

_OPS = "+-*/"

#: Random trees tried per drawn set of numbers (see :func:`generate_attempt`).
TREES_PER_ATTEMPT = 16


class DataError(ValueError):
    """A Countdown JSONL file is missing, malformed, or has no usable item for a split."""


@dataclass(frozen=True)
class Instance:
    """One Countdown puzzle.

    Attributes:
        numbers: the numbers, in the order the observation shows them.
        target: the integer to reach.
        witness: an expression known to reach the target: the generator's tree, or
            the solver's answer for data items (checked at load); ``None`` for an
            instance given through reset options.
        data_index: position among the items of its split in the data file, or ``None``.
    """

    numbers: tuple[int, ...]
    target: int
    witness: str | None = None
    data_index: int | None = None

    @property
    def key(self) -> bytes:
        """The canonical key (see :func:`canonical_key`)."""
        return canonical_key(self.numbers, self.target)


def canonical_key(numbers: Sequence[int], target: int) -> bytes:
    """``b'countdown:[[sorted numbers],target]'``: equal for equal instances."""
    return (
        b"countdown:"
        + json.dumps([sorted(int(n) for n in numbers), int(target)], separators=(",", ":")).encode()
    )


def split_key(numbers: Sequence[int]) -> bytes:
    """``b'countdown-numbers:[sorted numbers]'``: the key whose hash decides the split."""
    return (
        b"countdown-numbers:"
        + json.dumps(sorted(int(n) for n in numbers), separators=(",", ":")).encode()
    )


def random_tree(numbers: Sequence[int], u: np.ndarray) -> tuple[Fraction | None, Tree]:
    """A random expression tree over all ``numbers`` and its exact value.

    Args:
        numbers: the leaves (at least one).
        u: ``3 * (len(numbers) - 1)`` uniform draws in ``[0, 1)``; round ``r`` uses
            ``u[3r:3r+3]`` to pick the left operand, the right operand (another one) and
            the operator, each uniformly.

    Returns:
        ``(value, tree)``; ``value`` is ``None`` when the tree divides by zero.
    """
    pool: list[tuple[Fraction | None, Tree]] = [(Fraction(int(x)), int(x)) for x in numbers]
    for r in range(len(pool) - 1):
        m = len(pool)
        i = min(int(u[3 * r] * m), m - 1)  # min(): guards against rounding up to m
        j = min(int(u[3 * r + 1] * (m - 1)), m - 2)
        j += j >= i
        op = _OPS[min(int(u[3 * r + 2] * 4), 3)]
        (va, ta), (vb, tb) = pool[i], pool[j]
        value = None if va is None or vb is None else apply_op(op, va, vb)
        merged: tuple[Fraction | None, Tree] = (value, (op, ta, tb))
        pool = [item for k, item in enumerate(pool) if k != i and k != j]
        pool.append(merged)
    return pool[0]


def generate_attempt(
    rng: np.random.Generator,
    *,
    count_range: Sequence[int],
    number_range: Sequence[int],
    target_range: Sequence[int],
    split: str | None,
    trees: int = TREES_PER_ATTEMPT,
) -> Instance | None:
    """One generation attempt (module docstring); ``None`` when the attempt fails.

    Draws the numbers once and rejects them unless :func:`split_key` is in ``split``;
    then draws up to ``trees`` random trees over them (:func:`random_tree`) and
    returns the first whose value is an integer in ``target_range``.
    """
    n = int(rng.integers(count_range[0], count_range[1] + 1))
    numbers = tuple(int(x) for x in rng.integers(number_range[0], number_range[1] + 1, size=n))
    if not in_split(split_key(numbers), split):
        return None
    lo, hi = target_range
    for _ in range(trees):
        value, tree = random_tree(numbers, rng.random(3 * (n - 1)))
        if value is None or value.denominator != 1 or not lo <= value.numerator <= hi:
            continue
        return Instance(numbers, int(value.numerator), witness=render(tree))
    return None


@dataclass(frozen=True)
class SplitData:
    """The usable items of one split of a data file.

    Attributes:
        items: the instances, in file order.
        n_lines: items read from the file (all splits).
        n_duplicates: items of this split dropped as repeats of an earlier one.
        n_unsolvable: items of this split dropped because no expression reaches the target.
    """

    items: tuple[Instance, ...]
    n_lines: int
    n_duplicates: int
    n_unsolvable: int


def _int_field(obj: dict, name: str, where: str) -> int:
    value = obj.get(name)
    if type(value) is not int or not 0 <= value <= MAX_DATA_VALUE:
        raise DataError(
            f"{where}: {name!r} must be an integer in [0, {MAX_DATA_VALUE}], got {value!r}"
        )
    return value


def _parse_line(line: str, where: str) -> tuple[tuple[int, ...], int]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{where}: expected a JSON object with 'nums' and 'target'")
    nums = obj.get("nums")
    if not isinstance(nums, list) or not 1 <= len(nums) <= MAX_SOLVER_NUMBERS:
        raise DataError(
            f"{where}: 'nums' must be a list of 1 to {MAX_SOLVER_NUMBERS} integers, got {nums!r}"
        )
    values = tuple(_int_field({"nums item": v}, "nums item", where) for v in nums)
    return values, _int_field(obj, "target", where)


def load_split(path: str | os.PathLike[str], split: str) -> SplitData:
    """The items of ``split`` in the JSONL file at ``path`` (module docstring).

    ``path`` is absolute or relative to the current working directory.  Results are
    cached per (resolved path, size, modification time, split).

    Raises:
        DataError: the file cannot be read, a line is malformed (the message names the
            line), or the split has no usable item.
    """
    p = Path(path).expanduser().resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise DataError(f"cannot read Countdown data {str(p)!r}: {exc.strerror}") from None
    return _load_split_cached(str(p), st.st_size, st.st_mtime_ns, split)


@functools.lru_cache(maxsize=16)
def _load_split_cached(path: str, size: int, mtime_ns: int, split: str) -> SplitData:
    items: list[Instance] = []
    seen: set[bytes] = set()
    n_lines = n_dup = n_unsolvable = 0
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                numbers, target = _parse_line(line, f"{path}:{lineno}")
                n_lines += 1
                if instance_split(split_key(numbers)) != split:
                    continue
                key = canonical_key(numbers, target)
                if key in seen:
                    n_dup += 1
                    continue
                seen.add(key)
                solution = solve(numbers, target)
                if solution is None:
                    n_unsolvable += 1
                    continue
                items.append(Instance(numbers, target, witness=solution, data_index=len(items)))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read Countdown data {path!r}: {exc}") from None
    if not items:
        raise DataError(
            f"{path}: no usable item of split {split!r} ({n_lines} items read, {n_dup} duplicates, "
            f"{n_unsolvable} unsolvable in this split)"
        )
    return SplitData(tuple(items), n_lines, n_dup, n_unsolvable)
