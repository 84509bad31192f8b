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
