"""Checkpoints: everything needed to continue a run exactly.

``<out_dir>/checkpoints/step_000010/``:

* ``model/`` — ``save_pretrained`` of the policy (LoRA: the adapter, or merged weights
  with ``lora.save=merged``) and the tokenizer, so ``ragen-bench run --model`` and
  ``ragen-train eval`` load it directly;
* ``critic/`` — the value model, when there is one;
* ``optimizer.pt``, ``critic_optimizer.pt``, ``scheduler.pt``;
* ``rng_rank<r>.pt`` — Python, NumPy and torch RNG states of every rank;
* ``state.json`` — step, rollout seed counter, consecutive-empty counter, config.

``<out_dir>/checkpoints/latest`` names the newest complete checkpoint (written last, so a
crash while saving leaves the previous one as latest).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen_envs import jsonutil


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_dir(out_dir: str | Path, step: int) -> Path:
    return Path(out_dir) / "checkpoints" / f"step_{step:06d}"


def latest(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    p = Path(out_dir) / "checkpoints" / "latest"
    if not p.is_file():
        return None
    d = Path(out_dir) / "checkpoints" / p.read_text().strip()
    return d if (d / "state.json").is_file() else None


def save_model(model: Any, tokenizer: Any, path: Path, *, merge_lora: bool = False) -> None:
    """Save a (possibly LoRA-wrapped) policy as a loadable Hugging Face directory."""
    m = getattr(model, "module", model)
    if merge_lora and hasattr(m, "merge_and_unload"):
        import copy

        m = copy.deepcopy(m).merge_and_unload()
    m.save_pretrained(path, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)


def save(out_dir: str | Path, step: int, *, model: Any, tokenizer: Any, optimizer: Any, scheduler: Any,
         state: dict[str, Any], rank: int = 0, critic: Any = None, critic_optimizer: Any = None,
         merge_lora: bool = False, keep: int = 1) -> Path:
    """Write a checkpoint (rank 0 writes the shared files; every rank its RNG state)."""
    d = checkpoint_dir(out_dir, step)
    d.mkdir(parents=True, exist_ok=True)
    torch.save(rng_state(), d / f"rng_rank{rank}.pt")
    if rank != 0:
        return d
    save_model(model, tokenizer, d / "model", merge_lora=merge_lora)
    if critic is not None:
        getattr(critic, "module", critic).save_pretrained(d / "critic", safe_serialization=True)
        torch.save(critic_optimizer.state_dict(), d / "critic_optimizer.pt")
    torch.save(optimizer.state_dict(), d / "optimizer.pt")
    torch.save(scheduler.state_dict(), d / "scheduler.pt")
    (d / "state.json").write_text(jsonutil.dumps({**state, "step": step}, indent=2) + "\n")
    pointer = Path(out_dir) / "checkpoints" / "latest"
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(d.name + "\n")
    os.replace(tmp, pointer)
    _prune(Path(out_dir) / "checkpoints", keep)
    return d


def _prune(root: Path, keep: int) -> None:
    if keep <= 0:
        return
    # Oldest first by the time they were written (not by step number: a restarted run may write
    # step_000002 after an older step_000030); the checkpoint `latest` names is never removed.
    current = (root / "latest").read_text().strip() if (root / "latest").is_file() else None
    steps = sorted((p for p in root.glob("step_*") if (p / "state.json").is_file()),
                   key=lambda p: ((p / "state.json").stat().st_mtime_ns, p.name))
    for old in [p for p in steps[:-keep] if p.name != current]:
        shutil.rmtree(old, ignore_errors=True)


def load_state(d: Path) -> dict[str, Any]:
    return json.loads((d / "state.json").read_text())
