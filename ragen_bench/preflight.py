"""Checks that run before the first episode of ``ragen-bench run`` (and ``ragen-train eval``).

Without them a missing optional package (``bm25s`` for SearchQA and WebShop) or an
endpoint that is not listening is discovered only after every episode has failed with
``env_error`` / ``endpoint_error``, and a run directory is left behind.  :func:`preflight`
is called by :func:`ragen_bench.runner.start_run` after the request is validated and
before the policy is built or the run directory created, so a failure is one line and
exit status 2 with nothing written:

* the env: one ``reset`` of the first episode's seed, then the env's ``check_ready()``
  when it has one (SearchQA builds its BM25 index there, which it otherwise builds at the
  first search); together they import the env's optional packages (a
  :class:`~ragen_envs.data.loaders.MissingExtraError` names the extra to install) and
  read its data;
* the packages an env imports only when a step needs them (:data:`ENV_PACKAGES`:
  MetaMathQA's answer checker ``math-verify`` is imported at the first answer, so without
  it every answered episode became ``env_error``): each is imported now;
* an ``openai`` endpoint: every base URL answers an HTTP request (any status, even
  401 or 404, counts as reachable; only a failed connection or a connect timeout does
  not).  ``GET <base_url>/models`` through the ``openai`` client the policy uses, with
  no retries.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

#: Seconds to wait for an endpoint's connection in :func:`check_endpoint`.
CONNECT_TIMEOUT_S = 5.0


class PreflightError(ValueError):
    """A run cannot start: what is missing and how to fix it (one line)."""


def _equivalence(*names: str) -> Callable[[dict[str, Any]], bool]:
    return lambda config: config.get("equivalence", "math_verify") in names


def _always(config: dict[str, Any]) -> bool:
    return True


def _by_check_ready(config: dict[str, Any]) -> bool:
    return False  # the env's own check_ready() imports it when its configured verifier needs it


#: Optional packages each env (by ``env_key``) needs while it plays: ``(import name,
#: distribution, extra, needed(env config))``.  Kept in step with the envs' lazy imports
#: (``ragen_envs/envs/metamathqa/equivalence.py``, ``ragen_envs/bm25.py``,
#: ``ragen_envs/envs/lean/kimina.py``) and the extras of ``pyproject.toml``.
ENV_PACKAGES: dict[str, tuple[tuple[str, str, str, Callable[[dict[str, Any]], bool]], ...]] = {
    "metamathqa": (
        ("math_verify", "math-verify", "math", _equivalence("math_verify")),
        ("sympy", "sympy", "math", _equivalence("math_verify", "sympy")),
    ),
    "searchqa": (("bm25s", "bm25s", "search", _always),),
    "webshop": (("bm25s", "bm25s", "webshop", _always),),
    "lean": (("httpx", "httpx", "lean", _by_check_ready),),
}


def env_extra(env_key: str) -> str | None:
    """The ``ragen[...]`` extra an env needs (``None``: none), for ``ragen-bench ls``."""
    extras = {extra for _, _, extra, _ in ENV_PACKAGES.get(env_key, ())}
    return ", ".join(sorted(extras)) or None


def check_packages(env_id: str, env_key: str, config: dict[str, Any]) -> None:
    """Import every optional package ``env_key`` needs with ``config`` (:data:`ENV_PACKAGES`).

    Raises:
        MissingExtraError: the first one missing (names the package and the extra).
    """
    from ragen_envs.data.loaders import MissingExtraError

    for module, dist, extra, needed in ENV_PACKAGES.get(env_key, ()):
        if not needed(config):
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtraError(dist, extra, f"{env_id} (every episode would fail)") from None


def check_env(env_id: str, env_config: dict[str, Any], seed: int) -> None:
    """Make ``env_id``, reset it once with ``seed`` (the run's first episode) and call its
    ``check_ready()`` if it has one.

    Raises:
        ImportError: an optional package is missing, imported now (:data:`ENV_PACKAGES`)
            or by the reset (:class:`~ragen_envs.data.loaders.MissingExtraError`, with the
            install hint).
        PreflightError: the reset could not reach a file or service (``OSError``).
    """
    import ragen_envs

    env = ragen_envs.make(env_id, **env_config)
    what = f"the first reset (seed {seed})"
    try:
        check_packages(
            env_id,
            getattr(env.unwrapped, "env_key", ""),
            dict(getattr(env.unwrapped, "config", None) or env_config),
        )
        env.reset(seed=seed)
        check_ready = getattr(
            env.unwrapped, "check_ready", None
        )  # an env's lazily built parts (SearchQA's index)
        if callable(check_ready):
            what = f"the readiness check after the first reset (seed {seed})"
            check_ready()
    except ImportError:
        raise
    except OSError as exc:
        raise PreflightError(
            f"{env_id}: {what} failed, so every episode would: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        env.close()


def check_endpoint(
    base_urls: str | Sequence[str],
    *,
    api_key: str | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """Check that every base URL of an OpenAI-compatible endpoint accepts a request.

    Raises:
        PreflightError: a URL refused the connection or did not answer within
            ``timeout_s`` (the message names the URL and the option to fix).
    """
    import openai

    for url in [base_urls] if isinstance(base_urls, str) else list(base_urls):
        client = openai.OpenAI(
            base_url=url,
            api_key=api_key or "EMPTY",
            max_retries=0,
            timeout=openai.Timeout(timeout_s, connect=timeout_s),
        )
        try:
            client.models.list()
        except openai.APIStatusError:
            pass  # it answered: reachable (an auth or routing problem is for the episodes to report)
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            cause = exc.__cause__ or exc
            raise PreflightError(
                f"endpoint {url} is unreachable ({type(cause).__name__}: {cause}); start the "
                "server or fix --base-url / the endpoint alias — no episode was played"
            ) from None
        finally:
            client.close()


def preflight(
    env_id: str,
    env_config: dict[str, Any],
    seed: int,
    backend: str | None,
    policy_options: dict[str, Any] | None = None,
) -> None:
    """Run the checks of this module for a run (``RunRequest`` / ``run.json`` fields).

    ``backend`` ``None``: the policy is already built (only the env is checked).

    Raises:
        ImportError, PreflightError: see :func:`check_env` and :func:`check_endpoint`.
    """
    check_env(env_id, env_config, seed)
    if backend == "openai":
        import os

        options = policy_options or {}
        key_env = options.get("api_key_env")
        check_endpoint(
            options.get("base_url") or [],
            api_key=os.environ.get(key_env) if key_env else None,
            timeout_s=float(options.get("connect_timeout") or CONNECT_TIMEOUT_S),
        )


__all__ = [
    "CONNECT_TIMEOUT_S",
    "ENV_PACKAGES",
    "PreflightError",
    "check_endpoint",
    "check_env",
    "check_packages",
    "env_extra",
    "preflight",
]
