"""What ``ragen-train starpo --resume WHERE`` continues, and why it cannot when it cannot.

``WHERE`` is ``latest`` (the newest intact checkpoint in the config's ``trainer.out_dir``),
a run directory (a ``trainer.out_dir`` with ``config.json``), or a checkpoint directory
(``<out_dir>/checkpoints/step_N``, or the TRL back-end's ``<out_dir>/trl/checkpoint-N``).  With a directory and no ``--config``, the config is
the run's own ``config.json`` (for a checkpoint: the run directory's, else the copy in its
``state.json``) with the command line's overrides on top, as ``ragen-bench run --resume``
reads its run's ``run.json`` — so a run is continued with the settings it was started with.
A run directory that was moved is continued where it now is (``trainer.out_dir`` is set to it).

:func:`missing_checkpoint_message` names the actual reason a resume found nothing: the
directory does not exist, is neither a run nor a checkpoint, the run was configured never to
save (``trainer.save_every=0``), or it stopped before its first checkpoint.

:func:`check_config_values` applies :mod:`ragen_bench.trust` to the config a command reads:
a run folder's ``config.json`` (``--resume DIR`` without ``--config``) may not choose a
command, endpoint or key variable the user did not confirm; a config file the user named with
``-c`` may choose endpoints and key variables (printed before the run), but a command only
when confirmed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ResumeTarget:
    """Where a resume reads its config and what it passes to the trainer.

    Attributes:
        config_path: the run's ``config.json`` (``None``: the config is the ``state.json`` copy in
            ``state``, or the command line's ``--config``).
        state_config: the config saved in the checkpoint's ``state.json`` (used when the run
            directory has no ``config.json``).
        run_dir: the run directory (``trainer.out_dir``), if ``WHERE`` names one.
        resume: the trainer's ``resume`` argument (``"latest"`` or a checkpoint directory).
    """

    config_path: Path | None
    state_config: dict[str, Any] | None
    run_dir: Path | None
    resume: str


def _is_checkpoint(d: Path) -> bool:
    return (d / "state.json").is_file() or (d / "manifest.json").is_file()


def resume_target(where: str) -> ResumeTarget:
    """Classify ``--resume WHERE`` (module docstring).  ``latest`` and paths that are neither a
    run nor a checkpoint come back with no config (the trainer then reports why).

    Raises:
        nothing: a missing or unreadable directory is reported later by
        :func:`missing_checkpoint_message`, with the config in hand.
    """
    if where == "latest":
        return ResumeTarget(None, None, None, "latest")
    d = Path(where)
    if (
        d / "trainer_state.json"
    ).is_file() and d.parent.name == "trl":  # a TRL back-end checkpoint-N
        run = d.parent.parent
        return ResumeTarget(
            run / "config.json" if (run / "config.json").is_file() else None, None, run, str(d)
        )
    if _is_checkpoint(d):
        run = d.parent.parent if d.parent.name == "checkpoints" else None
        cfg_file = (
            run / "config.json" if run is not None and (run / "config.json").is_file() else None
        )
        state = None
        if cfg_file is None:
            try:
                state = json.loads((d / "state.json").read_text()).get("config")
            except (OSError, ValueError, AttributeError):
                state = None
        return ResumeTarget(cfg_file, state if isinstance(state, dict) else None, run, str(d))
    if (d / "config.json").is_file():
        return ResumeTarget(d / "config.json", None, d, "latest")
    return ResumeTarget(None, None, None, str(d))


def _last_step(metrics: Path) -> int | None:
    """The largest ``step`` of a ``train`` row of ``metrics.jsonl`` (``None``: none)."""
    try:
        lines = metrics.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    steps = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(row, dict)
            and row.get("phase") == "train"
            and isinstance(row.get("step"), int)
        ):
            steps.append(row["step"])
    return max(steps) if steps else None


def missing_checkpoint_message(where: str, out_dir: Path, save_every: int) -> str:
    """One line saying why ``--resume where`` found no checkpoint.

    Args:
        where: the ``--resume`` argument.
        out_dir: the config's ``trainer.out_dir``.
        save_every: the config's ``trainer.save_every``.
    """
    never = (
        "checkpoints are written every trainer.save_every steps (0 = never; this config: 0) — set "
        "trainer.save_every > 0 in the run to be resumed"
    )
    if where != "latest":
        d = Path(where)
        if not d.exists():
            return f"no checkpoint to resume from at {where!r}: it does not exist"
        return (
            f"no checkpoint to resume from at {where!r}: it is neither a checkpoint (<out_dir>/checkpoints/"
            "step_N, with state.json) nor a run directory (a trainer.out_dir with config.json)"
        )
    head = f"no checkpoint to resume from in trainer.out_dir {str(out_dir)!r}"
    if not out_dir.is_dir():
        cause = (
            f"{head}: the directory does not exist (no run was started there; pass the run's --config, "
            "or --resume <its out_dir>)"
        )
        return cause + (
            "; and " + never
            if save_every <= 0
            else f" — this config saves a checkpoint every trainer.save_every={save_every} steps"
        )
    run_every = save_every
    try:
        run_every = int(json.loads((out_dir / "config.json").read_text())["trainer"]["save_every"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if run_every <= 0:
        return f"{head}: the run there was configured never to save — " + never.replace(
            "this config", "that run's"
        )
    last = _last_step(out_dir / "metrics.jsonl")
    if last is None:
        return (
            f"{head}: the run there logged no training step, so it wrote no checkpoint (the first is "
            f"written at step {run_every}, trainer.save_every={run_every}); start it again with "
            "trainer.overwrite=true"
        )
    return (
        f"{head}: the run there stopped at step {last}, before its first checkpoint at step {run_every} "
        f"(trainer.save_every={run_every}); start it again with trainer.overwrite=true, or save "
        "more often with a smaller trainer.save_every"
    )


def interrupted_message(
    out_dir: str | Path, save_every: int, *, command: str = "starpo", reason: str = "interrupted"
) -> str:
    """What to tell a user who pressed Ctrl-C (or whose run got SIGTERM): the command that
    continues the run from its newest intact checkpoint, or why there is nothing to continue yet.

    Args:
        out_dir: the run's ``trainer.out_dir``.
        save_every: its ``trainer.save_every``.
        command: ``starpo``, or ``quickstart`` (whose StarPO phase ``starpo --resume`` continues;
            the before/after summary is only written by a complete quickstart).
        reason: the start of the line (``ragen_bench.interrupt.signal_label``: "interrupted"
            for Ctrl-C, "stopped by SIGTERM").
    """
    from . import checkpoint as ckpt

    out = Path(out_dir)
    try:
        found: Any = ckpt.find_resumable(out)
    except (ckpt.CheckpointError, FileNotFoundError, OSError):
        found = None
    if found is None:
        why = (
            "this run never saves one (trainer.save_every=0)"
            if save_every <= 0
            else f"no checkpoint was written yet (one every trainer.save_every={save_every} steps)"
        )
        again = (
            "run the quickstart again"  # a recipe: it overwrites by itself
            if command == "quickstart"
            else "start it again with trainer.overwrite=true (its first files are in the way)"
        )
        return f"{reason}: nothing to resume in {out} — {why}; {again}"
    tail = (
        " (the StarPO phase; the before/after summary needs a complete quickstart)"
        if command == "quickstart"
        else ""
    )
    return (
        f"{reason}: continue from checkpoint step {found.step} with `ragen-train starpo --resume {out}`"
        f"{tail}"
    )


def _override_values(overrides: list[str] | None) -> dict[str, str]:
    """``{last key: value}`` of ``section.field=value`` overrides (what they confirm)."""
    out = {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if sep:
            out[key.strip().rsplit(".", 1)[-1]] = value.strip()
    return out


def check_config_values(
    cfg: Any,
    *,
    config: str | None,
    resume: str | None,
    overrides: list[str] | None,
    trust: bool,
) -> list[str]:
    """Check the commands, endpoints and key variables of the env configs ``cfg`` holds
    against where the config came from (:mod:`ragen_bench.trust`; docs/security.md).

    * a preset (``-c NAME``, or none): project code, nothing to check;
    * a run folder's ``config.json`` or checkpoint ``state.json`` (``--resume DIR``, no
      ``-c``): every command, endpoint and key variable must be confirmed by an override
      with the same value (``env.config.verifier=...``) or ``--trust-folder``;
    * a file the user named (``-c FILE``): a command must be confirmed the same way;
      endpoints and key variables are accepted.

    Returns:
        Lines to print before anything runs: each accepted command, and the origin
        (``scheme://host:port``) of each endpoint.
    Raises:
        UntrustedValueError: an unconfirmed value (one line naming the file and the field).
    """
    from ragen_bench.trust import check_folder_values, directing_fields, origins

    from .multienv import train_envs, val_envs
    from .presets import PRESETS

    if config is not None:
        if config in PRESETS:
            return []
        source, folder = config, False
    else:
        target = resume_target(resume) if resume else None
        if target is None or (target.config_path is None and target.state_config is None):
            return []
        source = str(target.config_path or Path(target.resume) / "state.json")
        folder = True
    fields = []
    for slot in [*train_envs(cfg), *val_envs(cfg)]:
        for f in directing_fields(slot.config, None):
            if f not in fields:
                fields.append(f)
    given = _override_values(overrides)
    confirmed = {f.name: given[f.key] for f in fields if f.key in given}
    must = [f for f in fields if folder or f.kind == "command"]
    how = {f.name: f"env.config.{f.key}=..." for f in must}
    check_folder_values(must, source=source, confirmed=confirmed, trust=trust, how=how)
    lines = [
        f"will run {f.name} = {f.value!r} (from {source})" for f in fields if f.kind == "command"
    ]
    lines += [f"will call {o} (from {source})" for o in origins(fields)]
    return lines


__all__ = [
    "ResumeTarget",
    "check_config_values",
    "interrupted_message",
    "missing_checkpoint_message",
    "resume_target",
]
