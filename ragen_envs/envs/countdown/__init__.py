"""Countdown arithmetic puzzles (spec: ``docs/envs/countdown.md``).

Modules: :mod:`.checker` (the answer checker), :mod:`.solver` (the exhaustive oracle),
:mod:`.instances` (generation and JSONL loading), :mod:`.env` (the environment),
:mod:`.register` (the ``register_env`` calls); config and info schemas beside them.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".checker": ["AnswerStatus", "CheckResult", "check_answer"],
        ".env": ["CountdownEnv"],
        ".instances": ["DataError", "Instance", "canonical_key", "split_key"],
        ".solver": ["is_solvable", "solve"],
    },
)
