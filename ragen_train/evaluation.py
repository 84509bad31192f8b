"""``ragen-train eval``: evaluate a trained model with the protocol it was trained with.

A model is only comparable to its training curves when it is played the same way: think
mode, system prompt, context mode and window, tokens per response, turns and actions per
turn, format penalty, the env and its config.  :func:`plan_eval` finds the training run's
``config.json`` next to the model folder, takes all of that from it (through
:func:`ragen_bench.rollout.protocol_overrides` of its ``rollout`` section, the settings
the trainer itself plays with) and
lets command-line options override single settings.  Run layouts (``ragen_train.trainer``,
``ragen_train.pipeline``, ``ragen_train.checkpoint``)::

    <out_dir>/config.json                     the training config
    <out_dir>/final_model/, <out_dir>/sft_model/
    <out_dir>/checkpoints/step_000010/model/  (its state.json also holds the config)

Every mistake a user can make on the command line is an :class:`EvalSetupError` naming
the option, raised before any model is loaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import (
    RolloutSection,
    StarPOConfig,
    TrainConfigError,
    TrainerSection,
    from_dict,
)

SPLITS = ("train", "validation", "test")
DEFAULT_TEMPERATURE = TrainerSection.val_temperature  # without a training config
DEFAULT_MAX_NEW_TOKENS = RolloutSection.max_new_tokens  # without a training config
ENV_SPECIFIC = ("max_turns", "max_actions_per_turn")  # dropped when --env names another env


class EvalSetupError(ValueError):
    """A command-line value of ``ragen-train eval`` is wrong (``option`` names it)."""

    def __init__(self, option: str, reason: str):
        self.option = option
        self.reason = reason
        super().__init__(f"{option}: {reason}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_training_config(data: Any) -> bool:
    """Whether ``data`` looks like a ragen-train ``config.json`` (not a model's)."""
    return isinstance(data, dict) and {"env", "rollout", "trainer"} <= set(data)


def is_model_dir(path: Path) -> bool:
    """A Hugging Face model folder (``config.json`` with ``model_type``/``architectures``)
    or a peft adapter folder (``adapter_config.json``)."""
    if (path / "adapter_config.json").is_file():
        return True
    data = _read_json(path / "config.json")
    return (
        isinstance(data, dict)
        and not is_training_config(data)
        and ("model_type" in data or "architectures" in data)
    )


def model_folders(run_dir: Path) -> list[Path]:
    """The model folders inside a training run folder: ``final_model``, ``sft_model``,
    ``checkpoints/step_N/model`` (newest step first)."""
    found = [
        run_dir / name for name in ("final_model", "sft_model") if is_model_dir(run_dir / name)
    ]
    steps = sorted((run_dir / "checkpoints").glob("step_*/model"), reverse=True)
    return found + [p for p in steps if is_model_dir(p)]


def training_config_candidates(model_dir: Path) -> list[Path]:
    """Where the training config of ``model_dir`` may be, in order of preference.

    ``<out_dir>/final_model`` (or ``sft_model``, or any folder saved into a run folder)
    → ``<out_dir>/config.json``; ``<out_dir>/checkpoints/step_N/model`` →
    ``<out_dir>/config.json``, then ``checkpoints/step_N/state.json`` (its ``config``).
    """
    p = Path(os.path.abspath(model_dir))
    if p.parent.name.startswith("step_") and p.parent.parent.name == "checkpoints":
        return [p.parents[2] / "config.json", p.parent / "state.json"]
    return [p.parent / "config.json"]


def find_training_config(model_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The training config of the run that wrote ``model_dir`` and the file it came
    from (see :func:`training_config_candidates`), or ``None``."""
    for path in training_config_candidates(model_dir):
        data = _read_json(path)
        if path.name == "state.json" and isinstance(data, dict):
            data = data.get("config")
        if is_training_config(data):
            return path, data
    return None


def saved_protocol(config: dict[str, Any]):
    """The agent protocol to save with a model trained with ``config`` (a ``config.json`` dict).

    It is exactly what :func:`plan_eval` uses without options: the trained env, its config
    and ``env.test_split``, and :func:`ragen_bench.rollout.protocol_overrides` at
    ``trainer.val_temperature``; ``ragen-bench run --model DIR`` plays with it
    (:mod:`ragen_bench.protocol`).

    Returns:
        A :class:`ragen_bench.protocol.AgentProtocol`.
    Raises:
        TrainConfigError: ``config`` is not a valid training config.
    """
    from ragen_bench.protocol import AgentProtocol
    from ragen_bench.rollout import protocol_overrides

    from .multienv import train_envs

    cfg = from_dict(StarPOConfig, config)
    rollout = protocol_overrides(cfg.rollout, cfg.trainer.val_temperature)
    if not cfg.env.train:
        return AgentProtocol(
            env_id=cfg.env.id,
            env_config=dict(cfg.env.config),
            split=cfg.env.test_split,
            rollout=rollout,
            run_name=cfg.name,
        )
    # A multi-env run (env.train): the trained envs, not env.id, which it did not train on.
    slots = train_envs(cfg)
    return AgentProtocol(
        env_id=slots[0].id,
        env_config=dict(slots[0].config),
        split=cfg.env.test_split,
        rollout=rollout,
        run_name=cfg.name,
        train_envs=tuple({"id": s.id, "tag": s.tag, "config": dict(s.config)} for s in slots),
    )


@dataclass
class EvalPlan:
    """What ``ragen-train eval`` will run.

    Attributes:
        env_id / env_config / split / episodes: the episodes (``RunRequest`` fields).
        rollout: ``RolloutConfig`` overrides (``RunRequest.rollout``; ``None`` = env default).
        resolved: the full ``RolloutConfig`` these give for ``env_id``.
        device / dtype: for the ``hf`` policy.
        source: the training config used, or ``None`` (env defaults).
        run_name: the training run's ``name``.
        overridden: command-line options that replaced a training setting.
        notes: warnings for the user (no config found, settings dropped).
    """

    env_id: str
    env_config: dict[str, Any]
    split: str
    episodes: int
    rollout: dict[str, Any]
    resolved: Any
    device: str = "cpu"
    dtype: str = "float32"
    source: Path | None = None
    run_name: str | None = None
    overridden: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line: where the protocol comes from and its settings."""
        r = self.resolved
        origin = (
            f"the training config {self.source}"
            + (f" (run {self.run_name!r})" if self.run_name else "")
            if self.source
            else "the env's defaults (no training config found)"
        )
        context = r.context_mode + (
            f" (window {r.context_window})" if r.context_mode == "last_k" else ""
        )
        env_cfg = f" {json.dumps(self.env_config, sort_keys=True)}" if self.env_config else ""
        text = (
            f"protocol from {origin}: env {self.env_id}{env_cfg}, split {self.split}, {self.episodes} episodes; "
            f"think {'on' if r.enable_think else 'off'}, system prompt {r.system_prompt}, context {context}, "
            f"{r.max_turns} turn(s) x {r.max_actions_per_turn} action(s), "
            f"max_new_tokens {r.sampling.max_new_tokens}, temperature {r.sampling.temperature}, "
            f"format penalty {r.format_penalty}; device {self.device}"
        )
        if self.overridden:
            text += f"; from the command line: {', '.join(self.overridden)}"
        return text


def _usable_device(device: str) -> bool:
    from .modeling import check_device

    try:
        check_device(device)
    except TrainConfigError:
        return False
    return True


def _check_folder_env_config(env_config: dict[str, Any], source: Path, trust: bool) -> list[str]:
    """:func:`ragen_bench.trust.check_folder_values` of the env config a model folder's training
    config gives; returns the notes naming what will run or be called.

    Raises:
        EvalSetupError: an unconfirmed command, endpoint or key variable (``CHECKPOINT``).
    """
    from ragen_bench.trust import UntrustedValueError, check_folder_values, directing_fields

    fields = directing_fields(env_config, None)
    try:
        check_folder_values(fields, source=str(source), trust=trust)
    except UntrustedValueError as exc:
        raise EvalSetupError("CHECKPOINT", str(exc)) from None
    return [
        f"--trust-folder: will use {f.name} = {f.value!r} ({f.kind}, from {source})" for f in fields
    ]


def plan_eval(
    model_dir: Path,
    *,
    env: str | None = None,
    split: str | None = None,
    episodes: int = 64,
    temperature: float | None = None,
    max_new_tokens: int | None = None,
    context_mode: str | None = None,
    think: bool | None = None,
    device: str | None = None,
    trust: bool = False,
) -> EvalPlan:
    """The evaluation of ``model_dir``: the training protocol overlaid with the options.

    The training config beside a model folder may have been written by someone else: a
    command, endpoint or key variable in its env config (the Lean env's ``verifier``,
    :mod:`ragen_bench.trust`) is refused unless ``trust`` (``--trust-folder``); an accepted
    command or endpoint is named in :attr:`EvalPlan.notes`, printed before the run starts.

    Args:
        model_dir: a model folder (``final_model``, ``sft_model``,
            ``checkpoints/step_N/model``).
        env, split, episodes, temperature, max_new_tokens, context_mode, think, device:
            command-line options; ``None`` takes the training config's value (``env.id``, or
            the one env of ``env.train``; several there and no ``env``: an error),
            ``env.test_split``, ``trainer.val_temperature``, ``rollout.max_new_tokens``,
            ``rollout.context_mode``, ``rollout.enable_think``, ``model.device`` when
            usable here), else the env's default.  With ``env`` naming another env than the
            trained one, the training ``env.config`` and turn/action limits are dropped.

    Raises:
        EvalSetupError: naming the option (``CHECKPOINT`` for the model folder): not a
            model folder (a run folder lists the model folders it holds), an out-of-range
            value, an unknown env id, no ``--env`` and no training config.
    """
    import ragen_envs
    from ragen_bench.rollout import CONTEXT_MODES, protocol_overrides, rollout_config

    model_dir = Path(model_dir)
    if not model_dir.exists():
        raise EvalSetupError("CHECKPOINT", f"{model_dir} does not exist")
    if not is_model_dir(model_dir):
        inside = model_folders(model_dir) if model_dir.is_dir() else []
        if inside:
            raise EvalSetupError(
                "CHECKPOINT",
                f"{model_dir} is a training run folder, not a model folder; "
                f"evaluate one of: {', '.join(str(p) for p in inside)}",
            )
        raise EvalSetupError(
            "CHECKPOINT",
            f"{model_dir} is not a model folder (no Hugging Face config.json or "
            "adapter_config.json); pass e.g. <out_dir>/final_model",
        )
    if episodes < 1:
        raise EvalSetupError("--episodes", f"must be >= 1, got {episodes}")
    if split is not None and split not in SPLITS:
        raise EvalSetupError("--split", f"must be one of {', '.join(SPLITS)}, got {split!r}")
    if context_mode is not None and context_mode not in CONTEXT_MODES:
        raise EvalSetupError(
            "--context-mode", f"must be one of {', '.join(CONTEXT_MODES)}, got {context_mode!r}"
        )
    if temperature is not None and temperature < 0:
        raise EvalSetupError("--temperature", f"must be >= 0 (0 = greedy), got {temperature}")
    if max_new_tokens is not None and max_new_tokens < 1:
        raise EvalSetupError("--max-new-tokens", f"must be >= 1, got {max_new_tokens}")
    if device is not None:
        from .modeling import check_device

        try:
            check_device(device, field="--device")
        except TrainConfigError as exc:
            raise EvalSetupError("--device", exc.reason) from None

    notes: list[str] = []
    cfg: StarPOConfig | None = None
    found = find_training_config(model_dir)
    if found is not None:
        try:
            cfg = from_dict(StarPOConfig, found[1])
        except TrainConfigError as exc:
            notes.append(f"ignoring {found[0]}: not readable as a training config ({exc})")
            found = None

    overridden = [
        name
        for name, value in (
            ("--env", env),
            ("--split", split),
            ("--temperature", temperature),
            ("--max-new-tokens", max_new_tokens),
            ("--context-mode", context_mode),
            ("--think/--no-think", think),
            ("--device", device),
        )
        if value is not None
    ]
    if cfg is not None:
        # A multi-env run (env.train) trained on its listed envs, not env.id: an evaluation
        # plays one, so --env chooses it (as `ragen-bench run --model DIR`).
        trained = list(dict.fromkeys(e.id for e in cfg.env.train)) or [cfg.env.id]
        if env is None and len(trained) > 1:
            raise EvalSetupError(
                "--env",
                f"{model_dir} was trained on {len(trained)} envs ({', '.join(trained)}): "
                "an evaluation plays one, so choose it with --env ID",
            )
        env_id = env or trained[0]
        configs = {e.id: dict(e.config) for e in reversed(cfg.env.train)} or {
            cfg.env.id: dict(cfg.env.config)
        }
        env_config = configs.get(env_id, {})
        notes += _check_folder_env_config(env_config, found[0] if found else model_dir, trust)
        rollout = protocol_overrides(
            cfg.rollout, cfg.trainer.val_temperature if temperature is None else temperature
        )
        if env_id not in configs:
            for key in ENV_SPECIFIC:
                rollout[key] = None
            what = (
                f"the trained env {trained[0]}"
                if len(trained) == 1
                else f"one of the trained envs ({', '.join(trained)})"
            )
            notes.append(
                f"--env {env_id} is not {what}: the training env.config and "
                "turn/action limits are not used (the env's defaults are)"
            )
        split = split or cfg.env.test_split
        if device is None:
            device = cfg.model.device if _usable_device(cfg.model.device) else "cpu"
        dtype = cfg.model.dtype if device != "cpu" else "float32"
    else:
        looked = training_config_candidates(model_dir)
        if env is None:
            raise EvalSetupError(
                "--env",
                f"no training config.json found for {model_dir} (looked at "
                f"{', '.join(map(str, looked))}); name the environment with --env",
            )
        notes.append(
            f"no training config found for {model_dir} (looked at {', '.join(map(str, looked))}): "
            "using the env's default protocol; set --think/--no-think, --context-mode, --max-new-tokens "
            "to match how the model was trained"
        )
        env_id, env_config = env, {}
        rollout = {
            "sampling": {
                "temperature": DEFAULT_TEMPERATURE if temperature is None else temperature,
                "max_new_tokens": DEFAULT_MAX_NEW_TOKENS,
            }
        }
        split = split or "test"
        device = device or "cpu"
        dtype = "float32"
    if max_new_tokens is not None:
        rollout["sampling"]["max_new_tokens"] = max_new_tokens
    if context_mode is not None:
        rollout["context_mode"] = context_mode
    if think is not None:
        rollout["enable_think"] = think

    try:
        ragen_envs.get_entry(env_id)
    except ragen_envs.UnknownEnvError as exc:
        option = (
            "--env"
            if env is not None
            else f"env.id in {found[0] if found else 'the training config'}"
        )
        raise EvalSetupError(option, str(exc)) from None
    try:
        resolved = rollout_config(env_id, rollout)
    except (TypeError, ValueError) as exc:  # a setting of the training config the harness rejects
        raise EvalSetupError("rollout", str(exc)) from None
    return EvalPlan(
        env_id=env_id,
        env_config=env_config,
        split=split,
        episodes=episodes,
        rollout=rollout,
        resolved=resolved,
        device=device,
        dtype=dtype,
        source=found[0] if found else None,
        run_name=cfg.name if cfg is not None else None,
        overridden=overridden,
        notes=notes,
    )
