"""Micro-batched forwards of the policy, the reference policy and the critic over a batch.

:class:`BatchForwards` chooses the path :mod:`ragen_train.logprobs` runs
(``trainer.update_path``: ``plain`` fixed chunks of the padded batch, ``padded`` or
``shared_prefix`` micro-batches planned by :func:`~ragen_train.logprobs.plan_micro_batches`),
plans the micro-batches, keeps their number equal on every rank (a dummy micro-batch, its
loss masked out, where a rank has fewer), and computes from them the log-probabilities,
entropies and values the update needs: the old and reference log-probs and the values in
eval mode (:meth:`BatchForwards.stats`), the per-sample entropy of entropy filtering
(:meth:`BatchForwards.fill_entropy`), and the differentiable forwards of a PPO micro-batch
(:meth:`BatchForwards.policy_logprobs`, :meth:`BatchForwards.values`).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from . import distributed as dist_utils
from .batch import Sample, TensorBatch, collate
from .config import StarPOConfig
from .logprobs import (
    MicroBatch,
    Unit,
    fast_path_problem,
    micro_batch_cost,
    micro_logprobs,
    packs_prefix,
    plan_micro_batches,
)
from .modeling import token_logprobs, token_values


def chunks(items: list[int], size: int) -> list[list[int]]:
    """``items`` cut into consecutive lists of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


class BatchForwards:
    """The forwards of one training run's models over batches of samples.

    Args:
        cfg: the run config (``trainer.update_path``, ``optim.micro_batch_size``,
            ``trainer.max_tokens_per_microbatch``, ``rollout.temperature``).
        dist: the process group state (:func:`ragen_train.distributed.init`).
        tokenizer: the policy's tokenizer (its ``pad_token_id`` pads the batches).
        model: the (wrapped) policy; ref: the reference policy or ``None``; critic: the
            (wrapped) critic or ``None``.
    """

    def __init__(
        self,
        cfg: StarPOConfig,
        dist: Any,
        tokenizer: Any,
        model: Any,
        ref: Any = None,
        critic: Any = None,
    ):
        self.cfg, self.dist, self.device = cfg, dist, dist.device
        self.tokenizer, self.model, self.ref, self.critic = tokenizer, model, ref, critic
        self._update_path: str | None = None

    @property
    def update_path(self) -> str:
        """The path :mod:`ragen_train.logprobs` runs: ``trainer.update_path``, or a simpler
        one (with a warning, once) when the model cannot run it."""
        path = self._update_path
        if path is None:
            path = self.cfg.trainer.update_path
            if path != "plain":
                problem = fast_path_problem(self.model)
                if problem is not None:
                    warnings.warn(
                        f"trainer.update_path={path} cannot run here ({problem}); using plain",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    path = "plain"
            self._update_path = path
        return path

    @property
    def single_pass(self) -> bool:
        """One epoch of one mini-batch: the policy that sampled is the one being updated,
        so the old log-probs equal the (detached) current ones and need no extra pass."""
        alg = self.cfg.algorithm
        kl_reward = self.ref is not None and alg.kl_in_reward  # needs the old log-probs up front
        return self.cfg.optim.ppo_epochs == 1 and self.cfg.optim.mini_batches == 1 and not kl_reward

    def eval_mode(self) -> None:
        """Policy, reference and critic in eval mode (no dropout) for the statistics of the
        batch; the PPO mini-batch (:meth:`ragen_train.update.PPOUpdate.minibatch`) switches
        the policy and critic back to train mode.

        A model whose config has dropout (a user's own policy; the critic's value head has none,
        :func:`ragen_train.modeling.load_critic`) would otherwise carry dropout noise into the
        old log-probs and GAE, and a resumed run (whose freshly loaded models are in eval
        mode) would differ from the uninterrupted one."""
        for m in (self.model, self.ref, self.critic):
            if m is not None:
                m.eval()

    def plan(self, samples: list[Sample], rows: list[int]) -> list[MicroBatch]:
        """Micro-batches of ``rows`` (:func:`~ragen_train.logprobs.plan_micro_batches`; the
        plain path keeps fixed chunks of ``optim.micro_batch_size`` in the given order)."""
        size = self.cfg.optim.micro_batch_size
        if self.update_path == "plain":
            return [MicroBatch((Unit(tuple(c), 0),)) for c in chunks(rows, size)]
        return plan_micro_batches(
            samples,
            rows,
            share_prefix=self.update_path == "shared_prefix",
            max_samples=size,
            max_tokens=self.cfg.trainer.max_tokens_per_microbatch,
            packed=packs_prefix(self.model),
        )

    def agree_micro_count(self, micro: list[MicroBatch]) -> list[MicroBatch | None]:
        """The same number of micro-batches on every rank: ``None`` marks a dummy one (a
        forward on row 0 whose loss is masked out), so DDP/FSDP collectives stay in step."""
        n = int(dist_utils.all_reduce_max(len(micro), self.dist))
        return list(micro) + [None] * (n - len(micro))

    def policy_logprobs(
        self,
        model: Any,
        batch: TensorBatch,
        samples: list[Sample],
        mb: MicroBatch | None,
        *,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``logp, entropy (b, T)`` of ``model`` (the policy or the reference) on the
        micro-batch's rows (row 0 for a dummy), zero outside the trained positions on the
        fast paths; ``entropy`` is ``None`` unless ``with_entropy``."""
        temp = self.cfg.rollout.temperature
        if mb is None:
            mb = (
                MicroBatch((Unit((0,), 0),))
                if self.update_path == "plain"
                else self.plan(samples, [0])[0]
            )
        if self.update_path == "plain":
            sel = mb.rows
            return token_logprobs(
                model,
                batch.input_ids[sel].to(self.device),
                batch.attention_mask[sel].to(self.device),
                temperature=temp,
                with_entropy=with_entropy,
                loss_mask=batch.loss_mask[sel].to(self.device),
            )
        return micro_logprobs(
            model,
            samples,
            mb,
            width=batch.loss_mask.shape[1],
            pad_id=self.tokenizer.pad_token_id,
            device=self.device,
            temperature=temp,
            with_entropy=with_entropy,
        )

    def values(
        self, batch: TensorBatch, samples: list[Sample], mb: MicroBatch | None
    ) -> torch.Tensor:
        """Critic values ``(b, T)`` of the micro-batch's rows (padded to the micro-batch on
        the fast paths; the critic runs every position, its head is one output wide)."""
        sel = mb.rows if mb is not None else [0]
        if self.update_path == "plain":
            ids, att = batch.input_ids[sel], batch.attention_mask[sel]
        else:
            sub = collate([samples[i] for i in sel], self.tokenizer.pad_token_id)
            ids, att = sub.input_ids, sub.attention_mask
        v = token_values(self.critic, ids.to(self.device), att.to(self.device))
        width = batch.loss_mask.shape[1]
        if v.shape[1] < width:
            v = torch.nn.functional.pad(v, (0, width - v.shape[1]))
        return v

    def tokens_processed(self, batch: TensorBatch, samples: list[Sample], mb: MicroBatch) -> int:
        """Tokens the policy forward of a micro-batch computes, padding included."""
        if self.update_path == "plain":
            return len(mb.rows) * int(batch.input_ids.shape[1])
        return micro_batch_cost(samples, mb.units, packs_prefix(self.model))

    @torch.no_grad()
    def stats(self, batch: TensorBatch, samples: list[Sample]) -> dict[str, torch.Tensor]:
        """``old_logp`` (unless :attr:`single_pass`), ``ref_logp`` (with a reference) and
        ``values`` (with a critic), each ``(B, T)`` on the CPU, micro-batched, all in eval
        mode (:meth:`eval_mode`)."""
        self.eval_mode()
        width = batch.loss_mask.shape[1]
        keys = [
            k
            for k, on in (
                ("old_logp", not self.single_pass),
                ("ref_logp", self.ref is not None),
                ("values", self.critic is not None),
            )
            if on
        ]
        out = {k: torch.zeros((len(batch), width)) for k in keys}
        for mb in self.agree_micro_count(self.plan(samples, list(range(len(batch))))):
            rows = mb.rows if mb is not None else [0]
            got: dict[str, torch.Tensor] = {}
            if "old_logp" in out:
                got["old_logp"], _ = self.policy_logprobs(self.model, batch, samples, mb)
            if "ref_logp" in out:
                got["ref_logp"], _ = self.policy_logprobs(self.ref, batch, samples, mb)
            if "values" in out:
                got["values"] = self.values(batch, samples, mb)
            if mb is not None:
                for k, v in got.items():
                    out[k][rows] = v.cpu()
        return out

    def fill_entropy(self, samples: list[Sample]) -> None:
        """Set each sample's ``entropy``: its mean token entropy (nats) over its trained
        tokens, in eval mode (for entropy filtering, :mod:`ragen_train.filtering`)."""
        self.eval_mode()
        batch = collate(samples, self.tokenizer.pad_token_id)
        with torch.no_grad():
            for mb in self.agree_micro_count(self.plan(samples, list(range(len(samples))))):
                rows = mb.rows if mb is not None else [0]
                _, ent = self.policy_logprobs(self.model, batch, samples, mb, with_entropy=True)
                if mb is None:  # a dummy micro-batch (another rank has more)
                    continue
                ent = ent.cpu()
                for j, i in enumerate(rows):
                    m = batch.loss_mask[i]
                    samples[i].entropy = float((ent[j] * m).sum() / m.sum().clamp(min=1))

    def dummy_sample(self) -> Sample:
        """A fully masked sample, so a rank without data still joins the collectives."""
        pad = self.tokenizer.pad_token_id
        return Sample(
            input_ids=[pad, pad],
            loss_mask=[0, 0],
            turn_ids=[-1, -1],
            rewards=[0.0, 0.0],
            rollout_logprobs=None,
            score=0.0,
            group=-1,
            episode=-1,
        )

    def release(self) -> None:
        """Drop the references to the models (the trainer's ``close``)."""
        self.model = self.ref = self.critic = None


__all__ = ["BatchForwards", "chunks"]
