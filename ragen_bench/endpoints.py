"""Endpoint aliases (``--endpoints FILE.toml``) and the endpoint options of ``ragen-bench run``.

An endpoints file names endpoints so that ``--model ALIAS`` is all a run needs::

    [endpoints.qwen-local]
    base_url = "http://127.0.0.1:8000/v1"      # or base_urls = ["http://a/v1", "http://b/v1"]
    model = "qwen2.5-coder-0.5b-instruct"      # the served model name
    concurrency = 8
    stream = true

    [endpoints.qwen-local.sampling]            # defaults; command-line flags win
    temperature = 0.0
    max_new_tokens = 256

    [endpoints.gpt]
    base_url = "https://api.openai.com/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"             # the variable's NAME, never the key
    max_tokens_param = "max_completion_tokens"

Keys of an alias: ``backend`` (default ``openai``), ``base_url`` / ``base_urls``,
``model``, ``api_key_env``, any :class:`~ragen_bench.policies.openai_api.OpenAIPolicy`
option in :data:`POLICY_KEYS`, and a ``sampling`` table (``temperature``, ``top_p``,
``max_new_tokens``, ``stop``).  Unknown keys are errors (a typo must not be ignored), and
so is a key-like value for ``api_key_env`` (a file holds names of variables, not keys).

Precedence: a flag given on the command line > the alias > the built-in default.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .policies import POLICIES

#: Back-ends that talk to an OpenAI-compatible server (registered with ``endpoint=True``).
ENDPOINT_BACKENDS = POLICIES.names(endpoint=True)

#: OpenAIPolicy options an alias (or the command line) may set.
POLICY_KEYS = (
    "concurrency",
    "stream",
    "connect_timeout",
    "read_timeout",
    "idle_timeout",
    "total_timeout",
    "episode_timeout",
    "max_retries",
    "backoff_base",
    "backoff_max",
    "retry_after_max",
    "logprobs",
    "top_logprobs",
    "return_token_ids",
    "stream_usage",
    "max_tokens_param",
    "extra_body",
    "max_response_bytes",
    "max_completion_chars",
)

#: vllm-server options an alias may set.
SERVER_KEYS = (
    "python",
    "served_model_name",
    "port",
    "max_model_len",
    "server_args",
    "server_env",
    "startup_timeout",
)

SAMPLING_KEYS = ("temperature", "top_p", "max_new_tokens", "stop")

_ALIAS_KEYS = frozenset(
    {
        "backend",
        "base_url",
        "base_urls",
        "model",
        "api_key_env",
        "sampling",
        "description",
        *POLICY_KEYS,
        *SERVER_KEYS,
    }
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EndpointsError(ValueError):
    """An endpoints file that cannot be used (the message names the file, alias and key)."""


@dataclass
class EndpointAlias:
    """One ``[endpoints.NAME]`` table, validated."""

    name: str
    backend: str = "openai"
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    api_key_env: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)


def load_endpoints(path: str | Path) -> dict[str, EndpointAlias]:
    """Read and validate an endpoints file.

    Raises:
        FileNotFoundError: no such file.
        EndpointsError: not TOML, no ``[endpoints.*]`` tables, or an invalid alias.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise EndpointsError(f"{p}: not valid TOML ({exc})") from None
    table = data.get("endpoints")
    if not isinstance(table, dict) or not table:
        raise EndpointsError(f"{p}: expected [endpoints.NAME] tables")
    unknown_top = sorted(set(data) - {"endpoints"})
    if unknown_top:
        raise EndpointsError(
            f"{p}: unknown top-level key(s) {unknown_top}; aliases go under [endpoints.NAME]"
        )
    return {name: _alias(p, name, spec) for name, spec in table.items()}


def _alias(p: Path, name: str, spec: Any) -> EndpointAlias:
    where = f"{p}: [endpoints.{name}]"
    if not isinstance(spec, dict):
        raise EndpointsError(f"{where} must be a table")
    unknown = sorted(set(spec) - _ALIAS_KEYS)
    if unknown:
        raise EndpointsError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_ALIAS_KEYS)}")
    backend = spec.get("backend", "openai")
    if backend not in ENDPOINT_BACKENDS:
        raise EndpointsError(
            f"{where}: backend must be one of {ENDPOINT_BACKENDS}, got {backend!r}"
        )
    if "base_url" in spec and "base_urls" in spec:
        raise EndpointsError(f"{where}: give base_url or base_urls, not both")
    urls = spec.get("base_urls", [spec["base_url"]] if "base_url" in spec else [])
    if isinstance(urls, str) or not all(isinstance(u, str) and u for u in urls):
        raise EndpointsError(f"{where}: base_urls must be a list of URLs")
    key_env = spec.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not _ENV_NAME.match(key_env)):
        raise EndpointsError(
            f"{where}: api_key_env must be the NAME of an environment variable "
            "(the key itself never goes into a file)"
        )
    sampling = spec.get("sampling", {})
    if not isinstance(sampling, dict) or set(sampling) - set(SAMPLING_KEYS):
        raise EndpointsError(f"{where}: sampling may hold only {SAMPLING_KEYS}")
    options = {k: spec[k] for k in (*POLICY_KEYS, *SERVER_KEYS) if k in spec}
    if "extra_body" in options and not isinstance(options["extra_body"], dict):
        raise EndpointsError(f"{where}: extra_body must be a table")
    return EndpointAlias(
        name=name,
        backend=backend,
        model=spec.get("model"),
        base_urls=list(urls),
        api_key_env=key_env,
        options=options,
        sampling=dict(sampling),
    )


@dataclass
class ResolvedEndpoint:
    """What ``ragen-bench run`` passes on: model, back-end options, sampling defaults."""

    backend: str
    model: str | None
    options: dict[str, Any]
    sampling_defaults: dict[str, Any]
    alias: str | None = None


def resolve_endpoint(
    backend: str,
    model: str | None,
    *,
    endpoints_file: str | Path | None = None,
    backend_explicit: bool = True,
    base_urls: list[str] | None = None,
    api_key_env: str | None = None,
    cli_options: dict[str, Any] | None = None,
) -> ResolvedEndpoint:
    """Merge an alias (if ``model`` names one in ``endpoints_file``) with command-line values.

    Args:
        backend: the ``--policy`` value.
        model: the ``--model`` value: an alias of ``endpoints_file`` or a model name.
        endpoints_file: the ``--endpoints`` file, if any.
        backend_explicit: whether ``--policy`` was given (else an alias's back-end wins).
        base_urls / api_key_env: the command-line values (``None``: not given).
        cli_options: other command-line policy options; ``None`` values are "not given".

    Returns:
        A :class:`ResolvedEndpoint`; ``options`` are the back-end's keyword arguments
        (recorded in ``run.json``: they hold the key's variable name, never the key).

    Raises:
        EndpointsError: bad endpoints file.
    """
    alias: EndpointAlias | None = None
    if endpoints_file is not None and model:
        aliases = load_endpoints(endpoints_file)
        alias = aliases.get(model)
    if alias is not None and not backend_explicit:
        backend = alias.backend
    options: dict[str, Any] = {}
    sampling: dict[str, Any] = {}
    resolved_model = model
    if alias is not None:
        options.update(alias.options)
        sampling.update(alias.sampling)
        if alias.base_urls:
            options["base_url"] = list(alias.base_urls)
        if alias.api_key_env:
            options["api_key_env"] = alias.api_key_env
        if alias.model:
            resolved_model = alias.model
    if base_urls:
        options["base_url"] = list(base_urls)
    if api_key_env:
        options["api_key_env"] = api_key_env
    for k, v in (cli_options or {}).items():
        if v is not None:
            options[k] = v
    if backend in POLICIES and POLICIES.meta(backend, "server"):  # it starts its own server
        options.pop("base_url", None)
    else:
        for k in SERVER_KEYS:
            options.pop(k, None)
    if isinstance(options.get("base_url"), list) and len(options["base_url"]) == 1:
        options["base_url"] = options["base_url"][0]
    return ResolvedEndpoint(
        backend=backend,
        model=resolved_model,
        options=options,
        sampling_defaults=sampling,
        alias=alias.name if alias is not None else None,
    )


def option_given(ctx: Any, name: str) -> bool:
    """Whether the command-line option ``name`` was given (not a default) in click context ``ctx``."""
    try:
        source = ctx.get_parameter_source(name)
    except (AttributeError, KeyError):
        return False
    # Compare by name: typer may ship its own copy of click's ParameterSource enum.
    return source is not None and getattr(source, "name", str(source)) not in (
        "DEFAULT",
        "DEFAULT_MAP",
    )


__all__ = [
    "ENDPOINT_BACKENDS",
    "EndpointAlias",
    "EndpointsError",
    "POLICY_KEYS",
    "ResolvedEndpoint",
    "SERVER_KEYS",
    "load_endpoints",
    "option_given",
    "resolve_endpoint",
]
