"""Lean 4 theorem proving on miniF2F (spec: ``docs/envs/lean.md``).

* :mod:`.env` — :class:`LeanEnv`;
* :mod:`.theorems` — the theorem record format, its loader and the split rule;
* :mod:`.verifier` — the verifier interface and the choice of back-end;
* :mod:`.kimina`, :mod:`.repl`, :mod:`.replay` — the back-ends;
* :mod:`.protocol` — what Lean's JSON answers mean (structured fields only);
* :mod:`.render` — the observation text;
* :mod:`.register` — the registered ids.

Config and info schemas: ``config.schema.json``, ``info.schema.json`` beside them.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {".env": ["LeanEnv"]})
