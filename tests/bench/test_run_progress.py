"""The run's progress moves with turns and tokens.

Before: the bar counted finished episodes only; with the hf back-end every episode of a
batch finishes at the same time, so it sat at ``0/8 … -:--:--`` until the very end.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from ragen_bench.progress import RunProgress
from ragen_bench.runner import RunRequest, start_run


class Recording(RunProgress):
    """RunProgress that notes (episodes finished, fraction done, tokens) at every turn."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timeline: list[tuple[int, float, int]] = []

    def on_turn(self, episode_index, turn):
        super().on_turn(episode_index, turn)
        self.timeline.append((self._finished, self.completed_fraction, self._tokens))


def test_progress_moves_every_turn_before_any_episode_finishes(tmp_path: Path) -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200)
    bar = Recording(console, episodes=4, max_turns=3)
    req = RunRequest(
        env_id="ragen/Sokoban-v0",
        backend="hf",
        model="tiny",
        episodes=4,
        out=str(tmp_path),
        run_id="r",
        rollout={
            "max_turns": 3,
            "enable_think": False,
            "sampling": {"max_new_tokens": 8, "temperature": 1.0},
        },
    )
    path = start_run(req, progress=bar.on_episode, on_start=bar.on_start, on_turn=bar.on_turn)
    bar.stop()
    episodes = [json.loads(line) for line in (path / "episodes.jsonl").read_text().splitlines()]
    turns = sum(len(e["turns"]) for e in episodes)
    tokens = sum(t["usage"]["completion_tokens"] for e in episodes for t in e["turns"])
    assert len(bar.timeline) == turns > 4  # one event per turn
    before_first_end = [frac for finished, frac, _ in bar.timeline if finished == 0]
    assert len(before_first_end) >= 4 and before_first_end == sorted(before_first_end)
    assert (
        0 < before_first_end[0] < before_first_end[-1] <= 1
    )  # it moved while no episode had ended
    assert len(set(before_first_end)) >= 4
    assert bar.timeline[-1][2] == tokens > 0
    assert bar.completed_fraction == 1.0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())  # the terminal's colour codes
    assert "episodes 4/4" in text and f"turns {turns}" in text and f"{tokens:,} tokens" in text
