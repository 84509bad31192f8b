"""The agent protocol saved with a model: ``<model_dir>/ragen_protocol.json``.

A model trained with one protocol (think mode, system prompt, context mode, turns,
actions per turn, tokens per response, ...) and evaluated with another mostly writes
answers the parser refuses: the tiny quickstart model is trained answer-only with the
minimal system prompt and 16 tokens a turn, and ``ragen-bench run``'s defaults (think on,
the full system prompt) give it 0% format-valid answers.  So every model directory the
trainer saves carries the protocol its evaluation uses (the one ``ragen-train eval``
takes from the training config), and ``ragen-bench run`` on a local model directory
plays with it, option by option, unless the command line sets that option.

File (``schemas/agent_protocol.schema.json``)::

    {"schema_version": 1, "written_by": "ragen-train", "run_name": "quickstart",
     "env_id": "ragen/Bandit-PairsAB-v0", "env_config": {...}, "split": "test",
     "rollout": {"max_turns": 1, ..., "sampling": {"temperature": 0.5, ...}}}

``rollout`` holds :class:`~ragen_bench.rollout.RolloutConfig` overrides in the form
``RunRequest.rollout`` takes (``None`` = the env's agent default).

A model trained on several envs (``env.train``, :mod:`ragen_train.multienv`) also lists
them in ``train_envs`` (``[{"id": ..., "tag": ..., "config": {...}}, ...]``; ``env_id`` is
then the first).  ``ragen-bench run`` plays one env per run, so for such a model it
refuses to guess: without ``--env`` it exits 2 naming the trained envs
(:func:`protocol_env`); with ``--env`` one of them, that env's training config is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .fileio import atomic_write_json

PROTOCOL_FILE = "ragen_protocol.json"
SCHEMA_VERSION = 1
#: Back-ends whose ``--model`` is a local model directory that may hold a protocol.
LOCAL_BACKENDS = ("hf", "vllm")
#: ``ragen-bench run`` option (click parameter name) -> key in ``rollout`` (``sampling.`` nested).
OPTION_KEYS = {
    "max_turns": "max_turns",
    "max_actions_per_turn": "max_actions_per_turn",
    "think": "enable_think",
    "context_mode": "context_mode",
    "context_window": "context_window",
    "max_context_tokens": "max_context_tokens",
    "format_penalty": "format_penalty",
    "max_invalid_answers": "max_invalid_answers",
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "max_new_tokens": "sampling.max_new_tokens",
}
#: Settings that belong to the trained env: dropped when the run names another env.
ENV_SPECIFIC = ("max_turns", "max_actions_per_turn")


@dataclass(frozen=True)
class AgentProtocol:
    """A protocol file read back (:func:`read_protocol`).

    Attributes:
        env_id / env_config / split: the env the model was trained on, its config, and the
            held-out split its evaluation uses.
        rollout: ``RolloutConfig`` overrides (``RunRequest.rollout`` form).
        run_name: the training run's ``name`` (or ``None``).
        path: the file it was read from.
        train_envs: the envs of a multi-env training run (``{"id", "tag", "config"}``
            each), ``()`` for a run on the one env ``env_id``.
    """

    env_id: str
    env_config: dict[str, Any]
    split: str
    rollout: dict[str, Any]
    run_name: str | None = None
    path: Path | None = None
    train_envs: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The file's content (``schemas/agent_protocol.schema.json``)."""
        data = {
            "schema_version": SCHEMA_VERSION,
            "written_by": "ragen-train",
            "run_name": self.run_name,
            "env_id": self.env_id,
            "env_config": self.env_config,
            "split": self.split,
            "rollout": self.rollout,
        }
        if self.train_envs:
            data["train_envs"] = [dict(e) for e in self.train_envs]
        return data

    def trained_ids(self) -> list[str]:
        """The ids of the envs the model was trained on, in training order, each once."""
        ids = [e["id"] for e in self.train_envs] or [self.env_id]
        return list(dict.fromkeys(ids))

    def env_entry(self, env_id: str) -> dict[str, Any] | None:
        """The training config of ``env_id`` (the first entry with that id), or ``None``
        when the model was not trained on it."""
        for e in self.train_envs or ({"id": self.env_id, "config": self.env_config},):
            if e["id"] == env_id:
                return dict(e["config"])
        return None


def write_protocol(model_dir: str | Path, protocol: AgentProtocol) -> Path:
    """Write ``protocol`` into ``model_dir`` (atomically; checked against the schema first).

    Raises:
        ValueError: the protocol does not follow ``schemas/agent_protocol.schema.json``.
    """
    from .validate import check_object

    data = protocol.as_dict()
    path = Path(model_dir) / PROTOCOL_FILE
    check_object(data, "agent_protocol", str(path))
    atomic_write_json(path, data)
    return path


def read_protocol(model_dir: str | Path) -> AgentProtocol | None:
    """The protocol saved in ``model_dir``, or ``None`` when it has none (or is no directory).

    Raises:
        ValueError: a damaged file (not strict JSON, not following the schema, an unknown
            ``schema_version``; one line naming the file).
    """
    from .validate import read_checked

    path = Path(model_dir) / PROTOCOL_FILE
    if not path.is_file():
        return None
    data = read_checked(path, "agent_protocol")
    return AgentProtocol(
        env_id=data["env_id"],
        env_config=data["env_config"],
        split=data["split"],
        rollout=data["rollout"],
        run_name=data.get("run_name"),
        path=path,
        train_envs=tuple(data.get("train_envs") or ()),
    )


@dataclass
class Applied:
    """What :func:`apply_protocol` did to a request."""

    request: Any
    protocol: AgentProtocol | None
    taken: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str | None:
        """One console line saying which protocol the run uses, or ``None`` without one."""
        if self.protocol is None:
            return None
        from .rollout import rollout_config

        r = rollout_config(self.request.env_id, self.request.rollout)  # what the run will play
        who = f" (run {self.protocol.run_name!r})" if self.protocol.run_name else ""
        text = (
            f"agent protocol from {self.protocol.path}{who}: think {'on' if r.enable_think else 'off'}, "
            f"system prompt {r.system_prompt}, context {r.context_mode}, {r.max_turns} turn(s) x "
            f"{r.max_actions_per_turn} action(s), max_new_tokens {r.sampling.max_new_tokens}, "
            f"temperature {r.sampling.temperature}"
        )
        if self.kept:
            text += f"; from the command line: {', '.join('--' + k.replace('_', '-') for k in self.kept)}"
        return text


def _set(rollout: dict[str, Any], key: str, value: Any) -> None:
    if key.startswith("sampling."):
        rollout.setdefault("sampling", {})[key.split(".", 1)[1]] = value
    else:
        rollout[key] = value


def _get(rollout: dict[str, Any], key: str) -> Any:
    if key.startswith("sampling."):
        return (rollout.get("sampling") or {}).get(key.split(".", 1)[1])
    return rollout.get(key)


def apply_protocol(req: Any, given: set[str], *, trust: bool = False) -> Applied:
    """Overlay the protocol saved with ``req.model`` on a ``RunRequest``.

    Every setting of :data:`OPTION_KEYS` whose option is not in ``given`` (the options
    set on the command line) is taken from the protocol, and so are the protocol's
    ``system_prompt`` and ``format_reminder`` (no option sets them).  The trained env's
    ``env_config`` and split are used unless given; with another env than the trained
    one, the env config and the turn/action limits are not (as ``ragen-train eval``).

    Args:
        req: a ``RunRequest`` (not modified; a changed copy is returned in ``Applied``).
        given: click parameter names the user set on the command line (``split`` and
            ``env_config`` among them when ``--split`` / ``--env-config`` were given).

    Raises:
        ValueError: a damaged protocol file (see :func:`read_protocol`).
        UntrustedValueError: the saved env config sets a command, endpoint or key variable
            (:mod:`ragen_bench.trust`: a model folder may come from someone else) and neither
            ``trust`` (``--trust-folder``) nor ``--env-config`` was given.
    """
    if req.backend not in LOCAL_BACKENDS or not req.model or not Path(req.model).is_dir():
        return Applied(req, None)
    protocol = read_protocol(req.model)
    if protocol is None:
        return Applied(req, None)
    rollout = json.loads(json.dumps(req.rollout or {}))
    applied = Applied(req, protocol)
    trained_config = protocol.env_entry(req.env_id)
    same_env = trained_config is not None
    for option, key in OPTION_KEYS.items():
        if option in given:
            applied.kept.append(option)
            continue
        if not same_env and key in ENV_SPECIFIC:
            _set(rollout, key, None)
            continue
        value = _get(protocol.rollout, key)
        _set(rollout, key, value)
        applied.taken.append(key)
    for key in ("system_prompt", "format_reminder"):
        if key in protocol.rollout:
            rollout[key] = protocol.rollout[key]
            applied.taken.append(key)
    changes: dict[str, Any] = {"rollout": rollout}
    if same_env:
        if "env_config" not in given:
            from .trust import check_folder_values, directing_fields

            fields = directing_fields(trained_config, None)
            how = {
                f.name: "--env-config KEY=VALUE, which replaces the saved env config"
                for f in fields
            }
            check_folder_values(
                fields, source=str(Path(req.model) / PROTOCOL_FILE), trust=trust, how=how
            )
            changes["env_config"] = trained_config
        if "split" not in given:
            changes["split"] = protocol.split
        if len(protocol.trained_ids()) > 1:
            others = [i for i in protocol.trained_ids() if i != req.env_id]
            applied.notes.append(
                f"evaluating {req.env_id}, one of the {len(protocol.trained_ids())} envs the model "
                f"was trained on (the others: {', '.join(others)}; --env ID plays another)"
            )
    else:
        trained = protocol.trained_ids()
        what = trained[0] if len(trained) == 1 else ", ".join(trained)
        applied.notes.append(
            f"--env {req.env_id} is not the env the model was trained on ({what}): "
            "its env config and turn/action limits are not used (the env's defaults are)"
        )
    applied.request = replace(req, **changes)
    return applied


def protocol_env(backend: str, model: str | None) -> str | None:
    """The trained env of a local model directory's saved protocol (the default ``--env``), or ``None``.

    Raises:
        ValueError: the model was trained on several envs (one line naming them and
            ``--env``: a run plays one env, and picking one silently would report a
            score for an env the user did not choose); a damaged protocol file.
    """
    if backend not in LOCAL_BACKENDS or not model or not Path(model).is_dir():
        return None
    protocol = read_protocol(model)
    if protocol is None:
        return None
    trained = protocol.trained_ids()
    if len(trained) > 1:
        raise ValueError(
            f"{model} was trained on {len(trained)} envs ({', '.join(trained)}; {protocol.path}): "
            "a run plays one, so choose it with --env ID (it then uses that env's training config)"
        )
    return trained[0]


def format_valid_warning(summary: dict[str, Any], applied: Applied | None = None) -> str | None:
    """A loud warning when no scored response of the run followed the answer format, else ``None``.

    A 0% format-valid rate nearly always means the protocol is not the one the policy
    expects (think mode, system prompt, token limit) rather than a bad policy.
    """
    est = (summary.get("metrics") or {}).get("format_valid_rate") or {}
    if est.get("mean") is None or est["mean"] > 0:
        return None
    n = (summary.get("episodes") or {}).get("scored", 0)
    hint = (
        "the run used the protocol saved with the model, so the model itself writes no valid answer"
        if applied is not None and applied.protocol is not None
        else "check that the protocol matches how the policy was trained or prompted: --think/--no-think, "
        "--max-new-tokens, --context-mode (a model saved by ragen-train carries it in "
        f"{PROTOCOL_FILE}; `ragen-train eval MODEL_DIR` uses its training config)"
    )
    return (
        f"format-valid rate is 0% over {n} scored episode(s): no response had the "
        f"<think>/<answer> format the parser expects, so success and return measure nothing but "
        f"the format; {hint}"
    )


__all__ = [
    "AgentProtocol",
    "Applied",
    "LOCAL_BACKENDS",
    "OPTION_KEYS",
    "PROTOCOL_FILE",
    "apply_protocol",
    "format_valid_warning",
    "protocol_env",
    "read_protocol",
    "write_protocol",
]
