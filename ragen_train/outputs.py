"""The files a StarPO run writes in its ``trainer.out_dir``, and clearing them for ``trainer.overwrite``.

A run started with ``trainer.overwrite=true`` in a directory that holds an earlier run must
not leave that run's files next to its own (a stale ``summary.json``, ``final_model/`` or
``report.html`` would describe the old run).  :data:`RUN_OUTPUTS` lists what a run (native
or TRL back-end), ``quickstart`` and ``ragen-train report`` write there; :func:`clear_run_outputs`
removes them.  The SFT outputs (``sft_model/``, ``sft/``) belong to ``ragen-train sft``, which
has its own overwrite check, and a path the new run reads (``model.path``, ``sft.demos_path``)
is never removed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

#: Names (glob patterns) inside ``out_dir`` written by a training run and its reports.
RUN_OUTPUTS = (
    "metrics.jsonl",
    "checkpoints",
    "final_model",
    "training_curves.png",
    "summary.json",
    "report.html",
    "eval_reports",
    "tensorboard",
    "wandb",
    "trl",
    "config.resumed_from*.json",
)


def _inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def clear_run_outputs(out_dir: str | Path, *, keep: Iterable[str | Path | None] = ()) -> list[Path]:
    """Remove the :data:`RUN_OUTPUTS` of ``out_dir``; return what was removed.

    Args:
        out_dir: the run directory.
        keep: paths the new run reads; an output that is or contains one of them stays.
    """
    out = Path(out_dir)
    kept = [Path(k) for k in keep if k]
    removed = []
    for pattern in RUN_OUTPUTS:
        for p in sorted(out.glob(pattern)):
            if any(_inside(k, p) for k in kept if k.exists()):
                continue
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            removed.append(p)
    return removed


__all__ = ["RUN_OUTPUTS", "clear_run_outputs"]
