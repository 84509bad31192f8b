"""Training configuration: loading, ``key=value`` overrides, validation.

A config is a :class:`StarPOConfig` (nested dataclasses, declared in
:mod:`ragen_train.sections` and re-exported here).  It comes from a preset
(:mod:`ragen_train.presets`) or a JSON/YAML file, then ``key=value`` overrides with
dotted paths (``algorithm.adv_estimator=gae optim.lr=1e-5``) are applied; every value
is type-checked against the dataclass field and a wrong or unknown key raises
:class:`TrainConfigError` naming the field.

Each field is declared once, with :func:`~ragen_train.fields.setting` (help, default, range,
choices); :data:`FIELD_SPECS` reads the declarations back and everything else derives from
them: :func:`validate`, :func:`config_json_schema` (the JSON Schema of the saved
``config.json``, checked in as ``schemas/train_config.schema.json``), :func:`explain_fields`
(``ragen-train show-config --explain``) and ``docs/config-reference.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
import warnings
from pathlib import Path
from typing import Any

from ragen_bench.rollout import RolloutConfig, rollout_config
from ragen_bench.schema_versions import RENAMED_FIELDS as FILE_RENAMES
from ragen_envs.jsonutil import NestingTooDeep, check_depth

from .advantages import ADVANTAGE_ESTIMATORS
from .errors import TrainConfigError
from .fields import json_schema
from .multienv import check_env_lists
from .presets import PRESETS
from .sections import (
    FIELD_SPECS,
    FIELDS,
    MAX_EPISODES_PER_STEP,
    AlgorithmSection,
    EnvSection,
    FilterSection,
    LoraConfig,
    ModelConfig,
    OptimSection,
    RolloutSection,
    SFTSection,
    StarPOConfig,
    TrainerSection,
    VLLMSection,
)

__all__ = [
    "FIELDS",
    "FIELD_SPECS",
    "RENAMED_FIELDS",
    "AlgorithmSection",
    "EnvSection",
    "FilterSection",
    "LoraConfig",
    "ModelConfig",
    "OptimSection",
    "RolloutSection",
    "SFTSection",
    "StarPOConfig",
    "TrainConfigError",
    "TrainerSection",
    "VLLMSection",
    "apply_overrides",
    "config_json_schema",
    "did_you_mean",
    "explain_fields",
    "field_elsewhere",
    "field_paths",
    "from_dict",
    "load_config",
    "read_config_file",
    "renamed_field",
    "rollout_config_for",
    "unknown_preset_message",
    "validate",
    "validation_episodes",
]


# ------------------------------------------------------------------ validation


def validate(cfg: StarPOConfig, *, user_env_fields: set[str] | None = None) -> StarPOConfig:
    """Check every field's declared choices and range (:data:`FIELD_SPECS`); return ``cfg``.

    Args:
        cfg: the config.
        user_env_fields: the ``env.config`` keys the user wrote (overrides or a config
            file) as opposed to keys inherited from a preset; used only to decide whether
            an unknown-field error gets the "drop the preset's env settings" hint.

    Raises:
        TrainConfigError: naming the first offending field (choices first, then ranges,
            then list items, each in declaration order).
    """
    flat = _flatten(cfg.to_dict())
    top = [s for s in FIELD_SPECS if not s.in_list]  # list entries: multienv.check_env_lists
    for spec in top:
        choices = spec.choices
        if choices is not None and flat[spec.path] not in choices:
            raise TrainConfigError(spec.path, f"must be one of {choices}, got {flat[spec.path]!r}")
    for spec in top:
        value = flat.get(spec.path)
        problem = None if value is None or spec.range is None else spec.range.problem(value)
        if problem is not None:
            raise TrainConfigError(spec.path, problem)
    for spec in top:
        known = spec.item_choices
        for item in flat[spec.path] if known is not None else ():
            if item not in known:
                raise TrainConfigError(
                    spec.path, f"unknown {spec.item_noun} {item!r} (known: {', '.join(known)})"
                )
    if flat["model.mixed_precision"] != "none" and flat["model.dtype"] != "float32":
        raise TrainConfigError(
            "model.mixed_precision",
            f"keeps float32 master weights (bf16 only in compute): set model.dtype=float32, "
            f"not {flat['model.dtype']!r}",
        )
    if (
        ADVANTAGE_ESTIMATORS.meta(flat["algorithm.adv_estimator"], "level") == "outcome"
        and flat["rollout.group_size"] < 2
    ):
        raise TrainConfigError(
            "rollout.group_size", f"{flat['algorithm.adv_estimator']} needs groups of at least 2"
        )
    per_step = flat["rollout.env_groups"] * flat["rollout.group_size"]
    if per_step > MAX_EPISODES_PER_STEP:
        raise TrainConfigError(
            "rollout.env_groups",
            f"{flat['rollout.env_groups']} groups x rollout.group_size={flat['rollout.group_size']} "
            f"is {per_step:,} episodes a step, over the bound of {MAX_EPISODES_PER_STEP:,}",
        )
    _validate_env(cfg, user_env_fields or set())
    return cfg


def _validate_env(cfg: StarPOConfig, user_env_fields: set[str]) -> None:
    """The env id is registered and ``env.config`` passes the env's config schema.

    Without this a config meant for another env (say ``risky_prob`` kept from a Bandit
    preset after ``env.id=ragen/Sokoban-v0``) would only fail inside every episode.  Only
    then — a field the env does not know that the user did not write — does the error
    suggest ``env.config={}``; a bad value of a known field, or a misspelt field the user
    typed, is reported as it is.
    """
    _validate_one_env("env.id", "env.config", cfg.env.id, cfg.env.config, user_env_fields)
    for config_field, env_id, env_config in check_env_lists(cfg):
        _validate_one_env(
            config_field.removesuffix(".config") + ".id",
            config_field,
            env_id,
            env_config,
            set(env_config),
        )


def _validate_one_env(
    id_field: str,
    config_field: str,
    env_id: str,
    env_config: dict[str, Any],
    user_env_fields: set[str],
) -> None:
    """:func:`_validate_env` for one env (``id_field`` / ``config_field`` name it in errors)."""
    import ragen_envs
    from ragen_envs.config import ConfigError as EnvConfigError
    from ragen_envs.config import validate_config

    try:
        entry = ragen_envs.get_entry(env_id)
    except Exception as exc:  # UnknownEnvError names close matches
        raise TrainConfigError(id_field, str(exc)) from None
    try:
        validate_config(entry.env_key, {**entry.kwargs, **env_config})
    except EnvConfigError as exc:
        field = f"{config_field}.{exc.field}" if exc.field else config_field
        unknown = exc.reason.startswith("unknown field")
        hint = (
            f" — override {config_field}={{}} to drop the preset's env settings"
            if unknown and exc.field not in user_env_fields
            else ""
        )
        raise TrainConfigError(field, f"{exc.reason} (env {env_id}){hint}") from None


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k != "config":
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


# --------------------------------------------------------------- construction
def _coerce(value: Any, tp: Any, path: str) -> Any:
    """Convert ``value`` (parsed JSON or a raw string) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, path)
            except TrainConfigError as exc:
                errors.append(str(exc))
        raise TrainConfigError(path, f"cannot read {value!r} as {tp}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(
            tp, "from_text"
        ):  # a short form, e.g. env.train=<id>:<weight>,...
            try:
                return tp.from_text(value)
            except ValueError as exc:
                raise TrainConfigError(path, str(exc)) from None
        if not isinstance(value, dict):
            raise TrainConfigError(path, f"expected a mapping, got {value!r}")
        return from_dict(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise TrainConfigError(path, f"expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise TrainConfigError(path, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return (
                    int(float(value))
                    if float(value).is_integer()
                    else _fail(path, value, "an integer")
                )
            except ValueError:
                pass
        raise TrainConfigError(path, f"expected an integer, got {value!r}")
    if tp is float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise TrainConfigError(path, f"expected a number, got {value!r}")
        if not math.isfinite(number):
            raise TrainConfigError(path, f"must be a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise TrainConfigError(path, f"expected a string, got {value!r}")
    if origin is list:
        if isinstance(
            value, str
        ):  # a,b  or Hydra's [a,b] / [a, 'b'] (what RAGEN's and verl's configs write)
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            value = [v.strip().strip("'\"") for v in text.split(",") if v.strip()]
        if not isinstance(value, list):
            raise TrainConfigError(path, f"expected a list, got {value!r}")
        return (
            [_coerce(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
            if args
            else list(value)
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise TrainConfigError(path, f"expected a mapping, got {value!r}")
        return dict(value)
    return value


def _fail(path: str, value: Any, what: str) -> Any:
    raise TrainConfigError(path, f"expected {what}, got {value!r}")


def field_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted field path of a config dict (``optim.lr``, ``env.config``, ...), sections
    included; ``env.config`` mappings are not entered."""
    out: list[str] = []
    for k, v in data.items():
        out.append(prefix + k)
        if isinstance(v, dict) and k != "config":
            out += field_paths(v, f"{prefix}{k}.")
    return out


#: Names other trainers use for our fields (Hugging Face ``TrainingArguments``, TRL), so a
#: user who types theirs gets ours suggested (difflib alone misses ``learning_rate`` -> ``lr``).
FIELD_SYNONYMS: dict[str, str] = {
    "learning_rate": "lr",
    "max_grad_norm": "grad_clip",
    "lr_scheduler_type": "lr_schedule",
    "num_warmup_steps": "warmup_steps",
    "adam_epsilon": "adam_eps",
    "adam_beta1": "beta1",
    "adam_beta2": "beta2",
}


def did_you_mean(name: str, candidates: Any, *, prefix: str = "", cutoff: float = 0.6) -> str:
    """``"; did you mean optim.lr?"`` for the closest of ``candidates`` with as many dots as
    ``name`` (difflib ratio at least ``cutoff``; as for env ids in :func:`ragen_envs.get_entry`),
    else ``""``; ``prefix`` is put before each match (a leaf name is matched among its
    section's fields, a misspelt section as a whole dotted path)."""
    import difflib

    same_depth = sorted(
        c for c in candidates if c.count(".") == name.count(".")
    )  # optim.lrr: not "optim"
    close = difflib.get_close_matches(name, same_depth, n=3, cutoff=cutoff)
    if not close and FIELD_SYNONYMS.get(name) in same_depth:
        close = [FIELD_SYNONYMS[name]]  # another trainer's name for the field (learning_rate)
    return f"; did you mean {', '.join(prefix + c for c in close)}?" if close else ""


def field_elsewhere(leaf: str, paths: Any, *, cutoff: float = 0.8) -> str:
    """``"; did you mean optim.lr?"`` for a field named in the wrong section (``lr=1``,
    ``optim.kl_coef=0.1``): the dotted paths whose last part is ``leaf``, else whose last
    part is close to it (difflib ratio at least ``cutoff``), at most three; else ``""``."""
    import difflib

    by_leaf: dict[str, list[str]] = {}
    for p in sorted(paths):
        if "." in p:
            by_leaf.setdefault(p.rsplit(".", 1)[1], []).append(p)
    found = by_leaf.get(leaf) or [
        p
        for c in difflib.get_close_matches(leaf, list(by_leaf), n=3, cutoff=cutoff)
        for p in by_leaf[c]
    ]
    return f"; did you mean {', '.join(found[:3])}?" if found else ""


#: Renamed fields: old dotted path -> new one.  The old spelling is read (config files,
#: ``key=value`` overrides, saved configs) with one ``FutureWarning`` line, for one release.
#: Built from :data:`ragen_bench.schema_versions.RENAMED_FIELDS` (saved files), where they are written.
RENAMED_FIELDS: dict[str, str] = dict(FILE_RENAMES["train_config"])


def renamed_field(path: str) -> str:
    """The current name of dotted field ``path``: itself, or (with one ``FutureWarning``
    line) its new name when :data:`RENAMED_FIELDS` lists it."""
    new = RENAMED_FIELDS.get(path)
    if new is None:
        return path
    warnings.warn(
        f"{path} is deprecated and will be removed in the next release; use {new}",
        FutureWarning,
        stacklevel=3,
    )
    return new


def from_dict(cls: type, data: dict[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from a (possibly partial) dict, checking every key (a key
    of :data:`RENAMED_FIELDS` is read as its new name).

    Raises:
        TrainConfigError: an unknown field, a bad value, or a field given under both its
            old and its new name.
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        fp = f"{path}.{key}" if path else key
        if fp in RENAMED_FIELDS:
            new_fp = renamed_field(fp)
            key = new_fp.rsplit(".", 1)[-1]
            if key in data:
                raise TrainConfigError(fp, f"give {new_fp} only (it replaces {fp})")
            fp = new_fp
        if key not in names:
            hint = did_you_mean(key, names, prefix=f"{path}." if path else "")
            raise TrainConfigError(fp, f"unknown field{hint} (known: {', '.join(sorted(names))})")
        kwargs[key] = _coerce(value, hints[key], fp)
    try:
        return cls(**kwargs)
    except ValueError as exc:  # a section that checks itself (FilterConfig): name the field
        sub = getattr(exc, "field", None)
        raise TrainConfigError(
            f"{path}.{sub}" if sub and path else path or cls.__name__,
            getattr(exc, "reason", str(exc)),
        ) from None


def apply_overrides(cfg: StarPOConfig, overrides: list[str]) -> StarPOConfig:
    """Apply ``key=value`` overrides (values parsed as JSON when possible).

    Raises:
        TrainConfigError: malformed override, unknown key or wrong type.
    """
    return _apply_overrides(cfg, overrides, set())


def _apply_overrides(
    cfg: StarPOConfig, overrides: list[str], user_env_fields: set[str]
) -> StarPOConfig:
    """:func:`apply_overrides`, recording in ``user_env_fields`` the ``env.config`` keys
    the overrides set (for :func:`_validate_env`'s hint)."""
    user_env_fields = set(user_env_fields)
    data = cfg.to_dict()
    for item in overrides:
        if "=" not in item:
            raise TrainConfigError(item, "overrides look like section.field=value")
        key, raw = item.split("=", 1)
        key = renamed_field(key.strip())
        try:  # 30,000 brackets were a RecursionError in json.loads
            check_depth(raw)
        except NestingTooDeep as exc:
            raise TrainConfigError(key.strip(), str(exc)) from None
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        node = data
        parts = key.strip().split(".")
        for i, part in enumerate(parts[:-1]):
            if not isinstance(node, dict) or part not in node:
                raise TrainConfigError(
                    ".".join(parts[: i + 1]),
                    "unknown section" + did_you_mean(key, field_paths(data), cutoff=0.8),
                )
            node = node[part]
        leaf = parts[-1]
        if not isinstance(node, dict) or (leaf not in node and parts[-2:-1] != ["config"]):
            parent = ".".join(parts[:-1])
            hint = (
                did_you_mean(leaf, node, prefix=f"{parent}." if parent else "")
                if isinstance(node, dict)
                else ""
            )
            raise TrainConfigError(
                key, "unknown field" + (hint or field_elsewhere(leaf, field_paths(data)))
            )
        node[leaf] = value
        if parts[:2] == ["env", "config"] and len(parts) >= 3:
            user_env_fields.add(parts[2])
        elif parts == ["env", "config"] and isinstance(value, dict):
            user_env_fields.update(value)
        elif parts == ["env"] and isinstance(value, dict) and isinstance(value.get("config"), dict):
            user_env_fields.update(value["config"])
    return validate(from_dict(StarPOConfig, data), user_env_fields=user_env_fields)


def load_config(name_or_path: str, overrides: list[str] | None = None) -> StarPOConfig:
    """A preset name or a JSON/YAML file, then overrides, validated.

    Raises:
        TrainConfigError: unknown preset; a file that cannot be read, is not valid JSON/YAML
            (field ``--config``; the message names the file and the line) or does not
            hold a mapping; a bad field (a field of a file's config is named with the file).
    """
    if name_or_path in PRESETS:
        return _apply_overrides(PRESETS[name_or_path](), overrides or [], set())
    p = Path(name_or_path)
    if not p.is_file():
        raise TrainConfigError("--config", unknown_preset_message(name_or_path))
    data = read_config_file(p)
    try:
        cfg = from_dict(StarPOConfig, data)
    except TrainConfigError as exc:
        raise TrainConfigError(exc.field, f"{exc.reason} (in {p})") from None
    env = data.get("env")
    file_env_fields = (
        set(env["config"])
        if isinstance(env, dict) and isinstance(env.get("config"), dict)
        else set()
    )
    return _apply_overrides(cfg, overrides or [], file_env_fields)


def unknown_preset_message(name: str) -> str:
    """Why ``--config NAME`` names nothing: the closest preset names first (difflib, as
    :func:`did_you_mean`), then how to list them all, not the whole list of presets.

    ``"'quickstrat' is neither a preset nor a file; did you mean quickstart? (ragen-train
    presets lists all 49)"``.
    """
    import difflib

    close = difflib.get_close_matches(name, sorted(PRESETS), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (
        f"{name!r} is neither a preset nor a file{hint} "
        f"(`ragen-train presets` lists all {len(PRESETS)})"
    )


def validation_episodes(cfg: dict[str, Any]) -> int | None:
    """Episodes one validation plays, from a run's ``config.json``: each ``env.val`` entry's
    ``episodes`` (else ``trainer.val_episodes``), summed; ``trainer.val_episodes`` with a single
    validation env; ``None`` without a config."""
    trainer = cfg.get("trainer") or {}
    default = trainer.get("val_episodes")
    vals = (cfg.get("env") or {}).get("val") or []
    per_env = [v.get("episodes") or default for v in vals if isinstance(v, dict)]
    if per_env and all(isinstance(n, int) for n in per_env):
        return sum(per_env)
    return default if isinstance(default, int) else None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping held by a JSON or YAML (``.yaml``/``.yml``) config file.

    Raises:
        TrainConfigError: (field ``--config``) the file cannot be read, is not valid JSON/YAML
            (the message names the file, line and column), breaks a bound of
            :func:`ragen_envs.safeload.load_config_file` (over 1 MiB, nested past 100 levels,
            YAML aliases past 64 uses or 100,000 expanded nodes) or holds something other
            than a mapping.
    """
    from ragen_envs.safeload import ConfigFileError, load_config_file

    p = Path(path)
    try:  # bounded: size, depth, YAML aliases (ragen_envs/safeload.py)
        data = load_config_file(p)
    except ConfigFileError as exc:
        raise TrainConfigError("--config", str(exc)) from None
    if data is None:
        raise TrainConfigError("--config", f"{p} is empty (expected a mapping of config sections)")
    if not isinstance(data, dict):
        raise TrainConfigError(
            "--config",
            f"{p} holds a {type(data).__name__}, expected a mapping of config sections "
            "(name, model, env, rollout, ...)",
        )
    return data


def rollout_config_for(
    cfg: StarPOConfig, temperature: float | None = None, env_id: str | None = None
) -> RolloutConfig:
    """Deprecated (removed in the next release): call
    ``ragen_bench.rollout.rollout_config(env_id or cfg.env.id, cfg.rollout, temperature=t)``,
    the one builder of a rollout config.

    Warns:
        DeprecationWarning: always.
    """
    warnings.warn(
        "ragen_train.config.rollout_config_for is deprecated; use "
        "ragen_bench.rollout.rollout_config(cfg.env.id, cfg.rollout, temperature=...)",
        DeprecationWarning,
        stacklevel=2,
    )
    return rollout_config(env_id or cfg.env.id, cfg.rollout, temperature=temperature)


def explain_fields(name: str, cfg: StarPOConfig | None = None) -> str:
    """Text for ``ragen-train show-config --explain NAME``: each field's path, help, type,
    default and allowed values (:meth:`~ragen_train.fields.FieldSpec.explain`), plus its value
    in ``cfg`` when given.

    Args:
        name: a field (``optim.lr``, ``env.train[].weight``), a section (``optim``,
            ``rollout.vllm``) or ``all``.

    Raises:
        TrainConfigError: (field ``--explain``) an unknown name, with the closest ones.
    """
    name = RENAMED_FIELDS.get(name, name)  # an old name explains its new field
    if name == "all":
        chosen = FIELD_SPECS
    elif name in FIELDS:
        chosen = [FIELDS[name]]
    else:
        chosen = [s for s in FIELD_SPECS if s.path.startswith(name + ".")]
    if not chosen:
        sections = {s.section for s in FIELD_SPECS if s.section}
        hint = did_you_mean(name, [*FIELDS, *sections]) or field_elsewhere(
            name.rsplit(".", 1)[-1], FIELDS
        )
        raise TrainConfigError("--explain", f"no config field or section {name!r}{hint}")
    flat = _flatten(cfg.to_dict()) if cfg is not None else {}
    blocks = []
    for spec in chosen:
        text = spec.explain()
        if spec.path in flat:
            text += f"\n  value:   {json.dumps(flat[spec.path])}"
        blocks.append(text)
    return "\n\n".join(blocks)


def config_json_schema() -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of :class:`StarPOConfig` as saved in ``config.json``,
    generated from the field declarations (types, ``enum``, bounds, ``description``,
    ``default``); checked in as ``schemas/train_config.schema.json``."""
    return json_schema(
        StarPOConfig,
        schema_id="train_config.schema.json",
        title="ragen-train StarPO config (config.json of a training run)",
    )
