"""Which (x, z) pairs enter the ℓ matrix: the first-turn and trajectory-uniform samplers.

Both follow RAGEN-2 (arXiv 2604.06268) and draw from a seeded ``numpy.random.Generator``
(RAGEN uses the global ``np.random`` state; we never do).

* **first_turn**: rows are valid first-turn samples (turn 1 with a non-empty Z), up to
  ``num_samples`` drawn without replacement; columns are the *distinct* first-turn
  inputs among the drawn rows (RAGEN: one column per env group, with an error when a
  group's prompts differ; keying columns by the prompt itself makes that error
  impossible and merges groups that happen to share a prompt).
* **trajectory**: draw a trajectory uniformly among those with at least one valid
  sample, then one of its valid turns uniformly, ``min(num_samples, #valid samples)``
  times with replacement; every draw is its own column (M = N), and identical prompts
  are recognised by signature in the retrieval metrics.

A :class:`ScoringProblem` scores each distinct X once and maps columns onto them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .samples import ReasoningSample

SAMPLERS = ("first_turn", "trajectory")


@dataclass(frozen=True)
class ScoringProblem:
    """Rows, columns and their inputs for one sampler.

    Attributes:
        sampler: ``"first_turn"`` or ``"trajectory"``.
        rows: the ``N`` drawn samples (``rows[i].z`` is row i's reasoning).
        xs: the ``U`` distinct input token sequences to score.
        column_x: ``(M,)`` index into ``xs`` of each column; it is also the column's
            prompt signature (equal inputs ⇔ equal index).
        own: ``(N,)`` column of each row's own input.
    """

    sampler: str
    rows: list[ReasoningSample]
    xs: list[tuple[int, ...]]
    column_x: np.ndarray
    own: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_columns(self) -> int:
        return int(self.column_x.size)

    def own_x(self) -> np.ndarray:
        """``(N,)`` index into ``xs`` of each row's own input."""
        return self.column_x[self.own]


def _index_inputs(rows: Sequence[ReasoningSample]) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Distinct inputs in order of first appearance, and each row's index into them."""
    index: dict[tuple[int, ...], int] = {}
    of_row = np.array([index.setdefault(r.x, len(index)) for r in rows], dtype=np.int64)
    return list(index), of_row  # dicts keep insertion order, which is index order


def first_turn_problem(
    samples: Sequence[ReasoningSample], num_samples: int | None, rng: np.random.Generator
) -> ScoringProblem:
    """RAGEN's first-turn sampler (module docstring).  ``num_samples=None`` keeps all."""
    pool = [s for s in samples if s.turn == 1 and s.valid]
    if num_samples is not None and num_samples < len(pool):
        pick = np.sort(rng.choice(len(pool), size=num_samples, replace=False))
        pool = [pool[int(i)] for i in pick]
    xs, of_row = _index_inputs(pool)
    return ScoringProblem("first_turn", pool, xs, np.arange(len(xs), dtype=np.int64), of_row)


def trajectory_problem(
    samples: Sequence[ReasoningSample], num_samples: int | None, rng: np.random.Generator
) -> ScoringProblem:
    """RAGEN's trajectory-uniform sampler (module docstring).  ``num_samples=None``
    draws as many times as there are valid samples."""
    by_episode: dict[int, list[ReasoningSample]] = {}
    for s in samples:
        if s.valid:
            by_episode.setdefault(s.episode, []).append(s)
    episodes = [by_episode[k] for k in sorted(by_episode)]
    total = sum(len(e) for e in episodes)
    draws = total if num_samples is None else min(num_samples, total)
    rows: list[ReasoningSample] = []
    for _ in range(draws):
        turns = episodes[int(rng.integers(len(episodes)))]
        rows.append(turns[int(rng.integers(len(turns)))])
    xs, of_row = _index_inputs(rows)
    return ScoringProblem("trajectory", rows, xs, of_row, np.arange(len(rows), dtype=np.int64))


def make_problem(
    sampler: str,
    samples: Sequence[ReasoningSample],
    num_samples: int | None,
    rng: np.random.Generator,
) -> ScoringProblem:
    """Dispatch on the sampler name.

    Raises:
        ValueError: unknown sampler.
    """
    if sampler == "first_turn":
        return first_turn_problem(samples, num_samples, rng)
    if sampler == "trajectory":
        return trajectory_problem(samples, num_samples, rng)
    raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
