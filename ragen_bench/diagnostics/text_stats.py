"""Per-response statistics that need no scorer: token entropy from log-probabilities,
degenerate outputs and answer diversity."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

#: A response is degenerate when one character makes up more than this share of it.
DEGENERATE_SHARE = 0.9


def sampled_token_entropy(logprobs: Iterable[Sequence[float] | None]) -> float | None:
    """Token-level entropy estimate from the log-probabilities of the sampled tokens.

    ``−mean log p(y_t | ·)`` pooled over every token of every sequence (token-weighted,
    like a token-mean loss).  When the tokens were sampled from ``p`` itself
    (temperature 1, top-p 1) it is an unbiased Monte-Carlo estimate of the mean
    per-token entropy ``E_t[H(p(· | y_<t))]``; under any other sampling it is the
    cross-entropy of the sampling distribution against ``p`` (>= its entropy), and should
    be read as such.  The full-distribution entropy (exact, no sampling noise) comes from
    a scorer that returns logits (:attr:`CrossScores.own_entropy`).

    Args:
        logprobs: per sequence, the natural-log probabilities of its sampled tokens, or
            ``None`` when the back-end gave none.

    Returns:
        The estimate in nats per token, or ``None`` when no token has a log-probability.
    """
    total = 0.0
    count = 0
    for seq in logprobs:
        if seq:
            arr = np.asarray(seq, dtype=np.float64)
            total += float(arr.sum())
            count += arr.size
    return None if count == 0 else -total / count


def is_degenerate(text: str, share: float = DEGENERATE_SHARE) -> bool:
    """One character (whitespace included) is more than ``share`` of ``text``.

    An empty response counts as degenerate (nothing usable was produced).
    """
    if not text:
        return True
    most = Counter(text).most_common(1)[0][1]
    return most > share * len(text)


def degenerate_rate(texts: Iterable[str], share: float = DEGENERATE_SHARE) -> float | None:
    """Share of responses that :func:`is_degenerate`; ``None`` for no responses."""
    flags = [is_degenerate(t, share) for t in texts]
    return None if not flags else sum(flags) / len(flags)


def answer_diversity(answers: Sequence[str | None]) -> tuple[float, float] | None:
    """Distinct answers / N and the Shannon entropy (nats) of the empirical answer distribution.

    Answers are compared after stripping surrounding whitespace; a missing answer
    (``None``: no answer block) is one outcome of its own.

    Returns:
        ``(distinct_ratio, entropy)`` or ``None`` for no answers.  ``entropy`` is 0 when
        every answer is the same and ``log N`` when all differ.
    """
    if not answers:
        return None
    counts = Counter(None if a is None else a.strip() for a in answers)
    n = len(answers)
    entropy = -sum((c / n) * math.log(c / n) for c in counts.values())
    return len(counts) / n, max(0.0, entropy)
