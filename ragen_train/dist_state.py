"""Model and optimizer state across layouts: one process, DDP, FSDP2 (sharded ``DTensor``).

Checkpoints written under FSDP2 hold the training state as a torch.distributed.checkpoint
(DCP) directory: every rank writes its own shards (``__<rank>_0.distcp``) and rank 0 the
``.metadata``; DCP reshards on load, so such a checkpoint loads into any world size and into
DDP or one process.  Checkpoints written by DDP or one process keep full tensors
(``model/model.safetensors`` and an ``optimizer.pt`` keyed by parameter index);
:func:`load_full` loads those into an FSDP2 model as well.  The state-dict conversions are
torch's own (``torch.distributed.checkpoint.state_dict``: ``get_state_dict`` /
``set_state_dict`` with fully-qualified parameter names).

The Hugging Face export (``final_model/``, a checkpoint's ``model/``) needs full tensors:
:func:`full_state_dict` gathers them collectively (every rank must call it; rank 0 gets
them on the CPU, the other ranks an empty dict).

A DCP directory may come from someone else, and DCP reads its ``.metadata`` with plain
``pickle.load`` and its non-tensor entries with ``torch.load(weights_only=False)``.
:func:`load_sharded` therefore first reads ``.metadata`` with :class:`MetadataUnpickler`
(only DCP's own metadata classes, ``torch.Size``, torch dtypes and layouts, paths), so a
planted ``__reduce__`` is refused before DCP sees the file, and loads the entries with
:class:`SafeLoadPlanner` (``weights_only=True``).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch

#: Modules whose classes (types only) a DCP ``.metadata`` may name.
_DCP_MODULES = (
    "torch.distributed.checkpoint.metadata",
    "torch.distributed.checkpoint.filesystem",
    "torch.distributed.checkpoint.planner",
)
#: Other globals a DCP ``.metadata`` names (torch 2.13, one process to FSDP2).
_DCP_GLOBALS = {
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "Path"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint file names a global it may not (one line naming the file and the global)."""


class MetadataUnpickler(pickle.Unpickler):
    """Reads a DCP ``.metadata``: only the classes of DCP's metadata modules (plain names, no
    dotted attribute paths), torch dtypes, and :data:`_DCP_GLOBALS`; any other global raises
    :class:`UnsafeCheckpointError` before it is called."""

    def find_class(self, module: str, name: str) -> Any:
        if "." not in name:
            if (module, name) in _DCP_GLOBALS:
                return super().find_class(module, name)
            if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
                return getattr(torch, name)
            if module in _DCP_MODULES:
                obj = super().find_class(module, name)
                if isinstance(obj, type) and obj.__module__ == module:
                    return obj
        raise UnsafeCheckpointError(f"global {module}.{name}")


def check_metadata(path: str | Path) -> None:
    """Read ``<path>/.metadata`` with :class:`MetadataUnpickler` (nothing but DCP's plain
    records is built); the file must be a regular one (``O_NOFOLLOW``).

    Raises:
        UnsafeCheckpointError: it names another global, or is a symbolic link (message:
            one line naming the file).
    """
    from ragen_bench.fileio import NotRegularFileError, check_regular, open_regular_file

    meta = Path(path) / ".metadata"
    try:
        for shard in Path(path).iterdir():  # the shards DCP opens itself
            check_regular(shard, root=path)
        with open_regular_file(meta, "rb") as fh:
            MetadataUnpickler(fh).load()
    except NotRegularFileError as exc:
        raise UnsafeCheckpointError(str(exc)) from None
    except UnsafeCheckpointError as exc:
        raise UnsafeCheckpointError(
            f"{meta}: holds a pickled object a checkpoint may not hold ({exc.args[0]}); "
            "refused without running it"
        ) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise UnsafeCheckpointError(f"{meta}: is not DCP metadata ({type(exc).__name__})") from None


def _safe_planner() -> Any:
    from torch.distributed.checkpoint._traverse import set_element
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    class SafeLoadPlanner(DefaultLoadPlanner):
        """DCP's default load planner, with its non-tensor entries read by
        ``torch.load(weights_only=True)`` instead of ``weights_only=False``."""

        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            try:
                obj = torch.load(value, weights_only=True)
            except pickle.UnpicklingError as exc:
                raise UnsafeCheckpointError(
                    f"DCP entry {read_item.dest_index.fqn}: holds a pickled object a checkpoint "
                    f"may not hold ({' '.join(str(exc).split())[:160]}); refused without running it"
                ) from None
            if self.flatten_state_dict:  # as DefaultLoadPlanner.load_bytes does
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj

    return SafeLoadPlanner()


#: The DCP directory inside a checkpoint.
DCP_DIR = "dcp"


def _module(model: Any) -> Any:
    return getattr(model, "module", model)  # DDP's wrapped module


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor`` (an FSDP2 shard)."""
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def is_sharded(model: Any) -> bool:
    """Whether any parameter of ``model`` is a ``DTensor`` (FSDP2 ``fully_shard``)."""
    return any(is_dtensor(p) for p in _module(model).parameters())


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a ``DTensor`` (an all-gather: every rank must call it in the same
    order); a plain tensor is returned as is."""
    return t.full_tensor() if is_dtensor(t) else t


def full_state_dict(model: Any, *, rank: int = 0) -> dict[str, torch.Tensor]:
    """The model's full state dict under its own parameter names.

    Sharded: a collective (all ranks call it); rank 0 receives every tensor on the CPU,
    gathered one parameter at a time, the other ranks ``{}``.  Not sharded: the module's
    ``state_dict()`` on rank 0, ``{}`` elsewhere (no communication).
    """
    if not is_sharded(model):
        return _module(model).state_dict() if rank == 0 else {}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    module = _module(model)
    sd = get_model_state_dict(
        module, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    # A tied weight (lm_head = embedding) is one parameter under two names; keep the name
    # ``named_parameters`` reports, as save_pretrained of the unsharded model does.
    own = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
    return {k: v for k, v in sd.items() if k in own} if rank == 0 else {}


def _pairs(entries: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """``{name: (model, optimizer)}`` -> DCP state (``name`` and ``name + "_optim"``)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    state: dict[str, Any] = {}
    for name, (model, optim) in entries.items():
        msd, osd = get_state_dict(_module(model), optim)
        state[name] = msd
        state[f"{name}_optim"] = osd
    return state


def save_sharded(path: str | Path, entries: dict[str, tuple[Any, Any]]) -> None:
    """Write the model and optimizer state of each ``(model, optimizer)`` pair as DCP shards.

    A collective: every rank calls it and writes its own shard file under ``path``.
    """
    import torch.distributed.checkpoint as dcp

    dcp.save(_pairs(entries), checkpoint_id=str(path))


def load_sharded(path: str | Path, entries: dict[str, tuple[Any, Any]]) -> None:
    """Load what :func:`save_sharded` wrote into ``entries`` (any layout, any world size).

    Nothing in the directory is unpickled as code: :func:`check_metadata` first, then the
    entries through :class:`SafeLoadPlanner` (module docstring).

    Raises:
        UnsafeCheckpointError: the metadata or an entry names a global it may not, or a
            file is a symbolic link (one line naming it).
        RuntimeError: a pair of ``entries`` is not in the checkpoint (DCP's missing-key error).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    check_metadata(path)
    state = _pairs(entries)
    dcp.load(state, checkpoint_id=str(path), planner=_safe_planner())
    for name, (model, optim) in entries.items():
        set_state_dict(
            _module(model),
            optim,
            model_state_dict=state[name],
            optim_state_dict=state[f"{name}_optim"],
        )


def _fqn_optimizer_state(model: Any, optim_sd: dict[str, Any]) -> dict[str, Any]:
    """An ``optimizer.state_dict()`` keyed by parameter index -> keyed by parameter name
    (the form ``set_optimizer_state_dict(full_state_dict=True)`` reads).  The optimizer was
    built over ``[p for p in model.parameters() if p.requires_grad]`` in that order."""
    names = [n for n, p in _module(model).named_parameters() if p.requires_grad]
    groups = []
    for g in optim_sd["param_groups"]:
        groups.append({**g, "params": [names[i] for i in g["params"]]})
    state = {names[int(i)]: v for i, v in optim_sd["state"].items()}
    return {"state": state, "param_groups": groups}


def load_full(
    model: Any,
    optimizer: Any,
    model_sd: dict[str, torch.Tensor],
    optim_sd: dict[str, Any] | None,
) -> None:
    """Load full tensors (a DDP / one-process checkpoint) into a sharded model and its optimizer.

    Each rank keeps its own shard of every tensor.  ``model_sd`` may omit tied weights (a
    Hugging Face ``model.safetensors`` stores ``lm_head.weight`` once, as the embedding).

    Raises:
        RuntimeError: ``model_sd`` names a weight the model does not have.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    module = _module(model)
    own = set(module.state_dict())
    unexpected = sorted(set(model_sd) - own)
    if unexpected:
        raise RuntimeError(f"checkpoint has unexpected weights: {unexpected[:5]}")
    opts = StateDictOptions(full_state_dict=True, strict=False)
    set_model_state_dict(module, model_sd, options=opts)
    if optim_sd is not None:
        set_optimizer_state_dict(
            module, optimizer, _fqn_optimizer_state(module, optim_sd), options=opts
        )
