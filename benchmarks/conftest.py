"""Benchmark-wide settings.

Lean needs a Lean verifier, which our machines do not have: ``test_env_speed.py`` times the
``ragen/Lean-*`` ids against the replay back-end and the synthetic recording the test sweeps
use (``tests/data/lean/sweep.replay.jsonl``), i.e. the env's own cost; without it every
step would wait for the connection-refused retries of the default Kimina address.
``test_lean_speed.py`` times each back-end explicitly.
"""

from __future__ import annotations

import os

os.environ.setdefault(
    "RAGEN_LEAN_VERIFIER",
    "replay:"
    + os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "tests",
        "data",
        "lean",
        "sweep.replay.jsonl",
    ),
)
