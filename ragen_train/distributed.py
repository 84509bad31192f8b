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
import os
from collections.abc import Iterator
from dataclasses import dataclass
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


def init(device: str = "cpu") -> DistInfo:
    """Initialise the process group when launched by ``torchrun`` (else single process)."""
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
        dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local, device=device)


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


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


def wrap(model: Any, info: DistInfo, strategy: str = "ddp") -> Any:
    """Wrap for data parallelism (no-op in one process).

    Args:
        strategy: ``ddp`` or ``fsdp2`` (each decoder layer sharded, then the root).
    """
    if not info.enabled:
        return model
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [info.local_rank] if info.device.startswith("cuda") else None
        return DDP(model, device_ids=ids)
    if strategy == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        layers = getattr(getattr(model, "model", model), "layers", [])
        for layer in layers:
            fully_shard(layer)
        fully_shard(model)
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


def groups_for_rank(n_groups: int, info: DistInfo) -> list[int]:
    """Group indices this rank plays (round-robin)."""
    return [g for g in range(n_groups) if g % info.world_size == info.rank]
