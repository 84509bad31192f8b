"""Lean 4 theorem proving on miniF2F (spec: ``docs/envs/lean.md``).

* :mod:`.env` — :class:`LeanEnv`;
* :mod:`.theorems` — the theorem record format, its loader and the split rule;
* :mod:`.verifier` — the verifier interface and the choice of back-end;
* :mod:`.kimina`, :mod:`.repl`, :mod:`.replay` — the back-ends;
* :mod:`.protocol` — what Lean's JSON answers mean (structured fields only);
* :mod:`.render` — the observation text;
* :mod:`.register` — the registered ids.
"""

from .env import LeanEnv

__all__ = ["LeanEnv"]
