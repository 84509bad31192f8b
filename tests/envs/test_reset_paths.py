"""Issue 31 (env resets): the reset fast paths give exactly what the general paths give.

The 4x4 Sudoku attempt on tables and pure-Python draws (``ragen_envs/envs/sudoku/four.py``)
is the general attempt, puzzle for puzzle: the general path draws from
``numpy.random.default_rng([base, attempt])`` and decides uniqueness with the 288-grid
table; the fast path draws the same numbers from :func:`ragen_envs.seeding.attempt_stream`
and decides uniqueness with unavoidable sets.  The PCG64 stream's new draws
(``words32``, ``integers2``, ``entropy_stream``) are NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragen_envs.envs.sudoku import four
from ragen_envs.envs.sudoku.generator import generate_attempt, has_unique_solution_without
from ragen_envs.pcg64 import PCG64Stream, entropy_stream, seeded_stream
from ragen_envs.seeding import attempt_rng, attempt_stream


def _bases(count: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(31)
    out = [(int(b), 0) for b in rng.integers(0, 2**63 - 1, size=count)]
    out += [(int(b), int(k)) for b, k in zip(rng.integers(0, 2**63 - 1, size=20), range(1, 21))]
    out += [(5, 0), (0, 0), (2**32 - 1, 3), (2**32, 1), (2**63 - 2, 2**32 + 7)]  # word counts 1-4
    return out


@pytest.mark.parametrize("split", [None, "train", "validation", "test"])
def test_four_attempt_is_the_general_attempt(split: str | None) -> None:
    made = 0
    for base, k in _bases(120):
        for num_empty in (6, 9):
            want = generate_attempt(attempt_rng(base, k), 4, num_empty, split)
            got = generate_attempt(attempt_stream(base, k), 4, num_empty, split)
            assert got == want, (base, k, num_empty)
            made += want is not None
    assert made > 10  # the comparison covered real puzzles, not only rejected attempts


def test_four_nine_by_nine_stream_attempt_takes_the_general_path() -> None:
    want = generate_attempt(attempt_rng(77, 0), 9, 32, None)
    assert generate_attempt(attempt_stream(77, 0), 9, 32, None) == want


def test_four_unavoidable_sets_decide_as_the_grid_table() -> None:
    rng = np.random.default_rng(7)
    grids = four.grids()
    assert len(grids) == 288 and len(set(grids)) == 288
    for _ in range(150):
        s = int(rng.integers(288))
        grid = list(grids[s])
        kept = four._ALL * four._ONES
        for c in rng.permutation(16).tolist():
            want = has_unique_solution_without(grid, c, grid[c])
            rest = four._blocks()[s][c] & kept
            got = ((rest | four._GUARD) - four._ONES) & four._GUARD == four._GUARD
            assert got == want, (s, c, grid)
            if want:
                grid[c] = 0
                kept ^= four._ONES << c


@pytest.mark.parametrize("seed", [0, 1, 5, 99, 2**31 + 3])
def test_four_shuffle_is_numpys_permutation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    draw = seeded_stream(seed).words32().__next__
    for n in (16, 2, 3, 4, 1, 0, 5, 16, 3, 2, 4, 9):
        assert four.shuffle(draw, n) == rng.permutation(n).tolist(), n


def test_four_words32_is_next32_and_leaves_the_stream() -> None:
    stream = seeded_stream(12)
    stream.next32()  # an upper half is buffered
    before = stream.bit_state()
    words = stream.words32()
    got = [next(words) for _ in range(9)]
    assert stream.bit_state() == before
    assert got == [stream.next32() for _ in range(9)]


@pytest.mark.parametrize(
    "entropy",
    [(0,), (5, 0), (1, 2), (2**40, 3), (2**32 - 1,), (1, 2, 3, 4), (2**64 + 5, 1), (1, 2, 3, 4, 5)],
)
def test_four_entropy_stream_is_default_rng(entropy: tuple[int, ...]) -> None:
    stream = entropy_stream(entropy)
    assert isinstance(stream, PCG64Stream)
    assert stream.bit_state() == np.random.default_rng(list(entropy)).bit_generator.state


def test_four_entropy_stream_refuses_negative_entropy() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        entropy_stream((3, -1))


@pytest.mark.parametrize("buffered", [False, True])
def test_integers2_is_two_integers_calls(buffered: bool) -> None:
    rng = np.random.default_rng(4)
    # 2**32 - 1 and 2**31 + 1 make the one-draw path fall back often (leftover < n)
    sizes = [2, 3, 7, 16, 1, 2**31 + 1, 2**32 - 1, 2**32, 100_000]
    for seed in rng.integers(0, 2**32, size=400).tolist():
        n, m = (sizes[i] for i in rng.integers(0, len(sizes), size=2))
        a, b = seeded_stream(seed), seeded_stream(seed)
        if buffered:
            a.next32(), b.next32()
        want = (b.integers(n), b.integers(m))
        assert a.integers2(n, m) == want, (seed, n, m)
        assert a.bit_state() == b.bit_state()
