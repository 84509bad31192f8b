"""Stable seeds and disjoint splits.

Everything random in an environment flows from ``env.np_random``, which
``gymnasium.Env.reset(seed=...)`` creates.  This module adds the two things Gymnasium
does not provide:

* **Stable derived seeds.**  :func:`derive_seed` hashes its arguments with BLAKE2b,
  so the same arguments give the same seed in every process, on every platform and
  whatever ``PYTHONHASHSEED`` is (Python's ``hash`` is salted per process; RAGEN's
  retry seed ``abs(hash(str(seed)))`` is therefore not reproducible).
* **Disjoint splits by construction.**  :func:`instance_split` assigns every
  *instance* (through a canonical byte key such as the Sokoban room layout) to exactly
  one of ``train`` / ``validation`` / ``test`` by a keyed hash.  A generator asked for a
  split rejects instances whose key belongs to another split, so no instance can ever
  appear in two splits, whatever seeds are used.  Seeds alone cannot give this: two
  different seeds may well generate the same small puzzle.

The scheme, documented in ``docs/envs/README.md`` ("Seeds and splits"): item ``i`` of
split ``s`` is ``make(id, split=s).reset(seed=i)``.  Procedural environments draw a
64-bit base seed from ``np_random`` and run attempt ``k`` of the generator on
``numpy.random.default_rng([base, k])`` until an attempt succeeds and lands in the
requested split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import pcg64
from .pcg64 import _STATE, PCG64Stream, entropy_stream, seeded_stream

T = TypeVar("T")

#: The three splits, in order.
SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: Share of the instance space that belongs to each split (by keyed hash).
SPLIT_FRACTIONS: dict[str, float] = {"train": 0.8, "validation": 0.1, "test": 0.1}

_SPLIT_PERSON = b"ragen-split-v0"  # BLAKE2b personalisation; changing it reshuffles splits


class GenerationError(RuntimeError):
    """A procedural generator found no valid instance within its attempt budget."""


def _canonical(parts: tuple[Any, ...]) -> bytes:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()


def derive_seed(*parts: Any) -> int:
    """Return a 63-bit seed that depends only on ``parts`` (JSON-serialisable values).

    Uses BLAKE2b over the canonical JSON encoding of ``parts``; stable across
    processes, platforms and ``PYTHONHASHSEED``.
    """
    digest = hashlib.blake2b(_canonical(parts), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def split_position(key: bytes | str) -> float:
    """Map an instance key to a number in ``[0, 1)`` by keyed BLAKE2b."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    digest = hashlib.blake2b(key, digest_size=8, person=_SPLIT_PERSON).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def instance_split(key: bytes | str) -> str:
    """Return the split (``"train"``, ``"validation"`` or ``"test"``) an instance belongs to.

    ``key`` is a canonical encoding of the instance (equal instances must give equal
    keys).  The first 80% of the hash range is ``train``, then 10% ``validation``, then
    10% ``test`` (:data:`SPLIT_FRACTIONS`).
    """
    pos = split_position(key)
    acc = 0.0
    for name in SPLITS:
        acc += SPLIT_FRACTIONS[name]
        if pos < acc:
            return name
    return SPLITS[-1]


def in_split(key: bytes | str, split: str | None) -> bool:
    """True when ``split`` is ``None`` (no constraint) or the instance belongs to it."""
    return split is None or instance_split(key) == split


def attempt_rng(base_seed: int, attempt: int) -> np.random.Generator:
    """The generator for attempt ``attempt`` of an instance with base seed ``base_seed``.

    ``numpy.random.default_rng([base_seed, attempt])`` (a ``SeedSequence`` over both
    integers), which is stable across platforms and NumPy versions that keep PCG64.
    """
    return np.random.default_rng([int(base_seed), int(attempt)])


def attempt_stream(base_seed: int, attempt: int) -> PCG64Stream:
    """:func:`attempt_rng`'s stream without the NumPy objects: a pure-Python
    :class:`~ragen_envs.pcg64.PCG64Stream` with the same state, so the same draws for
    the methods it has (``integers``, ``random``, ``permutation``).

    A base seed of two uint32 words (``2**32 <= base_seed < 2**64``, all but one in
    ``2**31`` of :func:`sample_instance`'s) with a one-word attempt goes straight to the
    compiled three-word hash (:data:`ragen_envs.pcg64._STATE`), skipping
    :func:`~ragen_envs.pcg64.entropy_stream`'s word split (the same words).
    """
    if type(base_seed) is int and type(attempt) is int and _M32 < base_seed <= _M64:
        if 0 <= attempt <= _M32:
            return PCG64Stream(*_STATE[3](base_seed & _M32, base_seed >> 32, attempt))
    return entropy_stream((int(base_seed), int(attempt)))


_M32, _M64 = 0xFFFFFFFF, (1 << 64) - 1
#: ``Generator.integers`` bound of :func:`sample_instance`'s base seed (``0 <= base < it``).
BASE_BOUND = 2**63 - 1

#: ``(first seed, rows)`` of :func:`first_attempt`'s block: per seed ``(state, inc,
#: has_uint32, uinteger, base, attempt-0 state, attempt-0 inc)``.  One object, replaced
#: whole (a thread always reads a start and the rows that belong to it).
_first_cache: tuple[int, list[tuple[int, ...]]] = (-1, [])
_first_last = -2  # only decides whether to compute a block (a race costs time, never values)


def _first_block(start: int, n: int) -> list[tuple[int, ...]]:
    """:func:`first_attempt`'s rows for seeds ``start .. start + n - 1``: the seeded
    streams from :func:`ragen_envs.pcg64._words_block`, each stream's base draw in
    Python, and the attempt-0 entropies ``[base, 0]`` hashed together by
    :func:`ragen_envs.pcg64.hash_block` (a base below ``2**32``, one word, by
    :func:`attempt_stream`)."""
    rows: list[tuple[int, ...]] = []
    for words in pcg64._words_block(start, n):
        stream = PCG64Stream.from_words(words)
        base = stream.integers(BASE_BOUND)
        rows.append((stream.state, stream.inc, stream.has_uint32, stream.uinteger, base))
    return _with_attempt0(rows)


def _with_attempt0(rows: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Each row ``(..., base)`` extended by ``(state, inc)`` of ``attempt_stream(base,
    0)``: the two-word bases' three-word entropies ``[base & M32, base >> 32, 0]`` hashed
    together by :func:`ragen_envs.pcg64.hash_block`, a one-word base alone."""
    bases = np.array([r[-1] for r in rows], dtype=np.uint64)
    lo = (bases & np.uint64(_M32)).astype(np.uint32)
    hi = (bases >> np.uint64(32)).astype(np.uint32)
    hashed = pcg64.hash_block([lo, hi, np.zeros(len(rows), dtype=np.uint32)])
    out = []
    for row, words in zip(rows, hashed):
        base = row[-1]
        first = attempt_stream(base, 0) if base <= _M32 else PCG64Stream.from_words(words)
        out.append((*row, first.state, first.inc))
    return out


def first_attempt(seed: int) -> tuple[PCG64Stream, int, PCG64Stream]:
    """The start of :func:`sample_instance` (``streams=True``) on ``reset(seed=seed)``'s
    fresh stream: ``(the seeded stream after the base draw, base seed, attempt 0's
    stream)``, i.e. ``stream = seeded_stream(seed)``, ``base = stream.integers(BASE_BOUND)``,
    ``attempt_stream(base, 0)``.

    Seeds that follow one another (``0, 1, 2, ...``) take these from a block of
    :data:`ragen_envs.pcg64.BLOCK` seeds computed at once, the attempt-0 hash in NumPy
    (about half of what one seed costs alone); others are computed alone.  Either way
    the values are those of the definition above (tested), in every process.

    Raises:
        ValueError: ``seed`` is negative (as NumPy does).
    """
    global _first_cache, _first_last
    start, rows = _first_cache
    i = seed - start
    if not 0 <= i < len(rows) and 0 <= seed <= _M32 and seed == _first_last + 1:
        rows = _first_block(seed, min(pcg64.BLOCK, _M32 + 1 - seed))
        _first_cache = (seed, rows)
        i = 0
    _first_last = seed
    if 0 <= i < len(rows):
        state, inc, has, word, base, a_state, a_inc = rows[i]
        return PCG64Stream(state, inc, has, word), base, PCG64Stream(a_state, a_inc)
    stream = seeded_stream(seed)
    base = stream.integers(BASE_BOUND)
    return stream, base, attempt_stream(base, 0)


def sample_instance(
    np_random: np.random.Generator | PCG64Stream,
    build: Callable[[Any], T | None],
    *,
    max_attempts: int,
    fallback: Callable[[], T] | None = None,
    streams: bool = False,
) -> tuple[T, int]:
    """Generate one instance with bounded, stably seeded retries.

    Args:
        np_random: the environment's generator, or its seeded
            :class:`~ragen_envs.pcg64.PCG64Stream` (the same draw); exactly one 63-bit
            base seed is drawn from it, so item ``i`` of a seeded stream needs no other
            items.
        build: builds an instance from a generator, or returns ``None`` when this
            attempt failed (no valid room, wrong split, ...).
        max_attempts: attempts before giving up.
        fallback: called when every attempt failed; if ``None`` a
            :class:`GenerationError` is raised instead.
        streams: hand ``build`` :func:`attempt_stream` (a pure-Python PCG64 stream, no
            NumPy objects) instead of :func:`attempt_rng`; the draws are the same.

    Returns:
        ``(instance, attempts_used)``.
    """
    if isinstance(np_random, PCG64Stream):
        base = np_random.integers(BASE_BOUND)  # = Generator.integers(0, 2**63 - 1)
    else:
        base = int(np_random.integers(0, BASE_BOUND))
    make = attempt_stream if streams else attempt_rng
    for attempt in range(max_attempts):
        inst = build(make(base, attempt))
        if inst is not None:
            return inst, attempt + 1
    if fallback is None:
        raise GenerationError(f"no valid instance after {max_attempts} attempts (base seed {base})")
    return fallback(), max_attempts
