"""Per-response statistics that need no scorer: token entropy from log-probabilities,
degenerate outputs (and a watch that alarms on them) and answer diversity."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

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


def record_responses(records: Iterable[Any]) -> list[str]:
    """Every turn's response text of episode records (objects with ``turns[*].response``);
    records without turns (e.g. metric-only log lines) contribute none."""
    return [str(t.response) for r in records for t in (getattr(r, "turns", None) or [])]


class DegenerateOutputWarning(RuntimeWarning):
    """The share of degenerate responses is above the alarm threshold (e.g. ``!!!!!!``)."""


class DegenerateWatch:
    """Alarm on degenerate outputs during training: warn once, then ask to stop.

    Users of RAGEN watched responses turn into ``!!!!!!`` with no alarm (RAGEN issue #52);
    :func:`degenerate_rate` measured it but nothing acted on it.  Feed :meth:`update` the
    rate of each step: the first step at or above ``threshold`` (and above 0) raises one
    :class:`DegenerateOutputWarning`; after ``stop_steps`` consecutive such steps
    :meth:`update` returns ``True`` (the caller stops and keeps its checkpoints;
    ``stop_steps=0`` never stops).  A step below the threshold (or at 0) resets the run.
    A step exactly at the threshold did not count before (``>``, now ``>=``).

    Args:
        threshold: share of degenerate responses in ``[0, 1]`` from which a step counts.
        stop_steps: consecutive such steps before stopping (0 = never stop).
    """

    def __init__(self, threshold: float, stop_steps: int):
        self.threshold = float(threshold)
        self.stop_steps = int(stop_steps)
        self.streak = 0
        self.warned = False
        self.first_step: int | None = None  # first step of the current run above the threshold

    def update(self, rate: float | None, step: int) -> bool:
        """Record step ``step``'s rate (``None``: no response, the run is unchanged); ``True`` = stop."""
        if rate is None:
            return False
        if rate < self.threshold or rate == 0:  # a step AT the threshold counts
            self.streak, self.first_step = 0, None
            return False
        self.streak += 1
        if self.first_step is None:
            self.first_step = step
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"step {step}: {rate:.0%} of the responses are degenerate (one character makes up more "
                f"than {DEGENERATE_SHARE:.0%} of the text, or empty), at or above trainer.degenerate_warn_rate="
                f"{self.threshold:g}; training stops after "
                + (
                    f"{self.stop_steps} such steps in a row (trainer.degenerate_stop_steps)"
                    if self.stop_steps
                    else "no number of such steps (trainer.degenerate_stop_steps=0)"
                ),
                DegenerateOutputWarning,
                stacklevel=2,
            )
        return bool(self.stop_steps) and self.streak >= self.stop_steps

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state (for trainer checkpoints)."""
        return {"streak": self.streak, "warned": self.warned, "first_step": self.first_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.streak = int(state.get("streak", 0))
        self.warned = bool(state.get("warned", False))
        first = state.get("first_step")
        self.first_step = None if first is None else int(first)


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
