"""The environment registry: versioned ids, named presets, validated construction.

Every environment is registered with :func:`gymnasium.register` under
``ragen/<Name>-v<version>``; each named preset is one more id,
``ragen/<Name>-<Preset>-v<version>``, whose default config differs.  So both
``gymnasium.make("ragen/Sokoban-v0")`` (after ``import ragen_envs``) and
:func:`make` work; :func:`make` adds a friendlier error for unknown ids.

A change to what a seed produces bumps the version of every affected id (golden
tests in ``tests/envs/test_golden.py`` pin seed -> first observation).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from .config import validate_config

NAMESPACE = "ragen"


@dataclass(frozen=True)
class EnvEntry:
    """One registered id.

    Attributes:
        id: the Gymnasium id, e.g. ``"ragen/Sokoban-Large-v0"``.
        name: the environment name, e.g. ``"Sokoban"``.
        preset: the preset name (``"Large"``), or ``None`` for the base id.
        version: the id's version number.
        env_key: config/schema key (``"sokoban"``).
        entry_point: ``"module:Class"``.
        kwargs: the preset's config overrides (validated at registration).
        description: one line for ``ragen-bench ls`` and the README table.
        procedural: instances are generated from the seed (``False`` for data-backed envs).
        agent_defaults: the agent-loop settings this task is meant to be played with
            (``max_turns``, ``max_actions_per_turn``, ...); the harness and trainer use
            them unless the user overrides them.
    """

    id: str
    name: str
    preset: str | None
    version: int
    env_key: str
    entry_point: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    procedural: bool = True
    agent_defaults: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (used by ``ragen-bench ls --json``)."""
        return {
            "id": self.id,
            "name": self.name,
            "preset": self.preset,
            "version": self.version,
            "env_key": self.env_key,
            "config": dict(self.kwargs),
            "description": self.description,
            "procedural": self.procedural,
            "agent_defaults": dict(self.agent_defaults),
        }


_ENTRIES: dict[str, EnvEntry] = {}


class UnknownEnvError(KeyError):
    """No environment is registered under the requested id."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def register_env(
    name: str,
    *,
    version: int,
    env_key: str,
    entry_point: str,
    description: str,
    presets: Mapping[str, tuple[Any, ...]] | None = None,
    base_kwargs: Mapping[str, Any] | None = None,
    procedural: bool = True,
    agent_defaults: Mapping[str, Any] | None = None,
) -> list[EnvEntry]:
    """Register an environment and its presets with Gymnasium.

    Args:
        name: CamelCase environment name (``"Sokoban"``).
        version: version of every id registered here.
        env_key: config/schema key.
        entry_point: ``"module:Class"``.
        description: one-line description of the base id.
        presets: ``{preset_name: (description, config_overrides)}``.
        base_kwargs: config overrides of the base id.
        procedural: see :class:`EnvEntry`.
        agent_defaults: see :class:`EnvEntry`; shared by the base id and its presets
            (a preset may override with a ``(description, kwargs, agent_defaults)``
            triple).

    Returns:
        The registered entries (base id first).

    Raises:
        ConfigError: a preset's config does not validate.
    """
    agent = dict(agent_defaults or {})
    entries = [
        EnvEntry(
            f"{NAMESPACE}/{name}-v{version}",
            name,
            None,
            version,
            env_key,
            entry_point,
            dict(base_kwargs or {}),
            description,
            procedural,
            agent,
        )
    ]
    for preset, spec in (presets or {}).items():
        desc, kwargs = spec[0], spec[1]
        preset_agent = {**agent, **(spec[2] if len(spec) > 2 else {})}
        entries.append(
            EnvEntry(
                f"{NAMESPACE}/{name}-{preset}-v{version}",
                name,
                preset,
                version,
                env_key,
                entry_point,
                dict(kwargs),
                desc,
                procedural,
                preset_agent,
            )
        )
    for entry in entries:
        validate_config(env_key, entry.kwargs)
        _ENTRIES[entry.id] = entry
        if entry.id not in gym.registry:
            gym.register(id=entry.id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs))
    return entries


def get_entry(env_id: str) -> EnvEntry:
    """Look up a registered id.

    Raises:
        UnknownEnvError: with the closest registered ids as suggestions.
    """
    try:
        return _ENTRIES[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, list(_ENTRIES), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownEnvError(
            f"unknown environment id {env_id!r}{hint} (ragen_envs.list_envs() lists them all)"
        ) from None


def make(env_id: str, **config: Any) -> gym.Env:
    """Create a registered environment with config overrides.

    ``config`` overrides the preset's defaults and is validated against the env's
    JSON Schema (``ragen_envs/envs/<env_key>/config.schema.json``).  ``render_mode`` is
    passed through to Gymnasium.

    Returns:
        The environment, wrapped by Gymnasium's ``make`` (passive checker, order
        enforcing); ``env.unwrapped`` is the :class:`~ragen_envs.core.TextEnv`.

    Raises:
        UnknownEnvError: ``env_id`` is not registered.
        ConfigError: a config field is unknown or invalid; the message names it.
    """
    entry = get_entry(env_id)
    render_mode = config.pop("render_mode", None)
    merged = {**entry.kwargs, **config}
    validate_config(entry.env_key, merged)  # fail early, naming the field
    return gym.make(env_id, render_mode=render_mode, **config)


def list_envs(name: str | None = None) -> list[EnvEntry]:
    """All registered ids (optionally only those of environment ``name``), sorted by id."""
    entries = sorted(_ENTRIES.values(), key=lambda e: (e.name, e.preset is not None, e.id))
    if name is not None:
        entries = [e for e in entries if e.name.lower() == name.lower()]
    return entries
