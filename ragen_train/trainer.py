"""The StarPO loop: multi-turn, trajectory-level PPO / GRPO on the tokens the policy sampled.

One step (RAGEN, arXiv 2504.20073, section 3 "StarPO"; RAGEN-AI/RAGEN
``ragen/trainer/agent_trainer.py``):

1. **rollout** — ``env_groups × group_size`` episodes on the train split through
   ``ragen_bench``'s rollout engine with the current policy (group ``g`` of step ``k``
   uses env seed ``k · env_groups + g``; members of a group share it);
2. **samples** — the sampled token ids and the loss mask (:mod:`ragen_train.batch`);
3. **collapse diagnostics** on the unfiltered batch every ``collapse_every`` steps;
4. **filter** — keep informative groups (:mod:`ragen_train.filtering`); an empty
   selection skips the update;
5. **old log-probs**, **reference log-probs** (only if a KL coefficient is non-zero),
   **values** (only for critic-based estimators);
6. **advantages** (:mod:`ragen_train.advantages`);
7. **update** — ``ppo_epochs × mini_batches × micro-batches`` with gradient accumulation
   and loss denominators taken over the whole mini-batch on every rank; gradient
   clipping; a step whose gradient norm is not finite is skipped and counted;
8. **validation** every ``val_every`` steps on the validation split (disjoint from
   training by construction), **checkpoint** every ``save_every`` steps.
"""

from __future__ import annotations

import random
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen_bench.diagnostics.text_stats import DegenerateWatch
from ragen_bench.fileio import atomic_write_json
from ragen_bench.policies.hf import HFPolicy
from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, rollout_config

from . import checkpoint as ckpt
from . import distributed as dist_utils
from . import run_dir
from .advantages import ADVANTAGE_ESTIMATORS, needs_critic
from .allocator import peak_rss_gib
from .batch import Sample, TensorBatch, build_samples, collate
from .config import StarPOConfig, validate
from .filtering import FilterConfig, group_scores, group_values, select_groups
from .logger import MetricLogger
from .logprobs import (
    MicroBatch,
    Unit,
    fast_path_problem,
    micro_batch_cost,
    micro_logprobs,
    packs_prefix,
    plan_micro_batches,
)
from .losses import (
    Denominators,
    aggregate,
    kl_penalty,
    ppo_policy_loss,
    tis_weights,
    token_mean,
    value_loss,
)
from .metrics import MetricAccumulator, episode_metrics, per_env_metrics, reduce_means
from .modeling import (
    check_device,
    load_critic,
    load_policy,
    load_tokenizer,
    token_logprobs,
    token_values,
    unwrap,
)
from .multienv import (
    GroupAllocator,
    is_multi_env,
    per_env_kept,
    run_by_env,
    select_groups_per_env,
    train_envs,
    val_envs,
)
from .progress import PhaseProgress, UpdateProgress
from .run_dir import config_changes
from .schedules import build_lr_scheduler


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
        opt = cfg.optim
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params,
            lr=opt.lr,
            betas=(opt.beta1, opt.beta2),
            eps=opt.adam_eps,
            weight_decay=opt.weight_decay,
        )
        self.scheduler = build_lr_scheduler(
            self.optimizer,
            opt.lr_schedule,
            warmup_steps=opt.warmup_steps,
            total_steps=cfg.trainer.total_steps,
            min_lr_ratio=opt.min_lr_ratio,
        )
        self.critic_optimizer = (
            torch.optim.AdamW(
                [p for p in self.critic.parameters() if p.requires_grad],
                lr=opt.critic_lr,
                betas=(opt.beta1, opt.beta2),
                eps=opt.adam_eps,
                weight_decay=opt.weight_decay,
            )
            if self.critic is not None
            else None
        )
        self.sampler_name, self.vllm_engine = self._build_sampler(sync=model is not None)
        self.policy = (
            self.vllm_engine.policy
            if self.vllm_engine is not None
            else HFPolicy(
                unwrap(self.model),
                self.tokenizer,
                device=self.device,
                max_batch_size=cfg.rollout.batch_size,
            )
        )
        self.tis = alg.tis == "on" or (alg.tis == "auto" and self.sampler_name == "vllm")
        if self.tis and cfg.rollout.temperature != 1.0:
            warnings.warn(
                "algorithm.tis needs rollout.temperature=1 (engines report log-probs at temperature 1); "
                "truncated importance sampling is off",
                RuntimeWarning,
                stacklevel=2,
            )
            self.tis = False
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
        self.nonfinite_skips = 0
        self.collapse_tracker: Any = None
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

    # ------------------------------------------------------------ configuration
    def _build_sampler(self, *, sync: bool) -> tuple[str, Any]:
        """``("hf", None)`` or ``("vllm", VLLMRolloutEngine)`` for ``rollout.sampler``
        (see :mod:`ragen_train.rollout_engine`); ``sync`` loads the trainer's weights into a
        new engine (a model passed in, e.g. after SFT, differs from ``model.path``)."""
        from .config import TrainConfigError
        from .modeling import resolve_model_path
        from .rollout_engine import resolve_sampler, sampler_line, vllm_available

        cfg = self.cfg
        name = resolve_sampler(cfg.rollout.sampler, cfg.model.path)
        if name == "vllm" or vllm_available():  # a choice to tell (without vLLM: always hf)
            self._progress_log(f"[ragen] {sampler_line(cfg.rollout.sampler, name, cfg.model.path)}")
        if name == "hf":
            return name, None
        from .rollout_engine import VLLMRolloutEngine, engine_dtype

        v = cfg.rollout.vllm
        if not str(self.device).startswith("cuda") and not float(v.kv_cache_gb).is_integer():
            raise TrainConfigError(  # vLLM parses VLLM_CPU_KVCACHE_SPACE with int()
                "rollout.vllm.kv_cache_gb",
                f"vLLM's CPU back-end takes whole GiB, got {v.kv_cache_gb:g}; use e.g. "
                f"rollout.vllm.kv_cache_gb={max(1, round(v.kv_cache_gb))}",
            )
        if not vllm_available():
            from ragen_bench.policies.vllm_backend import VLLM_EXTRA_HINT

            raise TrainConfigError(
                "rollout.sampler",
                f"vllm is not importable here ({VLLM_EXTRA_HINT}); use rollout.sampler=hf",
            )
        engine = VLLMRolloutEngine(
            resolve_model_path(cfg.model.path),
            dtype=engine_dtype(v.dtype, str(self.device)),
            max_batch_size=cfg.rollout.batch_size,
            device=str(self.device),
            tensor_parallel_size=v.tensor_parallel_size,
            gpu_memory_utilization=v.gpu_memory_utilization,
            max_model_len=v.max_model_len,
            enforce_eager=v.enforce_eager,
            seed=cfg.trainer.seed + self.dist.rank,  # sampling seeds: per request (_play_seeded)
            kv_cache_gb=v.kv_cache_gb,
            sleep_mode=v.sleep_mode,
            distributed=self.dist.enabled,
        )
        if sync:
            engine.sync_weights(self.model, check=v.check_sync)
        return name, engine

    def _sync_engine(self) -> dict[str, float]:
        """Push the updated weights into the vLLM engine (no-op for ``hf``)."""
        if self.vllm_engine is None:
            return {}
        return self.vllm_engine.sync_weights(self.model, check=self.cfg.rollout.vllm.check_sync)

    def env_config(self, split: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**(self.cfg.env.config if base is None else base), "split": split}

    # ---------------------------------------------------------------- rollouts
    def rollout(self, step: int) -> list[EpisodeRecord]:
        """This rank's share of step ``step``'s training episodes (groups handed to the training
        envs by :class:`~ragen_train.multienv.GroupAllocator`; one env: seed ``step · env_groups + g``)."""
        r, envs = self.cfg.rollout, self.train_envs
        plan = self.allocator.groups_at(step)
        self.env_of_group = {g: e for g, (e, _) in enumerate(plan)}
        specs: list[list[EpisodeSpec]] = [[] for _ in envs]
        for g in dist_utils.groups_for_rank(r.env_groups, self.dist):
            e, seed = plan[g]
            conf = self.env_config(self.cfg.env.train_split, envs[e].config)
            specs[e] += [
                EpisodeSpec(
                    index=g * r.group_size + m,
                    env_id=envs[e].id,
                    seed=seed,
                    group=g,
                    member=m,
                    env_config=dict(conf),
                )
                for m in range(r.group_size)
            ]
        self.model.eval()
        configs = [rollout_config(e.id, self.cfg.rollout, temperature=r.temperature) for e in envs]
        with (
            self._phase(f"step {step + 1} rollouts", sum(map(len, specs))) as progress,
            dist_utils.unsharded(
                self.model
            ),  # FSDP2: sampling runs a rank-dependent number of forwards
        ):
            parts = self._play_seeded(
                specs,
                configs,
                [("train", step, g) for g in range(r.env_groups)],
                "group",
                progress,
            )
        for part in parts:
            _raise_if_rollout_broken(part)
        return [rec for part in parts for rec in part]

    def _play_seeded(
        self,
        specs: list[list[EpisodeSpec]],
        configs: list[RolloutConfig],
        keys: list[tuple[str, int, int]],
        by: str,
        progress: Any = None,
    ) -> list[list[EpisodeRecord]]:
        """Play ``specs`` one unit at a time (a unit: the episodes whose ``by`` attribute,
        ``group`` or ``index // batch``, is ``u``), sampling unit ``u`` with the torch seed
        :func:`~ragen_train.distributed.rollout_seed` of ``(trainer.seed, *keys[u])``.

        So what an episode samples depends on the step and its global unit, not on the rank or
        the world size: 1 and N processes play the same episodes (process-count independence).
        The global RNG state is left as it was.  ``progress``: passed to
        :func:`~ragen_train.multienv.run_by_env`.  Returns ``[env][i]`` records in spec order.

        With the ``vllm`` sampler every spec plays in one batch (the engine's throughput) and
        each request samples with its own seed, ``rollout_seed(trainer.seed, *keys[u], env,
        episode index, turn)`` (:meth:`~ragen_train.rollout_engine.VLLMRolloutEngine.seeded`),
        which is again a function of the global unit, not of the rank.
        """
        batch = max(1, self.cfg.rollout.batch_size)

        def unit(spec: EpisodeSpec) -> int:
            return spec.group if by == "group" else spec.index // batch

        if self.vllm_engine is not None:
            return run_by_env(
                [
                    self._seeded_engine(e, {sp.index: keys[unit(sp)] for sp in part})
                    for e, part in enumerate(specs)
                ],
                specs,
                configs,
                progress=progress,
            )
        units = sorted({unit(sp) for part in specs for sp in part})
        out: list[list[EpisodeRecord]] = [[] for _ in specs]
        devices = [torch.cuda.current_device()] if str(self.device).startswith("cuda") else []
        for u in units:
            mine = [[sp for sp in part if unit(sp) == u] for part in specs]
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(dist_utils.rollout_seed(self.cfg.trainer.seed, *keys[u]))
                got = run_by_env(self.policy, mine, configs, progress=progress)
            for e, recs in enumerate(got):
                out[e] += recs
        return out

    def _seeded_engine(self, env: int, key_of: dict[int, tuple[Any, ...]]) -> Any:
        """The vLLM engine's policy for env ``env``'s episodes: a request of episode ``i`` at
        turn ``t`` samples with seed ``rollout_seed(trainer.seed, *key_of[i], env, i, t)``."""
        seed = self.cfg.trainer.seed

        def seed_of(req: Any) -> int:
            i = req.episode_index
            return dist_utils.rollout_seed(seed, *key_of[i], env, i, req.turn)

        return self.vllm_engine.seeded(seed_of)

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
        specs = [
            [
                EpisodeSpec(
                    index=i,
                    env_id=e.id,
                    seed=i,
                    group=i,
                    env_config=self.env_config(split, e.config),
                )
                for i in range(episodes or e.episodes or self.cfg.trainer.val_episodes)
                if (i // batch) % self.dist.world_size == self.dist.rank
            ]
            for e in self.val_envs
        ]
        self.model.eval()
        n_units = max((sp.index // batch for part in specs for sp in part), default=-1) + 1
        with (
            self._phase(f"{prefix} ({split} split)", sum(map(len, specs))) as progress,
            dist_utils.unsharded(self.model),
        ):
            parts = self._play_seeded(
                specs,
                [
                    rollout_config(e.id, self.cfg.rollout, temperature=max(t, 0.0))
                    for e in self.val_envs
                ],
                [(prefix, 0, u) for u in range(n_units)],
                "batch",
                progress,
            )
        for part in parts:
            _raise_if_rollout_broken(part)
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

    #: Seconds between progress lines of a long rollout or validation phase (issue 29 item 7).
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
        every = cfg.trainer.collapse_every
        if every and (
            self.step == 0 or (self.step + 1) % every == 0
        ):  # step 1, then every k (RAGEN)
            with dist_utils.unsharded(self.model):  # every rank enters; rank 0 scores (FSDP2-safe)
                metrics.update(self._collapse_metrics(records))
        if self.filter_cfg.metric == "entropy":
            with dist_utils.unsharded(self.model):  # a rank may have fewer (or no) samples
                if samples:
                    self._fill_entropy(samples)
        kept_samples, fmetrics, scale = self._filter(samples, records)
        metrics.update(fmetrics)
        if fmetrics["filter/kept"] == 0:  # the kept set is global, so every rank agrees
            self.empty_streak += 1
            metrics["train/skipped_empty"] = 1.0
            metrics["train/consecutive_empty"] = float(self.empty_streak)
        else:
            self.empty_streak = 0
            if self.vllm_engine is not None:
                self.vllm_engine.sleep()
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

    def _filter(
        self, samples: list[Sample], records: list[EpisodeRecord]
    ) -> tuple[list[Sample], dict[str, float], float]:
        """Group scores gathered over ranks; the same kept set everywhere.

        Only the episodes that survived :func:`~ragen_train.batch.build_samples` count
        towards their group (a NaN-reward episode is in no update, so it scores nothing).
        """
        per_group: dict[int, list[float]] = defaultdict(list)
        if self.filter_cfg.metric != "entropy":
            alive = {(s.group, s.episode) for s in samples}
            per_group.update(group_values(records, self.filter_cfg.metric, alive=alive))
        else:
            ent: dict[tuple[int, int], list[float]] = defaultdict(list)
            for s in samples:
                ent[(s.group, s.episode)].append(s.entropy)
            for (g, _), v in ent.items():
                per_group[g].append(float(np.nanmean(v)))
        gathered = dist_utils.all_gather_object(dict(per_group), self.dist)
        merged: dict[int, list[float]] = {}
        for part in gathered:
            merged.update(part)
        groups = sorted(merged)
        if self.filter_cfg.scope == "per_env":
            kept_ids, fmetrics, scale = select_groups_per_env(
                merged, self.env_of_group, self.filter_cfg
            )
        else:
            scores = group_scores(merged, self.filter_cfg.metric) if groups else np.zeros(0)
            result = select_groups(scores, self.filter_cfg)
            kept_ids, fmetrics, scale = (
                {groups[i] for i in result.kept},
                result.metrics,
                result.scale,
            )
        if self.multi_env:
            fmetrics = fmetrics | per_env_kept(kept_ids, self.env_of_group, self.train_envs)
        return [s for s in samples if s.group in kept_ids], fmetrics, scale

    def _fill_entropy(self, samples: list[Sample]) -> None:
        """Each sample's mean token entropy over its trained tokens (for entropy filtering)."""
        self._eval_mode()
        batch = collate(samples, self.tokenizer.pad_token_id)
        with torch.no_grad():
            for mb in self._agree_micro_count(self._plan(samples, list(range(len(samples))))):
                rows = mb.rows if mb is not None else [0]
                _, ent = self._policy_logprobs(self.model, batch, samples, mb, with_entropy=True)
                if mb is None:  # a dummy micro-batch (another rank has more)
                    continue
                ent = ent.cpu()
                for j, i in enumerate(rows):
                    m = batch.loss_mask[i]
                    samples[i].entropy = float((ent[j] * m).sum() / m.sum().clamp(min=1))

    # ----------------------------------------------------------------- update
    @property
    def max_turns(self) -> int:
        """The largest turn limit of the training envs (for ``norm_len``)."""
        return max(rollout_config(e.id, self.cfg.rollout).max_turns for e in self.train_envs)

    @property
    def _single_pass(self) -> bool:
        """One epoch of one mini-batch: the policy that sampled is the one being updated,
        so the old log-probs equal the (detached) current ones and need no extra pass."""
        alg = self.cfg.algorithm
        kl_reward = self.ref is not None and alg.kl_in_reward  # needs the old log-probs up front
        return self.cfg.optim.ppo_epochs == 1 and self.cfg.optim.mini_batches == 1 and not kl_reward

    def _eval_mode(self) -> None:
        """Policy, reference and critic in eval mode (no dropout) for the statistics of the
        batch; :meth:`_minibatch` switches the policy and critic back to train mode.

        A model whose config has dropout (a user's own policy; the critic's value head has none,
        :func:`ragen_train.modeling.load_critic`) would otherwise carry dropout noise into the
        old log-probs and GAE, and a resumed run (whose freshly loaded models are in eval
        mode) would differ from the uninterrupted one."""
        for m in (self.model, self.ref, self.critic):
            if m is not None:
                m.eval()

    # -------------------------------------------------------------- forwards
    @property
    def update_path(self) -> str:
        """The path :mod:`ragen_train.logprobs` runs: ``trainer.update_path``, or a simpler
        one (with a warning, once) when the model cannot run it."""
        path = getattr(self, "_update_path", None)
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

    def _plan(self, samples: list[Sample], rows: list[int]) -> list[MicroBatch]:
        """Micro-batches of ``rows`` (:func:`~ragen_train.logprobs.plan_micro_batches`; the
        plain path keeps fixed chunks of ``optim.micro_batch_size`` in the given order)."""
        size = self.cfg.optim.micro_batch_size
        if self.update_path == "plain":
            return [MicroBatch((Unit(tuple(c), 0),)) for c in _chunks(rows, size)]
        return plan_micro_batches(
            samples,
            rows,
            share_prefix=self.update_path == "shared_prefix",
            max_samples=size,
            max_tokens=self.cfg.trainer.max_tokens_per_microbatch,
            packed=packs_prefix(self.model),
        )

    def _agree_micro_count(self, micro: list[MicroBatch]) -> list[MicroBatch | None]:
        """The same number of micro-batches on every rank: ``None`` marks a dummy one (a
        forward on row 0 whose loss is masked out), so DDP/FSDP collectives stay in step."""
        n = int(dist_utils.all_reduce_max(len(micro), self.dist))
        return list(micro) + [None] * (n - len(micro))

    def _policy_logprobs(
        self,
        model: Any,
        batch: TensorBatch,
        samples: list[Sample],
        mb: MicroBatch | None,
        *,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``logp, entropy (b, T)`` of the micro-batch's rows (row 0 for a dummy), zero
        outside the trained positions on the fast paths."""
        temp = self.cfg.rollout.temperature
        if mb is None:
            mb = (
                MicroBatch((Unit((0,), 0),)) if self.update_path == "plain" else self._row0(samples)
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

    def _row0(self, samples: list[Sample]) -> MicroBatch:
        return self._plan(samples, [0])[0]

    def _values(self, batch: TensorBatch, samples: list[Sample], mb: MicroBatch | None):
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

    def _tokens_processed(self, batch: TensorBatch, samples: list[Sample], mb: MicroBatch) -> int:
        """Tokens the policy forward of a micro-batch computes, padding included."""
        if self.update_path == "plain":
            return len(mb.rows) * int(batch.input_ids.shape[1])
        return micro_batch_cost(samples, mb.units, packs_prefix(self.model))

    @torch.no_grad()
    def _forward_stats(self, batch: TensorBatch, samples: list[Sample]) -> dict[str, torch.Tensor]:
        """Old log-probs (unless :attr:`_single_pass`), reference log-probs and values, micro-batched,
        all in eval mode (:meth:`_eval_mode`)."""
        self._eval_mode()
        width = batch.loss_mask.shape[1]
        keys = [
            k
            for k, on in (
                ("old_logp", not self._single_pass),
                ("ref_logp", self.ref is not None),
                ("values", self.critic is not None),
            )
            if on
        ]
        out = {k: torch.zeros((len(batch), width)) for k in keys}
        for mb in self._agree_micro_count(self._plan(samples, list(range(len(batch))))):
            rows = mb.rows if mb is not None else [0]
            got: dict[str, torch.Tensor] = {}
            if "old_logp" in out:
                got["old_logp"], _ = self._policy_logprobs(self.model, batch, samples, mb)
            if "ref_logp" in out:
                got["ref_logp"], _ = self._policy_logprobs(self.ref, batch, samples, mb)
            if "values" in out:
                got["values"] = self._values(batch, samples, mb)
            if mb is not None:
                for k, v in got.items():
                    out[k][rows] = v.cpu()
        return out

    def _advantages(
        self, batch: TensorBatch, samples: list[Sample], stats: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and returns ``(B, T)`` for the batch."""
        alg = self.cfg.algorithm
        mask = batch.loss_mask
        rewards = batch.rewards.clone()
        kl_in_reward = self.ref is not None and alg.kl_in_reward
        if (
            kl_in_reward
        ):  # r_t <- r_t - β KL_t on every generated token (RAGEN / verl use_kl_in_reward)
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
                adv = self._whiten(adv, mask)
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

    def _whiten(self, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked whitening with statistics over the whole batch on every rank (unbiased variance)."""
        m = mask.double()
        a = adv.double()
        n = dist_utils.all_reduce_sum(float(m.sum()), self.dist)
        if n < 2:
            return adv * mask
        s1 = dist_utils.all_reduce_sum(float((a * m).sum()), self.dist)
        s2 = dist_utils.all_reduce_sum(float((a * a * m).sum()), self.dist)
        mean = s1 / n
        var = max((s2 - n * mean * mean) / (n - 1), 0.0)
        return ((a - mean) / (var + 1e-8) ** 0.5 * m).float()

    def _dummy_sample(self) -> Sample:
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

    def _update(self, samples: list[Sample], scale: float) -> dict[str, float]:
        """PPO epochs over mini-batches of the kept samples; returns metrics reduced over ranks."""
        opt = self.cfg.optim
        samples = samples or [self._dummy_sample()]
        batch = collate(samples, self.tokenizer.pad_token_id)
        t_old = time.perf_counter()
        with dist_utils.unsharded(
            self.model, self.critic
        ):  # [scale] equal work: no-grad forwards, any count
            stats = self._forward_stats(batch, samples)
        t_old = time.perf_counter() - t_old
        adv, returns = self._advantages(batch, samples, stats)
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
            self._progress_log,
            f"[ragen] step {self.step + 1} update",
            n * opt.ppo_epochs,
            epochs=opt.ppo_epochs,
            every_s=self.progress_every_s,
        ) as progress:
            for epoch in range(opt.ppo_epochs):
                progress.epoch = epoch
                gen = torch.Generator().manual_seed(
                    self.cfg.trainer.seed * 1_000_003 + self.step * 101 + epoch
                )
                order = torch.randperm(n, generator=gen).tolist()
                for k in range(opt.mini_batches):
                    self._minibatch(
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

    def _minibatch(
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
        """One optimizer step on one mini-batch, micro-batched with gradient accumulation.

        Losses are normalised by the mini-batch's global denominators (all micro-batches,
        all ranks) and multiplied by the world size to undo DDP's gradient averaging.
        """
        cfg, alg, opt = self.cfg, self.cfg.algorithm, self.cfg.optim
        world = self.dist.world_size
        m = batch.loss_mask[idx] if idx else torch.zeros((0, 1))
        norm_len = float(alg.norm_len or (cfg.rollout.max_new_tokens * max(1, self.max_turns)))
        denom = Denominators(
            tokens=dist_utils.all_reduce_sum(float(m.sum()), self.dist),
            seqs=dist_utils.all_reduce_sum(float((m.sum(-1) > 0).sum()) if idx else 0.0, self.dist),
            norm_len=norm_len,
        )
        if denom.tokens == 0:
            return
        micro = self._agree_micro_count(self._plan(samples, idx))
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        if self.critic is not None:
            self.critic.train()
            self.critic_optimizer.zero_grad(set_to_none=True)
        for j, mb in enumerate(micro):
            last = j == len(micro) - 1
            mi = mb is not None  # False: a dummy micro-batch (row 0, loss masked out)
            sel = mb.rows if mb is not None else [0]
            mask = batch.loss_mask[sel].to(self.device) * (1.0 if mi else 0.0)
            if mb is not None:
                acc.total("update/tokens_processed", self._tokens_processed(batch, samples, mb))
            with dist_utils.accumulate_without_sync(self.model, self.dist, sync=last):
                logp, ent = self._policy_logprobs(self.model, batch, samples, mb, with_entropy=True)
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
                if self.ref is not None and not alg.kl_in_reward:
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
            if self.critic is not None:
                with dist_utils.accumulate_without_sync(self.critic, self.dist, sync=last):
                    v = self._values(batch, samples, mb)
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
        params = [p for p in self.model.parameters() if p.requires_grad]
        gnorm = torch.nn.utils.clip_grad_norm_(
            params, opt.grad_clip if opt.grad_clip > 0 else float("inf")
        )
        if torch.isfinite(gnorm):
            self.optimizer.step()
            acc.step_stat("actor/grad_norm", float(gnorm))
        else:
            self.nonfinite_skips += 1
            acc.step_stat("actor/nonfinite_skip", 1.0)
        self.optimizer.zero_grad(set_to_none=True)
        if self.critic is not None:
            cparams = [p for p in self.critic.parameters() if p.requires_grad]
            cnorm = torch.nn.utils.clip_grad_norm_(
                cparams, opt.grad_clip if opt.grad_clip > 0 else float("inf")
            )
            if torch.isfinite(cnorm):
                self.critic_optimizer.step()
                acc.step_stat("critic/grad_norm", float(cnorm))
            self.critic_optimizer.zero_grad(set_to_none=True)

    # ------------------------------------------------------------- diagnostics
    def _collapse_metrics(self, records: list[EpisodeRecord]) -> dict[str, float]:
        """Reasoning-collapse diagnostics (MI / conditional entropy) on the unfiltered batch.

        Computed on rank 0 from its share of the batch with the policy itself as scorer
        (token ids as sampled); logged under ``collapse/``.  A
        :class:`~ragen_bench.diagnostics.TemplateCollapseWarning` is raised when MI falls
        while entropy stays high (``trainer.collapse_warn``).  Never stops training: a
        failure is a warning and an empty dict.
        """
        if not self.dist.is_main or not self.cfg.rollout.enable_think:
            return {}
        from ragen_bench.diagnostics import CollapseTracker, HFScorer, collapse_metrics

        if self.collapse_tracker is None:
            self.collapse_tracker = CollapseTracker(
                mi_drop=0.2 if self.cfg.trainer.collapse_warn else float("inf")
            )
        self.model.eval()
        try:
            return collapse_metrics(
                records,
                HFScorer(unwrap(self.model), self.tokenizer, device=self.device),
                num_samples=self.cfg.trainer.collapse_samples,
                seed=self.step,
                sampler=tuple(self.cfg.trainer.collapse_samplers),
                tracker=self.collapse_tracker,
                use_token_ids=True,
                step=self.step,
            )
        except Exception as exc:  # diagnostics must never kill training
            warnings.warn(f"collapse diagnostics failed at step {self.step}: {exc}", RuntimeWarning)
            return {}

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
            "collapse_tracker": self.collapse_tracker.state_dict()
            if self.collapse_tracker is not None
            else None,
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
        self.nonfinite_skips = int(state.get("nonfinite_skips", 0))
        self.degenerate_watch.load_state_dict(state.get("degenerate_watch") or {})
        if state.get("collapse_tracker"):
            from ragen_bench.diagnostics import CollapseTracker

            self.collapse_tracker = CollapseTracker(
                mi_drop=0.2 if self.cfg.trainer.collapse_warn else float("inf")
            )
            self.collapse_tracker.load_state_dict(state["collapse_tracker"])
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
        dist_utils.shutdown()


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


__all__ = [
    "StarPOTrainer",
    "config_changes",  # re-exported from ragen_train.run_dir
    "episode_metrics",  # re-exported from ragen_train.metrics
    "seed_everything",
]
