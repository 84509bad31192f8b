"""Progress lines for long silent phases (the SFT warm start inside ``quickstart``).

A line at the first step, then at most one every ``every_s`` seconds, and at the last step,
so a phase of a minute shows that it moves without flooding the console.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class ProgressLines:
    """``(step, metrics) -> None`` callable printing ``<label> step k/N  <key> v ... (t s)``.

    Args:
        log: a ``print``-like function.
        label: the phase (``"[ragen] SFT"``).
        total: the number of steps ``N``.
        keys: ``(metric key, short name, format)`` of the values to show.
        every_s: the least time between two lines (seconds).
        clock: the time source (seconds; tests pass a fake one).
    """

    def __init__(
        self,
        log: Callable[[str], Any],
        label: str,
        total: int,
        *,
        keys: tuple[tuple[str, str, str], ...] = (("sft/loss", "loss", "{:.3f}"),),
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.log, self.label, self.total, self.keys = log, label, int(total), keys
        self.every_s, self.clock = float(every_s), clock
        self.start = clock()
        self.last: float | None = None

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        now = self.clock()
        if not (self.last is None or step >= self.total or now - self.last >= self.every_s):
            return
        self.last = now
        parts = [f"{self.label} step {step}/{self.total}"]
        parts += [
            f"{short} {fmt.format(metrics[k])}" for k, short, fmt in self.keys if k in metrics
        ]
        self.log("  ".join(parts) + f"  ({now - self.start:.0f} s)")


class _Heartbeat:
    """A timer thread that logs :meth:`line` every ``every_s`` seconds while the phase runs,
    and one closing line if any was printed (a phase shorter than ``every_s`` prints nothing).
    Subclasses give :meth:`line`; use as a context manager."""

    def __init__(self, log: Callable[[str], Any], label: str, total: int, *, every_s: float = 15.0):
        import threading

        self.log, self.label, self.total, self.every_s = log, label, int(total), float(every_s)
        self.printed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="ragen-progress")
        self.start = time.monotonic()

    def line(self) -> str:
        raise NotImplementedError

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.printed += 1
            self.log(self.line())

    def __enter__(self) -> Any:
        self.start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self.printed and exc[0] is None:
            self.log(self.line())


class PhaseProgress(_Heartbeat):
    """Heartbeat lines for a phase that plays many episodes (validation, rollouts).

    A batched CPU generation can run for minutes between two finished episodes, so the
    lines come from a timer thread, not from the episodes: every ``every_s`` seconds while
    the phase runs, ``<label>: k/N episodes finished, T turns played (t s)``, and one
    closing line if any was printed.  A phase shorter than ``every_s`` prints nothing.
    Use as a context manager; pass :meth:`on_episode` and :meth:`on_turn` to the rollout
    engine (:class:`ragen_bench.rollout.RolloutEngine`).

    Args:
        log: a ``print``-like function (called from the timer thread).
        label: the phase (``"[ragen] validation"``).
        total: episodes in the phase.
        every_s: seconds between lines.
    """

    def __init__(self, log: Callable[[str], Any], label: str, total: int, *, every_s: float = 15.0):
        super().__init__(log, label, total, every_s=every_s)
        self.finished = 0
        self.turns = 0

    def on_episode(self, record: Any) -> None:
        self.finished += 1

    def on_turn(self, index: int, turn: Any) -> None:
        self.turns += 1

    def line(self) -> str:
        return (
            f"{self.label}: {self.finished}/{self.total} episodes finished, "
            f"{self.turns} turns played ({time.monotonic() - self.start:.0f} s)"
        )


class UpdateProgress(_Heartbeat):
    """Heartbeat lines for a policy update, which on a CPU can run for many minutes without
    any other output: ``<label>: k/N samples trained, E/P PPO epochs (t s)`` every ``every_s``
    seconds ("no silent minutes").  ``total``: samples × PPO epochs; the
    trainer calls :meth:`on_samples` after each micro-batch's backward pass.

    Args:
        log: a ``print``-like function (called from the timer thread).
        label: the phase (``"[ragen] step 3 update"``).
        total: sample passes in the update (samples × ``optim.ppo_epochs``).
        epochs: ``optim.ppo_epochs``.
        every_s: seconds between lines.
    """

    def __init__(
        self,
        log: Callable[[str], Any],
        label: str,
        total: int,
        *,
        epochs: int = 1,
        every_s: float = 15.0,
    ):
        super().__init__(log, label, total, every_s=every_s)
        self.epochs = int(epochs)
        self.done = 0
        self.epoch = 0

    def on_samples(self, n: int) -> None:
        self.done += int(n)

    def line(self) -> str:
        return (
            f"{self.label}: {self.done}/{self.total} samples trained, "
            f"epoch {min(self.epoch + 1, self.epochs)}/{self.epochs} "
            f"({time.monotonic() - self.start:.0f} s)"
        )
