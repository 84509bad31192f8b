"""Policy back-ends: a registry of factories, each declaring the options it takes.

``make_policy(backend, model, **options)`` builds one by name.  Every back-end is
registered once in :data:`POLICIES` with its metadata:

* ``model``: ``"required"`` (``hf``, ``vllm``, ``vllm-server``), ``"optional"``
  (``openai``: the served model name) or ``"ignored"`` (``random``, ``oracle``);
* ``check_model``: check a local model reference before building (``"config"``: it must
  hold a ``config.json``; ``"path"``: it must exist), or ``None``;
* ``requires``: ``fn(options)`` run first, before the model is looked at, raising
  ``ImportError`` when the back-end's package is missing (``vllm``, ``vllm-server``), or
  ``None``;
* ``endpoint``: options come through :func:`ragen_bench.endpoints.resolve_endpoint`
  (aliases of an endpoints file, base URLs, timeouts); ``server``: it starts its own
  OpenAI-compatible server (so takes no base URL);
* ``options``: the :class:`~ragen_bench.options.CliOption` s ``ragen-bench run`` exposes
  for it (``key`` = the factory keyword the value fills).

Back-ends import their heavy dependencies (torch, transformers, openai, vllm) only when
constructed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from ..options import CliOption, unique
from ..registry import Registry
from .base import Policy
from .privileged import OraclePolicy, RandomPolicy

#: Policy back-ends by the name ``--policy`` takes (see the module docstring for the metadata).
POLICIES: Registry[Callable[..., Policy]] = Registry("back-end")

_BATCH = CliOption("batch_size", int, 32, "hf: largest generation batch.", key="max_batch_size")
_BASE = CliOption(
    "base",
    Optional[str],
    None,
    "hf / vllm: base model of a LoRA adapter --model (default: its adapter_config.json's, "
    "else the training run's model.path).",
)
_CONCURRENCY = CliOption(
    "concurrency",
    Optional[int],
    None,
    "openai / vllm-server: requests in flight at once (default 16).",
)


def register_policy(
    name: str,
    *,
    model: str,
    check_model: str | None = None,
    endpoint: bool = False,
    server: bool = False,
    options: tuple[CliOption, ...] = (),
    requires: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Callable[..., Policy]], Callable[..., Policy]]:
    """Decorator registering a factory ``fn(model, **options) -> Policy`` in :data:`POLICIES`.

    Raises:
        ValueError: a bad ``model`` / ``check_model`` value, or the name is taken.
    """
    if model not in ("required", "optional", "ignored") or check_model not in (
        None,
        "config",
        "path",
    ):
        raise ValueError(
            f"bad policy metadata for {name!r}: model={model!r}, check_model={check_model!r}"
        )
    return POLICIES.register(
        name,
        model=model,
        check_model=check_model,
        endpoint=endpoint,
        server=server,
        options=options,
        requires=requires,
    )


def make_policy(backend: str, model: str | None = None, **options: Any) -> Policy:
    """Build a policy back-end.

    Args:
        backend: a name in :data:`POLICIES`.
        model: model directory / hub id / ``"tiny"`` (``hf``, ``vllm``), or the served
            model name (``openai``); ignored by ``random`` and ``oracle``.
        **options: back-end specific keyword arguments.

    Raises:
        ImportError: the back-end's package is missing (checked before the model).
        ValueError: unknown back-end, missing model, a local model path that does not
            exist (``hf``, ``vllm``, ``vllm-server``), or an option the back-end does
            not take.
    """
    entry = POLICIES.entry(backend)
    if entry.meta.get("requires"):
        entry.meta["requires"](options)
    if entry.meta["check_model"] and model:
        from .hf import check_model_ref

        check_model_ref(model, need_config=entry.meta["check_model"] == "config")
    try:
        return entry.obj(model, **options)
    except TypeError as exc:  # an unknown --policy-option: name it instead of a traceback
        if "unexpected keyword argument" not in str(exc):
            raise
        raise ValueError(
            f"the {backend} back-end does not take that option ({exc}); check --policy-option"
        ) from None


def policy_options(*, endpoint: bool | None = None) -> list[CliOption]:
    """The back-ends' declared options, each name once (first declaration wins), in
    registration order; ``endpoint=True``/``False``: only those of endpoint / local back-ends."""
    names = POLICIES.names() if endpoint is None else POLICIES.names(endpoint=endpoint)
    return unique(opt for name in names for opt in POLICIES.meta(name, "options"))


def declared_options(backend: str, values: dict[str, Any]) -> dict[str, Any]:
    """The factory keywords of ``backend``'s declared options, taken from ``values``
    (command-line values by parameter name; ``None``, an option not given, is left out).
    Endpoint back-ends get theirs through
    :func:`~ragen_bench.endpoints.resolve_endpoint` instead."""
    entry = POLICIES.entry(backend)
    if entry.meta["endpoint"]:
        return {}
    return {
        opt.keyword: values[opt.name]
        for opt in entry.meta["options"]
        if opt.name in values and values[opt.name] is not None  # None: the factory's default
    }


@register_policy(
    "hf",
    model="required",
    check_model="config",
    options=(
        CliOption("device", str, "cpu", "hf: torch device."),
        CliOption("dtype", str, "float32", "hf: float32 | bfloat16 | float16."),
        _BATCH,
        _BASE,
    ),
)
def _hf(model: str | None, **options: Any) -> Policy:
    if not model:
        raise ValueError("the hf back-end needs --model (a directory, a hub id or 'tiny')")
    from .hf import HFPolicy

    return HFPolicy(model, **options)


@register_policy(
    "random",
    model="ignored",
    options=(CliOption("policy_seed", int, 0, "random: seed of the random baseline.", key="seed"),),
)
def _random(model: str | None, **options: Any) -> Policy:
    return RandomPolicy(seed=int(options.get("seed", 0)))


@register_policy("oracle", model="ignored")
def _oracle(model: str | None, **options: Any) -> Policy:
    return OraclePolicy()


@register_policy(
    "openai",
    model="optional",
    endpoint=True,
    options=(
        CliOption(
            "base_url",
            Optional[list[str]],
            None,
            "openai: endpoint base URL, e.g. http://127.0.0.1:8000/v1; "
            "repeat to load-balance over several servers.",
            flags=("--base-url",),
        ),
        CliOption(
            "api_key_env",
            Optional[str],
            None,
            "openai: NAME of the environment variable holding the API key "
            "(the key is never recorded).",
        ),
        _CONCURRENCY,
        CliOption(
            "stream",
            Optional[bool],
            None,
            "openai: stream answers (server-sent events; enables --idle-timeout). "
            "Default: no stream.",
            flags=("--stream/--no-stream",),
        ),
        CliOption(
            "logprobs",
            Optional[bool],
            None,
            "openai: request per-token log-probabilities.",
            flags=("--logprobs/--no-logprobs",),
        ),
        CliOption(
            "connect_timeout", Optional[float], None, "openai: seconds to connect (default 10)."
        ),
        CliOption(
            "read_timeout",
            Optional[float],
            None,
            "openai: seconds to wait for the answer, or for the first stream chunk (default 300).",
        ),
        CliOption(
            "idle_timeout",
            Optional[float],
            None,
            "openai: longest gap between stream chunks in seconds (default 60).",
        ),
        CliOption(
            "total_timeout",
            Optional[float],
            None,
            "openai: wall-clock limit of one attempt in seconds (default 900).",
        ),
        CliOption(
            "episode_timeout",
            Optional[float],
            None,
            "openai: wall-clock budget of one episode in seconds, from its first request, "
            "retries included; past it the episode is recorded as endpoint_error "
            "(default 600; 0: no budget).",
        ),
        CliOption(
            "max_retries",
            Optional[int],
            None,
            "openai: retries of a 429 / 5xx / dropped / timed-out request "
            "before the episode is recorded as endpoint_error (default 5).",
        ),
    ),
)
def _openai(model: str | None, **options: Any) -> Policy:
    from .openai_api import OpenAIPolicy

    return OpenAIPolicy(model or "", **options)


def _needs_vllm(options: dict[str, Any]) -> None:
    from .vllm_backend import require_vllm

    require_vllm()


def _needs_server_vllm(options: dict[str, Any]) -> None:
    from .vllm_backend import require_server_vllm

    require_server_vllm(options.get("python"), options.get("module"))


@register_policy(
    "vllm", model="required", check_model="path", options=(_BATCH, _BASE), requires=_needs_vllm
)
def _vllm(model: str | None, **options: Any) -> Policy:
    if not model:
        raise ValueError("the vllm back-end needs --model (a directory or a hub id)")
    from .vllm_backend import VLLMPolicy

    return VLLMPolicy(model, **options)


@register_policy(
    "vllm-server",
    model="required",
    check_model="path",
    endpoint=True,
    server=True,
    requires=_needs_server_vllm,
    options=(
        _CONCURRENCY,
        CliOption(
            "vllm_python",
            Optional[str],
            None,
            "vllm-server: Python interpreter that has vLLM "
            "(default $RAGEN_VLLM_PYTHON or this one).",
            key="python",
        ),
    ),
)
def _vllm_server(model: str | None, **options: Any) -> Policy:
    if not model:
        raise ValueError("the vllm-server back-end needs --model (a directory or a hub id)")
    from .vllm_backend import VLLMServerPolicy

    return VLLMServerPolicy(model, **options)


__all__ = [
    "POLICIES",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "declared_options",
    "make_policy",
    "policy_options",
    "register_policy",
]
