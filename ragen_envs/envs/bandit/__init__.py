"""Two-armed bandit (spec: ``docs/envs/bandit.md``).

Modules: :mod:`.env` (:class:`BanditEnv`, the environment and its oracle),
:mod:`.register` (the ``register_env`` calls); config and info schemas beside them
(``config.schema.json``, ``info.schema.json``).
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["BanditEnv"],
    },
)
