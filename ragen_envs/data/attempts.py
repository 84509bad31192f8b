"""Multi-attempt scoring shared by data-backed environments.

An episode allows up to ``max_attempts`` answers.  Attempt ``k`` (counted from 0) that
scores ``s_k`` in ``[0, 1]`` is worth ``decay**k * s_k``; the return of an episode is the
best worth reached, ``max_k decay**k * s_k``, paid out incrementally: each attempt
earns the amount by which it raises the best so far (never negative).

With binary scores (a math answer is right or wrong) and ``decay = 0.5`` this is
RAGEN's MetaMathQA reward, ``1 / 2**k`` for the first correct answer at attempt ``k``
(RAGEN-AI/RAGEN ragen/env/: "Reward 1/2^k on attempt k").  With fractional scores
(the share of code tests passed) it avoids a flaw of summing per-attempt scores:
resubmitting a partly correct program can never earn more than solving it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AttemptTracker", "attempts_rule"]


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

    @classmethod
    def from_config(cls, env_key: str, config: Mapping[str, Any]) -> AttemptTracker:
        """The tracker of an env config (``max_attempts``, ``attempt_decay``).

        Raises:
            ConfigError: ``max_steps < max_attempts`` (an attempt could never be made).
        """
        from ..config import ConfigError

        if config["max_steps"] < config["max_attempts"]:
            raise ConfigError(
                env_key,
                "max_steps",
                f"must be >= max_attempts ({config['max_attempts']}), got {config['max_steps']}",
            )
        return cls(int(config["max_attempts"]), float(config["attempt_decay"]))

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


def attempts_rule(config: Mapping[str, Any], many: str, one: str) -> str:
    """The instruction sentence stating an episode's attempt budget.

    Args:
        config: the env config (``max_attempts``, ``attempt_decay``).
        many: the rule after "You have N attempts; " (``{decay}`` is replaced by the
            decay, formatted with ``:g``).
        one: the rule after "You have one attempt; ".
    """
    n = int(config["max_attempts"])
    if n > 1:
        return f"You have {n} attempts; " + many.format(decay=f"{float(config['attempt_decay']):g}")
    return "You have one attempt; " + one
