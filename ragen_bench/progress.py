"""Live progress of a ``ragen-bench run`` on the console (rich).

Counting finished episodes alone does not move when episodes are played in one batch:
with the ``hf`` back-end every episode advances one turn per batched generation and they
all finish together, so a bar of episodes sat at ``0/8 … -:--:--`` for minutes.  The bar
here advances by *turns*: an episode counts ``max_turns`` units, one per turn played,
and all of its remaining units when it ends (early success, invalid-answer limit), so the
bar moves on every batch and reaches 100% exactly when the last episode ends; the time
estimate follows from it.  Beside it: episodes finished / total, success so far, turns
played, completion tokens and tokens per second.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RunProgress:
    """A progress display fed by the runner's callbacks.

    Args:
        console: where to draw (stderr in the CLI).
        episodes: episodes of the run (updated by :meth:`on_start`).
        max_turns: the protocol's turns per episode (units per episode).

    The callbacks: :meth:`on_start` ``(finished, total)`` (draws the bar), :meth:`on_turn`
    ``(episode_index, turn_record)``, :meth:`on_episode` ``(record, finished, total)``;
    :meth:`stop` when done (a no-op if it never started).
    """

    def __init__(self, console: Console, episodes: int, max_turns: int):
        self.max_turns = max(1, int(max_turns))
        self.progress = Progress(
            TextColumn("[bold]episodes[/bold] {task.fields[episodes]}"),
            BarColumn(),
            TextColumn(
                "success {task.fields[rate]} · turns {task.fields[turns]} · {task.fields[tokens]} tokens "
                "({task.fields[speed]} tok/s)"
            ),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task(
            "run",
            total=episodes * self.max_turns,
            episodes=f"0/{episodes}",
            rate="–",
            turns=0,
            tokens=0,
            speed="–",
        )
        self._turns: dict[int, int] = {}  # turns played by each running episode
        self._finished = 0
        self._total = episodes
        self._scored = self._successes = self._turns_played = self._tokens = 0
        self._t0 = time.perf_counter()

    def _units(self) -> int:
        return self._finished * self.max_turns + sum(
            min(n, self.max_turns) for n in self._turns.values()
        )

    def _refresh(self) -> None:
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        self.progress.update(
            self.task,
            total=self._total * self.max_turns,
            completed=self._units(),
            episodes=f"{self._finished}/{self._total}",
            turns=self._turns_played,
            tokens=f"{self._tokens:,}",
            rate=f"{100 * self._successes / self._scored:.1f}%" if self._scored else "–",
            speed=f"{self._tokens / elapsed:.0f}" if self._tokens else "–",
        )

    def on_start(self, finished: int, total: int) -> None:
        """The run starts with ``finished`` of ``total`` episodes already recorded: draw the bar."""
        self._finished, self._total = finished, total
        self._t0 = time.perf_counter()
        self._refresh()
        self.progress.start()

    def on_turn(self, episode_index: int, turn: Any) -> None:
        """One turn of a running episode was played (``turn``: a ``TurnRecord``)."""
        self._turns[episode_index] = self._turns.get(episode_index, 0) + 1
        self._turns_played += 1
        self._tokens += int(getattr(turn, "completion_tokens", 0) or 0)
        self._refresh()

    def on_episode(self, record: Any, finished: int, total: int) -> None:
        """An episode ended (``record``: an ``EpisodeRecord``)."""
        self._turns.pop(record.episode_index, None)
        self._finished, self._total = finished, total
        self._scored += 1
        self._successes += int(bool(record.success))
        self._refresh()

    @property
    def completed_fraction(self) -> float:
        """Units done / all units (0..1)."""
        return self._units() / max(1, self._total * self.max_turns)

    def stop(self) -> None:
        """Stop drawing (a never-started display prints nothing)."""
        if self.progress.live.is_started:
            self.progress.stop()


__all__ = ["RunProgress"]
