"""The ragen environments, one package each: ``ragen_envs/envs/<key>/``.

Each package holds its env class (``env.py``, exported by the package), its generator or
data, its oracle, its ``register.py`` (the ``register_env`` calls, imported by
``ragen_envs/_register.py``), its ``config.schema.json`` and ``info.schema.json``, and, for a
data-backed env, its ``bundled/`` data with provenance.  How to add one:
``docs/envs/adding-an-env.md``.
"""
