"""Policy back-ends.  ``make_policy(backend, model, **options)`` builds one by name.

Back-ends import their heavy dependencies (torch, transformers, openai, vllm) only when
constructed.
"""

from __future__ import annotations

from typing import Any

from .base import Policy
from .baselines import OraclePolicy, RandomPolicy

BACKENDS = ("hf", "random", "oracle", "openai", "vllm", "vllm-server")


def make_policy(backend: str, model: str | None = None, **options: Any) -> Policy:
    """Build a policy back-end.

    Args:
        backend: one of :data:`BACKENDS`.
        model: model directory / hub id / ``"tiny"`` (``hf``, ``vllm``), or the served
            model name (``openai``); ignored by ``random`` and ``oracle``.
        **options: back-end specific keyword arguments.

    Raises:
        ValueError: unknown back-end, missing model, a local model path that does not
            exist (``hf``, ``vllm``, ``vllm-server``), or an option the back-end does
            not take.
    """
    try:
        return _make(backend, model, **options)
    except TypeError as exc:  # an unknown --policy-option: name it instead of a traceback
        if "unexpected keyword argument" not in str(exc):
            raise
        raise ValueError(f"the {backend} back-end does not take that option ({exc}); "
                         "check --policy-option") from None


def _make(backend: str, model: str | None, **options: Any) -> Policy:
    if backend in ("hf", "vllm", "vllm-server") and model:
        from .hf import check_model_ref

        check_model_ref(model, need_config=backend == "hf")
    if backend == "random":
        return RandomPolicy(seed=int(options.get("seed", 0)))
    if backend == "oracle":
        return OraclePolicy()
    if backend == "hf":
        if not model:
            raise ValueError("the hf back-end needs --model (a directory, a hub id or 'tiny')")
        from .hf import HFPolicy

        return HFPolicy(model, **options)
    if backend == "openai":
        from .openai_api import OpenAIPolicy

        return OpenAIPolicy(model or "", **options)
    if backend == "vllm":
        if not model:
            raise ValueError("the vllm back-end needs --model (a directory or a hub id)")
        from .vllm_backend import VLLMPolicy

        return VLLMPolicy(model, **options)
    if backend == "vllm-server":
        if not model:
            raise ValueError("the vllm-server back-end needs --model (a directory or a hub id)")
        from .vllm_backend import VLLMServerPolicy

        return VLLMServerPolicy(model, **options)
    raise ValueError(f"unknown back-end {backend!r}; choose one of {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "OraclePolicy", "Policy", "RandomPolicy", "make_policy"]
