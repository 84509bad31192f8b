"""The HTTP side of the ``openai`` back-end: clients, limits, timeouts, retries, streaming.

:class:`EndpointTransport` sends one chat-completions request body to one of several
OpenAI-compatible base URLs through ``openai.AsyncOpenAI`` with the client's own retries
switched off (``max_retries=0``), so that every retry is ours, bounded and counted; the
answer is read by an :class:`~ragen_bench.policies.openai_answers.AnswerReader` (the
policy's side).  The behaviour, option by option, is described in
:mod:`ragen_bench.policies.openai_api` and ``docs/endpoints.md``:

* **Load balancing.** Least outstanding requests, ties round-robin; a retry avoids the
  endpoint that just failed when another one exists.
* **Timeouts.** ``connect_timeout``, ``read_timeout`` (the whole answer, or the first
  stream chunk), ``idle_timeout`` (between two stream chunks), ``total_timeout`` (one
  attempt) and a ``deadline`` per request (the policy's per-episode wall budget): no
  attempt and no backoff sleep runs past it, and a request that reaches it fails as
  ``episode_timeout`` (not retried).
* **Retries** of 408, 409, 429, 5xx, dropped connections, timeouts, stalled or incomplete
  streams, stream error events and malformed answers, with bounded exponential backoff
  and equal jitter (:class:`RetryPolicy`) and ``Retry-After`` honoured.
* **Limits.** Response bodies over ``max_response_bytes`` (decoded size for gzip /
  deflate), redirects to another origin and unknown encodings are refused
  (:func:`_capped_http_client`).
* **Redaction.** Error messages pass through :meth:`EndpointTransport.scrub` (the API
  key, URL credentials and ``Authorization`` values masked, lone surrogates repaired).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragen_envs.ranges import Range

from ..redaction import redact, redact_url
from ..types import Generation

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
      ``Authorization`` header;
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
class Outcome:
    """What one request came to (:meth:`EndpointTransport.send`).

    Attributes:
        generation: the answer, or ``None`` when the request failed.
        failure: the last failure when it failed, else ``None``.
        faults: the kind of every failure, in order (retried ones and the last).
        retries: attempts after the first.
        attempts: HTTP requests sent.
        retried: the kind of each retried failure, in order.
        endpoint: index of the endpoint of the last attempt.
        latency_s: wall-clock seconds of the whole request, retries included.
    """

    generation: Generation | None
    failure: EndpointFailure | None
    faults: list[str]
    retries: int
    attempts: int
    retried: list[str]
    endpoint: int
    latency_s: float


class EndpointTransport:
    """Sends chat-completions requests to one or several base URLs (module docstring).

    Args:
        openai_mod: the imported ``openai`` package.
        base_urls: the endpoints' base URLs (already checked: ``http(s)://``).
        api_key: the key sent as ``Authorization: Bearer`` (``"EMPTY"`` for local servers).
        concurrency: requests in flight at once (sizes the client pool).
        stream: read answers as server-sent events.
        connect_timeout / read_timeout / idle_timeout / total_timeout: seconds.
        retry: the backoff rule.
        max_response_bytes: largest response body accepted, bytes.
        jitter_seed: seed of the backoff jitter (``None``: from the OS).
    """

    def __init__(
        self,
        openai_mod: Any,
        base_urls: Sequence[str],
        api_key: str,
        *,
        concurrency: int,
        stream: bool,
        connect_timeout: float,
        read_timeout: float,
        idle_timeout: float,
        total_timeout: float,
        retry: RetryPolicy,
        max_response_bytes: int,
        jitter_seed: int | None = None,
    ):
        self._openai = openai_mod
        self._api_key = api_key
        self.endpoints = [_Endpoint(i, u) for i, u in enumerate(base_urls)]
        self.concurrency = int(concurrency)
        self.stream = bool(stream)
        self.connect_timeout, self.read_timeout = float(connect_timeout), float(read_timeout)
        self.idle_timeout, self.total_timeout = float(idle_timeout), float(total_timeout)
        self.retry = retry
        self.max_response_bytes = int(max_response_bytes)
        self._rng = random.Random(jitter_seed)
        self._rr = 0
        self._transport_errors = _transport_errors()

    def scrub(self, text: str) -> str:
        """``text`` safe to write: the API key replaced by ``***``, then
        :func:`ragen_bench.redaction.redact` (registered secrets, URL credentials,
        ``Authorization`` values, lone surrogates)."""
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
            n = max(1, -(-self.concurrency // CONNECTIONS_PER_CLIENT))
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
        """Close the HTTP connections of the running loop (the transport stays usable)."""
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

    # ------------------------------------------------------------- requests
    async def send(
        self,
        kwargs: dict[str, Any],
        reader: Any,
        *,
        deadline: float | None = None,
        budget_s: float | None = None,
    ) -> Outcome:
        """Send ``kwargs`` (``chat.completions.create`` arguments), retrying transient faults.

        Args:
            kwargs: the request.
            reader: an :class:`~ragen_bench.policies.openai_answers.AnswerReader`.
            deadline: ``time.monotonic()`` value no attempt or backoff may pass; reaching
                it fails the request as ``episode_timeout`` (not retried).
            budget_s: the budget the deadline comes from, seconds (for the message).

        Returns:
            An :class:`Outcome`; never raises for an endpoint fault.
        """
        t0 = time.perf_counter()
        faults: list[str] = []
        retried: list[str] = []
        attempts = 0
        avoid: int | None = None
        ep = self.endpoints[0]
        while True:
            limit, by_deadline = self.total_timeout, False
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    fail = _episode_timeout(budget_s)
                    faults.append(fail.kind)
                    return Outcome(
                        None, fail, faults, len(retried), attempts, retried, ep.index, _since(t0)
                    )
                if remaining < limit:
                    limit, by_deadline = remaining, True
            ep = self._pick(avoid)
            ep.outstanding += 1
            attempts += 1
            try:
                gen = await self._attempt(ep, kwargs, reader, limit)
            except EndpointFailure as fail:
                if fail.kind == "timeout" and by_deadline:
                    fail = _episode_timeout(budget_s)
                faults.append(fail.kind)
                if fail.retryable and len(retried) < self.retry.max_retries:
                    delay = self.retry.delay(len(retried), fail.retry_after, self._rng)
                    if deadline is not None:
                        delay = max(0.0, min(delay, deadline - time.monotonic()))
                    retried.append(fail.kind)
                    avoid = ep.index if len(self.endpoints) > 1 else None
                    await asyncio.sleep(delay)
                    continue
                return Outcome(
                    None, fail, faults, len(retried), attempts, retried, ep.index, _since(t0)
                )
            finally:
                ep.outstanding -= 1
            return Outcome(gen, None, faults, len(retried), attempts, retried, ep.index, _since(t0))

    async def _attempt(
        self, ep: _Endpoint, kwargs: dict[str, Any], reader: Any, limit: float
    ) -> Generation:
        """One HTTP request of at most ``limit`` seconds; raises :class:`EndpointFailure` on any fault."""
        shard = self._shard(ep)
        client = ep.clients[shard]
        ep.shard_load[shard] += 1
        try:
            async with asyncio.timeout(limit):
                if self.stream:
                    return await self._attempt_stream(client, kwargs, reader)
                resp = await client.chat.completions.create(**kwargs)
                return reader.from_completion(resp)
        except EndpointFailure:
            raise
        except Exception as exc:
            raise self._failure(exc, limit) from None
        finally:
            if ep.clients and shard < len(ep.shard_load):
                ep.shard_load[shard] -= 1

    async def _attempt_stream(self, client: Any, kwargs: dict[str, Any], reader: Any) -> Generation:
        stream = await client.chat.completions.create(**kwargs)
        answer = reader.stream()
        first = True
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
                if answer.add(chunk):
                    break  # stop reading: the rest would be cut anyway
        finally:
            try:
                await stream.close()
            except Exception:  # pragma: no cover - the connection may already be gone
                pass
        return answer.result()

    def _failure(self, exc: Exception, limit: float) -> EndpointFailure:
        """The :class:`EndpointFailure` for an exception raised by one attempt of ``limit`` seconds."""
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
                f"no complete answer within total_timeout={limit:g}s",
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


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 6)


def _episode_timeout(budget_s: float | None) -> EndpointFailure:
    """The ``episode_timeout`` failure (the per-episode wall budget ran out; not retried)."""
    budget = f" of {budget_s:g}s" if budget_s is not None else ""
    return EndpointFailure(
        "episode_timeout",
        f"the episode's wall-clock budget{budget} ran out (raise it with --episode-timeout)",
        retryable=False,
    )


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
    "CONNECTIONS_PER_CLIENT",
    "CONTEXT_LENGTH_MARKERS",
    "MAX_RESPONSE_BYTES",
    "RETRY_STATUSES",
    "EndpointFailure",
    "EndpointTransport",
    "Outcome",
    "RefusedResponse",
    "ResponseTooLarge",
    "RetryPolicy",
    "is_context_length_error",
    "parse_retry_after",
]
