"""Countdown arithmetic puzzles (spec: ``docs/envs/countdown.md``).

Modules: :mod:`.checker` (the answer checker), :mod:`.solver` (the exhaustive oracle),
:mod:`.instances` (generation and JSONL loading), :mod:`.env` (the environment).
"""

from .checker import AnswerStatus, CheckResult, check_answer
from .env import CountdownEnv
from .instances import DataError, Instance, canonical_key, split_key
from .solver import is_solvable, solve

__all__ = [
    "AnswerStatus",
    "CheckResult",
    "CountdownEnv",
    "DataError",
    "Instance",
    "canonical_key",
    "check_answer",
    "is_solvable",
    "solve",
    "split_key",
]
