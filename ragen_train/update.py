"""The StarPO update: advantages, then PPO epochs over mini-batches of micro-batches.

Steps 6 and 7 of a StarPO step (:mod:`ragen_train.trainer`; RAGEN, arXiv 2504.20073,
section 3): :func:`batch_advantages` turns the kept samples' rewards (and, for critic-based
estimators, values) into advantages and returns with the estimator of
``algorithm.adv_estimator`` (:mod:`ragen_train.advantages`); :class:`PPOUpdate` then runs
``ppo_epochs × mini_batches`` optimizer steps, each over the micro-batches of
:class:`~ragen_train.forwards.BatchForwards` with gradient accumulation and loss
denominators taken over the whole mini-batch on every rank, with gradient clipping; a step
whose gradient norm is not finite is skipped and counted.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from . import distributed as dist_utils
from .advantages import ADVANTAGE_ESTIMATORS
from .batch import Sample, TensorBatch, collate
from .config import StarPOConfig
from .forwards import BatchForwards
from .losses import (
    Denominators,
    aggregate,
    kl_penalty,
    ppo_policy_loss,
    tis_weights,
    token_mean,
    value_loss,
)
from .metrics import MetricAccumulator
from .progress import UpdateProgress
from .schedules import build_lr_scheduler


def build_optimizers(cfg: StarPOConfig, model: Any, critic: Any = None) -> tuple[Any, Any, Any]:
    """``(optimizer, scheduler, critic_optimizer)``: AdamW on the trainable parameters of the
    (wrapped) policy with ``optim.lr``, its learning-rate schedule
    (:func:`~ragen_train.schedules.build_lr_scheduler`, over ``trainer.total_steps``), and
    AdamW with ``optim.critic_lr`` on the critic's (``None`` without a critic)."""
    opt = cfg.optim

    def adamw(module: Any, lr: float) -> torch.optim.AdamW:
        return torch.optim.AdamW(
            [p for p in module.parameters() if p.requires_grad],
            lr=lr,
            betas=(opt.beta1, opt.beta2),
            eps=opt.adam_eps,
            weight_decay=opt.weight_decay,
        )

    optimizer = adamw(model, opt.lr)
    scheduler = build_lr_scheduler(
        optimizer,
        opt.lr_schedule,
        warmup_steps=opt.warmup_steps,
        total_steps=cfg.trainer.total_steps,
        min_lr_ratio=opt.min_lr_ratio,
    )
    return optimizer, scheduler, adamw(critic, opt.critic_lr) if critic is not None else None


def tis_enabled(cfg: StarPOConfig, sampler_name: str) -> bool:
    """Whether the update applies truncated importance sampling (:func:`~ragen_train.losses.tis_weights`):
    ``algorithm.tis=on``, or ``auto`` with the ``vllm`` sampler; off, with a warning, unless
    ``rollout.temperature`` is 1 (the samplers report log-probs at temperature 1)."""
    tis = cfg.algorithm.tis == "on" or (cfg.algorithm.tis == "auto" and sampler_name == "vllm")
    if tis and cfg.rollout.temperature != 1.0:
        warnings.warn(
            "algorithm.tis needs rollout.temperature=1 (engines report log-probs at temperature 1); "
            "truncated importance sampling is off",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return tis


def whiten(adv: torch.Tensor, mask: torch.Tensor, dist: Any) -> torch.Tensor:
    """Masked whitening ``(adv - mean) / sqrt(var + 1e-8) · mask`` of ``(B, T)`` advantages,
    with the mean and the unbiased variance over the masked tokens of every rank; a batch of
    fewer than 2 tokens is only masked."""
    m = mask.double()
    a = adv.double()
    n = dist_utils.all_reduce_sum(float(m.sum()), dist)
    if n < 2:
        return adv * mask
    s1 = dist_utils.all_reduce_sum(float((a * m).sum()), dist)
    s2 = dist_utils.all_reduce_sum(float((a * a * m).sum()), dist)
    mean = s1 / n
    var = max((s2 - n * mean * mean) / (n - 1), 0.0)
    return ((a - mean) / (var + 1e-8) ** 0.5 * m).float()


def batch_advantages(
    cfg: StarPOConfig,
    batch: TensorBatch,
    samples: list[Sample],
    stats: dict[str, torch.Tensor],
    dist: Any,
    *,
    kl_in_reward: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns ``(B, T)`` of the batch with ``algorithm.adv_estimator``.

    ``kl_in_reward``: shape the rewards first, ``r_t <- r_t - β KL_t`` on every generated
    token (RAGEN / verl ``use_kl_in_reward``; needs ``stats["old_logp"]`` and
    ``stats["ref_logp"]``).  Token-level estimators (GAE and its turn-level variant) read
    ``stats["values"]`` and whiten over all ranks (:func:`whiten`) when
    ``algorithm.whiten_advantages``; outcome estimators (GRPO, RLOO, ...) score each episode
    once (the turn samples of an episode share its score) and broadcast its advantage over
    its trained tokens, the return being the advantage.
    """
    alg = cfg.algorithm
    mask = batch.loss_mask
    rewards = batch.rewards.clone()
    if kl_in_reward:
        rewards = (
            rewards
            - alg.kl_coef
            * kl_penalty(stats["old_logp"], stats["ref_logp"], alg.kl_estimator)
            * mask
        )
    estimator = ADVANTAGE_ESTIMATORS.entry(alg.adv_estimator)
    fn = estimator.obj
    if estimator.meta["level"] == "token":
        adv, ret = fn(
            rewards=rewards,
            values=stats["values"] * mask,
            mask=mask,
            turn_ids=batch.turn_ids,
            gamma=alg.gamma,
            lam=alg.lam,
            turn_gamma=alg.turn_gamma,
            whiten_advantages=False,
        )
        if alg.whiten_advantages:
            adv = whiten(adv, mask, dist)
        return adv, ret
    # Outcome estimators: one score per episode, so the turn samples of an episode count once.
    keys = [(s.group, s.episode) for s in samples]
    uniq = sorted(set(keys))
    pos = {k: i for i, k in enumerate(uniq)}
    ep_scores = torch.zeros(len(uniq), dtype=torch.float64)
    ep_groups = torch.zeros(len(uniq), dtype=torch.long)
    kl_sums = torch.zeros(len(uniq), dtype=torch.float64)
    for i, (s, k) in enumerate(zip(samples, keys)):
        ep_scores[pos[k]] = s.score
        ep_groups[pos[k]] = s.group
        if kl_in_reward:
            kl_sums[pos[k]] += float((rewards[i] - batch.rewards[i]).sum())
    ep_adv, _ = fn(
        scores=ep_scores + kl_sums,
        group_ids=ep_groups,
        mask=torch.ones((len(uniq), 1)),
        eps=alg.grpo_eps,
    )
    adv = ep_adv[[pos[k] for k in keys], 0][:, None] * mask
    return adv, adv.clone()


class PPOUpdate:
    """PPO epochs over mini-batches of the kept samples, for the policy and the critic.

    Args:
        cfg: the run config (``optim.*``, ``algorithm.*``, ``rollout.max_new_tokens``).
        dist: the process group state (:func:`ragen_train.distributed.init`).
        forwards: the models' forwards (:class:`~ragen_train.forwards.BatchForwards`).
        optimizer / scheduler: the policy's; critic_optimizer: the critic's or ``None``.
        tis: apply truncated importance sampling (:func:`tis_enabled`).
        max_turns: the largest turn limit of the training envs (``norm_len``'s default).

    Attributes:
        nonfinite_skips: optimizer steps skipped for a non-finite gradient norm, over the run.
    """

    def __init__(
        self,
        cfg: StarPOConfig,
        dist: Any,
        forwards: BatchForwards,
        optimizer: Any,
        scheduler: Any,
        critic_optimizer: Any = None,
        *,
        tis: bool = False,
        max_turns: int = 1,
    ):
        self.cfg, self.dist, self.forwards, self.device = cfg, dist, forwards, dist.device
        self.optimizer, self.scheduler, self.critic_optimizer = (
            optimizer,
            scheduler,
            critic_optimizer,
        )
        self.tis = tis
        alg = cfg.algorithm
        self.norm_len = float(alg.norm_len or (cfg.rollout.max_new_tokens * max(1, max_turns)))
        self.nonfinite_skips = 0

    def update(
        self,
        samples: list[Sample],
        scale: float,
        *,
        step: int,
        log: Callable[[str], Any] = print,
        every_s: float = 15.0,
    ) -> dict[str, float]:
        """Advantages, then ``optim.ppo_epochs`` epochs of ``optim.mini_batches`` optimizer
        steps on ``samples`` (a rank without samples joins with a dummy one); the order of an
        epoch is a seeded permutation of ``(trainer.seed, step, epoch)``.

        Args:
            samples: this rank's kept samples.
            scale: the filter's loss scale (:func:`~ragen_train.filtering.select_groups`).
            step: the trainer's step (the permutations' seed, the progress label).
            log / every_s: where and how often the update's progress lines go
                (:class:`~ragen_train.progress.UpdateProgress`).

        Returns:
            Metrics reduced over ranks (``adv/*``, ``actor/*``, ``critic/*``, ``time/*``).
        """
        opt, fw = self.cfg.optim, self.forwards
        samples = samples or [fw.dummy_sample()]
        batch = collate(samples, fw.tokenizer.pad_token_id)
        t_old = time.perf_counter()
        with dist_utils.unsharded(
            fw.model, fw.critic
        ):  # [scale] equal work: no-grad forwards, any count
            stats = fw.stats(batch, samples)
        t_old = time.perf_counter() - t_old
        kl_in_reward = fw.ref is not None and self.cfg.algorithm.kl_in_reward
        adv, returns = batch_advantages(
            self.cfg, batch, samples, stats, self.dist, kl_in_reward=kl_in_reward
        )
        mask = batch.loss_mask
        acc = MetricAccumulator()
        acc.tok("adv/mean", float((adv * mask).sum()), float(mask.sum()))
        acc.tok("adv/abs_mean", float((adv.abs() * mask).sum()), float(mask.sum()))
        acc.tok("adv/nonzero_frac", float(((adv != 0).float() * mask).sum()), float(mask.sum()))
        if (
            batch.rollout_logprobs is not None
            and self.cfg.rollout.temperature == 1.0
            and "old_logp" in stats
        ):
            # Rollout log-probs are at temperature 1; so are the recomputed ones only then.
            diff = (batch.rollout_logprobs - stats["old_logp"]).abs() * mask
            acc.tok("rollout/logprob_abs_diff", float(diff.sum()), float(mask.sum()))
            acc.step_stat(
                "rollout/logprob_abs_diff_max", float(diff.max()) if diff.numel() else 0.0
            )
        acc.total("batch/response_tokens", float(mask.sum()))
        n = len(samples)
        t_upd = time.perf_counter()
        with UpdateProgress(
            log,
            f"[ragen] step {step + 1} update",
            n * opt.ppo_epochs,
            epochs=opt.ppo_epochs,
            every_s=every_s,
        ) as progress:
            for epoch in range(opt.ppo_epochs):
                progress.epoch = epoch
                gen = torch.Generator().manual_seed(
                    self.cfg.trainer.seed * 1_000_003 + step * 101 + epoch
                )
                order = torch.randperm(n, generator=gen).tolist()
                for k in range(opt.mini_batches):
                    self.minibatch(
                        batch,
                        samples,
                        stats,
                        adv,
                        returns,
                        order[k :: opt.mini_batches],
                        scale,
                        acc,
                        progress,
                    )
        metrics = acc.reduce(self.dist)
        metrics["time/old_logprob_s"] = t_old
        metrics["time/update_s"] = time.perf_counter() - t_upd
        metrics["actor/lr"] = self.scheduler.get_last_lr()[0]
        if "actor/grad_norm" in acc.steps:  # the schedule advances with optimizer steps
            self.scheduler.step()
        return metrics

    def minibatch(
        self,
        batch: TensorBatch,
        samples: list[Sample],
        stats: dict[str, torch.Tensor],
        adv: torch.Tensor,
        returns: torch.Tensor,
        idx: list[int],
        scale: float,
        acc: MetricAccumulator,
        progress: UpdateProgress | None = None,
    ) -> None:
        """One optimizer step on the mini-batch of rows ``idx``, micro-batched with gradient
        accumulation; its metrics go into ``acc``.

        Losses are normalised by the mini-batch's global denominators (all micro-batches,
        all ranks) and multiplied by the world size to undo DDP's gradient averaging.
        """
        cfg, alg, fw = self.cfg, self.cfg.algorithm, self.forwards
        model, critic = fw.model, fw.critic
        world = self.dist.world_size
        m = batch.loss_mask[idx] if idx else torch.zeros((0, 1))
        denom = Denominators(
            tokens=dist_utils.all_reduce_sum(float(m.sum()), self.dist),
            seqs=dist_utils.all_reduce_sum(float((m.sum(-1) > 0).sum()) if idx else 0.0, self.dist),
            norm_len=self.norm_len,
        )
        if denom.tokens == 0:
            return
        micro = fw.agree_micro_count(fw.plan(samples, idx))
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        if critic is not None:
            critic.train()
            self.critic_optimizer.zero_grad(set_to_none=True)
        for j, mb in enumerate(micro):
            last = j == len(micro) - 1
            mi = mb is not None  # False: a dummy micro-batch (row 0, loss masked out)
            sel = mb.rows if mb is not None else [0]
            mask = batch.loss_mask[sel].to(self.device) * (1.0 if mi else 0.0)
            if mb is not None:
                acc.total("update/tokens_processed", fw.tokens_processed(batch, samples, mb))
            with dist_utils.accumulate_without_sync(model, self.dist, sync=last):
                logp, ent = fw.policy_logprobs(model, batch, samples, mb, with_entropy=True)
                if "old_logp" in stats:
                    old = stats["old_logp"][sel].to(self.device)
                else:
                    old = logp.detach()
                    rl = batch.rollout_logprobs
                    if rl is not None and mi and cfg.rollout.temperature == 1.0:
                        diff = (rl[sel].to(self.device) - old).abs() * mask
                        acc.tok("rollout/logprob_abs_diff", float(diff.sum()), float(mask.sum()))
                        acc.step_stat("rollout/logprob_abs_diff_max", float(diff.max()))
                pg, pst = ppo_policy_loss(
                    logp,
                    old,
                    adv[sel].to(self.device),
                    mask,
                    clip_low=alg.clip_low,
                    clip_high=alg.clip_high,
                    dual_clip=alg.dual_clip,
                )
                if self.tis and batch.rollout_logprobs is not None and mi:
                    w = tis_weights(
                        old, batch.rollout_logprobs[sel].to(self.device), alg.tis_cap, mask
                    )
                    pg = pg * w
                    acc.tok("rollout/tis_weight", float((w * mask).sum()), float(mask.sum()))
                    acc.tok(
                        "rollout/tis_capped_frac",
                        float(((w >= alg.tis_cap) * mask).sum()),
                        float(mask.sum()),
                    )
                pg_loss = aggregate(pg, mask, alg.loss_agg_mode, denom)
                ent_loss = aggregate(ent, mask, alg.loss_agg_mode, denom)
                loss = pg_loss - alg.entropy_coef * ent_loss
                if fw.ref is not None and not alg.kl_in_reward:
                    kl = kl_penalty(logp, stats["ref_logp"][sel].to(self.device), alg.kl_estimator)
                    kl_loss = aggregate(kl, mask, alg.loss_agg_mode, denom)
                    loss = loss + alg.kl_coef * kl_loss
                    acc.loss("actor/kl_loss", float(kl_loss.detach()))
                (loss * scale * world).backward()
            ntok = float(mask.sum())
            if progress is not None and mb is not None:
                progress.on_samples(len(mb.rows))
            acc.loss("actor/pg_loss", float(pg_loss.detach()))
            acc.tok("actor/entropy", float((ent.detach() * mask).sum()), ntok)
            for k, v in pst.items():
                acc.tok(f"actor/{k}", float(v) * ntok, ntok)
            if critic is not None:
                with dist_utils.accumulate_without_sync(critic, self.dist, sync=last):
                    v = fw.values(batch, samples, mb)
                    vl, _ = value_loss(
                        v,
                        stats["values"][sel].to(self.device),
                        returns[sel].to(self.device),
                        clip=alg.value_clip,
                    )
                    vloss = token_mean(vl, mask, denom)
                    (alg.vf_coef * vloss * world).backward()
                acc.loss("critic/vf_loss", float(vloss.detach()))
                acc.tok("critic/value_mean", float((v.detach() * mask).sum()), ntok)
        acc.end_minibatch()
        self._step(model, self.optimizer, "actor", acc, count_skips=True)
        if critic is not None:
            self._step(critic, self.critic_optimizer, "critic", acc, count_skips=False)

    def _step(
        self, module: Any, optimizer: Any, prefix: str, acc: MetricAccumulator, *, count_skips: bool
    ) -> None:
        """Clip the gradient norm of ``module`` (``optim.grad_clip``; 0: no clipping) and step
        ``optimizer`` when the norm is finite (logged as ``<prefix>/grad_norm``); a non-finite
        norm skips the step (counted in :attr:`nonfinite_skips` when ``count_skips``)."""
        clip = self.cfg.optim.grad_clip
        params = [p for p in module.parameters() if p.requires_grad]
        gnorm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        if torch.isfinite(gnorm):
            optimizer.step()
            acc.step_stat(f"{prefix}/grad_norm", float(gnorm))
        elif count_skips:
            self.nonfinite_skips += 1
            acc.step_stat(f"{prefix}/nonfinite_skip", 1.0)
        optimizer.zero_grad(set_to_none=True)


__all__ = ["PPOUpdate", "batch_advantages", "build_optimizers", "tis_enabled", "whiten"]
