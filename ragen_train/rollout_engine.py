"""The samplers of the native trainer's rollouts (``rollout.sampler``): ``hf`` (transformers
``generate`` on the training model) and ``vllm`` (a colocated ``vllm.LLM`` engine in the
trainer's process, kept in step with the trained weights).

Both plug into :class:`ragen_bench.rollout.RolloutEngine` as a
:class:`~ragen_bench.policies.base.Policy`: the episode loop, prompts, parsing, rewards and
env seeds are the same; only who samples the tokens differs.  The ``vllm`` engine is the
bench back-end :class:`~ragen_bench.policies.vllm_backend.VLLMPolicy` (token ids in, sampled
ids and their log-probabilities out) plus what training needs:

* :meth:`VLLMRolloutEngine.sync_weights` — after every optimizer step the trainer's weights
  (LoRA adapters merged on the fly, :func:`merged_named_weights`) go through the engine's
  own weight loader (``model.load_weights``, which also fuses q/k/v and gate/up), the prefix
  cache is reset (cached KV blocks were computed with the old weights), and one weight the
  loader cannot skip is compared with the trainer's (:meth:`VLLMRolloutEngine.check_weights`).
* On GPUs, optional sleep mode (``enable_sleep_mode``): the engine frees its KV cache
  during the update (:meth:`sleep` / :meth:`wake_up`); elsewhere these are no-ops.

The engine's log-probabilities and the trainer's differ slightly (other kernels, bf16
vs fp32, batch-dependent reductions): the trainer logs their token-mean absolute difference
``rollout/logprob_abs_diff`` and its maximum ``rollout/logprob_abs_diff_max``, and by default
applies truncated importance sampling (see :func:`ragen_train.losses.tis_weights`).

vLLM is imported only when the ``vllm`` engine is built.  In-process access to the model
needs vLLM's V1 engine core in this process: the engine sets
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` before importing vLLM unless the caller set it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ragen_bench.policies.base import Policy

from . import dist_state
from .dist_state import full_tensor
from .sections import SAMPLERS


def vllm_available() -> bool:
    """Whether ``import vllm`` can work here (checked without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_sampler(sampler: str, model_path: str) -> str:
    """The sampler ``rollout.sampler`` selects: ``auto`` is ``vllm`` when vLLM is installed
    and the model is not the tiny preset, else ``hf``.

    Raises:
        ValueError: an unknown sampler name.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"rollout.sampler must be one of {list(SAMPLERS)}, got {sampler!r}")
    if sampler != "auto":
        return sampler
    return "vllm" if model_path != "tiny" and vllm_available() else "hf"


# -------------------------------------------------------------------- dtype
#: /proc/cpuinfo flags of a CPU with native bfloat16 matrix arithmetic (AVX-512 BF16, AMX).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags (the first ``flags`` line of ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def engine_dtype(requested: str, device: str, flags: set[str] | None = None) -> str:
    """The dtype the vLLM engine runs in for ``rollout.vllm.dtype``.

    ``auto``: ``bfloat16`` on a GPU (the log-prob gap is reported as
    ``rollout/logprob_abs_diff`` and truncated importance sampling corrects for it);
    ``float32`` on every CPU.  A bf16 copy of the weights rounds most of a
    small LoRA update away at every sync (after one sync 91.6% of the targeted weights were
    unchanged, and the engine/trainer log-prob gap grew from 0.009 to 0.23 nats), so on a CPU
    the engine holds what the trainer trains.  Without native bf16 (:data:`NATIVE_BF16_FLAGS`)
    vLLM's CPU bf16 is also about 13x slower than float32; with it, ask for ``bfloat16``
    explicitly to trade the update's precision for speed.  Any value other than ``auto`` is
    returned as given.

    Args:
        requested: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        device: the trainer's device (``cpu``, ``cuda``, ``cuda:1``...).
        flags: CPU flags (default: :func:`cpu_flags`); kept for callers that report them,
            ``auto`` no longer depends on them.
    """
    del flags
    if requested != "auto":
        return requested
    return "bfloat16" if str(device).startswith("cuda") else "float32"


# ------------------------------------------------------------------- weights
def _is_lora_layer(module: Any) -> bool:
    return (
        hasattr(module, "base_layer")
        and hasattr(module, "lora_A")
        and hasattr(module, "get_delta_weight")
    )


@torch.no_grad()
def merged_named_weights(
    model: Any, dtype: torch.dtype | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's weights under the plain Hugging Face names, LoRA adapters merged.

    For a peft model every LoRA-wrapped linear layer yields ``W + ΔW`` with
    ``ΔW = (α / r) · B A`` (Hu et al. 2021, eq. 3; peft's ``get_delta_weight`` of each active
    adapter), under the name of the original layer (``…q_proj.weight``, not
    ``…q_proj.base_layer.weight``); adapter tensors themselves are not yielded.  The model
    itself is not modified (no merge/unmerge round trip, which would drift in float32).
    A plain model yields its ``named_parameters`` and buffers that are part of its state.
    FSDP2-sharded (``DTensor``) parameters are gathered one at a time
    (:func:`ragen_train.dist_state.full_tensor`), so every rank gets full tensors: a
    collective, every rank must consume the whole iterator in step.

    Args:
        model: a ``PreTrainedModel``, a peft ``PeftModel`` or one wrapped by DDP.
        dtype: cast every tensor to it (e.g. the engine's dtype); ``None`` keeps it.

    Yields:
        ``(name, tensor)`` with tensors detached (on the model's device).
    """
    from .modeling import unwrap

    model = unwrap(model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    lora_prefixes: dict[str, Any] = {}
    for name, module in base.named_modules():
        if _is_lora_layer(module):
            lora_prefixes[name] = module

    def cast(t: torch.Tensor) -> torch.Tensor:
        t = t.detach()
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    for name, module in lora_prefixes.items():
        layer = module.base_layer
        weight = full_tensor(layer.weight.detach()).clone()
        for adapter in getattr(module, "active_adapters", ["default"]):
            if adapter in module.lora_A:
                weight += _delta_weight(module, adapter).to(weight.dtype)
        yield f"{name}.weight", cast(weight)
        if getattr(layer, "bias", None) is not None:
            yield f"{name}.bias", cast(full_tensor(layer.bias))
    for name, param in base.named_parameters():
        if ".lora_" in name or ".base_layer." in name:
            continue
        yield name, cast(full_tensor(param))


def _delta_weight(module: Any, adapter: str) -> torch.Tensor:
    """peft's ``get_delta_weight``; for FSDP2-sharded adapters the same ``(α / r) · B A``
    (transposed for ``fan_in_fan_out`` layers) from the gathered full ``A`` and ``B``."""
    a, b = module.lora_A[adapter].weight, module.lora_B[adapter].weight
    if not (dist_state.is_dtensor(a) or dist_state.is_dtensor(b)):
        return module.get_delta_weight(adapter)
    delta = full_tensor(b.detach()) @ full_tensor(a.detach())
    if getattr(module, "fan_in_fan_out", False):
        delta = delta.T
    return delta * module.scaling[adapter]


@torch.no_grad()
def _linear_weight_through_forward(layer: Any, dtype: torch.dtype) -> torch.Tensor:
    """The ``(out, in)`` weight of a vLLM linear layer whose ``weight`` was repacked (CPU
    back-end), as ``(f(I) − f(0))ᵀ``; float32 on the CPU."""

    def f(x: torch.Tensor) -> torch.Tensor:
        y = layer(x)
        return (y[0] if isinstance(y, tuple) else y).float()

    eye = torch.eye(int(layer.input_size), dtype=dtype)
    return (f(eye) - f(torch.zeros_like(eye[:1]))).T.cpu().contiguous()


#: The weight :meth:`VLLMRolloutEngine.check_weights` compares: a decoder layer's MLP down
#: projection (the last layer's).
_DOWN_PROJ = re.compile(r"model\.layers\.(\d+)\.mlp\.down_proj\.weight")


# -------------------------------------------------------------------- engine
def _import_vllm_in_process() -> Any:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from ragen_bench.policies.vllm_backend import _import_vllm

    return _import_vllm()


class VLLMRolloutEngine:
    """A colocated vLLM engine that samples the trainer's rollouts.

    Construction loads the model into vLLM (about 30 s for a 0.5B model on two CPU cores).

    Args:
        model_path: the model directory vLLM loads (the trainer's ``model.path``, resolved).
        dtype: engine dtype (``"float32"``, ``"bfloat16"``, ``"float16"``; ``"auto"``: the
            model config's).
        max_batch_size: most requests per ``generate`` call.
        device: the trainer's device; ``cuda`` enables sleep mode when asked for.
        tensor_parallel_size, gpu_memory_utilization, max_model_len, enforce_eager, seed:
            forwarded to ``vllm.LLM``.
        kv_cache_gb: on CPU, the KV cache size (``VLLM_CPU_KVCACHE_SPACE``, GiB) unless the
            environment already sets it.
        sleep_mode: free the engine's GPU memory during updates (GPU only).
        distributed: the trainer runs under torchrun (one engine per rank, vLLM's
            ``external_launcher`` executor so it joins the ranks' process group).
        engine_kwargs: any other ``vllm.LLM`` argument.

    Raises:
        ImportError: vLLM is not installed (the message names the extra).
    """

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "auto",
        max_batch_size: int = 256,
        device: str = "cpu",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        enforce_eager: bool = True,
        seed: int = 0,
        kv_cache_gb: float = 2.0,
        sleep_mode: bool = True,
        distributed: bool = False,
        **engine_kwargs: Any,
    ):
        on_gpu = str(device).startswith("cuda")
        if not on_gpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gb:g}")
        _import_vllm_in_process()
        from ragen_bench.policies.vllm_backend import VLLMPolicy

        self.sleep_mode = bool(sleep_mode and on_gpu)
        kwargs = dict(engine_kwargs)
        if self.sleep_mode:
            kwargs["enable_sleep_mode"] = True
        if distributed:
            kwargs.setdefault("distributed_executor_backend", "external_launcher")
        self.policy = VLLMPolicy(
            model_path,
            max_batch_size=max_batch_size,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            dtype=dtype,
            seed=seed,
            enforce_eager=enforce_eager,
            **kwargs,
        )
        self.llm = self.policy.llm
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.asleep = False
        self.syncs = 0

    # -- model access
    def apply(self, fn: Any) -> list[Any]:
        """Run ``fn(model)`` on the engine's model in every worker; their results."""
        return self.llm.apply_model(fn)

    def sync_weights(self, model: Any, *, check: bool = True) -> dict[str, float]:
        """Load the trainer's current weights into the engine and reset its prefix cache.

        Args:
            model: the training model (plain, peft or DDP-wrapped).
            check: compare one weight afterwards (:meth:`check_weights`).

        Returns:
            ``{"sync/tensors": n, "sync/max_abs_err": e}`` (``e`` only when checked).

        Raises:
            RuntimeError: the engine did not take the weights (check failed).
        """
        self.wake_up()
        dtype = self._engine_dtype()
        to_cpu = self._engine_on_cpu
        kept: dict[str, torch.Tensor] = {}  # only what check_weights reads
        sent, last_layer = 0, -1

        def stream() -> Iterator[tuple[str, torch.Tensor]]:
            # One merged tensor at a time: vLLM's reload processes layer by layer, so the
            # sync never holds a second full copy of the weights (1.4 GiB of merged LoRA
            # layers for the 0.5B model when they were listed first).
            nonlocal sent, last_layer
            for n, t in merged_named_weights(model, dtype):
                if to_cpu and t.device.type != "cpu":
                    t = t.to("cpu")
                sent += 1
                down = _DOWN_PROJ.fullmatch(n)
                if n == self.CHECK_NAME:
                    kept[n] = t
                elif down and int(down.group(1)) > last_layer:
                    kept.pop(f"model.layers.{last_layer}.mlp.down_proj.weight", None)
                    last_layer = int(down.group(1))
                    kept[n] = t
                yield n, t

        # The worker's reload path (vllm.model_executor.model_loader.reload): the checkpoint-
        # format names and shapes go through each layer's loader and its post-load processing
        # (CPU weight repacking), which a bare model.load_weights after start-up skips.
        weights = stream()
        self.llm.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": weights, "is_checkpoint_format": True},
        )
        for _ in weights:  # FSDP2: gathers are collectives, every rank runs all of them
            pass
        self.llm.reset_prefix_cache()
        self.syncs += 1
        out = {"sync/tensors": float(sent)}
        if check:
            out["sync/max_abs_err"] = self.check_weights(kept)
        return out

    @property
    def _engine_on_cpu(self) -> bool:
        return not torch.cuda.is_available()

    def _engine_dtype(self) -> torch.dtype:
        found = self.apply(lambda m: next(m.parameters()).dtype)
        return found[0]

    #: A weight every supported decoder keeps under its Hugging Face name and shape in
    #: vLLM (not fused, not sharded by tensor parallelism): the final norm.
    CHECK_NAME = "model.norm.weight"

    def check_weights(self, weights: dict[str, torch.Tensor], *, tol: float = 1e-2) -> float:
        """Largest absolute difference between the engine's copy of one trained weight
        (the last decoder layer's MLP down projection, which every LoRA ``all-linear``
        update and every full update changes; else the final norm) and the trainer's.

        vLLM's CPU back-end repacks linear weights for its GEMM kernels and leaves the
        layer's ``weight`` empty; the weight is then read through the layer itself:
        ``Wᵀ = f(I) − f(0)`` for ``f(x) = x Wᵀ + b`` (exact in float32: each output is one
        weight times 1 plus zeros).

        Raises:
            RuntimeError: the difference exceeds ``tol`` (the engine still serves other
                weights), or, without tensor parallelism, the shapes differ (e.g. an FSDP2
                shard was sent instead of the gathered tensor).
        """
        name = self._check_key(weights)
        if name is None:
            return 0.0
        expect = weights[name].float().cpu()
        attr = name.split(".")

        def read(m: Any) -> torch.Tensor:
            obj = m
            for a in attr[:-1]:
                obj = obj[int(a)] if a.isdigit() else getattr(obj, a)
            tensor = getattr(obj, attr[-1])
            if tensor.numel() == 0 and attr[-1] == "weight" and hasattr(obj, "input_size"):
                return _linear_weight_through_forward(obj, tensor.dtype)
            return tensor.detach().float().cpu().clone()

        got = self.apply(read)[0]
        if got.shape != expect.shape:
            if self.tensor_parallel_size > 1:  # the engine's own shard: nothing comparable
                return 0.0
            raise RuntimeError(
                f"the vLLM engine's {name} has shape {tuple(got.shape)} but the trainer sent "
                f"{tuple(expect.shape)} (a sharded tensor instead of the full one?)"
            )
        err = float((got - expect).abs().max())
        if err > tol:
            raise RuntimeError(
                f"the vLLM engine does not serve the trained weights after the sync: {name} differs "
                f"by {err:.3g} (> {tol:g})"
            )
        return err

    def _check_key(self, weights: dict[str, torch.Tensor]) -> str | None:
        layers = sorted({int(k.split(".")[2]) for k in weights if k.startswith("model.layers.")})
        if layers and self.tensor_parallel_size == 1:
            key = f"model.layers.{layers[-1]}.mlp.down_proj.weight"
            if key in weights:
                return key
        return self.CHECK_NAME if self.CHECK_NAME in weights else None

    def seeded(self, seed_of: Callable[[Any], int]) -> SeededRequests:
        """This engine's policy with one sampling seed per request, ``seed_of(request)``
        (:class:`SeededRequests`)."""
        return SeededRequests(self.policy, seed_of)

    # -- memory
    def sleep(self) -> None:
        """Free the engine's GPU memory (KV cache, and weights: they are re-synced) during
        the update; a no-op without sleep mode."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        """Undo :meth:`sleep` (before a sync or a rollout)."""
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False


class SeededRequests(Policy):
    """A vLLM policy whose every request samples with its own seed ``seed_of(request)``.

    vLLM seeds a request's own ``torch.Generator`` from ``SamplingParams(seed=...)`` and
    draws that request's sampling noise from it alone (``vllm.v1.sample.ops.
    topk_topp_sampler.random_sample``), so what a request samples does not depend on the
    other requests of its batch nor on the engine's seed.  The trainer passes
    ``seed_of(request) = rollout_seed(trainer.seed, <unit key>, env, episode, turn)``
    (:func:`ragen_train.distributed.rollout_seed`): the same global batch played by 1 or N
    processes, each with its own engine, samples the same tokens (to the extent that the
    engine's logits do not depend on the batch).

    Args:
        policy: a :class:`~ragen_bench.policies.vllm_backend.VLLMPolicy`.
        seed_of: ``PolicyRequest -> int`` in ``[0, 2**63)``.
    """

    def __init__(self, policy: Any, seed_of: Callable[[Any], int]):
        self.policy = policy
        self.seed_of = seed_of
        self.name = policy.name
        self.max_batch_size = policy.max_batch_size
        self.max_concurrency = policy.max_concurrency

    @property
    def tokenizer(self) -> Any:
        return self.policy.tokenizer

    @property
    def model_name(self) -> str:
        return self.policy.model_name

    def describe(self) -> dict[str, Any]:
        return self.policy.describe()

    async def generate(self, requests: list[Any], params: Any) -> list[Any]:
        """:meth:`VLLMPolicy.generate_sync` with ``seeds=[seed_of(r) for r in requests]``
        (in a worker thread, as ``VLLMPolicy.generate``)."""
        import asyncio

        seeds = [int(self.seed_of(r)) for r in requests]
        return await asyncio.to_thread(self.policy.generate_sync, requests, params, seeds)

    async def aclose(self) -> None:
        """Nothing to release: the engine outlives its seeded views."""


__all__ = [
    "NATIVE_BF16_FLAGS",
    "SeededRequests",
    "cpu_flags",
    "engine_dtype",
    "VLLMRolloutEngine",
    "merged_named_weights",
    "SAMPLERS",
    "resolve_sampler",
    "vllm_available",
]
