"""Reasoning-collapse diagnostics of the training rollouts, and their state across a resume.

RAGEN-2 (arXiv 2604.06268) tracks the mutual information between the prompt and the
reasoning (and the reasoning's conditional entropy) to tell a policy that reasons about its
input from one that repeats an input-agnostic template.  :class:`CollapseMonitor` computes
them on the unfiltered training batch (:func:`ragen_bench.diagnostics.collapse_metrics`) at
step 1 and then every ``trainer.collapse_every`` steps (RAGEN's schedule), keeps the
:class:`~ragen_bench.diagnostics.CollapseTracker` that warns when MI falls while entropy
stays high, and hands its state to the checkpoint.
"""

from __future__ import annotations

import warnings
from typing import Any

from ragen_bench.records import EpisodeRecord

from .config import StarPOConfig
from .modeling import unwrap


class CollapseMonitor:
    """The collapse diagnostics of one training run.

    Args:
        cfg: the run config (``trainer.collapse_*``, ``rollout.enable_think``).
        dist: the process group state (:func:`ragen_train.distributed.init`).

    Attributes:
        tracker: the :class:`~ragen_bench.diagnostics.CollapseTracker` (``None`` until the
            first diagnostics or a resume with one).
    """

    def __init__(self, cfg: StarPOConfig, dist: Any):
        self.cfg, self.dist = cfg, dist
        self.tracker: Any = None

    def due(self, step: int) -> bool:
        """Whether step ``step`` (0-based) computes diagnostics: the first step, then every
        ``trainer.collapse_every`` (0: never)."""
        every = self.cfg.trainer.collapse_every
        return bool(every) and (step == 0 or (step + 1) % every == 0)

    def _new_tracker(self) -> Any:
        from ragen_bench.diagnostics import CollapseTracker

        return CollapseTracker(mi_drop=0.2 if self.cfg.trainer.collapse_warn else float("inf"))

    def metrics(
        self, records: list[EpisodeRecord], model: Any, tokenizer: Any, step: int
    ) -> dict[str, float]:
        """Reasoning-collapse diagnostics (MI / conditional entropy) on the unfiltered batch.

        Computed on rank 0 from its share of the batch with the policy ``model`` itself as
        scorer (token ids as sampled; the model is put in eval mode); logged under
        ``collapse/``.  A :class:`~ragen_bench.diagnostics.TemplateCollapseWarning` is raised
        when MI falls while entropy stays high (``trainer.collapse_warn``).  Never stops
        training: a failure is a warning and an empty dict.
        """
        if not self.dist.is_main or not self.cfg.rollout.enable_think:
            return {}
        from ragen_bench.diagnostics import HFScorer, collapse_metrics

        if self.tracker is None:
            self.tracker = self._new_tracker()
        model.eval()
        t = self.cfg.trainer
        try:
            return collapse_metrics(
                records,
                HFScorer(unwrap(model), tokenizer, device=self.dist.device),
                num_samples=t.collapse_samples,
                seed=step,
                sampler=tuple(t.collapse_samplers),
                tracker=self.tracker,
                use_token_ids=True,
                step=step,
            )
        except Exception as exc:  # diagnostics must never kill training
            warnings.warn(f"collapse diagnostics failed at step {step}: {exc}", RuntimeWarning)
            return {}

    def state_dict(self) -> dict[str, Any] | None:
        """The tracker's state for a checkpoint (``None`` before the first diagnostics)."""
        return self.tracker.state_dict() if self.tracker is not None else None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore a checkpoint's tracker state (nothing to restore: no tracker)."""
        if state:
            self.tracker = self._new_tracker()
            self.tracker.load_state_dict(state)


__all__ = ["CollapseMonitor"]
