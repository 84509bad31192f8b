"""ragen_train: StarPO, multi-turn trajectory-level RL for LLM agents on ragen environments.

Modules: :mod:`.config` (dataclass configs, presets, overrides), :mod:`.batch` (sampled
tokens and loss masks), :mod:`.advantages` (GAE, bi-level GAE, GRPO, Dr. GRPO, RLOO),
:mod:`.losses` (PPO clip with asymmetric and dual clipping, aggregation modes, entropy,
KL estimators, value loss), :mod:`.filtering` (reward-variance rollout filtering),
:mod:`.trainer` (the loop), :mod:`.sft` (warm start), :mod:`.distributed` (torchrun,
DDP / FSDP2), :mod:`.checkpoint`, :mod:`.logger`, :mod:`.plot`, :mod:`.pipeline`.
Rollouts reuse ``ragen_bench``'s engine; no episode loop is reimplemented here.
"""

from __future__ import annotations

__all__: list[str] = []
