"""ragen_envs: rigorously specified text environments for LLM agents (Gymnasium API).

Quick start::

    import ragen_envs
    env = ragen_envs.make("ragen/Sokoban-v0")
    obs, info = env.reset(seed=0)
    print(env.unwrapped.instruction)
    obs, reward, terminated, truncated, info = env.step("Up")

Importing the package registers every id with Gymnasium, so
``gymnasium.make("ragen/Sokoban-v0")`` works too.  This package imports neither torch
nor transformers nor an HTTP client.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _pkg_version

from . import _register  # noqa: F401,E402  (registers the ids)
from .checker import CheckReport, check_env
from .config import ConfigError, config_defaults, validate_config, validate_info
from .core import EpisodeStatus, TextEnv, Transition
from .parsing import ParsedResponse, format_answer, parse_response
from .registry import EnvEntry, UnknownEnvError, get_entry, list_envs, make, register_env
from .seeding import SPLITS, derive_seed, instance_split
from .spaces import UnicodeText


def _version() -> str:
    for dist in ("ragen", "ragen-envs"):
        try:
            return _pkg_version(dist)
        except PackageNotFoundError:
            continue
    return "0.0.0+unknown"


__version__ = _version()

__all__ = [
    "CheckReport",
    "ConfigError",
    "EnvEntry",
    "EpisodeStatus",
    "ParsedResponse",
    "SPLITS",
    "TextEnv",
    "Transition",
    "UnicodeText",
    "UnknownEnvError",
    "check_env",
    "config_defaults",
    "derive_seed",
    "format_answer",
    "get_entry",
    "instance_split",
    "list_envs",
    "make",
    "parse_response",
    "register_env",
    "validate_config",
    "validate_info",
    "__version__",
]
