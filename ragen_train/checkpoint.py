"""Checkpoints: everything needed to continue a run exactly, written so that a crash never
leaves a damaged one in place, and verified before they are loaded.

``<out_dir>/checkpoints/step_000010/``:

* ``model/`` — ``save_pretrained`` of the policy (LoRA: the adapter, or merged weights
  with ``lora.save=merged``) and the tokenizer, so ``ragen-bench run --model`` and
  ``ragen-train eval`` load it directly;
* ``critic/`` — the value model, when there is one;
* ``optimizer.pt``, ``critic_optimizer.pt``, ``scheduler.pt``;
* under FSDP2, instead of ``optimizer.pt``, ``critic_optimizer.pt`` and ``critic/``: ``dcp/``,
  the sharded model and optimizer state written by every rank with
  torch.distributed.checkpoint (:mod:`ragen_train.dist_state`; it loads into any world size,
  DDP or one process); ``model/`` is then gathered collectively and written by rank 0.
  The checkpoint directory must be on a file system every rank sees (rank 0 hashes every
  rank's shard into the manifest);
* ``rng_rank<r>.pt`` — Python, NumPy and torch RNG states of every rank (only tensors,
  numbers, strings, tuples, lists and dicts: the NumPy key as a tensor);
* ``state.json`` — step, rollout seed counter, consecutive-empty counter, config;
* ``manifest.json`` — written last: ``{"format": "ragen-checkpoint", "version": 1, "step",
  "config_hash", "saved_at", "files": {<relative path>: {"size", "sha256"}}}``.

Writing (:func:`save`): every file goes into ``checkpoints/.step_000010.tmp-save``, which
is ``fsync``-ed, given its manifest and renamed to ``step_000010`` (atomic); only then is
``checkpoints/latest`` rewritten (atomically) to name it, and older checkpoints pruned.  A
kill at any moment leaves the previous checkpoints intact and at most a temporary
directory, removed by the next save.  Saved models (``sft_model/``, ``final_model/``) are
written the same way by :func:`save_model` (manifest ``format: "ragen-model"``).

Loading (:func:`verify`, :func:`find_resumable`): a checkpoint is intact when its manifest
is readable and every file it lists has the recorded size and SHA-256.  ``--resume
latest`` takes the newest intact checkpoint (by ``saved_at``), reporting each newer
damaged one with the file at fault; :class:`NoIntactCheckpoint` when there is none.
Pruning (:func:`prune`) never removes the newest intact checkpoint nor the one ``latest``
names.

A checkpoint may come from someone else, so nothing in it is unpickled as code: every
``.pt`` file is read by :func:`load_pt` with ``torch.load(weights_only=True)`` (torch's
restricted unpickler: tensors, numbers, strings and containers), plus only the three NumPy
globals that rebuild a plain array (:data:`LEGACY_NUMPY_GLOBALS`: the NumPy RNG key that
checkpoints written before this format held as an ``ndarray``).  A file that names any other
global (an object whose ``__reduce__`` would call ``os.system``) is refused with
:class:`CheckpointError`, one line naming the file, and the payload never runs.  Every file
a manifest lists must be a regular file inside the checkpoint (no symbolic link, no ``..``):
:func:`ragen_bench.fileio.check_regular`.  The DCP directory of FSDP2 checkpoints is
checked the same way (:mod:`ragen_train.dist_state`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen_bench.fileio import (
    TMP_MARK,
    NotRegularFileError,
    atomic_directory,
    atomic_write_json,
    atomic_write_text,
    check_regular,
    fsync_tree,
    open_regular_file,
    remove_directory,
    remove_stale_temporaries,
    replace_directory,
    sha256_file,
)
from ragen_bench.protocol import write_protocol
from ragen_envs import jsonutil

from . import dist_state
from .evaluation import saved_protocol

MANIFEST = "manifest.json"
CHECKPOINT_FORMAT = "ragen-checkpoint"
MODEL_FORMAT = "ragen-model"
MANIFEST_VERSION = 1

#: Seconds to sleep at each stage of a checkpoint write (before every file, the manifest, the
#: rename and the ``latest`` pointer).  Only for fault-injection tests: it widens the save
#: window so that an external SIGKILL lands inside it.  Unset (0) in normal use.
TEST_DELAY_ENV = "RAGEN_CHECKPOINT_TEST_DELAY_S"


class CheckpointError(Exception):
    """A checkpoint (or saved model) directory is damaged.

    Attributes:
        path: the directory.  file: the file at fault, relative to it (``manifest.json``
        when the manifest itself is missing or unreadable).  reason: what is wrong.
    """

    def __init__(self, path: Path, file: str, reason: str):
        self.path, self.file, self.reason = Path(path), file, reason
        super().__init__(f"{self.path}: {file} {reason}")


class NoIntactCheckpoint(FileNotFoundError):
    """``--resume`` found no intact checkpoint; the message is one line naming each damaged one."""


class RefusedCheckpoint(NoIntactCheckpoint):
    """A verified checkpoint holds a file that may not be loaded (a pickled object other than
    tensors, numbers and containers, or a symbolic link): the resume stops, without falling
    back and without running anything; the message is one line naming the file."""


@dataclass
class Resumable:
    """The checkpoint :func:`find_resumable` chose.

    Attributes:
        path: its directory.  step: its step.  damaged: newer checkpoints passed over
        (each a :class:`CheckpointError`).  newest_step: the highest step among them and
        the chosen one (``step`` when nothing was passed over).
    """

    path: Path
    step: int
    damaged: list[CheckpointError] = field(default_factory=list)
    newest_step: int = 0

    @property
    def steps_lost(self) -> int:
        """Steps the damaged checkpoints held beyond ``step`` (what the fall-back loses)."""
        return max(0, self.newest_step - self.step)

    def fallback_message(self) -> str | None:
        """One line for the user when a damaged checkpoint was passed over, else ``None``."""
        if not self.damaged:
            return None
        what = "; ".join(f"{e.path.name}: {e.file} {e.reason}" for e in self.damaged)
        lost = self.steps_lost
        return (
            f"damaged checkpoint(s) skipped ({what}); resuming from the newest intact one, {self.path.name} "
            f"(step {self.step}): {lost} step{'s' if lost != 1 else ''} lost"
        )


# ------------------------------------------------------------------------------- safe loading
#: The globals beyond torch's weights-only set that :func:`load_pt` allows: what pickling a
#: plain NumPy array names (``numpy._core`` in NumPy 2, ``numpy.core`` before).  Checkpoints
#: written before the tensor-only RNG format hold the NumPy RNG key as such an array.
LEGACY_NUMPY_GLOBALS = (
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray._reconstruct",
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.dtypes.UInt32DType",
)


def _numpy_globals() -> list[Any]:
    out = []
    for dotted in LEGACY_NUMPY_GLOBALS:
        module, _, name = dotted.rpartition(".")
        try:
            mod = __import__(module, fromlist=[name])
            obj = getattr(mod, name)
        except (ImportError, AttributeError):
            continue
        out.append((obj, dotted))  # under the name the file spells it, whatever NumPy aliases
    return out


def load_pt(d: str | Path, rel: str) -> Any:
    """Read ``d/rel``, a ``.pt`` file of a checkpoint, without running anything it holds.

    ``torch.load(weights_only=True)`` (tensors, numbers, strings, tuples, lists, dicts,
    ``OrderedDict``) with :data:`LEGACY_NUMPY_GLOBALS` allowed; the file is opened with
    ``O_NOFOLLOW`` and must be a regular file (:func:`ragen_bench.fileio.open_regular_file`).

    Raises:
        CheckpointError: the file names another global (e.g. ``posix.system`` from a
            planted ``__reduce__``; refused before anything is called), is a symbolic link,
            or is not a torch file.  One line naming the file.
    """
    d = Path(d)
    try:
        with (
            open_regular_file(d / rel, "rb") as fh,
            torch.serialization.safe_globals(_numpy_globals()),
        ):
            return torch.load(fh, map_location="cpu", weights_only=True)
    except NotRegularFileError as exc:
        raise CheckpointError(d, rel, str(exc).split(": ", 1)[-1]) from None
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f" ({found.group(1)})" if found else ""
        raise CheckpointError(
            d,
            rel,
            f"holds a pickled object a checkpoint may not hold{what}; refused without running it "
            "(only tensors, numbers, strings and containers are loaded)",
        ) from None
    except (RuntimeError, EOFError, OSError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise CheckpointError(d, rel, f"is not a readable torch file ({reason})") from None


# ------------------------------------------------------------------------------- RNG state
def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch (and CUDA) global RNG states, in a form :func:`load_pt` reads
    (the NumPy key is an int64 tensor of the 624 ``uint32`` words, not an ``ndarray``)."""
    name, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": str(name),
            "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned (also the earlier form, whose ``numpy``
    entry is ``np.random.get_state()``'s tuple)."""
    random.setstate(state["python"])
    npy = state["numpy"]
    if isinstance(npy, dict):
        npy = (
            npy["bit_generator"],
            np.asarray(npy["key"].numpy(), dtype=np.uint32),
            int(npy["pos"]),
            int(npy["has_gauss"]),
            float(npy["cached_gaussian"]),
        )
    np.random.set_state(npy)
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ------------------------------------------------------------------------------- paths
def checkpoint_dir(out_dir: str | Path, step: int) -> Path:
    """``<out_dir>/checkpoints/step_<step:06d>``."""
    return Path(out_dir) / "checkpoints" / f"step_{step:06d}"


def config_hash(config: dict[str, Any]) -> str:
    """SHA-256 of the config's canonical JSON (sorted keys), hex."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


# ------------------------------------------------------------------------------- manifest
def _fault_point() -> None:
    delay = float(os.environ.get(TEST_DELAY_ENV) or 0)
    if delay > 0:
        time.sleep(delay)


def write_manifest(
    d: Path,
    *,
    kind: str = CHECKPOINT_FORMAT,
    step: int | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record every file under ``d`` (size and SHA-256) in ``d/manifest.json``; returns it."""
    files = {}
    for p in sorted(q for q in d.rglob("*") if q.is_file() and q.name != MANIFEST):
        rel = p.relative_to(d).as_posix()
        files[rel] = {"size": p.stat().st_size, "sha256": sha256_file(p)}
    manifest = {
        "format": kind,
        "version": MANIFEST_VERSION,
        "step": step,
        "config_hash": config_hash(config) if config is not None else None,
        "saved_at": time.time(),
        "files": files,
    }
    atomic_write_json(d / MANIFEST, manifest)
    return manifest


def read_manifest(d: Path) -> dict[str, Any]:
    """The manifest of ``d``.

    Raises:
        CheckpointError: it is missing, unreadable or not a ragen manifest.
    """
    p = Path(d) / MANIFEST
    if not Path(d).is_dir():
        raise CheckpointError(d, "(directory)", "is missing")
    try:
        present = check_regular(p, missing_ok=True)
    except NotRegularFileError as exc:
        raise CheckpointError(d, MANIFEST, str(exc).split(": ", 1)[-1]) from None
    if not present:
        raise CheckpointError(
            d,
            MANIFEST,
            "is missing (the save did not finish, or the directory was not "
            "written by this version of ragen)",
        )
    try:
        m = json.loads(p.read_bytes().decode("utf-8"))
    except (ValueError, OSError) as exc:
        raise CheckpointError(d, MANIFEST, f"is unreadable ({type(exc).__name__})") from None
    if (
        not isinstance(m, dict)
        or not isinstance(m.get("files"), dict)
        or m.get("format") not in (CHECKPOINT_FORMAT, MODEL_FORMAT)
    ):
        raise CheckpointError(d, MANIFEST, "is not a ragen manifest")
    if m.get("version") != MANIFEST_VERSION:
        raise CheckpointError(
            d, MANIFEST, f"has version {m.get('version')!r}; this ragen reads {MANIFEST_VERSION}"
        )
    return m


def verify(d: str | Path, *, kind: str | None = CHECKPOINT_FORMAT) -> dict[str, Any]:
    """Check that every file the manifest of ``d`` lists is there, whole and unchanged.

    Returns the manifest.  Cost: one read of every file (SHA-256).

    Raises:
        CheckpointError: naming the first damaged file: missing, emptied, truncated (or
            grown), or changed in place (SHA-256 mismatch, e.g. a flipped bit); or the
            manifest is missing/unreadable, or of another ``kind``.
    """
    d = Path(d)
    m = read_manifest(d)
    if kind is not None and m["format"] != kind:
        raise CheckpointError(d, MANIFEST, f"describes a {m['format']!r} directory, not a {kind!r}")
    for rel, entry in sorted(m["files"].items()):
        p = d / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise CheckpointError(d, rel, "is named outside the directory (refused)")
        try:
            present = check_regular(p, root=d, missing_ok=True)
        except NotRegularFileError as exc:
            raise CheckpointError(d, rel, str(exc).split(": ", 1)[-1]) from None
        if not present:
            raise CheckpointError(d, rel, "is missing")
        size, want = p.stat().st_size, int(entry["size"])
        if size != want:
            how = "is empty" if size == 0 else ("is truncated" if size < want else "has grown")
            raise CheckpointError(d, rel, f"{how} ({size} of {want} bytes)")
        if sha256_file(p) != entry["sha256"]:
            raise CheckpointError(d, rel, "has changed since it was saved (SHA-256 mismatch)")
    if kind == CHECKPOINT_FORMAT:
        try:
            state_step = json.loads((d / "state.json").read_text()).get("step")
        except (OSError, ValueError):
            raise CheckpointError(d, "state.json", "is unreadable") from None
        if state_step != m.get("step"):
            raise CheckpointError(
                d, "state.json", f"says step {state_step}, the manifest {m.get('step')}"
            )
    return m


# ------------------------------------------------------------------------------- writing
def _write_model(
    model: Any,
    tokenizer: Any,
    path: Path,
    *,
    merge_lora: bool = False,
    config: dict[str, Any] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> None:
    """``save_pretrained`` of ``model`` (or of ``state_dict``: the full tensors
    :func:`export_weights` gathered from a sharded model, LoRA already merged when
    ``merge_lora``), the tokenizer and the agent protocol."""
    m = getattr(model, "module", model)
    if state_dict is not None:
        if merge_lora and hasattr(m, "get_base_model"):
            m = m.get_base_model()  # the merged weights carry the base model's names
        m.save_pretrained(path, safe_serialization=True, state_dict=state_dict)
    else:
        if merge_lora and hasattr(m, "merge_and_unload"):
            import copy

            m = copy.deepcopy(m).merge_and_unload()
        m.save_pretrained(path, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    if config is not None:  # the agent protocol travels with the model (ragen_bench.protocol)
        write_protocol(path, saved_protocol(config))


def export_weights(model: Any, *, merge_lora: bool, rank: int) -> dict[str, torch.Tensor] | None:
    """The full tensors of a sharded (FSDP2) model for a Hugging Face export, else ``None``.

    A collective when sharded: every rank calls it; rank 0 gets the tensors (CPU), the others
    an empty dict.  ``merge_lora``: the LoRA deltas are merged, one parameter at a time
    (:func:`ragen_train.rollout_engine.merged_named_weights`).
    """
    if not dist_state.is_sharded(model):
        return None
    m = getattr(model, "module", model)
    if merge_lora and hasattr(m, "get_base_model"):
        from .rollout_engine import merged_named_weights

        out = {}
        for name, t in merged_named_weights(model):
            if rank == 0:
                out[name] = t.detach().cpu().clone()
        return out
    return dist_state.full_state_dict(model, rank=rank)


def save_model(
    model: Any,
    tokenizer: Any,
    path: str | Path,
    *,
    merge_lora: bool = False,
    config: dict[str, Any] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Save a (possibly LoRA-wrapped) policy as a loadable Hugging Face directory, atomically.

    ``state_dict``: the full tensors of a sharded model (:func:`export_weights`, rank 0).

    The directory is built under a temporary name, given a manifest (``format:
    "ragen-model"``; :func:`verify` with ``kind=MODEL_FORMAT`` checks it) and renamed over
    ``path`` (an existing one is replaced only once the new one is complete).
    """
    path = Path(path)
    with atomic_directory(path) as tmp:
        _write_model(
            model, tokenizer, tmp, merge_lora=merge_lora, config=config, state_dict=state_dict
        )
        write_manifest(tmp, kind=MODEL_FORMAT, config=config)
    return path


def save(
    out_dir: str | Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scheduler: Any,
    state: dict[str, Any],
    rank: int = 0,
    critic: Any = None,
    critic_optimizer: Any = None,
    merge_lora: bool = False,
    keep: int = 1,
    barrier: Callable[[], None] = lambda: None,
) -> Path:
    """Write checkpoint ``step`` (see the module docstring for the layout and the order).

    Every rank calls it (``barrier`` synchronises them): each writes its RNG state (and,
    for an FSDP2 model, its DCP shards and its part of the gathered HF export), rank 0 the
    shared files, the manifest, the rename, ``latest`` and the pruning.

    Returns:
        The checkpoint directory.
    Raises:
        CheckpointError: the checkpoint read back does not match what was written (rank 0;
            ``latest`` is then not moved).
    """
    root = Path(out_dir) / "checkpoints"
    final = checkpoint_dir(out_dir, step)
    tmp = root / f".{final.name}{TMP_MARK}save"  # one name for every rank
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(root)  # left by a killed save; this process is the only writer
        tmp.mkdir()
    barrier()
    _fault_point()
    torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
    sharded = dist_state.is_sharded(model)
    full: dict[str, torch.Tensor] | None = None
    if sharded:  # collectives: every rank writes its DCP shards, then the HF export is gathered
        entries = {"policy": (model, optimizer)}
        if critic is not None:
            entries["critic"] = (critic, critic_optimizer)
        _fault_point()
        dist_state.save_sharded(tmp / dist_state.DCP_DIR, entries)
        fsync_tree(tmp / dist_state.DCP_DIR)
        full = export_weights(model, merge_lora=merge_lora, rank=rank)
    barrier()
    if rank != 0:
        return final
    cfg = state.get("config")
    _fault_point()
    _write_model(
        model,
        tokenizer,
        tmp / "model",
        merge_lora=merge_lora,
        config=cfg if isinstance(cfg, dict) else None,
        state_dict=full,
    )
    if critic is not None and not sharded:
        _fault_point()
        getattr(critic, "module", critic).save_pretrained(tmp / "critic", safe_serialization=True)
        _fault_point()
        torch.save(critic_optimizer.state_dict(), tmp / "critic_optimizer.pt")
    if not sharded:
        _fault_point()
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    _fault_point()
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    _fault_point()
    (tmp / "state.json").write_text(jsonutil.dumps({**state, "step": step}, indent=2) + "\n")
    fsync_tree(tmp)
    _fault_point()
    write_manifest(tmp, step=step, config=cfg if isinstance(cfg, dict) else None)
    _fault_point()
    replace_directory(tmp, final)
    verify(final)  # read back before `latest` may name it
    _fault_point()
    atomic_write_text(root / "latest", final.name + "\n")
    prune(root, keep, newest_intact=final.name)
    return final


# ------------------------------------------------------------------------------- choosing
def _saved_at(d: Path) -> float:
    """When ``d`` was saved: its manifest's ``saved_at``, else the mtime of its
    ``state.json``, else of the directory (damaged or pre-manifest checkpoints)."""
    try:
        m = json.loads((d / MANIFEST).read_text())
        return float(m["saved_at"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for p in (d / "state.json", d):
        try:
            return p.stat().st_mtime
        except OSError:
            continue
    return 0.0


def _step_of(d: Path) -> int:
    try:
        return int(d.name.split("_", 1)[1])
    except (IndexError, ValueError):
        return -1


def list_checkpoints(root: str | Path) -> list[Path]:
    """The ``step_*`` directories under ``root``, newest first (by :func:`_saved_at`, then step)."""
    root = Path(root)
    dirs = [p for p in root.glob("step_*") if p.is_dir()] if root.is_dir() else []
    return sorted(dirs, key=lambda p: (_saved_at(p), _step_of(p)), reverse=True)


def find_resumable(out_dir: str | Path) -> Resumable:
    """The newest intact checkpoint of a run (what ``--resume latest`` loads).

    Raises:
        NoIntactCheckpoint: no checkpoint, or none intact (one line naming each damaged one
            and its file at fault).
    """
    root = Path(out_dir) / "checkpoints"
    damaged: list[CheckpointError] = []
    for d in list_checkpoints(root):
        try:
            m = verify(d)
        except CheckpointError as exc:
            damaged.append(exc)
            continue
        step = int(m["step"])
        newest = max([step, *(_step_of(e.path) for e in damaged)])
        return Resumable(d, step, damaged, newest)
    if damaged:
        raise NoIntactCheckpoint(
            f"no intact checkpoint to resume from in {root}: "
            + "; ".join(f"{e.path.name}: {e.file} {e.reason}" for e in damaged)
        )
    raise NoIntactCheckpoint(f"no checkpoint to resume from in {root}")


def prune(root: Path, keep: int, *, newest_intact: str | None = None) -> list[Path]:
    """Remove old checkpoints, keeping the ``keep`` newest (``keep <= 0``: all), the newest
    intact one (verified, unless the caller names it in ``newest_intact`` because it has
    just verified it) and the one ``latest`` names; returns what was removed.

    "Newest" is by time written (:func:`_saved_at`), not step number: a run resumed from an
    early checkpoint writes ``step_000002`` after an older ``step_000030``.
    """
    if keep <= 0:
        return []
    ordered = list_checkpoints(root)
    pointer = root / "latest"
    current = pointer.read_text(errors="replace").strip() if pointer.is_file() else None
    keep_set = {p.name for p in ordered[:keep]} | ({current} if current else set())
    for d in ordered:
        if d.name == newest_intact:
            keep_set.add(d.name)
            break
        try:
            verify(d)
        except CheckpointError:
            continue
        keep_set.add(d.name)
        break
    removed = [d for d in ordered if d.name not in keep_set]
    for d in removed:
        remove_directory(d)
    return removed


# Kept for callers and tests of the earlier name.
_prune = prune


def load_state(d: Path) -> dict[str, Any]:
    """``state.json`` of checkpoint ``d`` (verify ``d`` first)."""
    return json.loads((Path(d) / "state.json").read_text())
