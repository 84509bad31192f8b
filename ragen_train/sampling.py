"""The trainer's rollout sampler, from birth to release, and its seeded play.

:class:`Sampler` owns what generates the tokens of the training and validation episodes
(``rollout.sampler``, :mod:`ragen_train.rollout_engine`): ``hf`` samples with the policy
being trained (:class:`~ragen_bench.policies.hf.HFPolicy` on it), ``vllm`` with a colocated
:class:`~ragen_train.rollout_engine.VLLMRolloutEngine`.  Its lifecycle in a StarPO step:
:meth:`Sampler.play_seeded` (rollouts, validation), :meth:`Sampler.sleep` (the update runs),
:meth:`Sampler.sync` (the new weights go into the engine), and :meth:`Sampler.close` once,
with the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ragen_bench.policies.hf import HFPolicy
from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutConfig

from . import distributed as dist_utils
from .config import StarPOConfig, TrainConfigError
from .modeling import resolve_model_path, unwrap
from .multienv import run_by_env
from .rollout_engine import resolve_sampler


def build_engine(
    cfg: StarPOConfig,
    dist: Any,
    model: Any,
    *,
    sync: bool,
    log: Callable[[str], None] | None = None,
) -> tuple[str, Any]:
    """``("hf", None)`` or ``("vllm", VLLMRolloutEngine)`` for ``rollout.sampler``
    (see :mod:`ragen_train.rollout_engine`); ``sync`` loads ``model``'s weights into a new
    engine (a model passed in, e.g. after SFT, differs from ``model.path``).

    Args:
        cfg: the run config.
        dist: the process group state (:func:`ragen_train.distributed.init`).
        model: the (wrapped) policy being trained.
        log: where to say the sampler choice in one line, when vLLM is importable (so a
            choice was made; without vLLM it is always ``hf`` and nothing is said).

    Raises:
        TrainConfigError: ``rollout.vllm.kv_cache_gb`` is not whole on a CPU, or vLLM is
            not importable while ``rollout.sampler=vllm``.
    """
    from .rollout_engine import sampler_line, vllm_available

    name = resolve_sampler(cfg.rollout.sampler, cfg.model.path)
    if log is not None and (name == "vllm" or vllm_available()):
        log(f"[ragen] {sampler_line(cfg.rollout.sampler, name, cfg.model.path)}")
    if name == "hf":
        return name, None
    from .rollout_engine import VLLMRolloutEngine, engine_dtype

    v, device = cfg.rollout.vllm, dist.device
    if not str(device).startswith("cuda") and not float(v.kv_cache_gb).is_integer():
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
        dtype=engine_dtype(v.dtype, str(device)),
        max_batch_size=cfg.rollout.batch_size,
        device=str(device),
        tensor_parallel_size=v.tensor_parallel_size,
        gpu_memory_utilization=v.gpu_memory_utilization,
        max_model_len=v.max_model_len,
        enforce_eager=v.enforce_eager,
        seed=cfg.trainer.seed + dist.rank,  # sampling seeds: per request (play_seeded)
        kv_cache_gb=v.kv_cache_gb,
        sleep_mode=v.sleep_mode,
        distributed=dist.enabled,
    )
    if sync:
        engine.sync_weights(model, check=v.check_sync)
    return name, engine


class Sampler:
    """The sampler of a training run: builds it, plays seeded units with it, keeps it in
    step with the trained weights, releases it.

    Args:
        cfg: the run config (``rollout.*``, ``trainer.seed``).
        dist: the process group state (:func:`ragen_train.distributed.init`).
        model: the (wrapped) policy being trained.
        tokenizer: its tokenizer.
        sync: load ``model``'s weights into a new vLLM engine (:func:`build_engine`).

    Attributes:
        name: ``"hf"`` or ``"vllm"``.
        engine: the :class:`~ragen_train.rollout_engine.VLLMRolloutEngine`, or ``None``.
        policy: what plays the episodes with ``hf`` (replaceable, e.g. by a scripted policy
            in tests); the engine's policy with ``vllm``.

    Raises:
        TrainConfigError: as :func:`build_engine`.
    """

    def __init__(
        self,
        cfg: StarPOConfig,
        dist: Any,
        model: Any,
        tokenizer: Any,
        *,
        sync: bool,
        log: Callable[[str], None] | None = None,
    ):
        self.cfg, self.dist = cfg, dist
        self.name, self.engine = build_engine(cfg, dist, model, sync=sync, log=log)
        self.policy: Any = (
            self.engine.policy
            if self.engine is not None
            else HFPolicy(
                unwrap(model),
                tokenizer,
                device=dist.device,
                max_batch_size=cfg.rollout.batch_size,
            )
        )

    def sync(self, model: Any) -> dict[str, float]:
        """Push ``model``'s updated weights into the vLLM engine (``{}`` for ``hf``); returns
        the engine's ``sync/*`` metrics (:meth:`~ragen_train.rollout_engine.VLLMRolloutEngine.sync_weights`)."""
        if self.engine is None:
            return {}
        return self.engine.sync_weights(model, check=self.cfg.rollout.vllm.check_sync)

    def sleep(self) -> None:
        """Free the engine's KV cache while the update runs (a no-op for ``hf`` and off GPUs)."""
        if self.engine is not None:
            self.engine.sleep()

    def close(self) -> None:
        """Release the engine and the policy; the sampler cannot play afterwards."""
        self.engine = None
        self.policy = None

    def play_seeded(
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

        if self.engine is not None:
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
        device = str(self.dist.device)
        devices = [torch.cuda.current_device()] if device.startswith("cuda") else []
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

        return self.engine.seeded(seed_of)


__all__ = ["Sampler", "build_engine"]
