"""A real OpenAI-compatible chat-completions server for tests, with faults on demand.

:class:`FaultServer` listens on ``127.0.0.1`` (an ephemeral port by default) in a
background thread (standard library ``http.server``, one thread per connection, HTTP/1.1
keep-alive) and speaks enough of the chat completions protocol for the official
``openai`` client: ``GET /v1/models`` and ``POST /v1/chat/completions`` as JSON or as
server-sent events (``stream=True``, with the usage-only last chunk ``choices: []`` when
``stream_options.include_usage`` is set, then ``data: [DONE]``).

What each request gets comes from a *script*: a callable ``script(request) -> Reply |
Fault | str`` that sees the parsed request (:class:`Request`: arrival number, body,
headers).  A :class:`Reply` is a normal answer (content, ``reasoning_content``, finish
reason, usage, log-probabilities) with optional stream faults (stall or reset after
``k`` chunks, missing finish reason); a :class:`Fault` is an HTTP error with body and
headers (429 + ``Retry-After``, 500, a 400 "context too long" in vLLM's or OpenAI's
shape), a connection reset (TCP RST before any byte), a stall (no byte at all), a 200
answer with any body (:func:`answer_body`: wrong shapes, huge bodies, with or without
``Content-Length``) or an event stream of any events (:func:`answer_events`).

The server counts requests in flight and keeps the maximum it saw
(:attr:`FaultServer.max_in_flight`), so tests can check the client's concurrency bound.
A request whose client went away (a timeout on the client side) is no longer counted:
waits poll the socket and end as soon as the peer closes it.

Run it as a stand-alone process (used to test the ``vllm-server`` back-end's process
management without vLLM): ``python -m tests.helpers.fault_server --port 0 --served-model-name
NAME [--model DIR] [--latency S]``; it accepts and ignores other ``vllm``-style flags,
prints ``READY <base_url>`` and serves until SIGTERM.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Real error bodies, in the servers' shapes (message templates from the servers' source;
# numbers are illustrative).
#: vLLM 0.32.0 OpenAI server: the body it sent on this machine for a 2049-token prompt with
#: ``--max-model-len 2048`` (``vllm/renderers/params.py`` ``_token_len_check``).
VLLM_CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, your prompt contains at least "
        "2049 input tokens, which exceeds this limit even without any output tokens. Please reduce the "
        "length of the input prompt. (parameter=input_tokens, value=2049)",
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
    }
}
#: vLLM before 0.7 answered with a flat object (``"object": "error"``).
VLLM_LEGACY_CONTEXT_ERROR = {
    "object": "error",
    "message": "This model's maximum context length is 2048 tokens. However, you requested 2357 tokens (2301 in "
    "the messages, 56 in the completion). Please reduce the length of the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
#: OpenAI's API: ``code`` ``context_length_exceeded``.
OPENAI_CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130412 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@dataclass
class Request:
    """One request as the server saw it.

    Attributes:
        n: arrival number (0, 1, 2, ... over the server's life).
        path: request path, e.g. ``/v1/chat/completions``.
        body: the parsed JSON body.
        headers: request headers, lower-case names.
    """

    n: int
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def last_user(self) -> str:
        """Content of the last user message ('' if none)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return str(m.get("content") or "")
        return ""


@dataclass
class Reply:
    """A normal completion (with optional stream faults).

    Attributes:
        content: message content; ``None`` sends ``"content": null``.
        reasoning_content: the separate reasoning channel (vLLM's reasoning parsers).
        finish_reason: ``stop``, ``length``, ...; ``None`` omits it (a broken stream).
        prompt_tokens / completion_tokens: usage; default: characters / 4 of the
            messages, and one token per chunk of the content.
        logprobs: per-token log-probabilities sent when the request asks for them
            (default ``-0.25`` per token).  Tokens are chunks of ``chunk_chars`` characters.
        chunk_chars: characters per token / SSE chunk.
        latency: seconds before the first byte (overrides the server's latency).
        stall_after_chunks: stream only: after this many content chunks send nothing
            more for ``stall_s`` seconds, then close the connection.
        reset_after_chunks: stream only: after this many content chunks reset the TCP
            connection.
        usage_chunk: stream only: send the usage-only last chunk when asked for it.
    """

    content: str | None = ""
    reasoning_content: str | None = None
    finish_reason: str | None = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logprobs: list[float] | None = None
    chunk_chars: int = 4
    latency: float | None = None
    stall_after_chunks: int | None = None
    stall_s: float = 30.0
    reset_after_chunks: int | None = None
    usage_chunk: bool = True


@dataclass
class Fault:
    """A failed request.

    Attributes:
        kind: ``"status"`` (an HTTP error response), ``"reset"`` (TCP reset before any
            response byte), ``"stall"`` (no response byte for ``seconds``, then close),
            ``"body"`` (``status`` with ``body`` as given; ``chunked``: without
            ``Content-Length``) or ``"events"`` (an event stream of the events in ``body``).
        status / body / headers: the HTTP error (``body`` a JSON-able object or text).
        chunked: ``"body"``: send the body with chunked transfer encoding.
        seconds: stall duration.
        latency: seconds before the fault (overrides the server's latency).
    """

    kind: str = "status"
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 30.0
    latency: float | None = None
    chunked: bool = False


# ------------------------------------------------------------------ fault helpers
def http_error(
    status: int, message: str = "", *, headers: dict[str, str] | None = None, body: Any = None
) -> Fault:
    """An HTTP error in OpenAI's error shape (or ``body`` as given)."""
    if body is None:
        body = {
            "error": {
                "message": message or f"error {status}",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
    return Fault("status", status, body, dict(headers or {}))


def rate_limited(retry_after: float | str = 0) -> Fault:
    """429 with a ``Retry-After`` header (seconds)."""
    return http_error(
        429, "Rate limit reached; try again later.", headers={"Retry-After": str(retry_after)}
    )


def server_error(status: int = 500) -> Fault:
    return http_error(status, "Internal server error")


def reset() -> Fault:
    """Reset the TCP connection before any response byte."""
    return Fault("reset")


def stall(seconds: float = 30.0) -> Fault:
    """Send nothing for ``seconds`` (or until the client goes away), then close."""
    return Fault("stall", seconds=seconds)


def context_too_long(shape: str = "vllm") -> Fault:
    """A 400 "context too long" with the body of ``vllm``, ``vllm-legacy`` or ``openai``."""
    body = {
        "vllm": VLLM_CONTEXT_ERROR,
        "vllm-legacy": VLLM_LEGACY_CONTEXT_ERROR,
        "openai": OPENAI_CONTEXT_ERROR,
    }[shape]
    return Fault("status", 400, body)


def answer_body(body: Any, *, chunked: bool = False, status: int = 200) -> Fault:
    """A ``status`` (200) answer whose body is ``body`` as given (a JSON-able object, or
    text/bytes sent as they are): answers of the wrong shape, oversized answers.
    ``chunked``: no ``Content-Length`` (chunked transfer encoding, 64 KiB chunks)."""
    return Fault("body", status, body, chunked=chunked)


def answer_events(events: list[Any]) -> Fault:
    """A 200 event stream of ``events`` (JSON-able objects or raw strings as ``data:`` lines),
    then ``data: [DONE]``."""
    return Fault("events", 200, list(events))


Script = Callable[[Request], "Reply | Fault | str"]


def _default_script(request: Request) -> Reply:
    return Reply(content="<think>ok</think><answer>Left</answer>")


# ------------------------------------------------------------------------ server
class _ClientGone(Exception):
    pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True
    owner: FaultServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as production servers set it: headers and body are separate writes, and
    # with Nagle's algorithm the body would wait for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence access logs
        return None

    # ---------------------------------------------------------------- routes
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        owner = self.server.owner
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": owner.model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "ragen-tests",
                        }
                    ],
                },
            )
        elif self.path.rstrip("/").endswith("/health"):
            self._json(200, {})
        else:
            self._json(
                404,
                {"error": {"message": f"no route {self.path}", "type": "not_found", "code": 404}},
            )

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(
                400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}
            )
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(
                404,
                {"error": {"message": f"no route {self.path}", "type": "not_found", "code": 404}},
            )
            return
        req = owner._begin(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        self._req: Request | None = req
        outcome = "error"
        try:
            action = owner.script(req)
            if isinstance(action, str):
                action = Reply(content=action)
            outcome = self._serve(req, action)
        except _ClientGone:
            outcome = "client_gone"
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            outcome = "client_gone"
            self.close_connection = True
        finally:
            self._release()
            owner._end(req, outcome)
            self._req = None

    # -------------------------------------------------------------- helpers
    def _serve(self, req: Request, action: Reply | Fault) -> str:
        owner = self.server.owner
        latency = action.latency if action.latency is not None else owner.latency
        if latency > 0 and not self._wait(latency):
            raise _ClientGone()
        if isinstance(action, Fault):
            if action.kind == "reset":
                self._reset()
                return "reset"
            if action.kind == "stall":
                self._wait(action.seconds)
                self.close_connection = True
                return "stall"
            if action.kind == "events":
                return self._raw_events(action.body)
            if action.kind == "body" and action.chunked:
                return self._chunked_body(action.status, action.body)
            body = action.body
            self._json(action.status, body, action.headers)
            return f"status:{action.status}"
        if req.stream:
            return self._stream(req, action)
        self._json(200, self._completion(req, action))
        return "ok"

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False as soon as the client closes the connection."""
        owner = self.server.owner
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if owner._stopping.is_set():
                return False
            try:
                ready, _, _ = select.select([self.connection], [], [], min(left, 0.2))
            except (OSError, ValueError):
                return False
            if ready:
                try:
                    peek = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    return False
                if not peek:
                    return False
                time.sleep(min(left, 0.01))

    def _release(self) -> None:
        """Stop counting this request as in flight.  Called just before the last bytes of
        an answer are written, so a client that sends its next request as soon as it has
        read this answer never meets a stale count."""
        req = getattr(self, "_req", None)
        if req is not None:
            self.server.owner._release(req)

    def _reset(self) -> None:
        self._release()
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _chunked_body(self, status: int, obj: Any) -> str:
        data = (
            obj
            if isinstance(obj, bytes)
            else (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._release()
        for i in range(0, len(data), 65536):
            self._send_chunk(data[i : i + 65536])
        self._send_chunk(b"")
        return f"body:{status}"

    def _raw_events(self, events: list[Any]) -> str:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._event(event)
        self._release()
        self._event("[DONE]")
        self._send_chunk(b"")
        return "events"

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = (
            obj
            if isinstance(obj, bytes)
            else (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        )
        self.send_response(status)
        self.send_header(
            "Content-Type", "application/json" if not isinstance(obj, str) else "text/plain"
        )
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._release()
        self.wfile.write(data)

    @staticmethod
    def _tokens(text: str, size: int) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)] if text else []

    def _usage(self, req: Request, reply: Reply, n_tokens: int) -> dict[str, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(len(str(m.get("content") or "")) for m in req.messages) // 4 + 1
        completion = reply.completion_tokens if reply.completion_tokens is not None else n_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _logprob_items(tokens: list[str], values: list[float] | None) -> list[dict[str, Any]]:
        out = []
        for i, tok in enumerate(tokens):
            lp = values[i] if values is not None and i < len(values) else -0.25
            out.append(
                {"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": []}
            )
        return out

    def _completion(self, req: Request, reply: Reply) -> dict[str, Any]:
        owner = self.server.owner
        tokens = self._tokens(reply.content or "", reply.chunk_chars)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": reply.finish_reason,
            "logprobs": None,
        }
        if req.body.get("logprobs"):
            choice["logprobs"] = {"content": self._logprob_items(tokens, reply.logprobs)}
        return {
            "id": f"chatcmpl-{req.n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.body.get("model", owner.model),
            "choices": [choice],
            "usage": self._usage(req, reply, len(tokens)),
        }

    def _chunk(
        self,
        req: Request,
        delta: dict[str, Any],
        finish: str | None = None,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        choice = {
            "index": 0,
            "delta": delta,
            "finish_reason": finish,
            "logprobs": {"content": logprobs} if logprobs is not None else None,
        }
        return {
            "id": f"chatcmpl-{req.n}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.body.get("model", self.server.owner.model),
            "choices": [choice],
        }

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _event(self, obj: Any) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._send_chunk(f"data: {payload}\n\n".encode())

    def _stream(self, req: Request, reply: Reply) -> str:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        want_lp = bool(req.body.get("logprobs"))
        self._event(self._chunk(req, {"role": "assistant", "content": ""}))
        if reply.reasoning_content:
            for piece in self._tokens(reply.reasoning_content, reply.chunk_chars):
                self._event(self._chunk(req, {"reasoning_content": piece}))
        tokens = self._tokens(reply.content or "", reply.chunk_chars)
        for i, tok in enumerate(tokens):
            if reply.reset_after_chunks is not None and i == reply.reset_after_chunks:
                self._reset()
                return "reset_mid_stream"
            if reply.stall_after_chunks is not None and i == reply.stall_after_chunks:
                self._wait(reply.stall_s)
                self.close_connection = True
                return "stall_mid_stream"
            lp = (
                self._logprob_items([tok], reply.logprobs[i : i + 1] if reply.logprobs else None)
                if want_lp
                else None
            )
            self._event(self._chunk(req, {"content": tok}, logprobs=lp))
        if reply.finish_reason is not None:
            self._event(self._chunk(req, {}, reply.finish_reason))
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage"))
        if include_usage and reply.usage_chunk:
            self._event(
                {
                    "id": f"chatcmpl-{req.n}",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": req.body.get("model", self.server.owner.model),
                    "choices": [],
                    "usage": self._usage(req, reply, len(tokens)),
                }
            )
        self._release()
        self._event("[DONE]")
        self._send_chunk(b"")
        return "ok"


class FaultServer:
    """A scripted chat-completions server on ``127.0.0.1`` in a background thread.

    Args:
        script: ``script(request) -> Reply | Fault | str`` (default: a fixed valid answer).
        latency: seconds every request waits before its first byte (the test
            benchmark's "model latency").
        model: the model id ``/v1/models`` lists.
        host / port: where to listen (port 0: an ephemeral port).

    Attributes:
        requests: every chat request in arrival order (:class:`Request`).
        outcomes: ``{n: "ok" | "status:429" | "reset" | "stall" | "client_gone" | ...}``.
        in_flight / max_in_flight: chat requests being served now / at most so far.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        latency: float = 0.0,
        model: str = "test-model",
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.script: Script = script or _default_script
        self.latency = float(latency)
        self.model = model
        self.host, self.port = host, int(port)
        self.requests: list[Request] = []
        self.outcomes: dict[int, str] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._released: set[int] = set()
        self._counter = itertools.count()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FaultServer:
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fault-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_stats(self) -> None:
        """Forget recorded requests and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.outcomes.clear()
            self.max_in_flight = self.in_flight

    def count(self, outcome: str | None = None) -> int:
        """Requests seen (with the given outcome, if any)."""
        with self._lock:
            if outcome is None:
                return len(self.requests)
            return sum(1 for o in self.outcomes.values() if o == outcome)

    # called from handler threads
    def _begin(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Request:
        with self._lock:
            req = Request(next(self._counter), path, body, headers)
            self.requests.append(req)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return req

    def _release(self, req: Request) -> None:
        with self._lock:
            if req.n not in self._released:
                self._released.add(req.n)
                self.in_flight -= 1

    def _end(self, req: Request, outcome: str) -> None:
        with self._lock:
            self.outcomes[req.n] = outcome


def _main(argv: list[str]) -> int:
    """Stand-alone mode with vLLM-compatible flags (see module docstring)."""
    import argparse
    import signal

    ap = argparse.ArgumentParser(description="ragen test chat-completions server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="test-model")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--startup-delay", type=float, default=0.0, help="seconds before listening")
    ap.add_argument("--answer", default="<think>ok</think><answer>Left</answer>")
    args, _unknown = ap.parse_known_args(argv)
    time.sleep(args.startup_delay)
    server = FaultServer(
        lambda r: Reply(content=args.answer),
        latency=args.latency,
        model=args.served_model_name or args.model,
        host=args.host,
        port=args.port,
    ).start()
    print(f"READY {server.base_url}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
