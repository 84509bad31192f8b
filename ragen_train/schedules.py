"""Learning-rate schedules (``optim.lr_schedule``): warm-up, then constant, linear or cosine decay.

The schedule advances once per training step that updated the weights (a step whose update
was skipped, e.g. an all-filtered batch, does not move it), over ``trainer.total_steps``
steps.  Built from :mod:`torch.optim.lr_scheduler` parts, so its state is saved and resumed
with the checkpoint like any torch scheduler:

* warm-up (``optim.warmup_steps = w > 0``): :class:`~torch.optim.lr_scheduler.LinearLR`
  from ``lr / w`` to ``lr`` — step ``s < w`` trains at ``lr · (s + 1) / w`` (the first step
  already learns; transformers' ``get_*_schedule_with_warmup`` start at 0);
* then, over the remaining ``D = total_steps − w`` steps (``m = optim.min_lr_ratio``):

  - ``constant``: ``lr``;
  - ``linear``: :class:`~torch.optim.lr_scheduler.LinearLR` from ``lr`` down to ``m · lr``
    at step ``D`` (the shape of transformers' ``get_linear_schedule_with_warmup`` with
    ``m = 0``);
  - ``cosine``: :class:`~torch.optim.lr_scheduler.CosineAnnealingLR`,
    ``m·lr + (1 − m)·lr·(1 + cos(π·t/D))/2`` (SGDR, Loshchilov & Hutter 2017, arXiv
    1608.03983, eq. 5, one cycle without restarts).

The TRL back-end maps the same names onto ``TrainingArguments.lr_scheduler_type``
(:func:`hf_scheduler_type`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragen_bench.registry import Registry

if TYPE_CHECKING:  # torch loads where a schedule is built, so that the config imports without it
    import torch
    from torch.optim import lr_scheduler as S

#: Learning-rate schedules by the name ``optim.lr_schedule`` takes:
#: ``decay(optimizer, steps, min_lr_ratio) -> scheduler`` for the ``D`` steps after warm-up
#: (module docstring).  Metadata: ``hf(min_lr_ratio) -> (lr_scheduler_type,
#: lr_scheduler_kwargs)`` of transformers' ``TrainingArguments`` (raises ``ValueError`` for a
#: setting transformers cannot express); ``verl``: verl's ``actor.optim.lr_scheduler_type`` of
#: the same shape (absent: verl has none; its actor schedules are ``constant`` and ``cosine``).
LR_SCHEDULES: Registry[Callable[[torch.optim.Optimizer, int, float], S.LRScheduler]] = Registry(
    "lr schedule"
)


def _linear_hf(min_lr_ratio: float) -> tuple[str, dict[str, Any]]:
    if min_lr_ratio > 0:
        raise ValueError(
            "transformers' linear schedule decays to 0; optim.min_lr_ratio > 0 needs "
            "lr_schedule=cosine on the trl back-end"
        )
    return "linear", {}


def _constant(opt: torch.optim.Optimizer, steps: int, m: float) -> S.LRScheduler:
    from torch.optim import lr_scheduler as S

    return S.ConstantLR(opt, factor=1.0, total_iters=0)


def _linear(opt: torch.optim.Optimizer, steps: int, m: float) -> S.LRScheduler:
    from torch.optim import lr_scheduler as S

    return S.LinearLR(opt, start_factor=1.0, end_factor=m, total_iters=steps)


def _cosine(opt: torch.optim.Optimizer, steps: int, m: float) -> S.LRScheduler:
    from torch.optim import lr_scheduler as S

    return S.CosineAnnealingLR(opt, T_max=steps, eta_min=m * opt.param_groups[0]["lr"])


LR_SCHEDULES.add(
    "constant",
    _constant,
    hf=lambda m: ("constant_with_warmup", {}),
    verl="constant",
)
LR_SCHEDULES.add(
    "linear",
    _linear,
    hf=_linear_hf,
)
LR_SCHEDULES.add(
    "cosine",
    _cosine,
    hf=lambda m: ("cosine_with_min_lr", {"min_lr_rate": m}) if m > 0 else ("cosine", {}),
    verl="cosine",
)


def build_lr_scheduler(
    optimizer: torch.optim.Optimizer,
    schedule: str,
    *,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.0,
) -> torch.optim.lr_scheduler.LRScheduler:
    """The scheduler of ``optim.lr_schedule`` (module docstring).

    Args:
        optimizer: the optimizer whose learning rate is scheduled (its ``lr`` is the peak).
        schedule: a name in :data:`LR_SCHEDULES`.
        warmup_steps: linear warm-up steps ``w`` (0: none).
        total_steps: training steps; the decay reaches ``min_lr_ratio · lr`` at step
            ``total_steps`` (so the last trained step is one decay step above it, as in
            transformers' schedules).  The length is part of the saved state: a run resumed with a
            larger ``trainer.total_steps`` keeps the schedule it was started with.
        min_lr_ratio: final learning rate as a share of the peak, in ``[0, 1]``.

    Raises:
        ValueError: an unknown schedule (:class:`ragen_bench.registry.UnknownNameError`), or
            ``min_lr_ratio`` outside ``[0, 1]``.
    """
    from torch.optim import lr_scheduler as S

    decay = LR_SCHEDULES.get(schedule)
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio!r}")
    warm = max(0, int(warmup_steps))
    main = decay(optimizer, max(1, int(total_steps) - warm), min_lr_ratio)
    if warm == 0:
        return main
    ramp = S.LinearLR(
        optimizer, start_factor=1.0 / warm, end_factor=1.0, total_iters=max(1, warm - 1)
    )
    return S.SequentialLR(optimizer, [ramp, main], milestones=[warm])


def hf_scheduler_type(schedule: str, min_lr_ratio: float) -> tuple[str, dict[str, Any]]:
    """``(lr_scheduler_type, lr_scheduler_kwargs)`` of transformers' ``TrainingArguments`` for
    ``optim.lr_schedule`` (warm-up via ``warmup_steps``; HF's ramp starts at 0, ours at ``lr / w``).

    Raises:
        ValueError: an unknown schedule, or a ``min_lr_ratio`` the schedule cannot express there.
    """
    LR_SCHEDULES.get(schedule)  # an unknown name: UnknownNameError
    return LR_SCHEDULES.meta(schedule, "hf")(min_lr_ratio)


__all__ = ["LR_SCHEDULES", "build_lr_scheduler", "hf_scheduler_type"]
