"""torch.distributed plumbing: the same code as one process or under ``torchrun``.

No home-made process group or launcher: under ``torchrun`` the environment variables
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` are set and :func:`init` calls
``torch.distributed.init_process_group`` (gloo on CPU, NCCL on CUDA).  Models are wrapped
with ``DistributedDataParallel`` or FSDP2 (``torch.distributed.fsdp.fully_shard``).

Work split: groups are assigned to ranks round-robin (group ``g`` to rank ``g % W``), so
group statistics never cross ranks; loss denominators are summed over ranks
(:func:`all_reduce_sum`) and the per-rank loss is multiplied by ``W`` to undo DDP's
gradient averaging, which makes the update identical to one process with the global
batch (``tests/train/test_distributed.py``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """Rank, world size and device of this process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


#: ``trainer.dist_timeout_s``'s default: how long a collective waits for the other ranks.
DEFAULT_TIMEOUT_S = 600.0


#: Whether :func:`init` created the process group (so :func:`shutdown` may destroy it); a
#: group made by someone else (an in-process vLLM engine, a caller's own) is left alone.
_OWNED_GROUP = [False]


def init(device: str = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S) -> DistInfo:
    """Initialise the process group when launched by ``torchrun`` (else single process).

    Args:
        timeout_s: every collective fails after waiting this long for the other ranks
            (``init_process_group(timeout=...)``), so a stopped or hung rank ends the job
            instead of blocking it forever; :func:`failure_message` words the error.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(device=device)
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
        backend = "nccl"
    else:
        backend = "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=float(timeout_s)))
        _OWNED_GROUP[0] = True
    return DistInfo(rank=rank, world_size=world, local_rank=local, device=device)


def rank_prefix() -> str:
    """``"[rank r/W] "`` under ``torchrun`` (from ``RANK`` / ``WORLD_SIZE``), else ``""``: the
    prefix of every warning and error line a process prints, so a log says who wrote it."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return ""
    return f"[rank {os.environ.get('RANK', '?')}/{world}] "


#: Substrings of the errors torch raises when a collective times out or a peer vanishes
#: (gloo: "Timed out waiting ...", "Connection closed by peer"; NCCL: "Watchdog caught
#: collective operation timeout").
_PEER_FAILURES = ("timed out", "timeout", "connection closed by peer", "connection reset")


def failure_message(exc: BaseException, timeout_s: float) -> str | None:
    """One line for a collective that failed because another rank stopped, hung or died
    (``None`` for any other error).  Names this rank; the other rank's own log (or
    ``torchrun``'s summary) names the one that failed."""
    text = str(exc)
    if not isinstance(exc, (RuntimeError, dist.DistBackendError)) or not any(
        s in text.lower() for s in _PEER_FAILURES
    ):
        return None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    rank = os.environ.get("RANK", "?")
    world = os.environ.get("WORLD_SIZE", "?")
    return (
        f"rank {rank} of {world}: a collective got no answer from the other ranks within "
        f"trainer.dist_timeout_s={timeout_s:g} s (a rank is stopped, hung or dead; its own log "
        f"or torchrun's summary names it): {first[:200]}"
    )


def shutdown() -> None:
    """Leave the process group together and tear it down while the interpreter is alive.

    A barrier (no rank destroys its group while a peer still talks to it), then
    ``destroy_process_group`` (PyTorch's documented end of a distributed script: the
    "Shutdown" section of the torch.distributed docs), then a garbage collection so that the
    process group's last owners (a ``DistributedDataParallel`` module caught in a reference
    cycle) are freed now.  Without it the group's C++ worker threads outlive ``main`` and
    can release a tensor that still has a Python object during interpreter finalization,
    which aborts the process with "terminate called without an active exception"
    (pytorch/pytorch#179291 describes the mechanism) and makes ``torchrun`` report a finished
    run as failed.  Release the wrapped models first (:meth:`StarPOTrainer.close`).  The
    barrier and the collection are no-ops in a single process, and a group this module did
    not create (:func:`init`; e.g. an in-process vLLM engine's) is left alone.
    """
    if _OWNED_GROUP[0] and dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        _OWNED_GROUP[0] = False
        gc.collect()


def all_reduce_sum(value: float, info: DistInfo) -> float:
    """Sum a float over ranks."""
    if not info.enabled:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item())


def all_reduce_max(value: float, info: DistInfo) -> float:
    """Maximum of a float over ranks."""
    if not info.enabled:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def all_gather_object(obj: Any, info: DistInfo) -> list[Any]:
    """Gather a picklable object from every rank (list indexed by rank)."""
    if not info.enabled:
        return [obj]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def autocast_forward(model: Any, dtype: torch.dtype, device_type: str) -> Any:
    """Run every forward of ``model`` (generation included) under ``torch.autocast``: float32
    parameters and optimizer state, ``dtype`` matmuls; returns ``model`` (patched in place)."""
    inner = model.forward

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=device_type, dtype=dtype):
            return inner(*args, **kwargs)

    model.forward = forward
    return model


def wrap(model: Any, info: DistInfo, strategy: str = "ddp", mixed_precision: str = "none") -> Any:
    """Wrap for data parallelism (no-op in one process).

    Args:
        strategy: ``ddp`` or ``fsdp2`` (each decoder layer sharded, then the root).
        mixed_precision: ``none`` or ``bf16``: float32 master weights with bfloat16 compute —
            FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`` (the
            all-gathered parameters are cast, gradients reduced in float32 into the float32
            shards), otherwise :func:`autocast_forward` (DDP reduces the float32 gradients).
    """
    bf16 = mixed_precision == "bf16"
    if bf16 and not (info.enabled and strategy == "fsdp2"):
        autocast_forward(model, torch.bfloat16, torch.device(info.device).type)
    if not info.enabled:
        return model
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [info.local_rank] if info.device.startswith("cuda") else None
        return DDP(model, device_ids=ids)
    if strategy == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        kw: dict[str, Any] = {}
        if bf16:
            kw["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            )
        layers = getattr(getattr(model, "model", model), "layers", [])
        for layer in layers:
            fully_shard(layer, **kw)
        fully_shard(model, **kw)
        return model
    raise ValueError(f"unknown distributed strategy {strategy!r}")


def accumulate_without_sync(model: Any, info: DistInfo, sync: bool) -> Any:
    """Context for one micro-batch of gradient accumulation.

    ``sync=False`` skips the gradient all-reduce (DDP ``no_sync``) or reduce-scatter (FSDP2
    ``set_requires_gradient_sync(False)``) until the last micro-batch; a no-op in one process.
    """
    if sync or not info.enabled:
        return contextlib.nullcontext()
    if hasattr(model, "no_sync"):
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        return _fsdp_no_sync(model)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _fsdp_no_sync(model: Any) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def _fsdp_modules(model: Any) -> list[Any]:
    """Every FSDP2-managed submodule of ``model`` (``fully_shard`` makes them ``FSDPModule``)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return []
    return [m for m in model.modules() if isinstance(m, FSDPModule)] if model is not None else []


@contextlib.contextmanager
def unsharded(*models: Any) -> Iterator[None]:
    """Hold the full parameters of FSDP2 models for a stretch of no-grad forwards.

    FSDP2 all-gathers each layer's parameters inside every forward, so a forward that runs
    on one rank only, or a different number of times per rank (sampling until EOS, uneven
    groups, rank-0 diagnostics), waits forever for the others.  Inside this context the
    parameters are gathered once on entry (a collective: every rank enters) and kept
    (``set_reshard_after_forward(False)``), so forwards need no communication and ranks may
    run any number of them; on exit they are resharded.  Costs the memory of a full copy
    of the model while it lasts (as a colocated rollout engine does).  A no-op for DDP or
    one process.  Not for forwards whose gradients are needed.
    """
    mods = [m for model in models for m in _fsdp_modules(model)]
    if not mods:
        yield
        return
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
    for m in mods:
        m.unshard()
    try:
        yield
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)


def rollout_seed(seed: int, *key: int | str) -> int:
    """The torch sampling seed of one rollout unit: a stable function of the run's seed and
    ``key`` (e.g. ``("train", step, global group index)``), never of the rank, via NumPy's
    ``SeedSequence`` (strings enter as their UTF-8 bytes' integer value).  In ``[0, 2**63)``."""
    import numpy as np

    ints = [k if isinstance(k, int) else int.from_bytes(str(k).encode(), "little") for k in key]
    state = np.random.SeedSequence([int(seed) % 2**63, *ints]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def groups_for_rank(n_groups: int, info: DistInfo) -> list[int]:
    """Group indices this rank plays (round-robin)."""
    return [g for g in range(n_groups) if g % info.world_size == info.rank]
