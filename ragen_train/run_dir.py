"""Run management for :class:`~ragen_train.trainer.StarPOTrainer`: the output directory.

One job: what lives in ``trainer.out_dir`` between runs — claiming it for a new run,
finding the checkpoint ``--resume`` names, noting config changes on resume, and the weight
files of a checkpoint or of ``final_model``.  The trainer decides *when*; this module does
the file work (:mod:`ragen_train.checkpoint` writes and verifies the files themselves).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

from ragen_bench.fileio import atomic_write_json

from . import checkpoint as ckpt
from .config import RENAMED_FIELDS, _flatten
from .distributed import DistInfo, barrier
from .modeling import unwrap
from .outputs import clear_run_outputs


def claim_out_dir(out_dir: Path, *, overwrite: bool, keep: tuple[str | None, ...] = ()) -> None:
    """A new run never mixes with an earlier one in ``out_dir``.

    Args:
        out_dir: ``trainer.out_dir``.
        overwrite: ``trainer.overwrite``; when true every output of the earlier run is
            removed (:func:`ragen_train.outputs.clear_run_outputs`, by rank 0 only).
        keep: paths inside ``out_dir`` that must survive the clean-up (the model and SFT
            demos the new run reads).

    Raises:
        FileExistsError: ``out_dir`` holds a run (``metrics.jsonl`` or checkpoints) and
            ``overwrite`` is false; the message says how to resume or overwrite.
    """
    metrics, ckpts = out_dir / "metrics.jsonl", out_dir / "checkpoints"
    old = ([metrics] if metrics.is_file() and metrics.stat().st_size > 0 else []) + (
        [ckpts] if any(ckpts.glob("step_*")) else []
    )
    if not old:
        return
    if not overwrite:
        raise FileExistsError(
            f"trainer.out_dir {str(out_dir)!r} already holds a run ({', '.join(p.name for p in old)}); "
            "continue it with --resume latest, choose another trainer.out_dir, or set trainer.overwrite=true "
            "to replace it"
        )
    if int(os.environ.get("RANK", "0")) == 0:  # the earlier run's other files too
        clear_run_outputs(out_dir, keep=keep)


def find_checkpoint(out_dir: Path, where: str, save_every: int) -> ckpt.Resumable:
    """The checkpoint ``--resume`` names, verified (:func:`ragen_train.checkpoint.verify`).

    ``"latest"``: the newest intact checkpoint in ``out_dir`` (damaged newer ones are
    passed over and reported by :meth:`Resumable.fallback_message`).  A directory: that
    checkpoint, which must be intact (no fall-back from one the user named).

    Raises:
        FileNotFoundError: no checkpoint at all; the message names the reason
            (:func:`ragen_train.resume.missing_checkpoint_message`).
        NoIntactCheckpoint: checkpoints exist but none (or not the named one) is intact;
            one line naming the damaged file(s).
    """
    root = out_dir / "checkpoints"
    looks_saved = where != "latest" and any(
        (Path(where) / n).exists() for n in (ckpt.MANIFEST, "state.json", "model")
    )
    if (where == "latest" and not ckpt.list_checkpoints(root)) or (
        where != "latest" and not looks_saved
    ):
        from .resume import missing_checkpoint_message

        raise FileNotFoundError(missing_checkpoint_message(where, out_dir, save_every))
    if where == "latest":
        return ckpt.find_resumable(out_dir)
    try:
        manifest = ckpt.verify(where)
    except ckpt.CheckpointError as exc:
        raise ckpt.NoIntactCheckpoint(f"cannot resume from damaged checkpoint {exc}") from None
    return ckpt.Resumable(Path(where), int(manifest["step"]), newest_step=int(manifest["step"]))


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``"section.field: old -> new"`` for every field that differs between two saved
    configs (``StarPOConfig.to_dict()`` form; ``env.config`` compared as a whole), sorted.
    A field saved under its old name (:data:`ragen_train.config.RENAMED_FIELDS`) is
    compared under its new one."""
    a, b = ({RENAMED_FIELDS.get(k, k): v for k, v in _flatten(d).items()} for d in (old, new))
    missing = object()

    def show(value: Any) -> str:
        return "(absent)" if value is missing else json.dumps(value)

    return [
        f"{key}: {show(a.get(key, missing))} -> {show(b.get(key, missing))}"
        for key in sorted(set(a) | set(b))
        if a.get(key, missing) != b.get(key, missing)
    ]


def resumed_copy_path(out_dir: Path) -> Path:
    """``config.resumed_from.json``, or ``config.resumed_from.<n>.json`` if earlier
    resumes with a changed config already kept one (none is overwritten)."""
    path = out_dir / "config.resumed_from.json"
    n = 2
    while path.exists():
        path = out_dir / f"config.resumed_from.{n}.json"
        n += 1
    return path


def _saved_config(out_dir: Path, resume_dir: Path) -> dict[str, Any] | None:
    """The resumed run's config: ``<out_dir>/config.json``, else the checkpoint's
    ``state.json``; ``None`` when neither can be read."""
    try:
        old = json.loads((out_dir / "config.json").read_text())
    except (OSError, ValueError):
        old = None
    if old is None:
        try:
            old = json.loads((resume_dir / "state.json").read_text()).get("config")
        except (OSError, ValueError):
            old = None
    return old if isinstance(old, dict) else None


def note_config_changes(out_dir: Path, resume_dir: Path, new: dict[str, Any]) -> None:
    """Warn (``RuntimeWarning``, one line) about fields that differ from the resumed run's
    config and keep that config.

    When the saved config (:func:`_saved_config`) differs from ``new``, it is copied to
    :func:`resumed_copy_path` (never overwriting an earlier copy); the caller then writes
    the new ``config.json``.
    """
    old = _saved_config(out_dir, resume_dir)
    if old is None:
        return
    changes = config_changes(old, new)
    if not changes:
        return
    kept = resumed_copy_path(out_dir)
    atomic_write_json(kept, old)
    warnings.warn(
        f"resuming {resume_dir} with a changed config ({len(changes)} field(s)): "
        + "; ".join(changes)
        + f" — the previous config is kept in {kept}",
        RuntimeWarning,
        stacklevel=3,  # the caller of StarPOTrainer(...)
    )


def _load_pt(d: Path, name: str) -> Any:
    """:func:`ragen_train.checkpoint.load_pt`; a refused file stops the resume in one line
    (:class:`~ragen_train.checkpoint.RefusedCheckpoint`, which the CLI prints as ``error:``)."""
    try:
        return ckpt.load_pt(d, name)
    except ckpt.CheckpointError as exc:
        raise ckpt.RefusedCheckpoint(f"cannot resume from checkpoint {exc}") from None


def restore_rng(d: Path, rank: int) -> None:
    """Restore this rank's Python/NumPy/torch RNG state saved in checkpoint ``d`` (if any).

    Raises:
        RefusedCheckpoint: the file holds anything but tensors, numbers and containers (a
            planted pickle payload is refused unrun: :func:`ragen_train.checkpoint.load_pt`).
    """
    name = f"rng_rank{rank}.pt"
    if os.path.lexists(d / name):
        ckpt.set_rng_state(_load_pt(d, name))


def load_weights(
    d: Path,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    critic: Any = None,
    critic_optimizer: Any = None,
) -> None:
    """Model, optimizer and scheduler state (critic too) of checkpoint ``d``, whatever
    layout wrote it: DCP shards (FSDP2, any world size) or full tensors (DDP / one
    process), into whatever layout this run uses (:mod:`ragen_train.dist_state`).  The
    ``.pt`` files are read without unpickling code (:func:`ragen_train.checkpoint.load_pt`).

    Raises:
        RefusedCheckpoint: a ``.pt`` file or the DCP metadata holds a pickled object a
            checkpoint may not hold, or a file is a symbolic link (one line naming it).
        RuntimeError: the checkpoint holds weights the model does not have, or an FSDP2
            run resumes a LoRA adapter written without FSDP2.
    """
    from safetensors.torch import load_file

    from . import dist_state

    entries = {"policy": (model, optimizer)}
    if critic is not None:
        entries["critic"] = (critic, critic_optimizer)
    scheduler.load_state_dict(_load_pt(d, "scheduler.pt"))
    if (d / dist_state.DCP_DIR).is_dir():
        try:
            dist_state.load_sharded(d / dist_state.DCP_DIR, entries)
        except dist_state.UnsafeCheckpointError as exc:
            raise ckpt.RefusedCheckpoint(f"cannot resume from checkpoint {d}: {exc}") from None
        return
    weights = d / "model" / "model.safetensors"
    if dist_state.is_sharded(model):
        if not weights.is_file():
            raise RuntimeError(
                f"{d} holds a LoRA adapter written without FSDP2; resume it with "
                "trainer.distributed=ddp (FSDP2 resumes LoRA runs from its own checkpoints)"
            )
        opt = _load_pt(d, "optimizer.pt")
        dist_state.load_full(model, optimizer, load_file(str(weights)), opt)
        if critic is not None:
            dist_state.load_full(
                critic,
                critic_optimizer,
                load_file(str(d / "critic" / "model.safetensors")),
                _load_pt(d, "critic_optimizer.pt"),
            )
        return
    target = unwrap(model)
    if weights.is_file():
        missing, unexpected = target.load_state_dict(load_file(str(weights)), strict=False)
        if unexpected:
            raise RuntimeError(f"checkpoint has unexpected weights: {unexpected[:5]}")
    else:  # a LoRA adapter
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(target, load_file(str(d / "model" / "adapter_model.safetensors")))
    optimizer.load_state_dict(_load_pt(d, "optimizer.pt"))
    if critic is not None:
        unwrap(critic).load_state_dict(load_file(str(d / "critic" / "model.safetensors")))
        critic_optimizer.load_state_dict(_load_pt(d, "critic_optimizer.pt"))


def save_final_model(
    out_dir: Path, model: Any, tokenizer: Any, dist: DistInfo, *, merge_lora: bool, config: dict
) -> Path:
    """Save the policy to ``<out_dir>/final_model`` (rank 0; atomic, with a manifest), as
    every back-end does (docs/backends.md); returns the path.  Every rank must call it:
    under FSDP2 the full tensors are gathered on every rank (a collective), rank 0 writes."""
    final = out_dir / "final_model"
    full = ckpt.export_weights(model, merge_lora=merge_lora, rank=dist.rank)
    if dist.is_main:
        ckpt.save_model(
            model, tokenizer, final, merge_lora=merge_lora, config=config, state_dict=full
        )
    barrier(dist)
    return final


__all__ = [
    "claim_out_dir",
    "config_changes",
    "find_checkpoint",
    "load_weights",
    "note_config_changes",
    "restore_rng",
    "resumed_copy_path",
    "save_final_model",
]
