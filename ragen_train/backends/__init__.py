"""Pluggable trainer back-ends: train on ragen environments with our StarPO trainer, TRL or verl.

Every back-end plays episodes through ``ragen_bench``'s rollout engine (same prompts,
parser, format penalty, seeds and splits), so the reward of a response and its loss mask
are the same everywhere; only the optimiser side differs.  See ``docs/backends.md``.

* ``native`` — :class:`ragen_train.trainer.StarPOTrainer`;
* ``trl`` — TRL's ``GRPOTrainer`` fed by our rollouts through its ``rollout_func`` hook
  (:mod:`.trl_backend`);
* ``verl`` — an agent loop for verl's multi-turn agent-loop rollout, the config mapping
  and the launch files (:mod:`.verl_backend`, :mod:`.verl_agent_loop`); verl itself runs
  on GPU clusters only.
"""

from __future__ import annotations

from .base import BackendResult, TrainerBackend
from .registry import TRAINER_BACKENDS, get_backend

__all__ = ["TRAINER_BACKENDS", "BackendResult", "TrainerBackend", "get_backend"]
