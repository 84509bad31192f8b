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
* **Answers.** ``content: null`` is the empty string (the turn is an invalid answer); a
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
completion) does not get it written into results, reports, the site or messages.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ragen_envs.ranges import Range

from ..redaction import redact, register_secret
from ..types import Generation, PolicyRequest, SamplingParams
from .base import Policy

#: HTTP statuses retried (as the OpenAI client itself would, but bounded and counted by us).
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))

#: Message fragments that identify a "context too long" 400 (vLLM, OpenAI, SGLang, TGI,
#: llama.cpp, Anthropic-style gateways).  Matched case-insensitively.
CONTEXT_LENGTH_MARKERS = (
    "maximum context length",
    "context length",
    "context_length_exceeded",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the available context size",
    "input tokens exceed",
    "max_model_len",
    "reduce the length of the",
)

#: Finish reasons that mean "the model finished normally".
_STOP_REASONS = frozenset(
    {"stop", "eos", "end_turn", "stop_sequence", "tool_calls", "function_call"}
)


class EndpointFailure(Exception):
    """One failed attempt.

    Attributes:
        kind: ``rate_limit``, ``server_error``, ``connection``, ``timeout``,
            ``stream_idle``, ``stream_incomplete``, ``stream_error``, ``invalid_response``,
            ``response_too_large``, ``refused_response``, ``aborted``, ``context_length``, ``bad_request``,
            ``auth``, ``not_found``, ``client_error``.
        retryable: whether an identical request may succeed later.
        retry_after: the server's ``Retry-After`` in seconds, if it sent one.
        status: the HTTP status, if any.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with equal jitter.

    Attributes:
        max_retries: retries after the first attempt (``0`` disables retrying).
        backoff_base: seconds; the un-jittered delay before retry ``k`` is
            ``min(backoff_max, backoff_base * 2**k)``.
        backoff_max: cap of the exponential delay, seconds.
        retry_after_max: cap of a server's ``Retry-After``, seconds.
    """

    max_retries: int = 5
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_after_max: float = 120.0

    def __post_init__(self) -> None:
        for name in ("max_retries", "backoff_base", "backoff_max", "retry_after_max"):
            _NON_NEGATIVE.check(name, getattr(self, name))

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        d = min(self.backoff_max, self.backoff_base * (2.0**retry))
        wait = rng.uniform(d / 2.0, d) if d > 0 else 0.0
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_max))
        return wait


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), else ``None``.

    RFC 9110 §10.2.3 defines ``Retry-After`` as delay-seconds or an HTTP-date;
    ``retry-after-ms`` is the OpenAI API's millisecond variant.
    """
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        raw = headers.get("retry-after")
    except Exception:  # pragma: no cover - exotic header containers
        return None
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def is_context_length_error(status: int | None, message: str, body: Any = None) -> bool:
    """Whether an HTTP error says the prompt (plus ``max_tokens``) exceeds the context.

    True for status 400/413/422 whose ``code`` is ``context_length_exceeded`` or whose
    message contains one of :data:`CONTEXT_LENGTH_MARKERS` (vLLM: "This model's maximum
    context length is N tokens. However, your request has M input tokens..."; OpenAI:
    code ``context_length_exceeded``).
    """
    if status not in (400, 413, 422):
        return False
    parts = [message or ""]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            if str(err.get("code") or "") == "context_length_exceeded":
                return True
            parts.append(str(err.get("message") or ""))
        parts.append(str(body.get("message") or ""))
    elif body is not None:
        parts.append(str(body))
    text = " ".join(parts).lower()
    return any(m in text for m in CONTEXT_LENGTH_MARKERS)


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (safe to write to results)."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Raw transport exception classes of the HTTP libraries the openai client may use.

    Recent ``openai`` versions wrap errors raised while iterating a stream into
    ``APIConnectionError``; older ones let ``httpx`` errors escape.  We catch both.
    """
    found: list[type[BaseException]] = []
    for mod in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(mod).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


_NON_NEGATIVE = Range(ge=0)
_POSITIVE = Range(gt=0)
_AT_LEAST_ONE = Range(ge=1)

#: Default cap of one response body, bytes.
MAX_RESPONSE_BYTES = 16 * 2**20
#: Default cap of a stored completion (and of its reasoning text), characters.
MAX_COMPLETION_CHARS = 2**20


class ResponseTooLarge(Exception):
    """A response body grew past the policy's ``max_response_bytes`` (raised by the transport)."""

    def __init__(self, limit: int, declared: int | None = None, *, decoded: bool = False):
        self.limit, self.declared = limit, declared
        size = f"{declared} bytes declared" if declared is not None else "more than that was sent"
        if decoded:
            size = "more than that after decompression"
        super().__init__(f"response body over max_response_bytes={limit} ({size})")


class RefusedResponse(Exception):
    """An answer the client will not follow or decode: a redirect to another origin, or an
    unsupported ``Content-Encoding`` (raised by the transport; never retried)."""


#: ``Content-Encoding`` values the client decodes itself (zlib ``wbits``: gzip header, zlib).
_DECODERS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


def _origin(url: Any) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of an httpx URL, with the scheme's default port filled in."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, port


def _capped_http_client(openai_mod: Any, limit: int) -> Any:
    """An ``openai.DefaultAsyncHttpxClient`` that refuses response bodies over ``limit`` bytes.

    A response event hook (httpx runs it once the headers are in, before any body byte
    is read, for every response including each redirect):

    * refuses a redirect whose ``Location`` has another origin (scheme, host, port) than
      the request: httpx would re-post the prompt there (a 307/308), only dropping the
      ``Authorization`` header (issue 28);
    * refuses a ``Content-Length`` over the limit, and otherwise wraps the body stream so
      that it raises :class:`ResponseTooLarge` as soon as the bytes read pass the limit;
    * decodes ``gzip``/``deflate`` bodies itself, in bounded steps, and counts the
      *decoded* bytes against the same limit (a 510 KiB gzip body expanded to 512 MiB
      before: the cap counted compressed bytes); the header is then removed so that httpx
      does not decode again.  Other encodings are refused (and not asked for:
      ``Accept-Encoding: gzip, deflate``).

    The client keeps openai's defaults otherwise (connection limits, proxies and TLS from
    the environment).  The openai client reads bodies through ``httpx``, or its fork
    ``httpx2`` in openai >= 3; the wrapper uses whichever that is.
    """
    import zlib

    client_cls = openai_mod.DefaultAsyncHttpxClient
    base = next(c for c in client_cls.__mro__ if c.__name__ == "AsyncClient")
    http = importlib.import_module(base.__module__.split(".")[0])
    step = 1 << 16  # largest decoded piece held at once, bytes

    class CappedStream(http.AsyncByteStream):
        def __init__(self, inner: Any, wbits: int | None):
            self._inner = inner
            self._wbits = wbits

        async def __aiter__(self):  # type: ignore[override]
            raw = decoded = 0
            dec = None if self._wbits is None else zlib.decompressobj(self._wbits)
            async for chunk in self._inner:
                raw += len(chunk)
                if raw > limit:
                    raise ResponseTooLarge(limit)
                if dec is None:
                    yield chunk
                    continue
                data = chunk
                while data and not dec.eof:
                    try:
                        out = dec.decompress(data, step)
                    except zlib.error as exc:
                        raise RefusedResponse(f"bad compressed body: {exc}") from None
                    data = dec.unconsumed_tail
                    decoded += len(out)
                    if decoded > limit:
                        raise ResponseTooLarge(limit, decoded=True)
                    if out:
                        yield out

        async def aclose(self) -> None:
            await self._inner.aclose()

    async def cap(response: Any) -> None:
        if response.has_redirect_location:
            target = response.request.url.join(response.headers["location"])
            if _origin(target) != _origin(response.request.url):
                raise RefusedResponse(
                    f"refused a {response.status_code} redirect from "
                    f"{redact_url(str(response.request.url))} to another origin "
                    f"({redact_url(str(target))}): the prompt is not sent elsewhere"
                )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ResponseTooLarge(limit, int(declared))
        coding = response.headers.get("content-encoding", "").strip().lower()
        wbits = None
        if coding and coding != "identity":
            if coding not in _DECODERS:
                raise RefusedResponse(f"unsupported Content-Encoding {coding!r}")
            wbits = _DECODERS[coding]
            del response.headers["content-encoding"]
        response.stream = CappedStream(response.stream, wbits)

    return client_cls(event_hooks={"response": [cap]}, headers={"Accept-Encoding": "gzip, deflate"})


def _chained(exc: BaseException, cls: type[BaseException]) -> BaseException | None:
    """``exc`` or the first exception of type ``cls`` in its ``__cause__``/``__context__`` chain."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, cls):
            return exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


#: Most requests in flight per ``AsyncOpenAI`` client.  httpcore's connection pool scans
#: every connection on each request and response, so one client with hundreds of
#: connections costs noticeably more CPU per request than several small ones.
CONNECTIONS_PER_CLIENT = 8


@dataclass
class _Endpoint:
    index: int
    base_url: str
    outstanding: int = 0
    clients: list[Any] = field(default_factory=list)
    shard_load: list[int] = field(default_factory=list)
    loop: Any = None


@dataclass
class EndpointStats:
    """Counters over the policy's life (``describe``/``stats`` report them).

    ``requests``: generations asked for; ``attempts``: HTTP requests sent; ``retries``:
    attempts after the first; ``retried``: faults that were retried, by kind;
    ``failed``: requests returned as errors, by kind; ``length``: answers truncated by
    ``max_tokens``; ``truncated``: answers cut to ``max_completion_chars``;
    ``reasoning_only``: answers with empty content but a reasoning channel;
    ``prompt_tokens`` / ``completion_tokens``: usage sums.
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

    def as_dict(self) -> dict[str, Any]:
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
        for label, value, allowed in (
            ("concurrency", concurrency, _AT_LEAST_ONE),
            ("connect_timeout", connect_timeout, _POSITIVE),
            ("read_timeout", read_timeout, _POSITIVE),
            ("idle_timeout", idle_timeout, _POSITIVE),
            ("total_timeout", total_timeout, _POSITIVE),
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
        self.endpoints = [_Endpoint(i, u) for i, u in enumerate(urls)]
        self.max_concurrency = int(concurrency)
        self.stream = bool(stream)
        self.connect_timeout, self.read_timeout = float(connect_timeout), float(read_timeout)
        self.idle_timeout, self.total_timeout = float(idle_timeout), float(total_timeout)
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
        self._rng = random.Random(jitter_seed)
        self._rr = 0
        self._transport_errors = _transport_errors()
        self.stats_counters = EndpointStats()

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
        """``text`` with the API key replaced by ``***``."""
        if self._api_key and self._api_key != "EMPTY":
            text = text.replace(self._api_key, "***")
        return redact(text)

    # -------------------------------------------------------------- clients
    def _shard(self, ep: _Endpoint) -> int:
        """Index of the endpoint's least loaded ``AsyncOpenAI`` client for the running loop.

        Clients belong to one event loop (their connections do); a new loop gets new ones.
        """
        loop = asyncio.get_running_loop()
        if not ep.clients or ep.loop is not loop:
            # Without streaming the socket read timeout is the answer's deadline; with
            # streaming our own first-chunk / idle timeouts govern and this is a backstop.
            read = (
                max(self.read_timeout, self.idle_timeout) + 1.0
                if self.stream
                else self.read_timeout
            )
            timeout = self._openai.Timeout(
                self.total_timeout,
                connect=self.connect_timeout,
                read=read,
                write=self.read_timeout,
                pool=self.total_timeout,
            )
            n = max(1, -(-self.max_concurrency // CONNECTIONS_PER_CLIENT))
            ep.clients = [
                self._openai.AsyncOpenAI(
                    base_url=ep.base_url,
                    api_key=self._api_key,
                    max_retries=0,
                    timeout=timeout,
                    http_client=_capped_http_client(self._openai, self.max_response_bytes),
                )
                for _ in range(n)
            ]
            ep.shard_load = [0] * n
            ep.loop = loop
        return min(range(len(ep.clients)), key=ep.shard_load.__getitem__)

    def _pick(self, avoid: int | None) -> _Endpoint:
        """Least outstanding requests; ties round-robin; avoid the last failed one if possible."""
        candidates = [e for e in self.endpoints if e.index != avoid] or self.endpoints
        low = min(e.outstanding for e in candidates)
        tied = [e for e in candidates if e.outstanding == low]
        self._rr += 1
        return tied[self._rr % len(tied)]

    async def aclose(self) -> None:
        """Close the HTTP connections of the running loop (the policy stays usable)."""
        loop = asyncio.get_running_loop()
        for ep in self.endpoints:
            clients, ep.clients, ep.shard_load = ep.clients, [], []
            if ep.loop is loop:
                for client in clients:
                    try:
                        await client.close()
                    except Exception:  # pragma: no cover - closing must never fail a run
                        pass
            ep.loop = None

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

    async def _one(self, req: PolicyRequest, params: SamplingParams) -> Generation:
        stats = self.stats_counters
        stats.requests += 1
        kwargs = self._request_kwargs(req, params)
        t0 = time.perf_counter()
        retries = 0
        avoid: int | None = None
        history: list[str] = []
        while True:
            ep = self._pick(avoid)
            ep.outstanding += 1
            stats.attempts += 1
            try:
                gen = await self._attempt(ep, kwargs)
            except EndpointFailure as fail:
                history.append(fail.kind)
                if fail.retryable and retries < self.retry.max_retries:
                    stats.retried[fail.kind] = stats.retried.get(fail.kind, 0) + 1
                    delay = self.retry.delay(retries, fail.retry_after, self._rng)
                    retries += 1
                    stats.retries += 1
                    avoid = ep.index if len(self.endpoints) > 1 else None
                    await asyncio.sleep(delay)
                    continue
                stats.failed[fail.kind] = stats.failed.get(fail.kind, 0) + 1
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
                        "attempts": retries + 1,
                        "faults": history,
                        "endpoint": ep.index,
                        "latency_s": round(time.perf_counter() - t0, 6),
                    },
                )
            finally:
                ep.outstanding -= 1
            gen.extra.update(
                {
                    "retries": retries,
                    "attempts": retries + 1,
                    "endpoint": ep.index,
                    "latency_s": round(time.perf_counter() - t0, 6),
                }
            )
            if history:
                gen.extra["faults"] = history
            stats.prompt_tokens += gen.prompt_tokens
            stats.completion_tokens += gen.completion_tokens
            if gen.extra.get("truncated_chars"):
                stats.truncated += 1
            elif gen.finish_reason == "length":
                stats.length += 1
            if not gen.text.strip() and gen.reasoning_text:
                stats.reasoning_only += 1
            return gen

    async def _attempt(self, ep: _Endpoint, kwargs: dict[str, Any]) -> Generation:
        """One HTTP request; raises :class:`EndpointFailure` on any fault."""
        shard = self._shard(ep)
        client = ep.clients[shard]
        ep.shard_load[shard] += 1
        try:
            async with asyncio.timeout(self.total_timeout):
                if self.stream:
                    return await self._attempt_stream(client, kwargs)
                resp = await client.chat.completions.create(**kwargs)
                return self._from_completion(resp)
        except EndpointFailure:
            raise
        except Exception as exc:
            raise self._failure(exc) from None
        finally:
            if ep.clients and shard < len(ep.shard_load):
                ep.shard_load[shard] -= 1

    def _failure(self, exc: Exception) -> EndpointFailure:
        """The :class:`EndpointFailure` for an exception raised by one attempt."""
        oa = self._openai
        too_large = _chained(exc, ResponseTooLarge)
        if too_large is not None:
            return EndpointFailure("response_too_large", str(too_large), retryable=False)
        refused = _chained(exc, RefusedResponse)
        if refused is not None:
            return EndpointFailure("refused_response", self.scrub(str(refused)), retryable=False)
        if isinstance(exc, TimeoutError):
            return EndpointFailure(
                "timeout",
                f"no complete answer within total_timeout={self.total_timeout:g}s",
                retryable=True,
            )
        if isinstance(exc, oa.APIStatusError):
            return self._status_failure(exc)
        if isinstance(exc, oa.APITimeoutError):
            return EndpointFailure("timeout", f"request timed out ({_cause(exc)})", retryable=True)
        if isinstance(exc, oa.APIConnectionError):
            return EndpointFailure(
                "connection", f"connection failed ({_cause(exc)})", retryable=True
            )
        if isinstance(exc, oa.APIResponseValidationError):
            return EndpointFailure("invalid_response", str(exc), retryable=True)
        if isinstance(
            exc, oa.APIError
        ):  # an error event inside a stream, or another API error without status
            return EndpointFailure("stream_error", str(exc) or type(exc).__name__, retryable=True)
        if isinstance(exc, self._transport_errors):
            return EndpointFailure(
                "connection", f"connection dropped ({type(exc).__name__}: {exc})", retryable=True
            )
        if isinstance(exc, (ValueError, AttributeError, TypeError, KeyError, IndexError)):
            # malformed JSON / SSE in a 200 answer, or an answer of the wrong shape that the
            # client's (non-validating) response types let through
            return EndpointFailure(
                "invalid_response",
                f"the answer is not a chat completion ({type(exc).__name__}: {exc})",
                retryable=True,
            )
        raise exc

    def _status_failure(self, exc: Any) -> EndpointFailure:
        status = int(getattr(exc, "status_code", 0) or 0)
        body = getattr(exc, "body", None)
        message = str(getattr(exc, "message", "") or exc)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        if is_context_length_error(status, message, body):
            return EndpointFailure("context_length", message, retryable=False, status=status)
        if status in RETRY_STATUSES:
            kind = (
                "rate_limit"
                if status == 429
                else ("server_error" if status >= 500 else "client_error")
            )
            return EndpointFailure(
                kind, message, retryable=True, retry_after=parse_retry_after(headers), status=status
            )
        kind = {400: "bad_request", 401: "auth", 403: "auth", 404: "not_found"}.get(
            status, "client_error"
        )
        return EndpointFailure(kind, message, retryable=False, status=status)

    # ------------------------------------------------------------- parsing
    @staticmethod
    def _extra_field(obj: Any, *names: str) -> Any:
        """A field that the openai types may not declare (``reasoning_content``...)."""
        if obj is None:
            return None
        for n in names:
            v = getattr(obj, n, None)
            if v is None:
                extra = getattr(obj, "model_extra", None) or {}
                v = extra.get(n)
            if v is not None:
                return v
        return None

    def _finish(self, raw: str | None) -> str:
        if raw == "length":
            return "length"
        if raw == "content_filter":
            return "content_filter"
        if raw == "abort":
            raise EndpointFailure(
                "aborted", "the server aborted the request (finish_reason 'abort')", retryable=True
            )
        return "stop"

    def _from_completion(self, resp: Any) -> Generation:
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _shape_error("it has no choices")
        if not isinstance(choices, list):
            raise _shape_error(f"'choices' is a {type(choices).__name__}, not a list")
        choice = choices[0]
        if not hasattr(choice, "message"):
            raise _shape_error(f"choices[0] is a {type(choice).__name__}, not a choice object")
        msg = choice.message
        if isinstance(msg, (str, bytes, int, float, list)):
            raise _shape_error(
                f"choices[0].message is a {type(msg).__name__}, not a message object"
            )
        content = getattr(msg, "content", None)
        if content is not None and not isinstance(content, str):
            raise _shape_error(f"message content is a {type(content).__name__}, not a string")
        text = content or ""
        reasoning = self._extra_field(msg, "reasoning_content", "reasoning")
        usage = getattr(resp, "usage", None)
        gen = Generation(
            text=text,
            finish_reason=self._finish(choice.finish_reason),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            reasoning_text=reasoning if isinstance(reasoning, str) else None,
        )
        if usage is None:
            gen.extra["usage_missing"] = True
        lp = getattr(choice, "logprobs", None)
        if self.logprobs and lp is not None and getattr(lp, "content", None):
            gen.completion_logprobs = [_clamp_logprob(t.logprob) for t in lp.content]
        if choice.finish_reason not in (None, "stop", "length"):
            gen.extra["raw_finish_reason"] = choice.finish_reason
        ids = self._extra_field(choice, "token_ids")
        if isinstance(ids, list):
            gen.completion_token_ids = [int(i) for i in ids]
        pids = self._extra_field(resp, "prompt_token_ids")
        if isinstance(pids, list):
            gen.prompt_token_ids = [int(i) for i in pids]
        return self._capped(gen)

    def _capped(self, gen: Generation) -> Generation:
        """``gen`` with text and reasoning cut to ``max_completion_chars``: flagged in
        ``extra["truncated_chars"]`` (``{"response"|"reasoning": full length}``) and finished
        ``length``.  A cut answer loses its token ids and log-probabilities (they no longer
        match the text)."""
        limit, flag = self.max_completion_chars, {}
        if len(gen.text) > limit:
            flag["response"], gen.text = len(gen.text), gen.text[:limit]
        if gen.reasoning_text is not None and len(gen.reasoning_text) > limit:
            flag["reasoning"], gen.reasoning_text = (
                len(gen.reasoning_text),
                gen.reasoning_text[:limit],
            )
        if flag:
            gen.extra["truncated_chars"] = flag
            gen.finish_reason = "length"
            gen.completion_token_ids = gen.completion_logprobs = None
        return gen

    async def _attempt_stream(self, client: Any, kwargs: dict[str, Any]) -> Generation:
        stream = await client.chat.completions.create(**kwargs)
        parts: list[str] = []
        reasoning: list[str] = []
        logprobs: list[float] = []
        token_ids: list[int] = []
        prompt_ids: list[int] | None = None
        finish: str | None = None
        usage = None
        first = True
        text_chars = reasoning_chars = 0
        cut = False
        try:
            iterator = stream.__aiter__()
            while True:
                wait = self.read_timeout if first else self.idle_timeout
                try:
                    async with asyncio.timeout(wait):
                        chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    what = "first chunk" if first else "next chunk"
                    raise EndpointFailure(
                        "stream_idle", f"stream stalled: no {what} within {wait:g}s", retryable=True
                    ) from None
                first = False
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                pids = self._extra_field(chunk, "prompt_token_ids")
                if isinstance(pids, list):
                    prompt_ids = [int(i) for i in pids]
                choices = getattr(chunk, "choices", None) or []  # the usage chunk has choices == []
                if not isinstance(choices, list):
                    raise _shape_error(
                        f"a stream chunk's 'choices' is a {type(choices).__name__}, not a list"
                    )
                for ch in choices:
                    if getattr(ch, "index", 0) != 0:
                        continue
                    delta = ch.delta
                    if delta is not None:
                        if isinstance(delta.content, str):
                            parts.append(delta.content)
                            text_chars += len(delta.content)
                        r = self._extra_field(delta, "reasoning_content", "reasoning")
                        if isinstance(r, str):
                            reasoning.append(r)
                            reasoning_chars += len(r)
                    lp = getattr(ch, "logprobs", None)
                    if lp is not None and getattr(lp, "content", None):
                        logprobs.extend(_clamp_logprob(t.logprob) for t in lp.content)
                    ids = self._extra_field(ch, "token_ids")
                    if isinstance(ids, list):
                        token_ids.extend(int(i) for i in ids)
                    if ch.finish_reason:
                        finish = ch.finish_reason
                if max(text_chars, reasoning_chars) > self.max_completion_chars:
                    cut = True  # stop reading: the rest would be cut anyway (_capped flags it)
                    break
        finally:
            try:
                await stream.close()
            except Exception:  # pragma: no cover - the connection may already be gone
                pass
        if finish is None and not cut:
            raise EndpointFailure(
                "stream_incomplete", "the stream ended without a finish reason", retryable=True
            )
        gen = Generation(
            text="".join(parts),
            finish_reason=self._finish(finish),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            reasoning_text="".join(reasoning) if reasoning else None,
        )
        if usage is None:
            gen.extra["usage_missing"] = True
        if self.logprobs and logprobs:
            gen.completion_logprobs = logprobs
        if token_ids:
            gen.completion_token_ids = token_ids
        if prompt_ids is not None:
            gen.prompt_token_ids = prompt_ids
        if finish not in ("stop", "length", None):
            gen.extra["raw_finish_reason"] = finish
        return self._capped(gen)


def _shape_error(what: str) -> EndpointFailure:
    """The retryable ``invalid_response`` failure for an answer of the wrong shape."""
    return EndpointFailure(
        "invalid_response", f"the answer is not a chat completion: {what}", retryable=True
    )


def _clamp_logprob(value: Any) -> float:
    """A log-probability as a float <= 0 (servers may send -0.0, tiny positives or -9999)."""
    v = float(value)
    return min(0.0, v) if math.isfinite(v) else -9999.0


def _cause(exc: BaseException) -> str:
    """The root cause of a wrapped transport error, as ``Type: message``."""
    inner = exc.__cause__ or exc.__context__
    seen = 0
    while inner is not None and (inner.__cause__ or inner.__context__) is not None and seen < 5:
        inner = inner.__cause__ or inner.__context__
        seen += 1
    if inner is None:
        return type(exc).__name__
    msg = str(inner)
    return f"{type(inner).__name__}: {msg}" if msg else type(inner).__name__


__all__ = [
    "CONTEXT_LENGTH_MARKERS",
    "EndpointFailure",
    "EndpointStats",
    "OpenAIPolicy",
    "RETRY_STATUSES",
    "RetryPolicy",
    "is_context_length_error",
    "parse_retry_after",
    "redact_url",
]
