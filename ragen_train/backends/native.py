"""The ``native`` back-end: :class:`ragen_train.trainer.StarPOTrainer` behind the back-end interface."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import StarPOConfig
from .base import BackendResult


class NativeBackend:
    """Our StarPO trainer (PPO / GRPO / Dr. GRPO / DAPO-style clipping, filtering, critic, KL)."""

    name = "native"

    def train(
        self,
        cfg: StarPOConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        resume: str | None = None,
    ) -> BackendResult:
        """Fit; :meth:`StarPOTrainer.fit` saves the final policy to ``<out_dir>/final_model``."""
        from ..trainer import StarPOTrainer

        trainer = StarPOTrainer(cfg, resume=resume, model=model, tokenizer=tokenizer)
        last = trainer.fit()
        out = Path(cfg.trainer.out_dir)
        final = out / "final_model"
        return BackendResult(
            backend=self.name,
            out_dir=out,
            metrics_path=out / "metrics.jsonl",
            checkpoint_dir=final,
            last_val=last,
            extra={"steps": trainer.step},
        )
