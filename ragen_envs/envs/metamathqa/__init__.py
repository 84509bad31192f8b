"""MetaMathQA: math word problems, final answer checked (spec: ``docs/envs/metamathqa.md``).

Modules, one job each:

* :mod:`.extract` - final-answer extraction (``\\boxed{}``, ``The answer is:``, ``####``);
* :mod:`.equivalence` - answer equivalence (exact numbers, then math-verify);
* :mod:`.generator` - our template problems (``bundled/math-templates-*.jsonl``);
* :mod:`.env` - :class:`MetaMathQAEnv`, the environment and its record formats;
* :mod:`.register` - the ``register_env`` calls.

``bundled/`` holds the bundled data with provenance (rebuilt by ``scripts/build_bundled.py``);
``config.schema.json`` and ``info.schema.json`` the schemas.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["MathItem", "MetaMathQAEnv", "math_item_from_record"],
    },
)
