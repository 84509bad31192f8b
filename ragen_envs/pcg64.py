"""NumPy's seeded PCG64 stream in pure Python, bit for bit (the cheap start of a reset).

``gymnasium.Env.reset(seed=k)`` builds ``Generator(PCG64(SeedSequence(k)))``: about 6 µs
of NumPy object construction (``SeedSequence`` hashes its entropy on NumPy scalars under
``np.errstate``), more than the rest of a Bandit reset.  A reset that draws only a few
small integers does not need the objects, only the numbers: :func:`seeded_stream` gives
the same 128-bit PCG64 state and :class:`PCG64Stream` the same draws, computed with
Python integers, and :meth:`PCG64Stream.generator` builds the NumPy ``Generator`` at
exactly the stream's current position when code asks for ``env.np_random``
(:class:`ragen_envs.core.TextEnv` does this lazily).

Sources (NumPy 2, ``numpy/random``): ``bit_generator.pyx`` (``SeedSequence``:
``hashmix``, ``mix``, ``mix_entropy``, ``generate_state``, constants ``INIT_A``,
``MULT_A``, ``INIT_B``, ``MULT_B``, ``MIX_MULT_L``, ``MIX_MULT_R``, ``XSHIFT``),
``_pcg64.pyx`` (``PCG64.__init__``: ``generate_state(4, uint64)``, the first two words
the initial state, the last two the sequence), ``src/pcg64/pcg64.h`` (``pcg64_set_seed``,
the XSL-RR output of the stepped state, ``pcg64_next32``'s buffered upper half) and
``src/distributions/distributions.c`` (``random_bounded_uint64_fill``: Lemire's bounded
integers, 32-bit draws for ranges below ``2**32``).  Equality with NumPy is tested on
thousands of seeds (``tests/envs/test_env_speed_paths.py``); the results are a pure
function of the seed, so they are the same in every process.

Sequential seeds (``reset(seed=0)``, ``reset(seed=1)``, ...: a data set's items, a
rollout's episodes) hash a block of :data:`BLOCK` seeds at once with NumPy array
arithmetic (~0.7 µs a seed instead of ~4.5 µs one at a time); a seed met out of
sequence is hashed alone.  Only seeds below ``2**32`` (one entropy word) take these
paths; larger seeds use NumPy's own ``SeedSequence``.  A reset that needs only the
stream's first 64-bit draw (Bandit) takes :func:`seeded_first`: for a seed out of
sequence NumPy's ``SeedSequence`` mixes the pool in C and one straight-line function
finishes the state and the draw.  :func:`hash_block` hashes many entropies of 1-4 words
at once (:func:`ragen_envs.seeding.first_attempt` uses it for the attempt-0 streams of
sequential seeds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
#: PCG64's 128-bit LCG multiplier (``PCG_DEFAULT_MULTIPLIER_128``).
PCG64_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_TWICE = (1 << 64) + 1  # x * _TWICE: a 64-bit x next to itself (rotations by shifting)

# SeedSequence constants (numpy/random/bit_generator.pyx).
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL = 4
#: The low 16 bits of each 32-bit field of a 128-bit int.
_LOW16 = sum(0xFFFF << (32 * k) for k in range(4))


def _hash_consts(init: int, mult: int, n: int) -> list[tuple[int, int]]:
    """``(xor, multiplier)`` of the first ``n`` hashmix calls: the running hash constant
    is multiplied by ``mult`` at every call whatever the data, so both are fixed."""
    out, h = [], init
    for _ in range(n):
        nxt = (h * mult) & _M32
        out.append((h, nxt))
        h = nxt
    return out


#: The 4 initial + 12 pairwise hashmix calls of ``mix_entropy`` over a 4-word pool.
_HA = _hash_consts(_INIT_A, _MULT_A, _POOL + _POOL * (_POOL - 1))
#: The 8 calls of ``generate_state(4, uint64)`` (8 uint32 words).
_HB = _hash_consts(_INIT_B, _MULT_B, 8)
#: The pool words mixed from a zero entropy word (words 1-3 of a one-word entropy).
_ZERO = tuple((((0 ^ x) * m) & _M32) ^ ((((0 ^ x) * m) & _M32) >> 16) for x, m in _HA[1:_POOL])
#: ``(source, destination, hashmix index)`` of mix_entropy's pairwise rounds, in order.
_ROUNDS = tuple((s, d) for s in range(_POOL) for d in range(_POOL) if s != d)


def _straight_line(n: int, *, stream: bool) -> Callable[..., tuple[int, ...]]:
    """Compile ``SeedSequence(entropy).generate_state(4, np.uint64)`` for an entropy of
    ``n`` uint32 words (``1 <= n <= 4``) into one straight-line function of them.

    The same arithmetic as NumPy's ``mix_entropy`` and ``generate_state`` (see the
    module docstring), unrolled from :data:`_HA`, :data:`_HB` and :data:`_ROUNDS` with
    the constants written in: a missing word's hash is its :data:`_ZERO` value, and
    ``_MIX_L`` times it is folded where a round mixes into it.  With ``stream`` the
    function returns the ``(state, inc)`` of :meth:`PCG64Stream.from_words` instead of
    the four words.  Unrolled, a seed hashes in about 60 % of the time of the loop over
    the tables (Python 3.11; a one-word seed in about 2-3 µs).
    """
    lines = [f"def words({', '.join(f'e{i}' for i in range(n))}):"]
    constant = {}
    for i in range(_POOL):
        if i < n:
            x, m = _HA[i]
            lines.append(f"    v = ((e{i} ^ {x}) * {m}) & {_M32}; p{i} = v ^ (v >> 16)")
        else:
            constant[i] = _ZERO[i - 1]
    for k, (src, dst) in enumerate(_ROUNDS, start=_POOL):
        x, m = _HA[k]
        mixed = (_MIX_L * constant.pop(dst)) & _M32 if dst in constant else f"{_MIX_L} * p{dst}"
        lines.append(f"    v = ((p{src} ^ {x}) * {m}) & {_M32}")
        lines.append(f"    r = ({mixed} - {_MIX_R} * (v ^ (v >> 16))) & {_M32}")
        lines.append(f"    p{dst} = r ^ (r >> 16)")
    lines += _output_lines(stream)
    namespace: dict[str, Any] = {}
    kind = "PCG64 state" if stream else "SeedSequence words"
    exec(compile("\n".join(lines), f"<{kind} of {n} entropy words>", "exec"), namespace)
    return namespace["words"]


def _output_lines(stream: bool, *, first: bool = False) -> list[str]:
    """The straight-line tail of :func:`_straight_line` from the mixed pool ``p0..p3``:
    ``generate_state(4, np.uint64)``'s 8 hashmix calls (:data:`_HB`), and with ``stream``
    :meth:`PCG64Stream.from_words` on the words; with ``first`` also the stream's first
    :meth:`PCG64Stream.next64` (``(state after it, inc, the draw)``; the two LCG steps
    of seeding and drawing folded into one: ``s1 = (inc + init) * MULT**2 + inc *
    (MULT + 1)`` modulo ``2**128``)."""
    lines = []
    if stream:  # from_words: inc = seq << 1 | 1, state = ((inc + initstate) * MULT + inc)
        # The words' final xorshift (w = v ^ v >> 16) is done on the four packed into
        # 128 bits, each 32-bit field shifted alone: V ^ ((V >> 16) & _LOW16).
        for i, (x, m) in enumerate(_HB):
            lines.append(f"    v{i} = ((p{i & 3} ^ {x}) * {m}) & {_M32}")
        lines.append("    init = v1 << 96 | v0 << 64 | v3 << 32 | v2")
        lines.append(f"    init ^= (init >> 16) & {_LOW16}")
        lines.append("    seq = v5 << 96 | v4 << 64 | v7 << 32 | v6")
        lines.append(f"    inc = ((seq ^ ((seq >> 16) & {_LOW16})) << 1 | 1) & {_M128}")
        if first:
            mult2, mult1 = PCG64_MULT * PCG64_MULT & _M128, PCG64_MULT + 1
            lines.append(f"    s = ((inc + init) * {mult2} + inc * {mult1}) & {_M128}")
            lines.append("    hi = s >> 64")
            lines.append(
                f"    return s, inc, ((((hi ^ s) & {_M64}) * {_TWICE}) >> (hi >> 58)) & {_M64}"
            )
        else:
            lines.append(f"    return ((inc + init) * {PCG64_MULT} + inc) & {_M128}, inc")
    else:
        for i, (x, m) in enumerate(_HB):
            lines.append(f"    v = ((p{i & 3} ^ {x}) * {m}) & {_M32}; w{i} = v ^ (v >> 16)")
        lines.append("    return (w1 << 32 | w0, w3 << 32 | w2, w5 << 32 | w4, w7 << 32 | w6)")
    return lines


def _pool_first() -> Callable[[list[int]], tuple[int, int, int]]:
    """``(state after the first draw, inc, the first draw)`` of the PCG64 seeded by a
    ``SeedSequence`` whose mixed pool (``SeedSequence.pool``, four uint32 words) is
    ``pool``: :func:`_output_lines` as one function."""
    lines = ["def first(pool):", "    p0, p1, p2, p3 = pool", *_output_lines(True, first=True)]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), "<first draw of a mixed pool>", "exec"), namespace)
    return namespace["first"]


#: ``SeedSequence(seed).generate_state(4, np.uint64)`` for ``0 <= seed < 2**32``.
_words_one = _straight_line(1, stream=False)
#: ``_STATE[n](*words)``: ``(state, inc)`` of the PCG64 seeded by an ``n``-word entropy.
_STATE = {n: _straight_line(n, stream=True) for n in range(1, _POOL + 1)}
#: ``_FIRST(SeedSequence(seed).pool.tolist())``: see :func:`seeded_first`.
_FIRST = _pool_first()
_SeedSequence = np.random.SeedSequence


def _words_block(start: int, n: int) -> list[list[int]]:
    """:func:`_words_one` of seeds ``start .. start + n - 1`` with NumPy uint32 arrays
    (array arithmetic wraps modulo ``2**32`` as the C code's ``uint32_t`` does)."""
    seeds = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
    return hash_block([seeds])


def hash_block(columns: Sequence[np.ndarray]) -> list[list[int]]:
    """``SeedSequence(row).generate_state(4, np.uint64)`` of every row of an entropy
    given as 1 to 4 columns of uint32 words (row ``i`` is ``[c[i] for c in columns]``),
    with NumPy array arithmetic: the words of many entropies in one pass (~1 µs a row
    for a few hundred rows, against ~3-5 µs a row in straight-line Python).

    The arithmetic is :func:`_straight_line`'s, element-wise (uint32 arrays wrap modulo
    ``2**32`` as the C code's ``uint32_t`` does).

    Raises:
        ValueError: no column, or more than four.
    """
    if not 1 <= len(columns) <= _POOL:
        raise ValueError(f"1 to {_POOL} entropy words, got {len(columns)}")
    u = np.uint32
    n = len(columns[0])

    def hashmix(v: np.ndarray, k: int) -> np.ndarray:
        x, m = _HA[k]
        v = (v ^ u(x)) * u(m)
        return v ^ (v >> u(16))

    pool = [hashmix(np.asarray(c, dtype=u), i) for i, c in enumerate(columns)]
    pool += [np.full(n, z, dtype=u) for z in _ZERO[len(columns) - 1 :]]
    for k, (s, d) in enumerate(_ROUNDS, start=_POOL):
        r: np.ndarray = u(_MIX_L) * pool[d] - u(_MIX_R) * hashmix(pool[s], k)
        pool[d] = r ^ (r >> u(16))
    out = np.empty((n, 8), dtype=u)
    for i, (x, m) in enumerate(_HB):
        v = (pool[i & 3] ^ u(x)) * u(m)
        out[:, i] = v ^ (v >> u(16))
    return out.astype("<u4").view("<u8").tolist()


#: Seeds hashed together when a seed follows the previous one.
BLOCK = 256
#: ``(first seed, words of BLOCK seeds)``: one object, replaced whole, so a thread
#: always reads a start and the words that belong to it.
_cache: tuple[int, list[list[int]]] = (-1, [])
_last_seed = -2  # only decides whether to hash a block (a race costs time, never values)


def entropy_stream(entropy: tuple[int, ...] | list[int]) -> PCG64Stream:
    """The stream of ``Generator(PCG64(SeedSequence(list(entropy))))``, e.g.
    ``entropy_stream((base, k))`` for ``default_rng([base, k])``
    (:func:`ragen_envs.seeding.attempt_stream`).

    Each non-negative int becomes its little-endian uint32 words (``0`` one zero word),
    as NumPy's ``_coerce_to_uint32_array`` does; up to four words in all are hashed here,
    more by NumPy's ``SeedSequence``.

    Raises:
        ValueError: an entry is negative (as NumPy does).
    """
    words: list[int] = []
    for n in entropy:
        if n < 0:
            raise ValueError(f"entropy must be non-negative, got {n}")
        words.append(n & _M32)
        n >>= 32
        while n:
            words.append(n & _M32)
            n >>= 32
    if not words or len(words) > _POOL:
        seq = np.random.SeedSequence([int(n) for n in entropy])
        return PCG64Stream.from_words(tuple(seq.generate_state(4, np.uint64).tolist()))
    return PCG64Stream(*_STATE[len(words)](*words))


def _block_words(seed: int) -> list[int] | None:
    """``seed``'s words from the block of sequential seeds (hashing the next
    :data:`BLOCK` seeds when ``seed`` follows the previous one), or ``None`` for a seed
    met out of sequence (negative, above ``2**32 - 1``, or not the next one)."""
    global _cache, _last_seed
    start, block = _cache
    i = seed - start
    if 0 <= i < len(block):
        _last_seed = seed
        return block[i]
    if 0 <= seed <= _M32:
        if seed == _last_seed + 1:  # a sequence: hash the next BLOCK seeds at once
            block = _words_block(seed, min(BLOCK, _M32 + 1 - seed))
            _cache = (seed, block)
            _last_seed = seed
            return block[0]
        _last_seed = seed
    return None


def seed_words(seed: int) -> tuple[int, ...]:
    """``numpy.random.SeedSequence(seed).generate_state(4, numpy.uint64)`` as ints.

    Args:
        seed: a non-negative ``int``.

    Raises:
        ValueError: ``seed`` is negative (as NumPy does).
    """
    words = _block_words(seed)
    if words is not None:
        return tuple(words)
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    if seed > _M32:
        return tuple(np.random.SeedSequence(seed).generate_state(4, np.uint64).tolist())
    return _words_one(seed)


class PCG64Stream:
    """NumPy's ``PCG64`` state and the draws a reset needs, on Python integers.

    Attributes:
        state, inc: the 128-bit LCG state and increment (``bit_generator.state["state"]``).
        has_uint32, uinteger: the buffered upper half of the last 64-bit draw used for
            32-bit draws (``pcg64_next32``), as in NumPy's state dict.

    Every method advances the state exactly as the NumPy call it names does, so
    :meth:`generator` continues the same stream.
    """

    __slots__ = ("state", "inc", "has_uint32", "uinteger")

    def __init__(self, state: int, inc: int, has_uint32: int = 0, uinteger: int = 0) -> None:
        self.state = state
        self.inc = inc
        self.has_uint32 = has_uint32
        self.uinteger = uinteger

    @classmethod
    def from_words(cls, words: Sequence[int]) -> PCG64Stream:
        """The stream of ``PCG64(seed_sequence)`` whose ``generate_state(4, uint64)`` is
        ``words`` (``pcg64_set_seed``: state 0, ``inc = seq << 1 | 1``, step, add the
        initial state, step)."""
        inc = (((words[2] << 64 | words[3]) << 1) | 1) & _M128
        state = (((inc + (words[0] << 64 | words[1])) & _M128) * PCG64_MULT + inc) & _M128
        return cls(state, inc)

    def next64(self) -> int:
        """``bit_generator.random_raw()``: step, then the XSL-RR output of the new state."""
        s = self.state = (self.state * PCG64_MULT + self.inc) & _M128
        hi = s >> 64
        # rotate right by hi >> 58: the 64-bit value doubled (x * (2**64 + 1)), shifted
        return ((((hi ^ s) & _M64) * _TWICE) >> (hi >> 58)) & _M64

    def next32(self) -> int:
        """NumPy's ``next_uint32``: the buffered upper half, else the lower half of a new
        64-bit draw (buffering its upper half)."""
        if self.has_uint32:
            self.has_uint32 = 0
            return self.uinteger
        n = self.next64()
        self.has_uint32 = 1
        self.uinteger = n >> 32
        return n & _M32

    def random(self) -> float:
        """``Generator.random()``: ``(next64 >> 11) * 2**-53``."""
        return (self.next64() >> 11) * (1.0 / 9007199254740992.0)

    def integers(self, n: int) -> int:
        """``Generator.integers(n)`` (int64, ``0 <= value < n``) for ``1 <= n <= 2**64``:
        Lemire's multiply-and-reject on 32-bit draws when ``n - 1 < 2**32``, else on
        64-bit draws (``random_bounded_uint64_fill``)."""
        rng = n - 1
        if rng == 0:
            return 0
        if rng <= _M32:
            if rng == _M32:
                return self.next32()
            m = self.next32() * n
            if (m & _M32) < n:
                threshold = (_M32 - rng) % n
                while (m & _M32) < threshold:
                    m = self.next32() * n
            return m >> 32
        if rng == _M64:
            return self.next64()
        m = self.next64() * n
        if (m & _M64) < n:
            threshold = (_M64 - rng) % n
            while (m & _M64) < threshold:
                m = self.next64() * n
        return m >> 64

    def integers2(self, n: int, m: int) -> tuple[int, int]:
        """``(integers(n), integers(m))``, the two calls in turn, for ``2 <= n, m < 2**32``.

        Two 32-bit Lemire draws are the two halves of one 64-bit draw when no half is
        buffered: taken here from one :meth:`next64` when both are accepted at once
        (leftover ``>= n``; otherwise, with probability below ``(n + m) / 2**32``, the
        calls are made one by one from the saved state).
        """
        if not self.has_uint32 and 2 <= n <= _M32 and 2 <= m <= _M32:
            state = self.state
            x = self.next64()
            a = (x & _M32) * n
            b = (x >> 32) * m
            if (a & _M32) >= n and (b & _M32) >= m:
                self.uinteger = x >> 32  # next32's buffer, its upper half used
                return a >> 32, b >> 32
            self.state = state
        return self.integers(n), self.integers(m)

    def words32(self) -> Iterator[int]:
        """The stream's 32-bit draws one after another, as repeated :meth:`next32` calls
        give them, from a copy of the state: ``self`` does not advance.  For a stream
        used once and dropped (an attempt's, :func:`ragen_envs.seeding.attempt_stream`);
        :meth:`next64`'s step and output are written out here (a generator's locals are
        the fastest state Python has)."""
        state, inc = self.state, self.inc
        mult, m128, m64, m32, twice = PCG64_MULT, _M128, _M64, _M32, _TWICE  # locals
        if self.has_uint32:
            yield self.uinteger
        while True:
            state = (state * mult + inc) & m128
            hi = state >> 64
            x = ((((hi ^ state) & m64) * twice) >> (hi >> 58)) & m64  # see next64
            yield x & m32
            yield x >> 32

    def bit_state(self) -> dict[str, object]:
        """The stream as NumPy's ``PCG64.state`` dict."""
        return {
            "bit_generator": "PCG64",
            "state": {"state": self.state, "inc": self.inc},
            "has_uint32": self.has_uint32,
            "uinteger": self.uinteger,
        }

    def generator(self) -> np.random.Generator:
        """A NumPy ``Generator(PCG64)`` at this stream's current position."""
        bits = np.random.PCG64(0)
        bits.state = cast(Any, self.bit_state())  # NumPy types the setter as a TypedDict
        return np.random.Generator(bits)


def seeded_stream(seed: int) -> PCG64Stream:
    """The stream of ``numpy.random.Generator(PCG64(SeedSequence(seed)))``, i.e. of
    ``gymnasium.utils.seeding.np_random(seed)`` (Gymnasium's ``reset(seed=seed)``).

    Raises:
        ValueError: ``seed`` is negative (as NumPy does).
    """
    words = _block_words(seed)
    if words is not None:
        return PCG64Stream.from_words(words)
    if 0 <= seed <= _M32:
        return PCG64Stream(*_STATE[1](seed))
    return PCG64Stream.from_words(seed_words(seed))


def seeded_first(seed: int, scratch: np.ndarray | None = None) -> tuple[int, int, int]:
    """``(state, inc, x)``: the stream of :func:`seeded_stream` after its first
    :meth:`PCG64Stream.next64`, and that draw ``x``; for a reset whose draws come from
    one 64-bit draw (``PCG64Stream(state, inc)`` continues the stream; a 32-bit draw
    after it would use the upper half ``x >> 32`` as NumPy's ``uinteger``).

    A seed out of sequence (``0 <= seed < 2**32``) is mixed by NumPy's own
    ``SeedSequence`` (C code, its ``pool`` read back: ~2.2-2.6 µs instead of ~3.5 µs
    for the same mixing in Python) and the rest is one straight-line function
    (:data:`_FIRST`); sequential seeds take the block path of :func:`seeded_stream`.

    Args:
        seed: a non-negative ``int``.
        scratch: a one-element uint32 array the caller owns (not shared between
            threads): the seed is written there and handed to ``SeedSequence`` as an
            array, which skips NumPy's int-to-words conversion (~0.4 µs); the same
            entropy words, so the same stream.

    Raises:
        ValueError: ``seed`` is negative (as NumPy does).
    """
    global _last_seed
    start, block = _cache
    if not 0 <= seed - start < len(block) and 0 <= seed <= _M32 and seed != _last_seed + 1:
        _last_seed = seed  # out of sequence (_block_words' test, inlined)
        if scratch is None:
            return _FIRST(_SeedSequence(seed).pool.tolist())
        scratch[0] = seed
        return _FIRST(_SeedSequence(scratch).pool.tolist())
    words = _block_words(seed)
    stream = PCG64Stream.from_words(seed_words(seed) if words is None else words)
    x = stream.next64()
    return stream.state, stream.inc, x
