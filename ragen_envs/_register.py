"""Registration of every ragen environment id and preset (imported by ``ragen_envs``).

Ids and presets are listed here, in one place, so that ``ragen_envs.list_envs()``, the
README table and the golden tests all see the same set.
"""

from __future__ import annotations

from .registry import register_env

register_env(
    "Bandit",
    version=0,
    env_key="bandit",
    entry_point="ragen_envs.envs.bandit:BanditEnv",
    description="Two-armed bandit with meaningful arm names; pick the higher-mean arm.",
    presets={},
)
