"""Multi-attempt scoring shared by data-backed environments.

An episode allows up to ``max_attempts`` answers.  Attempt ``k`` (counted from 0) that
scores ``s_k`` in ``[0, 1]`` is worth ``decay**k * s_k``; the return of an episode is the
best worth reached, ``max_k decay**k * s_k``, paid out incrementally: each attempt
earns the amount by which it raises the best so far (never negative).

With binary scores (a math answer is right or wrong) and ``decay = 0.5`` this is
RAGEN's MetaMathQA reward, ``1 / 2**k`` for the first correct answer at attempt ``k``
(reference fact 1.3 "MetaMathQA": "Reward 1/2^k on attempt k").  With fractional scores
(the share of code tests passed) it avoids a flaw of summing per-attempt scores:
resubmitting a partly correct program can never earn more than solving it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AttemptTracker"]


@dataclass
class AttemptTracker:
    """Tracks attempts and pays the increase of the best discounted score.

    Args:
        max_attempts: attempts allowed (>= 1).
        decay: discount per attempt in ``(0, 1]``.

    Raises:
        ValueError: out-of-range arguments.
    """

    max_attempts: int
    decay: float
    attempts: int = 0
    best: float = 0.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"attempt_decay must be in (0, 1], got {self.decay}")

    def reset(self) -> None:
        """Start a new episode."""
        self.attempts = 0
        self.best = 0.0

    @property
    def remaining(self) -> int:
        """Attempts left."""
        return self.max_attempts - self.attempts

    @property
    def exhausted(self) -> bool:
        """No attempt left."""
        return self.attempts >= self.max_attempts

    def worth(self, attempt: int, score: float) -> float:
        """``decay**attempt * score``."""
        return float(self.decay) ** attempt * float(score)

    def record(self, score: float) -> float:
        """Record the next attempt's score in ``[0, 1]``; return its reward.

        Raises:
            ValueError: the score is outside ``[0, 1]`` or no attempt is left.
        """
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {score}")
        if self.exhausted:
            raise ValueError("no attempt left")
        value = self.worth(self.attempts, score)
        self.attempts += 1
        reward = max(0.0, value - self.best)
        self.best = max(self.best, value)
        return reward
