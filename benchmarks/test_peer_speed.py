"""Issue 21's rows under pytest-benchmark: ours and each reference, in one run.

``pytest benchmarks/test_peer_speed.py --benchmark-only --benchmark-group-by=param:row``
puts every row's sides next to each other.  One round is one batch of
``peer_speed.N_STEP`` steps or ``peer_speed.N_RESET`` resets (set up outside the timed
region); divide by ``extra_info["ops_per_round"]`` for the time per operation.  The
installed peers (reasoning-gym, GEM, gym-sokoban) run only when they import in this
interpreter, and the "RAGEN (source ...)" sides only when ``.peer-ragen`` holds RAGEN's
files at ``peer_speed.RAGEN_COMMIT`` (``peer_speed.py --vendor-ragen CHECKOUT``) and
their imports (``omegaconf``, ``gym-sokoban``, ``datasets``) work here; otherwise the
test is skipped with the reason (use ``python benchmarks/peer_speed.py``, which runs
them in ``.peer-venv``).  The ratio table
of ``benchmarks/README.md`` comes from ``peer_speed.py`` (fresh processes, alternating).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_speed  # noqa: E402

CASES = [(key, i) for key, row in peer_speed.ROWS.items() for i in range(-1, len(row.refs))]


@pytest.mark.parametrize(
    ("row", "side"), CASES, ids=[f"{k}-{'ours' if i < 0 else f'ref{i}'}" for k, i in CASES]
)
def test_peer_speed(benchmark: Any, row: str, side: int) -> None:
    spec = peer_speed.ROWS[row]
    entry = spec.ours if side < 0 else spec.refs[side]
    try:
        prepare = entry.factory()
    except peer_speed.PeerMissing as exc:
        pytest.skip(f"{entry.label}: {exc}")
    benchmark.group = spec.title
    benchmark.extra_info.update(side=entry.label, ops_per_round=entry.n)
    count = {"n": 0}

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        run, n = prepare(entry.n)
        count["n"] = n
        return (run,), {}

    benchmark.pedantic(lambda run: run(), setup=setup, rounds=20, warmup_rounds=2)
    assert count["n"] >= entry.n
