"""OpenAI-compatible endpoint policy (back-end ``openai``), on the official ``openai`` client.

One :class:`OpenAIPolicy` talks to one or several base URLs (vLLM, SGLang, TGI, llama.cpp,
a hosted API or a gateway) through ``openai.AsyncOpenAI`` with the client's own retries
switched off (``max_retries=0``), so that every retry is ours, bounded and counted.

Per request (one chat completion per :class:`~ragen_bench.types.PolicyRequest`):

* **Load balancing.** Several base URLs are balanced by *least outstanding requests*
  (ties broken round-robin); a retry avoids the endpoint that just failed when another
  one exists.
* **Timeouts.** ``connect_timeout`` (TCP/TLS connect), ``read_timeout`` (longest wait for
  a byte: the whole answer without streaming, the first chunk with streaming),
  ``idle_timeout`` (longest gap between two stream chunks) and ``total_timeout`` (wall
  clock of one attempt).
* **Per-episode wall budget.** ``episode_timeout`` (default :data:`EPISODE_TIMEOUT`,
  600 s) bounds the wall clock from an episode's first request (turn 1) to the end of
  its last one, retries and backoff included: no attempt and no backoff sleep runs past
  it, and a request that reaches it is the endpoint error ``episode_timeout`` (not
  retried; the episode is recorded as ``endpoint_error`` and ``--resume`` replays it).
  Without it a server that drips a byte every ``idle_timeout`` seconds held one request
  for ``total_timeout * (max_retries + 1)`` (900 s x 6, about 90 minutes) per turn.
* **Retries** for faults that a later identical request can survive: HTTP 408, 409, 429,
  5xx, dropped or refused connections, timeouts, stalled or incomplete streams, error
  events inside a stream, malformed 200 answers.  Delay before retry ``k`` (0-based):
  ``d = min(backoff_max, backoff_base * 2**k)``, drawn uniformly from ``[d/2, d]``
  ("equal jitter", Brooker, *Exponential Backoff And Jitter*, AWS Architecture Blog
  2015); a ``Retry-After`` / ``retry-after-ms`` header raises it to at least the server's
  value (capped at ``retry_after_max``).  After ``max_retries`` retries the request is
  returned as ``Generation(finish_reason="error", extra={"error", "error_kind", ...})``:
  the rollout engine records the episode as ``endpoint_error`` and ``--resume`` replays it.
* **Never retried:** a 400 saying the context is too long (``error_kind =
  "context_length"``: the engine ends the episode as ``context_limit`` with its rewards
  so far — the identical request would fail again), other 4xx (bad request,
  authentication, not found), and finish reason ``length`` (a truncated answer is a
  valid outcome: the turn is invalid and gets the format penalty).
* **Answers of the wrong shape** (``{"choices": "nope"}``, a choice without a message, a
  non-string content, usage that is not a number...) are ``invalid_response`` endpoint
  errors: retried like the other transient faults, counted, then recorded with their
  ``error_kind``.
* **Size caps.** A response body over ``max_response_bytes`` (default 16 MiB; checked
  against ``Content-Length`` and while reading, so a huge body is never held in memory;
  a gzip/deflate body is decoded in 64 KiB steps and its *decoded* size counts)
  is the endpoint error ``response_too_large`` (not retried: the identical request would
  send it again).  A completion (or reasoning text) longer than ``max_completion_chars``
  (default 2**20) is cut to that length and returned as truncated (finish reason
  ``length``, an invalid answer with the format penalty), with ``extra["truncated_chars"]``
  (its full length) recorded in the turn; with streaming the rest of the stream is not read.
* **Answers** (read by :mod:`ragen_bench.policies.openai_answers`): lone surrogates
  (an emoji split over two stream chunks) are joined or replaced by U+FFFD and counted
  (``surrogates_joined`` / ``surrogates_replaced``); ``usage`` token counts outside
  ``[0, 10**9]`` are recorded as missing (``usage_invalid``).  ``content: null`` is the empty string (the turn is an invalid answer); a
  separate reasoning channel (``reasoning_content`` or ``reasoning``) is returned as
  ``Generation.reasoning_text`` (the engine's ``answer_from_reasoning`` option parses it).
  Streaming keeps the text and the usage of a usage-only last chunk (``choices: []``).
  Token usage is recorded; with ``logprobs=True`` the per-token log-probabilities come
  back as ``completion_logprobs``; with ``return_token_ids=True`` (a vLLM extension) the
  prompt and completion token ids too.

**Cost.** Messages are posted as they are (they are already in wire format) and each
endpoint gets one ``AsyncOpenAI`` client per :data:`CONNECTIONS_PER_CLIENT` requests in
flight; about 2.3 ms of CPU per request remain (mostly the client and ``httpx``), which is
what bounds throughput on a small machine (``benchmarks/test_endpoint_throughput.py``).

* **Redirects** to another origin (scheme, host or port) are refused (``refused_response``,
  not retried): a 307/308 would re-post the prompt there.  Same-origin redirects are
  followed as before.

The API key is read from the environment variable named by ``api_key_env`` when the
policy is built; it is never stored in the policy's description, and it is registered
with :mod:`ragen_bench.redaction`, so that a server that echoes it (in an error or in a
completion) does not get it written into results, reports, the site or messages.  So
are the credentials a base URL carries (``http://user:KEY@host/v1?api_key=KEY2``); the
description lists base URLs without user info or query, and ``run.json`` records them
masked (``http://***@host/v1?api_key=***``), which a later policy refuses to use (give
``--base-url`` again).

The module is the policy (messages -> request, answer -> generation, counters); the HTTP
side (clients, limits, timeouts, retries, streaming) is
:mod:`ragen_bench.policies.openai_transport` and the answer side
:mod:`ragen_bench.policies.openai_answers`.  Their public names stay importable from here.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..redaction import has_masked_credentials, redact_url, register_secret, url_secrets
from ..types import Generation, PolicyRequest, SamplingParams
from .base import Policy
from .openai_answers import MAX_COMPLETION_CHARS, MAX_USAGE_TOKENS, AnswerReader
from .openai_transport import (
    _AT_LEAST_ONE,
    _NON_NEGATIVE,
    _POSITIVE,
    CONNECTIONS_PER_CLIENT,
    CONTEXT_LENGTH_MARKERS,
    MAX_RESPONSE_BYTES,
    RETRY_STATUSES,
    EndpointFailure,
    EndpointTransport,
    Outcome,
    RetryPolicy,
    is_context_length_error,
    parse_retry_after,
)

#: Default per-episode wall budget of an endpoint policy, seconds (``episode_timeout``).
EPISODE_TIMEOUT = 600.0


@dataclass
class EndpointStats:
    """Counters over the policy's life (``describe``/``stats`` report them).

    ``requests``: generations asked for; ``attempts``: HTTP requests sent; ``retries``:
    attempts after the first; ``retried``: faults that were retried, by kind;
    ``failed``: requests returned as errors, by kind; ``length``: answers truncated by
    ``max_tokens``; ``truncated``: answers cut to ``max_completion_chars``;
    ``reasoning_only``: answers with empty content but a reasoning channel;
    ``prompt_tokens`` / ``completion_tokens``: usage sums; ``usage_invalid``: answers
    whose usage held a count outside ``[0, MAX_USAGE_TOKENS]`` (recorded as missing);
    ``surrogates_joined`` / ``surrogates_replaced``: UTF-16 surrogate pairs joined and
    lone surrogates replaced by U+FFFD in answers.
    """

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    retried: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    length: int = 0
    truncated: int = 0
    reasoning_only: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_invalid: int = 0
    surrogates_joined: int = 0
    surrogates_replaced: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The counters as a JSON object (dict counters sorted by kind)."""
        return {
            "requests": self.requests,
            "attempts": self.attempts,
            "retries": self.retries,
            "retried": dict(sorted(self.retried.items())),
            "failed": dict(sorted(self.failed.items())),
            "length": self.length,
            "truncated": self.truncated,
            "reasoning_only": self.reasoning_only,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "usage_invalid": self.usage_invalid,
            "surrogates_joined": self.surrogates_joined,
            "surrogates_replaced": self.surrogates_replaced,
        }


class OpenAIPolicy(Policy):
    """A model behind OpenAI-compatible chat-completions endpoints.

    Args:
        model: the served model name (the request's ``model`` field).
        base_url: one base URL (``http://host:port/v1``) or several (load-balanced).
        api_key_env: name of the environment variable holding the API key.  ``None``:
            ``OPENAI_API_KEY`` if set, else the placeholder ``"EMPTY"`` (local servers).
        concurrency: requests in flight at once (``max_concurrency``).
        stream: use server-sent events (enables the idle timeout).
        connect_timeout / read_timeout / idle_timeout / total_timeout: seconds (module
            docstring).
        episode_timeout: per-episode wall budget, seconds (module docstring); ``0``: none.
        max_retries / backoff_base / backoff_max / retry_after_max: see :class:`RetryPolicy`.
        logprobs: ask for per-token log-probabilities (``logprobs=true``).
        top_logprobs: also ask for this many alternatives per token (0: none).
        return_token_ids: ask a vLLM server for prompt/completion token ids.
        stream_usage: ask for the usage chunk when streaming (``stream_options``).
        max_tokens_param: ``"max_tokens"`` or ``"max_completion_tokens"`` (newer
            OpenAI models accept only the latter).
        extra_body: extra JSON fields for every request (``top_k``, ``min_p``,
            ``chat_template_kwargs``, ``reasoning_effort``...).
        jitter_seed: seed of the backoff jitter (``None``: from the OS).
        max_response_bytes: largest response body accepted, bytes (module docstring).
        max_completion_chars: longest completion (and reasoning text) kept, characters;
            a longer one is cut and returned as truncated.

    Raises:
        ImportError: the ``openai`` package is missing (``pip install 'ragen[api]'``).
        ValueError: no base URL, a bad setting, or ``api_key_env`` names an unset variable.
    """

    name = "openai"
    max_batch_size = 1

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None = None,
        api_key_env: str | None = None,
        concurrency: int = 16,
        stream: bool = False,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        idle_timeout: float = 60.0,
        total_timeout: float = 900.0,
        episode_timeout: float = EPISODE_TIMEOUT,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        logprobs: bool = False,
        top_logprobs: int = 0,
        return_token_ids: bool = False,
        stream_usage: bool = True,
        max_tokens_param: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        jitter_seed: int | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_completion_chars: int = MAX_COMPLETION_CHARS,
    ):
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the openai back-end needs the openai client: pip install 'ragen[api]'"
            ) from exc
        self._openai = openai
        if not model:
            raise ValueError(
                "the openai back-end needs --model (the served model name or an endpoint alias)"
            )
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
        if not urls:
            raise ValueError("the openai back-end needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        for u in urls:
            if urlsplit(u).scheme not in ("http", "https"):
                raise ValueError(
                    f"base URL must start with http:// or https://, got {redact_url(u)!r}"
                )
            if has_masked_credentials(u):
                raise ValueError(
                    f"base URL {redact_url(u)!r} holds credentials masked as *** (read back from "
                    "run.json, which never stores them); give --base-url with the credentials again"
                )
        for label, value, allowed in (
            ("concurrency", concurrency, _AT_LEAST_ONE),
            ("connect_timeout", connect_timeout, _POSITIVE),
            ("read_timeout", read_timeout, _POSITIVE),
            ("idle_timeout", idle_timeout, _POSITIVE),
            ("total_timeout", total_timeout, _POSITIVE),
            ("episode_timeout", episode_timeout, _NON_NEGATIVE),
            ("top_logprobs", top_logprobs, _NON_NEGATIVE),
            ("max_response_bytes", max_response_bytes, _AT_LEAST_ONE),
            ("max_completion_chars", max_completion_chars, _AT_LEAST_ONE),
        ):
            allowed.check(label, value)
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'")
        self._model = str(model)
        self.api_key_env = api_key_env
        self._api_key = self._read_key(api_key_env)
        register_secret(self._api_key)  # never written by this process (ragen_bench.redaction)
        for u in urls:
            for secret in url_secrets(u):
                register_secret(secret)
        self.max_concurrency = int(concurrency)
        self.stream = bool(stream)
        self.connect_timeout, self.read_timeout = float(connect_timeout), float(read_timeout)
        self.idle_timeout, self.total_timeout = float(idle_timeout), float(total_timeout)
        self.episode_timeout = float(episode_timeout)
        self.retry = RetryPolicy(
            int(max_retries), float(backoff_base), float(backoff_max), float(retry_after_max)
        )
        self.logprobs, self.top_logprobs = bool(logprobs), int(top_logprobs)
        self.return_token_ids = bool(return_token_ids)
        self.stream_usage = bool(stream_usage)
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        self.max_response_bytes, self.max_completion_chars = (
            int(max_response_bytes),
            int(max_completion_chars),
        )
        self.reader = AnswerReader(self.logprobs, self.max_completion_chars)
        self.transport = EndpointTransport(
            openai,
            urls,
            self._api_key,
            concurrency=self.max_concurrency,
            stream=self.stream,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            idle_timeout=self.idle_timeout,
            total_timeout=self.total_timeout,
            retry=self.retry,
            max_response_bytes=self.max_response_bytes,
            jitter_seed=jitter_seed,
        )
        self.stats_counters = EndpointStats()
        #: ``time.monotonic()`` of each episode's first request (turn 1), by episode index.
        self._episode_start: dict[int, float] = {}

    # --------------------------------------------------------------- config
    @staticmethod
    def _read_key(api_key_env: str | None) -> str:
        if api_key_env:
            value = os.environ.get(api_key_env)
            if not value:
                raise ValueError(
                    f"environment variable {api_key_env} (from --api-key-env) is not set or empty"
                )
            return value
        return os.environ.get("OPENAI_API_KEY") or "EMPTY"

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def endpoints(self) -> list[Any]:
        """The transport's endpoints (index, base URL, requests outstanding)."""
        return self.transport.endpoints

    @property
    def base_urls(self) -> list[str]:
        return [e.base_url for e in self.endpoints]

    def describe(self) -> dict[str, Any]:
        """Settings recorded in ``run.json`` / ``summary.json`` (no key, no headers)."""
        return {
            "backend": self.name,
            "model": self._model,
            "base_urls": [redact_url(u) for u in self.base_urls],
            "api_key_env": self.api_key_env,
            "concurrency": self.max_concurrency,
            "stream": self.stream,
            "timeouts_s": {
                "connect": self.connect_timeout,
                "read": self.read_timeout,
                "idle": self.idle_timeout,
                "total": self.total_timeout,
                "episode": self.episode_timeout,
            },
            "retry": {
                "max_retries": self.retry.max_retries,
                "backoff_base_s": self.retry.backoff_base,
                "backoff_max_s": self.retry.backoff_max,
                "retry_after_max_s": self.retry.retry_after_max,
            },
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "return_token_ids": self.return_token_ids,
            "max_tokens_param": self.max_tokens_param,
            "extra_body": self.extra_body,
            "max_response_bytes": self.max_response_bytes,
            "max_completion_chars": self.max_completion_chars,
        }

    def stats(self) -> dict[str, Any]:
        """Request counters so far (see :class:`EndpointStats`)."""
        return self.stats_counters.as_dict()

    def scrub(self, text: str) -> str:
        """``text`` with the API key and URL credentials masked (:meth:`EndpointTransport.scrub`)."""
        return self.transport.scrub(text)

    async def aclose(self) -> None:
        """Close the HTTP connections of the running loop (the policy stays usable)."""
        await self.transport.aclose()

    # ------------------------------------------------------------- generate
    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        return list(await asyncio.gather(*(self._one(r, params) for r in requests)))

    def _request_kwargs(self, req: PolicyRequest, params: SamplingParams) -> dict[str, Any]:
        # The messages are already in wire format (role + string content), so they go in
        # ``extra_body``, which the client merges into the JSON body as is and which takes
        # precedence over the (empty) ``messages`` argument.  This skips the client's
        # per-request type transform of the whole conversation, whose CPU cost grows with
        # the history (about 0.8 ms for a two-message Bandit prompt here) and which
        # limits the throughput of a many-episode run on a small machine.
        body = {"messages": [{"role": m["role"], "content": m["content"]} for m in req.messages]}
        kw: dict[str, Any] = {
            "model": self._model,
            "messages": [],
            "temperature": params.temperature,
            "top_p": params.top_p,
            self.max_tokens_param: params.max_new_tokens,
        }
        if params.stop:
            kw["stop"] = list(params.stop)
        if params.seed is not None:
            # Stable per (seed, episode, turn): the same request gets the same seed on a retry.
            kw["seed"] = (int(params.seed) * 1_000_003 + req.episode_index * 7919 + req.turn) % (
                2**31
            )
        if self.logprobs:
            kw["logprobs"] = True
            if self.top_logprobs:
                kw["top_logprobs"] = self.top_logprobs
        body.update(self.extra_body)
        if self.return_token_ids:
            body["return_token_ids"] = True
        kw["extra_body"] = body
        if self.stream:
            kw["stream"] = True
            if self.stream_usage:
                kw["stream_options"] = {"include_usage": True}
        return kw

    def _deadline(self, req: PolicyRequest) -> float | None:
        """The ``time.monotonic()`` deadline of ``req``'s episode (``None``: no budget).

        An episode's clock starts at its first request (turn 1, or 0 for a bare request),
        so a replayed or repeated episode index starts a new budget.
        """
        if self.episode_timeout <= 0:
            return None
        now = time.monotonic()
        if req.turn <= 1 or req.episode_index not in self._episode_start:
            self._episode_start[req.episode_index] = now
        return self._episode_start[req.episode_index] + self.episode_timeout

    async def _one(self, req: PolicyRequest, params: SamplingParams) -> Generation:
        stats = self.stats_counters
        stats.requests += 1
        out = await self.transport.send(
            self._request_kwargs(req, params),
            self.reader,
            deadline=self._deadline(req),
            budget_s=self.episode_timeout,
        )
        stats.attempts += out.attempts
        stats.retries += out.retries
        for kind in out.retried:
            stats.retried[kind] = stats.retried.get(kind, 0) + 1
        if out.generation is None:
            return self._error(out)
        gen = out.generation
        gen.extra.update(
            {
                "retries": out.retries,
                "attempts": out.attempts,
                "endpoint": out.endpoint,
                "latency_s": out.latency_s,
            }
        )
        if out.faults:
            gen.extra["faults"] = out.faults
        stats.prompt_tokens += gen.prompt_tokens
        stats.completion_tokens += gen.completion_tokens
        if gen.extra.get("usage_invalid"):
            stats.usage_invalid += 1
        fixed = gen.extra.get("surrogates")
        if fixed:
            stats.surrogates_joined += fixed["joined"]
            stats.surrogates_replaced += fixed["replaced"]
        if gen.extra.get("truncated_chars"):
            stats.truncated += 1
        elif gen.finish_reason == "length":
            stats.length += 1
        if not gen.text.strip() and gen.reasoning_text:
            stats.reasoning_only += 1
        return gen

    def _error(self, out: Outcome) -> Generation:
        """The ``finish_reason="error"`` generation of a failed request (counted)."""
        fail = out.failure
        assert fail is not None
        stats = self.stats_counters
        stats.failed[fail.kind] = stats.failed.get(fail.kind, 0) + 1
        retries = out.retries
        note = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
        if fail.retryable and not note:
            note = " (retries disabled)"
        message = self.scrub(f"{fail.kind}: {fail}{note}")[:1000]
        return Generation(
            text="",
            finish_reason="error",
            extra={
                "error": message,
                "error_kind": fail.kind,
                "status": fail.status,
                "retries": retries,
                "attempts": out.attempts,
                "faults": out.faults,
                "endpoint": out.endpoint,
                "latency_s": out.latency_s,
            },
        )


__all__ = [
    "CONNECTIONS_PER_CLIENT",
    "CONTEXT_LENGTH_MARKERS",
    "EPISODE_TIMEOUT",
    "MAX_COMPLETION_CHARS",
    "MAX_RESPONSE_BYTES",
    "MAX_USAGE_TOKENS",
    "RETRY_STATUSES",
    "EndpointFailure",
    "EndpointStats",
    "OpenAIPolicy",
    "RetryPolicy",
    "is_context_length_error",
    "parse_retry_after",
    "redact_url",
]
