"""DeepCoder: write a program that passes the problem's tests (spec: ``docs/envs/deepcoder.md``).

Modules, one job each:

* :mod:`.problems` - coding problems and their record formats (HumanEval, DeepCoder,
  LiveCodeBench, TACO, APPS, ours);
* :mod:`.harness` - the test drivers run beside the submitted program;
* :mod:`.judge` - code extraction and judging in :mod:`ragen_envs.sandbox`;
* :mod:`.ragen_problems` - our stdin/stdout problems (``bundled/code-stdio-ours.jsonl``);
* :mod:`.env` - :class:`DeepCoderEnv`, the environment;
* :mod:`.register` - the ``register_env`` calls.

``bundled/`` holds the bundled data with provenance (HumanEval, ours; rebuilt by
``scripts/build_bundled.py``); ``config.schema.json`` and ``info.schema.json`` the schemas.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["DeepCoderEnv"],
    },
)
