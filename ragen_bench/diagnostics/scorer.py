"""The scorer protocol: teacher-forced log p(z | x) for every pair of inputs and reasonings.

A *scorer* takes ``M`` inputs ``x_j`` and ``N`` reasoning texts ``z_i``, both as token
ids of one tokenizer, and returns the ``N × M`` matrix of sequence log-probabilities

    ℓ_ij = log p(z_i | x_j) = Σ_t log p(z_i[t] | x_j, z_i[:t])      (natural log, nats)

by teacher forcing (every token of ``z_i`` is fed, none is sampled), plus the token
count of each ``z_i`` so that the per-token mean ``ℓ_ij / |z_i|`` follows.  This is
RAGEN-2's cross-scoring (arXiv 2604.06268 and RAGEN's code: "ℓ_ij = log p(z_i | x_j), teacher-forced ...
Both sum and per-token mean versions are kept").

Implementations: :class:`~ragen_bench.diagnostics.hf_scorer.HFScorer` (a local
transformers model) and
:class:`~ragen_bench.diagnostics.openai_scorer.OpenAICompletionsScorer` (an
OpenAI-compatible ``/v1/completions`` endpoint that supports ``echo`` with
``logprobs``, such as vLLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .samples import TextTokenizer


class ScoringNotSupported(RuntimeError):
    """The back-end cannot return log-probabilities of given text (e.g. an endpoint that
    rejects ``echo`` with ``logprobs`` or returns no prompt log-probabilities)."""


@dataclass(frozen=True)
class CrossScores:
    """Teacher-forced scores of ``N`` reasonings under ``M`` inputs.

    Attributes:
        seq: ``(N, M)`` float64, ``seq[i, j] = Σ_t log p(z_i[t] | x_j, z_i[:t])`` in nats.
        lengths: ``(N,)`` int, ``|z_i|`` in tokens (every entry >= 1).
        own_entropy: ``(N,)`` float64 or ``None``: when the caller named each row's own
            input, the mean over ``z_i``'s positions of the entropy (nats) of the model's
            *full* next-token distribution given ``(x_own(i), z_i[:t])``; ``None`` when the
            back-end only returns log-probabilities of the given tokens.
    """

    seq: np.ndarray
    lengths: np.ndarray
    own_entropy: np.ndarray | None = None

    @property
    def mean(self) -> np.ndarray:
        """``(N, M)`` per-token mean log-probability ``seq[i, j] / |z_i|``."""
        return self.seq / self.lengths[:, None]


@runtime_checkable
class Scorer(Protocol):
    """What :func:`~ragen_bench.diagnostics.collapse.collapse_report` needs from a back-end.

    Attributes:
        text_tokenizer: renders chat prompts and encodes text in the scorer's vocabulary
            (:class:`~ragen_bench.diagnostics.samples.TextTokenizer`).
    """

    text_tokenizer: TextTokenizer

    def score(
        self,
        xs: Sequence[Sequence[int]],
        zs: Sequence[Sequence[int]],
        *,
        own: Sequence[int] | None = None,
    ) -> CrossScores:
        """Score every ``zs[i]`` after every ``xs[j]``.

        Args:
            xs: ``M`` non-empty input token-id sequences.
            zs: ``N`` non-empty reasoning token-id sequences.
            own: optional ``(N,)`` column index of each row's own input (enables
                ``own_entropy`` where the back-end can compute it).

        Returns:
            :class:`CrossScores` with ``seq`` of shape ``(N, M)``.

        Raises:
            ValueError: an empty ``x`` or ``z``.
            ScoringNotSupported: the back-end cannot score given text.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Scorer settings recorded with the diagnostics (kind, model; never secrets)."""
        ...


def check_pairs(
    xs: Sequence[Sequence[int]], zs: Sequence[Sequence[int]], own: Sequence[int] | None
) -> None:
    """Validate scorer inputs (shared by the back-ends).

    Raises:
        ValueError: no inputs, an empty sequence, or ``own`` of the wrong length / range.
    """
    if not xs or not zs:
        raise ValueError("need at least one input and one reasoning to score")
    if any(len(x) == 0 for x in xs):
        raise ValueError("every input x must have at least one token")
    if any(len(z) == 0 for z in zs):
        raise ValueError(
            "every reasoning z must have at least one token (empty reasonings are dropped earlier)"
        )
    if own is not None:
        if len(own) != len(zs):
            raise ValueError(f"own has {len(own)} entries for {len(zs)} reasonings")
        if any(not 0 <= int(o) < len(xs) for o in own):
            raise ValueError("own entries must index xs")
