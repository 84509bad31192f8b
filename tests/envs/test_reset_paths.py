"""The reset fast paths give exactly what the general paths give.

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


# --------------------------------------------- reset shortcuts
def _digest_of_resets(env_id: str, split: str, seeds: list[int]) -> str:
    """SHA-256 over everything a reset makes observable: observation, info, the Sudoku
    solution, and the generator state after the reset (read on every other seed, so
    both the lazy stream and the built generator are covered)."""
    import hashlib
    import json

    import ragen_envs

    env = ragen_envs.make(env_id, split=split).unwrapped
    h = hashlib.sha256()
    for i, seed in enumerate(seeds):
        obs, info = env.reset(seed=seed)
        rec = [seed, obs, json.dumps(info, sort_keys=True), list(getattr(env, "_solution", ()))]
        if i % 2:
            rec.append(str(env.np_random.bit_generator.state))
        h.update(repr(rec).encode())
    return h.hexdigest()[:16]


def _digest_seeds() -> list[int]:
    rng = np.random.default_rng(2031)
    scattered = rng.integers(0, 2**32, size=60).tolist() + [2**32 + 9, 2**40 + 1]
    return [*range(250, 520), *scattered, *range(2**32 - 40, 2**32 + 3), *range(7, 20)]


# Recorded with the code before this round (75dedad): the seed -> instance mapping.
_RESET_DIGESTS = {
    ("ragen/Sudoku-v0", "train"): "cd31e188bb3b7035",
    ("ragen/Sudoku-v0", "test"): "e4b4f37857e9c250",
    ("ragen/Sudoku-4x4-Hard-v0", "validation"): "92a1189e5c70c9ec",
    ("ragen/Bandit-v0", "train"): "2472207d23ae5c45",
    ("ragen/Bandit-v0", "validation"): "666417d90e12b31d",
}


@pytest.mark.parametrize(("env_id", "split"), list(_RESET_DIGESTS))
def test_reset_digest_is_the_one_before_the_shortcuts(env_id: str, split: str) -> None:
    got = _digest_of_resets(env_id, split, _digest_seeds())
    assert got == _RESET_DIGESTS[env_id, split]


@pytest.mark.parametrize("words", [1, 2, 3, 4])
def test_hash_block_is_seedsequence(words: int) -> None:
    from ragen_envs.pcg64 import hash_block

    rng = np.random.default_rng(words)
    columns = [rng.integers(0, 2**32, size=40, dtype=np.uint64) for _ in range(words)]
    columns[0][:3] = [0, 2**32 - 1, 1]
    got = hash_block([c.astype(np.uint32) for c in columns])
    for i, row in enumerate(got):
        entropy = [int(c[i]) for c in columns]
        want = np.random.SeedSequence(entropy).generate_state(4, np.uint64).tolist()
        assert row == want, entropy
    with pytest.raises(ValueError, match="entropy words"):
        hash_block([])


def _first_attempt_by_definition(seed: int) -> tuple[dict, int, dict]:
    stream = seeded_stream(seed)
    base = stream.integers(2**63 - 1)
    return stream.bit_state(), base, attempt_rng(base, 0).bit_generator.state


@pytest.mark.parametrize(
    "seeds",
    [
        list(range(0, 600)),  # sequential: blocks, and across their ends
        [9, 4, 2**31 + 5, 12, 2**32 - 1, 0, 2**32, 2**45 + 1],  # out of sequence, wide
        list(range(2**32 - 5, 2**32 + 3)),  # a block cut short at the last one-word seed
    ],
    ids=["sequential", "scattered", "top"],
)
def test_first_attempt_is_its_definition(seeds: list[int]) -> None:
    """``first_attempt``: the seeded stream after the base draw, the base seed and the
    attempt-0 stream, the same from a block as one at a time (and as NumPy's)."""
    from ragen_envs.seeding import first_attempt

    for seed in seeds:
        stream, base, attempt = first_attempt(seed)
        got = (stream.bit_state(), base, attempt.bit_state())
        assert got == _first_attempt_by_definition(seed), seed
    with pytest.raises(ValueError, match="non-negative"):
        first_attempt(-3)


def test_first_attempt_block_handles_one_word_bases() -> None:
    """A base seed below ``2**32`` hashes as two words ``[base, 0]``, not three: the
    block's attempt-0 step (``_with_attempt0``) sends those rows to ``attempt_stream``
    (given bases here, since a real one is a 1-in-2**31 event); real block rows carry
    the seeded stream after its base draw."""
    from ragen_envs import seeding

    bases = [0, 5, 2**32 - 1, 2**32, 2**40 + 3, 2**63 - 2]
    for i, row in enumerate(
        seeding._with_attempt0([("row", i, base) for i, base in enumerate(bases)])
    ):
        assert row[:3] == ("row", i, bases[i])
        want = attempt_rng(bases[i], 0).bit_generator.state["state"]
        assert row[3:] == (want["state"], want["inc"]), bases[i]
    for base in bases:
        assert attempt_stream(np.int64(base), 3).bit_state() == (
            attempt_rng(base, 3).bit_generator.state
        )
    assert attempt_stream(2**40, 2**33).bit_state() == attempt_rng(2**40, 2**33).bit_generator.state
    for i, row in enumerate(seeding._first_block(1000, 8)):
        state, inc, has, word, base, a_state, a_inc = row
        assert (a_state, a_inc) == (attempt_stream(base, 0).state, attempt_stream(base, 0).inc)
        assert (
            PCG64Stream(state, inc, has, word).bit_state()
            == (_first_attempt_by_definition(1000 + i)[0])
        )


@pytest.mark.parametrize(
    "seeds",
    [
        list(range(300, 900)),
        np.random.default_rng(5).integers(0, 2**32, size=400).tolist() + [0, 2**32 - 1],
        [2**32, 2**33 + 7, 2**64 + 1],
    ],
    ids=["sequential", "scattered", "wide"],
)
@pytest.mark.parametrize("scratch", [False, True])
def test_seeded_first_is_the_streams_first_draw(seeds: list[int], scratch: bool) -> None:
    from ragen_envs.pcg64 import seeded_first

    buf = np.zeros(1, dtype=np.uint32) if scratch else None
    for seed in seeds:
        rng = np.random.default_rng(seed)
        x = int(rng.bit_generator.random_raw())
        state = rng.bit_generator.state["state"]
        assert seeded_first(seed, buf) == (state["state"], state["inc"], x), seed
    with pytest.raises(ValueError, match="non-negative"):
        seeded_first(-1, buf)


def test_render_fresh_is_render_grid_of_the_givens() -> None:
    from ragen_envs.envs.sudoku.render import render_fresh, render_grid

    rng = np.random.default_rng(3)
    for n in (4, 9):
        for _ in range(200):
            givens = (rng.integers(0, n + 1, size=n * n) * (rng.random(n * n) < 0.6)).tolist()
            assert render_fresh(givens) == render_grid(givens, givens)


def _sudoku_state(env) -> dict:
    state = {k: v for k, v in vars(env).items() if k not in ("_stream", "_gen")}
    for name in ("_status", "_steps", "_return", "_live", "_ready", "_max_steps"):
        state[name] = getattr(env, name)
    state["rng"] = env.np_random.bit_generator.state
    return state


@pytest.mark.parametrize(
    "env_id", ["ragen/Sudoku-v0", "ragen/Sudoku-4x4-Medium-v0", "ragen/Sudoku-4x4-Hard-v0"]
)
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_sudoku_fast_reset_is_the_general_reset(env_id: str, split: str) -> None:
    """Sudoku's direct 4x4 reset sets exactly what TextEnv.reset with Sudoku's hooks
    sets (observation, info, every attribute, the generator), and the episode plays on
    the same from there; seeds in sequence (the block path) and out of it."""
    import ragen_envs
    from ragen_envs.core import TextEnv

    fast = ragen_envs.make(env_id, split=split).unwrapped
    slow = ragen_envs.make(env_id, split=split).unwrapped
    seeds = [*range(120, 190), 2**32 - 1, 2**32 + 4, 77, 3, 2**31 + 11]
    for seed in seeds:
        got = fast.reset(seed=seed)
        want = TextEnv.reset(slow, seed=seed)
        assert got == want, seed
        assert _sudoku_state(fast) == _sudoku_state(slow), seed
        for action in fast.oracle_actions()[:2]:
            assert fast.step(action) == slow.step(action)


def test_sudoku_fast_reset_leaves_other_resets_to_the_general_path() -> None:
    """Options, a negative seed and a 9x9 env take TextEnv.reset (same errors too)."""
    import gymnasium

    import ragen_envs
    from ragen_envs.core import TextEnv

    env = ragen_envs.make("ragen/Sudoku-v0").unwrapped
    fast = env.reset(seed=1, options={"puzzle": "12.4 3.12 21.3 4.21"})
    assert fast[1]["empty_cells"] == 4 and "Empty cells: 4." in fast[0]
    with pytest.raises(gymnasium.error.Error):
        env.reset(seed=-1)
    nine = ragen_envs.make("ragen/Sudoku-9x9-Easy-v0").unwrapped
    other = ragen_envs.make("ragen/Sudoku-9x9-Easy-v0").unwrapped
    assert nine.reset(seed=4) == TextEnv.reset(other, seed=4)


@pytest.mark.parametrize("env_id", ["ragen/Bandit-v0", "ragen/Bandit-PairsAB-v0"])
def test_bandit_fast_reset_with_scattered_seeds_is_the_general_reset(env_id: str) -> None:
    """Bandit's direct reset on seeds out of sequence (``seeded_first``: NumPy's
    ``SeedSequence`` pool, the first draw, both start draws from it) sets what
    TextEnv.reset with Bandit's hooks sets; a changed config is followed."""
    import ragen_envs
    from ragen_envs.core import TextEnv

    fast = ragen_envs.make(env_id).unwrapped
    slow = ragen_envs.make(env_id).unwrapped
    seeds = np.random.default_rng(17).integers(0, 2**32, size=150).tolist() + [2**32 + 1]
    for i, seed in enumerate(seeds):
        if i == 100:  # the per-env cache of starts follows a config change
            fast.config["split"] = slow.config["split"] = "test"
        got = fast.reset(seed=seed)
        want = TextEnv.reset(slow, seed=seed)
        assert got == want, seed
        assert {k: v for k, v in vars(fast).items() if k != "_np_random"} == {
            k: v for k, v in vars(slow).items() if k != "_np_random"
        }
        assert fast.np_random.bit_generator.state == slow.np_random.bit_generator.state
        assert fast.step(fast.oracle_actions()[0]) == slow.step(slow.oracle_actions()[0])
