"""A GRPO group as a PettingZoo ``ParallelEnv``: G agents on copies of one seeded instance.

GRPO (and RAGEN's StarPO, which resets ``env_groups x group_size`` environments with
one seed per group, RAGEN's config/base.yaml) compares several rollouts *of the same instance*.
:class:`GroupParallelEnv` exposes such a group to multi-agent frameworks: agents
``"agent_0"`` .. ``"agent_{G-1}"`` each act on their own copy of one registered
environment, and every copy is reset with the same seed, so all agents start from the
same instance and see the same first observation.

Semantics (spec: ``docs/envs/README.md``, section "Groups (PettingZoo)"):

* ``reset(seed=s)`` resets every copy with seed ``s`` (the same instance as
  ``ragen_envs.make(env_id).reset(seed=s)``).  ``reset()`` without a seed draws one
  seed from the group's own generator (seeded by the last explicit seed, else from
  OS entropy) and gives it to every copy, so the copies never drift apart even when
  their own random streams were consumed differently.
* ``step(actions)`` needs exactly one action (a ``str``) per live agent and steps each
  copy; an agent whose copy terminates or truncates is removed from ``self.agents``
  (it received its final observation and reward in that step) and is not stepped again.
* The copies' random streams start equal, so in a stochastic env two agents that take
  the same actions see the same outcomes (common random numbers).
* ``infos[agent]`` is the copy's own ``info`` dict (it validates against the env's info
  schema).  Spaces are the copies' own :class:`~ragen_envs.spaces.UnicodeText` spaces.

PettingZoo is an optional dependency (``pip install ragen-envs[pettingzoo]``);
``import ragen_envs`` never imports this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.utils import seeding

try:
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ragen_envs.group needs PettingZoo, an optional dependency: "
        "pip install 'ragen-envs[pettingzoo]' (or 'ragen[pettingzoo]' for the full project)"
    ) from exc

from .core import TextEnv
from .registry import get_entry, make
from .spaces import MAX_TEXT_LENGTH, UnicodeText

__all__ = ["GroupParallelEnv", "make_group"]


class GroupParallelEnv(ParallelEnv):
    """``group_size`` agents, each on its own copy of ``env_id``, all reset with one seed.

    Args:
        env_id: a registered id (``ragen_envs.list_envs()``).
        group_size: number of agents G (>= 1).
        render_mode: ``None`` or ``"ansi"`` (passed to every copy).
        **config: config overrides for every copy (validated like ``ragen_envs.make``).

    Attributes:
        possible_agents: ``["agent_0", ..., "agent_{G-1}"]``.
        agents: the agents whose episode is still running.
        envs: ``{agent: TextEnv}``, the unwrapped copies (for privileged baselines such
            as the oracle; acting on them directly bypasses the group's bookkeeping).
        instance_seed: the seed the copies were last reset with.

    Raises:
        UnknownEnvError: ``env_id`` is not registered.
        ConfigError: a config field is invalid (the message names it).
        ValueError: ``group_size`` < 1 or ``render_mode`` unsupported.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["ansi"],
        "name": "ragen_group_v0",
        "is_parallelizable": True,
    }

    def __init__(self, env_id: str, group_size: int, render_mode: str | None = None, **config: Any):
        if (
            isinstance(group_size, bool)
            or not isinstance(group_size, (int, np.integer))
            or group_size < 1
        ):
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}"
            )
        self.env_id = env_id
        self.entry = get_entry(env_id)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "name": f"ragen_group_{env_id}"}
        self.possible_agents = [f"agent_{i}" for i in range(int(group_size))]
        self.agents: list[str] = []
        self.envs: dict[str, TextEnv] = {
            agent: make(env_id, render_mode=render_mode, **config).unwrapped  # type: ignore[misc]
            for agent in self.possible_agents
        }
        self.observation_spaces = {a: env.observation_space for a, env in self.envs.items()}
        self.action_spaces = {a: env.action_space for a, env in self.envs.items()}
        self.state_space = UnicodeText((MAX_TEXT_LENGTH + 64) * len(self.possible_agents))
        self.instance_seed: int | None = None
        self._np_random: np.random.Generator | None = None
        self._last_obs: dict[str, str] = {}

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> UnicodeText:
        """The observation space of ``agent``'s copy (the same object on every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> UnicodeText:
        """The action space of ``agent``'s copy (the same object on every call)."""
        return self.action_spaces[agent]

    # --------------------------------------------------------------- episodes
    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, str], dict[str, dict]]:
        """Reset every copy with one seed.

        Args:
            seed: the instance seed; ``None`` draws one from the group's generator.
            options: reset options passed unchanged to every copy.

        Returns:
            ``(observations, infos)``, one entry per agent; the observations are equal.
        """
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
            instance_seed = int(seed)
        else:
            if self._np_random is None:
                self._np_random, _ = seeding.np_random(None)
            instance_seed = int(self._np_random.integers(0, 2**63 - 1))
        self.instance_seed = instance_seed
        self.agents = list(self.possible_agents)
        observations: dict[str, str] = {}
        infos: dict[str, dict] = {}
        for agent in self.agents:
            observations[agent], infos[agent] = self.envs[agent].reset(
                seed=instance_seed, options=options
            )
        self._last_obs = dict(observations)
        return observations, infos

    def step(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]]:
        """Step every live agent's copy with its action.

        Args:
            actions: ``{agent: action}`` for exactly the live agents (``self.agents``).

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, keyed by the
            agents that were live at the start of this step.

        Raises:
            ValueError: an action is missing for a live agent or given for an agent
                that is not live (finished or unknown).
        """
        live = set(self.agents)
        extra = sorted(set(actions) - live)
        if extra:
            raise ValueError(
                f"actions given for agents that are not live: {extra} (live: {self.agents})"
            )
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for live agents {missing}")
        observations: dict[str, str] = {}
        rewards: dict[str, float] = {}
        terminations: dict[str, bool] = {}
        truncations: dict[str, bool] = {}
        infos: dict[str, dict] = {}
        for agent in self.agents:
            obs, reward, terminated, truncated, info = self.envs[agent].step(actions[agent])
            observations[agent], rewards[agent], infos[agent] = obs, float(reward), info
            terminations[agent], truncations[agent] = bool(terminated), bool(truncated)
        self._last_obs.update(observations)
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    # ------------------------------------------------------------------ views
    def instruction(self, agent: str = "agent_0") -> str:
        """The task instruction of ``agent``'s copy (equal for all agents after a reset)."""
        return self.envs[agent].instruction

    def state(self) -> str:
        """The joint state as text: each agent's latest observation under an ``[agent]`` header.

        An element of :attr:`state_space`; empty before the first reset.
        """
        return "\n\n".join(
            f"[{a}]\n{self._last_obs[a]}" for a in self.possible_agents if a in self._last_obs
        )

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: :meth:`state`; otherwise ``None``."""
        return self.state() if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close every copy."""
        for env in self.envs.values():
            env.close()


def make_group(env_id: str, group_size: int, **config: Any) -> GroupParallelEnv:
    """Create a :class:`GroupParallelEnv` (``render_mode`` may be passed in ``config``).

    Example::

        from ragen_envs.group import make_group
        group = make_group("ragen/Sokoban-v0", group_size=8)
        observations, infos = group.reset(seed=42)   # 8 identical observations
    """
    return GroupParallelEnv(env_id, group_size, **config)
