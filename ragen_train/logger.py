"""Metric logging: a JSONL file always; TensorBoard and Weights & Biases optional; a console line.

Only rank 0 logs; the console line goes to standard output, one line per event
whatever the width of the terminal (:func:`ragen_bench.console.make_console`).  ``metrics.jsonl`` holds one object per event: ``{"step", "time",
"phase": "train"|"val"|"sft"|"eval", <metric>: <float>, ...}`` (``schemas/metrics.schema.json``).
W&B runs in offline mode unless ``WANDB_MODE`` says otherwise, so it works without a
network; the offline run directory can be synced later with ``wandb sync``.

Crash safety: rows are appended and flushed one at a time, so a killed run leaves at most
one torn last line; opening the log cuts it off (:func:`ragen_bench.fileio.repair_jsonl_tail`,
as ``episodes.jsonl`` is repaired).  A resumed run (``resume_step=k``) first drops the rows
of steps after ``k`` — logged after checkpoint ``k`` by the run that died — so every step
appears once and curves do not zigzag.  TensorBoard and W&B event logs are not rewritten.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from ragen_bench.console import make_console
from ragen_bench.fileio import atomic_write_text, open_regular_file, repair_jsonl_tail
from ragen_envs import jsonutil

KNOWN_LOGGERS = ("jsonl", "console", "tensorboard", "wandb")

CONSOLE_KEYS = (
    ("train/success", "succ", "{:.2f}"),
    ("train/return", "ret", "{:+.2f}"),
    ("train/format_valid_rate", "fmt", "{:.2f}"),
    ("actor/pg_loss", "pg", "{:+.3f}"),
    ("actor/entropy", "ent", "{:.2f}"),
    ("actor/grad_norm", "gn", "{:.2f}"),
    ("filter/kept_ratio", "kept", "{:.2f}"),
    ("val/success", "val", "{:.2f}"),
    ("sft/loss", "loss", "{:.4f}"),
    ("sft/confident_frac", "conf", "{:.2f}"),
    ("sft/lr", "lr", "{:.1e}"),
    ("actor/lr", "lr", "{:.1e}"),
    ("time/step_s", "s", "{:.1f}"),
)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricLogger:
    """Write metrics to every enabled sink.

    Args:
        out_dir: run output directory (``metrics.jsonl`` goes there).
        loggers: any of :data:`KNOWN_LOGGERS`: ``jsonl`` (always on), ``console``,
            ``tensorboard``, ``wandb``.
        enabled: False on non-zero ranks.
        run_name / config: for W&B.
        resume_step: the checkpoint step a resumed run continues from: rows of later
            steps are removed from ``metrics.jsonl`` (:func:`truncate_metrics`).

    Raises:
        ValueError: an unknown logger name.
        ImportError: a requested optional logger is not installed.
    """

    def __init__(
        self,
        out_dir: str | Path,
        loggers: list[str],
        *,
        enabled: bool = True,
        run_name: str = "ragen",
        config: dict[str, Any] | None = None,
        wandb_project: str = "ragen",
        resume_step: int | None = None,
    ):
        unknown = [name for name in loggers if name not in KNOWN_LOGGERS]
        if unknown:
            raise ValueError(f"unknown logger(s) {unknown} (known: {', '.join(KNOWN_LOGGERS)})")
        self.enabled = enabled
        self.out_dir = Path(out_dir)
        self.console = make_console() if "console" in loggers else None
        self._fh = None
        self._tb = None
        self._wandb = None
        if not enabled:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "metrics.jsonl"
        repair_jsonl_tail(path)
        if resume_step is not None:
            truncate_metrics(path, resume_step)
        self._fh = open_regular_file(path, "a", encoding="utf-8")  # a link is refused
        if "tensorboard" in loggers:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ImportError(
                    "the tensorboard logger needs the tensorboard package: pip install tensorboard"
                ) from exc
            self._tb = SummaryWriter(log_dir=str(self.out_dir / "tensorboard"))
        if "wandb" in loggers:
            try:
                import wandb
            except ImportError as exc:
                raise ImportError("the wandb logger needs wandb: pip install wandb") from exc
            os.environ.setdefault("WANDB_MODE", "offline")
            self._wandb = wandb.init(
                project=wandb_project,
                name=run_name,
                config=config or {},
                dir=str(self.out_dir),
                reinit=True,
            )

    def log(self, step: int, metrics: dict[str, float], phase: str = "train") -> None:
        """Record ``metrics`` at ``step``."""
        if not self.enabled:
            return
        row = {"step": int(step), "time": round(time.time(), 3), "phase": phase}
        row.update({k: _clean(float(v)) for k, v in metrics.items()})
        self._fh.write(jsonutil.dumps(row) + "\n")
        self._fh.flush()
        if self._tb is not None:
            for k, v in metrics.items():
                if math.isfinite(float(v)):
                    self._tb.add_scalar(k, float(v), step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log({k: float(v) for k, v in metrics.items()}, step=step)
        if self.console is not None:
            parts = [f"[bold]{phase} {step:>4}[/bold]"]
            for key, short, fmt in CONSOLE_KEYS:
                if key in metrics and math.isfinite(float(metrics[key])):
                    parts.append(f"{short} {fmt.format(float(metrics[key]))}")
            self.console.print("  ".join(parts), soft_wrap=True)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def truncate_metrics(path: str | Path, step: int) -> int:
    """Drop the rows of steps after ``step`` from a ``metrics.jsonl`` (atomically rewritten);
    returns how many were dropped.  Rows are kept byte for byte; a missing file is no-op.

    Raises:
        ValueError: a line is not a JSON object with an integer ``step`` (naming file and line).
    """
    p = Path(path)
    if not p.is_file():
        return 0
    kept, dropped = [], 0
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(keepends=True), 1):
        if not line.strip():
            continue
        try:
            row_step = int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f"{p}:{n}: not a metrics row (a JSON object with an integer step)"
            ) from None
        if row_step > step:
            dropped += 1
        else:
            kept.append(line if line.endswith("\n") else line + "\n")
    if dropped:
        atomic_write_text(p, "".join(kept))
    return dropped


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a ``metrics.jsonl``; a torn last line (a run killed mid-write) is skipped.

    Raises:
        ValueError: a line other than the last is not valid JSON (naming file and line).
    """
    rows = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            if n == len(lines):
                break  # torn last line
            raise ValueError(f"{path}:{n}: not valid JSON") from None
    return rows
