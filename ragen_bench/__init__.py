"""ragen_bench: evaluate any policy on any ragen environment.

The multi-turn agent loop (:mod:`ragen_bench.rollout`), policy back-ends
(:mod:`ragen_bench.policies`), results files and summaries (:mod:`ragen_bench.results`),
leaderboards (:mod:`ragen_bench.leaderboard`) and the ``ragen-bench`` CLI.  torch,
transformers, openai and vllm are imported only by the back-ends that need them.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _pkg_version

try:
    __version__ = _pkg_version("ragen")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
