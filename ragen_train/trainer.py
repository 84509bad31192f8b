"""The StarPO loop: multi-turn, trajectory-level PPO / GRPO on the tokens the policy sampled.

:class:`StarPOTrainer` only orchestrates; each stage of a step has its own collaborator.
One step (RAGEN, arXiv 2504.20073, section 3 "StarPO"; RAGEN-AI/RAGEN
``ragen/trainer/agent_trainer.py``):

1. **rollout** — ``env_groups × group_size`` episodes on the train split through
   ``ragen_bench``'s rollout engine with the current policy (group ``g`` of step ``k``
   uses env seed ``k · env_groups + g``; members of a group share it;
   :mod:`ragen_train.episodes`), sampled by :class:`~ragen_train.sampling.Sampler`;
2. **samples** — the sampled token ids and the loss mask (:mod:`ragen_train.batch`);
3. **collapse diagnostics** on the unfiltered batch every ``collapse_every`` steps
   (:mod:`ragen_train.collapse`);
4. **filter** — keep informative groups, the same on every rank
   (:mod:`ragen_train.step_filter`, :mod:`ragen_train.filtering`); an empty selection
   skips the update;
5. **old log-probs**, **reference log-probs** (only if a KL coefficient is non-zero),
   **values** (only for critic-based estimators; :mod:`ragen_train.forwards`);
6. **advantages** (:func:`ragen_train.update.batch_advantages`, :mod:`ragen_train.advantages`);
7. **update** — ``ppo_epochs × mini_batches × micro-batches`` with gradient accumulation
   and loss denominators taken over the whole mini-batch on every rank; gradient
   clipping; a step whose gradient norm is not finite is skipped and counted
   (:class:`ragen_train.update.PPOUpdate`);
8. **validation** every ``val_every`` steps on the validation split (disjoint from
   training by construction), **checkpoint** every ``save_every`` steps.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen_bench.diagnostics.text_stats import DegenerateWatch
from ragen_bench.fileio import atomic_write_json
from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, rollout_config

from . import checkpoint as ckpt
from . import distributed as dist_utils
from . import run_dir
from .advantages import needs_critic
from .allocator import peak_rss_gib
from .batch import Sample, build_samples
from .collapse import CollapseMonitor
from .config import StarPOConfig, validate
from .episodes import train_specs_by_env, val_specs_by_env
from .filtering import FilterConfig
from .forwards import BatchForwards
from .logger import MetricLogger
from .metrics import episode_metrics, per_env_metrics, reduce_means
from .modeling import check_device, load_critic, load_policy, load_tokenizer, unwrap
from .multienv import (
    GroupAllocator,
    is_multi_env,
    train_envs,
    val_envs,
)
from .progress import PhaseProgress
from .run_dir import config_changes
from .sampling import Sampler
from .step_filter import filter_step
from .update import PPOUpdate, build_optimizers, tis_enabled


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (the trainer's own randomness; envs use their seeds)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _raise_if_rollout_broken(records: Sequence[EpisodeRecord]) -> None:
    """Failures of the setup are not a training signal: stop instead of learning from zeros.

    * Every episode failing in the environment (``env_error``) is a setup error (e.g. a bad
      env config); a few are the env's own results and stay.
    * Any episode whose generation failed (``endpoint_error``: the rollout engine raised or
      aborted the request) stops the run.  The trainer's engines are local (hf, vLLM), so a
      failed generation is a broken engine, not a flaky network: an episode cut short by it
      has no reward of the policy's own, and training on it (or dropping it, which biases the
      group) would teach the model nothing true.

    Raises:
        RuntimeError: with the first failing episode's error and how many failed.
    """
    if records and all(r.status == "env_error" for r in records):
        raise RuntimeError(
            f"every episode failed in the environment ({records[0].env_id}): {records[0].error}"
        )
    failed = [r for r in records if r.status == "endpoint_error"]
    if failed:
        raise RuntimeError(
            f"the rollout engine failed on {len(failed)} of {len(records)} episodes "
            f"({failed[0].env_id}, first: {failed[0].error}); training stops rather than "
            "learn from episodes the policy did not play (the last checkpoint is kept)"
        )


class StarPOTrainer:
    """Trains a policy with StarPO.

    Args:
        cfg: the run config.
        resume: a checkpoint directory, or ``"latest"`` for the newest one in
            ``cfg.trainer.out_dir``.
        model / tokenizer: an already-loaded policy and tokenizer (e.g. after SFT in the
            same process); default: loaded from ``cfg.model.path``.
    """

    def __init__(
        self,
        cfg: StarPOConfig,
        *,
        resume: str | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ):
        self.cfg = validate(cfg)
        check_device(cfg.model.device)
        self.out_dir = Path(cfg.trainer.out_dir)
        found = (  # before loading anything
            run_dir.find_checkpoint(self.out_dir, resume, cfg.trainer.save_every)
            if resume
            else None
        )
        resume_dir = found.path if found is not None else None
        self.resumed_from: ckpt.Resumable | None = found
        if found is not None and found.fallback_message():
            warnings.warn(found.fallback_message(), RuntimeWarning, stacklevel=2)
        if resume is None:
            run_dir.claim_out_dir(
                self.out_dir,
                overwrite=cfg.trainer.overwrite,
                keep=(cfg.model.path, cfg.sft.demos_path),
            )
        self.dist = dist_utils.init(cfg.model.device, cfg.trainer.dist_timeout_s)
        self.device = self.dist.device
        seed_everything(cfg.trainer.seed + self.dist.rank)
        alg = cfg.algorithm
        self.tokenizer = tokenizer or load_tokenizer(cfg.model.path)
        raw = model if model is not None else load_policy(cfg.model)
        raw.to(self.device)
        self.ref = load_policy(cfg.model, trainable=False) if alg.kl_coef > 0 else None
        self.critic = load_critic(cfg.model) if needs_critic(alg.adv_estimator) else None
        mp = cfg.model.mixed_precision
        self.model = dist_utils.wrap(raw, self.dist, cfg.trainer.distributed, mp)
        if self.critic is not None:
            self.critic = dist_utils.wrap(self.critic, self.dist, cfg.trainer.distributed, mp)
        if self.ref is not None and mp == "bf16":
            dist_utils.autocast_forward(self.ref, torch.bfloat16, torch.device(self.device).type)
        self.optimizer, self.scheduler, self.critic_optimizer = build_optimizers(
            cfg, self.model, self.critic
        )
        self.sampler = Sampler(
            cfg,
            self.dist,
            self.model,
            self.tokenizer,
            sync=model is not None,
            log=self._progress_log,
        )
        self.sampler_name, self.vllm_engine = self.sampler.name, self.sampler.engine
        self.tis = tis_enabled(cfg, self.sampler.name)
        self.train_envs, self.val_envs, self.multi_env = (
            train_envs(cfg),
            val_envs(cfg),
            is_multi_env(cfg),
        )
        self.allocator = GroupAllocator([e.weight for e in self.train_envs], cfg.rollout.env_groups)
        self.env_of_group: dict[int, int] = {}  # env index of every group of the last rollout
        self.rollout_cfg = rollout_config(cfg.env.id, cfg.rollout)
        self.layout = "trajectory" if self.rollout_cfg.context_mode == "full" else "turn"
        self.filter_cfg = FilterConfig.from_section(alg.filter)
        self.step = 0
        self.empty_streak = 0
        self.forwards = BatchForwards(
            cfg, self.dist, self.tokenizer, self.model, self.ref, self.critic
        )
        self.updater = PPOUpdate(
            cfg,
            self.dist,
            self.forwards,
            self.optimizer,
            self.scheduler,
            self.critic_optimizer,
            tis=self.tis,
            max_turns=self.max_turns,
        )
        self.collapse = CollapseMonitor(cfg, self.dist)
        self.degenerate_watch = DegenerateWatch(
            cfg.trainer.degenerate_warn_rate, cfg.trainer.degenerate_stop_steps
        )
        self.logger = MetricLogger(
            self.out_dir,
            cfg.trainer.loggers,
            enabled=self.dist.is_main,
            run_name=cfg.name,
            config=cfg.to_dict(),
            wandb_project=cfg.trainer.wandb_project,
            resume_step=found.step if found is not None else None,
        )
        if self.dist.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if resume_dir is not None:
                run_dir.note_config_changes(self.out_dir, resume_dir, cfg.to_dict())
            atomic_write_json(self.out_dir / "config.json", cfg.to_dict())
        if resume_dir is not None:
            self._resume(resume_dir)

    # ---------------------------------------------------------------- sampler
    @property
    def policy(self) -> Any:
        """What plays the episodes (:attr:`ragen_train.sampling.Sampler.policy`; replaceable)."""
        return self.sampler.policy

    @policy.setter
    def policy(self, policy: Any) -> None:
        self.sampler.policy = policy

    def _sync_engine(self) -> dict[str, float]:
        """Push the updated weights into the vLLM engine (no-op for ``hf``)."""
        return self.sampler.sync(self.model)

    # ---------------------------------------------------------------- rollouts
    def rollout(self, step: int) -> list[EpisodeRecord]:
        """This rank's share of step ``step``'s training episodes (groups handed to the training
        envs by :class:`~ragen_train.multienv.GroupAllocator`; one env: seed ``step · env_groups + g``)."""
        r, envs = self.cfg.rollout, self.train_envs
        plan = self.allocator.groups_at(step)
        self.env_of_group = {g: e for g, (e, _) in enumerate(plan)}
        specs = train_specs_by_env(self.cfg, envs, plan, self.dist)
        configs = [rollout_config(e.id, self.cfg.rollout, temperature=r.temperature) for e in envs]
        keys = [("train", step, g) for g in range(r.env_groups)]
        parts = self._play(f"step {step + 1} rollouts", specs, configs, keys, "group")
        return [rec for part in parts for rec in part]

    def _play(
        self,
        label: str,
        specs: list[list[EpisodeSpec]],
        configs: list[RolloutConfig],
        keys: list[tuple[str, int, int]],
        by: str,
    ) -> list[list[EpisodeRecord]]:
        """Play ``specs`` (``[env][i]``) with the policy in eval mode and a heartbeat
        (:meth:`~ragen_train.sampling.Sampler.play_seeded`, same arguments); returns the
        records ``[env][i]``.

        Raises:
            RuntimeError: a broken setup or sampler (:func:`_raise_if_rollout_broken`).
        """
        self.model.eval()
        with (
            self._phase(label, sum(map(len, specs))) as progress,
            dist_utils.unsharded(self.model),  # FSDP2: sampling runs a rank-dependent forward count
        ):
            parts = self.sampler.play_seeded(specs, configs, keys, by, progress)
        for part in parts:
            _raise_if_rollout_broken(part)
        return parts

    def evaluate(
        self,
        *,
        split: str | None = None,
        episodes: int | None = None,
        temperature: float | None = None,
        prefix: str = "val",
        records_out: list[EpisodeRecord] | None = None,
    ) -> dict[str, float]:
        """Success and return on fixed seeds ``0..episodes-1`` of ``split`` (default: validation) of
        every validation env (:func:`~ragen_train.multienv.val_envs`): ``<prefix>/*`` over all
        episodes, and ``<prefix>/<tag>/*`` per env when the run lists its envs (``prefix``: ``val``,
        or ``test`` for the held-out evaluation of :mod:`ragen_train.pipeline`).

        ``records_out``: if given, extended with this rank's finished episodes (every episode
        in a one-process run), in seed order per env: per-episode outcomes for a paired
        before/after test (``examples/real_model_run.py``)."""
        split = split or self.cfg.env.val_split
        t = self.cfg.trainer.val_temperature if temperature is None else temperature
        # Chunks of rollout.batch_size episodes, chunk c on rank c % W with its own sampling seed:
        # the metrics do not depend on the number of processes.
        batch = max(1, self.cfg.rollout.batch_size)
        specs = val_specs_by_env(self.cfg, self.val_envs, split, episodes, self.dist)
        n_units = max((sp.index // batch for part in specs for sp in part), default=-1) + 1
        configs = [
            rollout_config(e.id, self.cfg.rollout, temperature=max(t, 0.0)) for e in self.val_envs
        ]
        keys = [(prefix, 0, u) for u in range(n_units)]
        parts = self._play(f"{prefix} ({split} split)", specs, configs, keys, "batch")
        records = [rec for part in parts for rec in part]
        if records_out is not None:
            records_out.extend(records)
        return self._episode_metrics(records, parts, self.val_envs, prefix)

    def _episode_metrics(
        self,
        records: list[EpisodeRecord],
        parts: list[list[EpisodeRecord]],
        envs: Sequence[Any],
        prefix: str,
        group_size: int | None = None,
    ) -> dict[str, float]:
        """:func:`~ragen_train.metrics.episode_metrics` of ``records``, reduced over ranks, plus
        ``<prefix>/<tag>/...`` of each env's ``parts`` entry when there are several envs."""
        out = reduce_means(episode_metrics(records, prefix, group_size), len(records), self.dist)
        if self.multi_env:
            out |= per_env_metrics(parts, envs, prefix, self.dist, group_size)
        return out

    #: Seconds between progress lines of a long rollout, validation or update phase.
    progress_every_s = 15.0

    def _phase(self, label: str, episodes: int) -> PhaseProgress:
        """Heartbeat lines on standard output while a phase plays (main rank only; a phase
        shorter than :attr:`progress_every_s` prints nothing)."""
        return PhaseProgress(
            self._progress_log, f"[ragen] {label}", episodes, every_s=self.progress_every_s
        )

    def _progress_log(self, line: str) -> None:
        """Print a progress line on the main rank (other ranks stay quiet)."""
        if self.dist.is_main:
            print(line, flush=True)

    # ------------------------------------------------------------------- step
    def train_step(self) -> dict[str, float]:
        """One StarPO step; returns its metrics (reduced over ranks)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        records = self.rollout(self.step)
        t_roll = time.perf_counter() - t0
        by_env: list[list[EpisodeRecord]] = [[] for _ in self.train_envs]
        for rec in records:
            by_env[self.env_of_group[rec.group]].append(rec)
        metrics = self._episode_metrics(
            records, by_env, self.train_envs, "train", cfg.rollout.group_size
        )
        samples, bstats = build_samples(
            records, layout=self.layout, reward_placement=cfg.rollout.reward_placement
        )
        for k, v in bstats.metrics().items():
            metrics[k] = dist_utils.all_reduce_sum(v, self.dist)
        if self.collapse.due(self.step):  # step 1, then every k (RAGEN)
            with dist_utils.unsharded(self.model):  # every rank enters; rank 0 scores (FSDP2-safe)
                metrics.update(
                    self.collapse.metrics(records, self.model, self.tokenizer, self.step)
                )
        if self.filter_cfg.metric == "entropy":
            with dist_utils.unsharded(self.model):  # a rank may have fewer (or no) samples
                if samples:
                    self.forwards.fill_entropy(samples)
        kept_samples, fmetrics, scale = filter_step(
            samples,
            records,
            self.filter_cfg,
            self.env_of_group,
            self.dist,
            self.train_envs if self.multi_env else None,
        )
        metrics.update(fmetrics)
        if fmetrics["filter/kept"] == 0:  # the kept set is global, so every rank agrees
            self.empty_streak += 1
            metrics["train/skipped_empty"] = 1.0
            metrics["train/consecutive_empty"] = float(self.empty_streak)
        else:
            self.empty_streak = 0
            self.sampler.sleep()
            metrics.update(self._update(kept_samples, scale))
            if "actor/grad_norm" in metrics:  # the weights changed
                t_sync = time.perf_counter()
                metrics.update(self._sync_engine())
                metrics["time/sync_s"] = time.perf_counter() - t_sync
        metrics["time/rollout_s"] = t_roll
        metrics["time/step_s"] = time.perf_counter() - t0
        metrics["perf/peak_rss_gib"] = peak_rss_gib()
        metrics["train/nonfinite_skips_total"] = float(self.nonfinite_skips)
        self.step += 1
        return metrics

    # ----------------------------------------------------------------- update
    @property
    def max_turns(self) -> int:
        """The largest turn limit of the training envs (for ``norm_len``)."""
        return max(rollout_config(e.id, self.cfg.rollout).max_turns for e in self.train_envs)

    @property
    def update_path(self) -> str:
        """The log-prob path of the update (:attr:`ragen_train.forwards.BatchForwards.update_path`)."""
        return self.forwards.update_path

    @property
    def nonfinite_skips(self) -> int:
        """Updates skipped for a non-finite gradient norm (:class:`ragen_train.update.PPOUpdate`)."""
        return self.updater.nonfinite_skips

    def _update(self, samples: list[Sample], scale: float) -> dict[str, float]:
        """PPO epochs over mini-batches of the kept samples at this step
        (:meth:`ragen_train.update.PPOUpdate.update`); returns metrics reduced over ranks."""
        return self.updater.update(
            samples, scale, step=self.step, log=self._progress_log, every_s=self.progress_every_s
        )

    # ----------------------------------------------------------- checkpoints
    def save(self) -> Path:
        """Write checkpoint ``self.step`` (crash-safe; :func:`ragen_train.checkpoint.save`)."""
        t = self.cfg.trainer
        # Train/eval mode of the modules is part of the state: a resumed run must continue in the
        # modes the uninterrupted one would be in (a freshly loaded module is in eval mode).
        modes = {
            "policy": unwrap(self.model).training,
            "critic": unwrap(self.critic).training if self.critic is not None else None,
        }
        state = {
            "empty_streak": self.empty_streak,
            "nonfinite_skips": self.nonfinite_skips,
            "degenerate_watch": self.degenerate_watch.state_dict(),
            "collapse_tracker": self.collapse.state_dict(),
            "rollout_seed_counter": self.step * self.cfg.rollout.env_groups,
            "modes": modes,
            "config": self.cfg.to_dict(),
        }
        path = ckpt.save(
            self.out_dir,
            self.step,
            model=self.model,
            tokenizer=self.tokenizer,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            state=state,
            rank=self.dist.rank,
            critic=self.critic,
            critic_optimizer=self.critic_optimizer,
            merge_lora=self.cfg.model.lora.save == "merged",
            keep=t.keep_checkpoints,
            barrier=lambda: dist_utils.barrier(self.dist),
        )
        dist_utils.barrier(self.dist)
        return path

    def save_final_model(self) -> Path:
        """Save the policy to ``<out_dir>/final_model`` (:func:`ragen_train.run_dir.save_final_model`);
        returns the path.  Every rank must call it."""
        return run_dir.save_final_model(
            self.out_dir,
            self.model,
            self.tokenizer,
            self.dist,
            merge_lora=self.cfg.model.lora.save == "merged",
            config=self.cfg.to_dict(),
        )

    def _resume(self, d: Path) -> None:
        """Load the model, optimiser, scheduler, RNG, module modes and loop state of checkpoint
        ``d`` (verified by :func:`ragen_train.run_dir.find_checkpoint`)."""
        state = ckpt.load_state(d)
        run_dir.load_weights(
            d,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            critic=self.critic,
            critic_optimizer=self.critic_optimizer,
        )
        run_dir.restore_rng(d, self.dist.rank)
        modes = state.get("modes") or {}
        if modes.get("policy") is not None:
            self.model.train(bool(modes["policy"]))
        if self.critic is not None and modes.get("critic") is not None:
            self.critic.train(bool(modes["critic"]))
        self.step = int(state["step"])
        self.empty_streak = int(state.get("empty_streak", 0))
        self.updater.nonfinite_skips = int(state.get("nonfinite_skips", 0))
        self.degenerate_watch.load_state_dict(state.get("degenerate_watch") or {})
        self.collapse.load_state_dict(state.get("collapse_tracker"))
        self._sync_engine()  # the engine was built from model.path, not the checkpoint

    # -------------------------------------------------------------------- fit
    def fit(self) -> dict[str, float]:
        """Train until ``total_steps`` (or a stopping rule), then save ``final_model``
        (:meth:`save_final_model`); returns the last validation metrics."""
        t = self.cfg.trainer
        last_val: dict[str, float] = {}
        if t.val_before_train and self.step == 0 and t.val_every > 0:
            last_val = self.evaluate()
            self.logger.log(0, last_val, phase="val")
        warned_no_signal = False
        while self.step < t.total_steps:
            metrics = self.train_step()
            self.logger.log(self.step, metrics, phase="train")
            if not warned_no_signal and metrics.get("train/format_valid_rate", 1.0) == 0.0:
                warned_no_signal = True
                warnings.warn(
                    f"step {self.step}: no rollout produced a valid answer, so every group is constant and "
                    "the update has no learning signal; start from an SFT checkpoint (`ragen-train sft`, "
                    "then model.path=<out_dir>/sft_model) or an instruct model",
                    RuntimeWarning,
                    stacklevel=2,
                )
            if t.val_every > 0 and (self.step % t.val_every == 0 or self.step == t.total_steps):
                last_val = self.evaluate()
                self.logger.log(self.step, last_val, phase="val")
            saved = t.save_every > 0 and (
                self.step % t.save_every == 0 or self.step == t.total_steps
            )
            if saved:
                self.save()
            if self.degenerate_watch.update(metrics.get("train/degenerate_rate"), self.step):
                if t.save_every > 0 and not saved:
                    self.save()
                w = self.degenerate_watch
                warnings.warn(
                    f"stopping: train/degenerate_rate has been above trainer.degenerate_warn_rate="
                    f"{w.threshold:g} for {w.streak} consecutive steps (since step {w.first_step}); "
                    f"checkpoints are kept in {self.out_dir / 'checkpoints'}",
                    RuntimeWarning,
                )
                break
            if self.empty_streak >= self.filter_cfg.empty_stop_steps:
                warnings.warn(
                    f"stopping: {self.empty_streak} consecutive steps had no group left after filtering",
                    RuntimeWarning,
                )
                break
            if self.nonfinite_skips > t.max_nonfinite_skips:
                warnings.warn(
                    f"stopping: {self.nonfinite_skips} updates had non-finite gradients",
                    RuntimeWarning,
                )
                break
        self.logger.close()
        self.save_final_model()
        return last_val

    def close(self) -> None:
        """Release the policy, critic, reference model, optimizers and rollout sampler, then
        leave the process group (:func:`ragen_train.distributed.shutdown`).  Call it once,
        after :meth:`fit` (``ragen-train starpo`` does); the trainer cannot train afterwards.
        Under ``torchrun`` every rank must call it (it holds a barrier)."""
        for name in ("model", "critic", "ref", "optimizer", "critic_optimizer", "vllm_engine"):
            setattr(self, name, None)
        self.forwards.release()
        self.updater.optimizer = self.updater.critic_optimizer = None
        self.sampler.close()
        dist_utils.shutdown()


__all__ = [
    "StarPOTrainer",
    "config_changes",  # re-exported from ragen_train.run_dir
    "episode_metrics",  # re-exported from ragen_train.metrics
    "seed_everything",
]
