"""Serve a local BM25 index over the retrieval-server protocol (Search-R1's and RAGEN's).

Usage::

    python -m ragen_envs.envs.searchqa.serve --port 8000                       # bundled country passages
    python -m ragen_envs.envs.searchqa.serve --port 8000 --corpus wiki.jsonl   # any corpus source spec
    python -m ragen_envs.envs.searchqa.serve --port 0                          # a free port (printed)

It listens on ``127.0.0.1`` (``--host`` to change) and answers

* ``POST /retrieve`` with a Search-R1 body ``{"queries": [...], "topk": k, "return_scores": b}``
  → ``{"result": [[{"document": {"id", "title", "text", "contents"}, "score": s}, ...], ...]}``
  (bare documents when ``return_scores`` is false, Search-R1's default), or with a
  RAGEN body ``{"query": q, "top_k": k}`` → ``{"query", "method": "bm25", "results":
  [{"id", "content", "score"}], "num_results"}`` (see :mod:`ragen_envs.envs.searchqa.retrieval`);
* ``GET /health`` → ``{"status": "healthy", "corpus_size": n, "index": "bm25"}``.

Malformed requests get HTTP 400 with ``{"error": "..."}``; bodies over 1 MiB get 413.
The first line on stdout is ``Serving <n> documents on http://<host>:<port>/retrieve``.
Uses only the standard library's ``http.server`` (threaded) and ``bm25s`` (extra ``search``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from .retrieval import BM25Retriever, local_bm25_retriever

__all__ = ["MAX_REQUEST_BYTES", "handle_retrieve", "main", "make_server", "serve_in_thread"]

#: Largest request body accepted (bytes).
MAX_REQUEST_BYTES = 1 << 20
#: Largest ``topk`` a request may ask for.
MAX_TOPK = 1000


class RequestError(ValueError):
    """A malformed retrieval request (answered with HTTP 400)."""


def _topk(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOPK:
        raise RequestError(f"topk must be an integer in [1, {MAX_TOPK}], got {value!r}")
    return value


def handle_retrieve(retriever: BM25Retriever, body: Any, default_topk: int) -> dict[str, Any]:
    """The response to one ``/retrieve`` request body (either protocol).

    Raises:
        RequestError: the body is neither a Search-R1 nor a RAGEN request.
    """
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    if "queries" in body:
        queries = body["queries"]
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise RequestError("'queries' must be a list of strings")
        k = _topk(body.get("topk"), default_topk)
        with_scores = bool(body.get("return_scores", False))
        out: list[list[dict[str, Any]]] = []
        for hits in retriever.retrieve(queries, k):
            if with_scores:
                out.append([{"document": h.document.as_record(), "score": h.score} for h in hits])
            else:
                out.append([h.document.as_record() for h in hits])
        return {"result": out}
    if "query" in body:
        query = body["query"]
        if not isinstance(query, str):
            raise RequestError("'query' must be a string")
        k = _topk(body.get("top_k", body.get("k")), default_topk)
        hits = retriever.retrieve([query], k)[0]
        results = [
            {"id": h.document.id, "content": h.document.contents, "score": h.score} for h in hits
        ]
        return {"query": query, "method": "bm25", "results": results, "num_results": len(results)}
    raise RequestError(
        "expected {'queries': [...], 'topk': k} (Search-R1) or {'query': q, 'top_k': k} (RAGEN)"
    )


def make_server(
    retriever: BM25Retriever,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    default_topk: int = 3,
    verbose: bool = False,
) -> ThreadingHTTPServer:
    """A threaded HTTP server for ``retriever`` (not started; call ``serve_forever``).

    Args:
        default_topk: ``topk`` when a request names none (Search-R1's server default: 3).
        verbose: log each request to stderr.
    """
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server_version = "ragen-retrieval/0"

        def _send(self, status: int, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path.rstrip("/") == "/health":
                self._send(
                    200,
                    {"status": "healthy", "corpus_size": len(retriever.documents), "index": "bm25"},
                )
            else:
                self._send(
                    404,
                    {"error": f"no such endpoint {self.path}; use POST /retrieve or GET /health"},
                )

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            if self.path.rstrip("/") != "/retrieve":
                self._send(404, {"error": f"no such endpoint {self.path}; use POST /retrieve"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._send(411, {"error": "a Content-Length header is required"})
                return
            if length > MAX_REQUEST_BYTES:
                self._send(413, {"error": f"request body over {MAX_REQUEST_BYTES} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                with lock:
                    payload = handle_retrieve(retriever, body, default_topk)
            except (ValueError, UnicodeDecodeError) as exc:  # RequestError and JSON errors
                self._send(400, {"error": str(exc)})
                return
            self._send(200, payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server API
            if verbose:
                super().log_message(format, *args)

    return ThreadingHTTPServer((host, port), Handler)


def _retrieve_url(server: ThreadingHTTPServer) -> str:
    """``http://HOST:PORT/retrieve`` of a bound server (an AF_INET address is ``(host, port)``)."""
    host, port = cast(tuple[str, int], server.server_address[:2])
    return f"http://{host}:{port}/retrieve"


def serve_in_thread(
    retriever: BM25Retriever, host: str = "127.0.0.1", port: int = 0, **kwargs: Any
) -> tuple[ThreadingHTTPServer, str]:
    """Start :func:`make_server` in a daemon thread; return ``(server, retrieve_url)``.

    Stop it with ``server.shutdown(); server.server_close()``.  ``port=0`` picks a free port.
    """
    server = make_server(retriever, host, port, **kwargs)
    threading.Thread(target=server.serve_forever, name="ragen-retrieval", daemon=True).start()
    return server, _retrieve_url(server)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m ragen_envs.envs.searchqa.serve",
        description="Serve a BM25 index over the Search-R1 / RAGEN retrieval protocol.",
    )
    parser.add_argument(
        "--corpus",
        default="bundled:searchqa-countries-corpus",
        help="corpus source spec: bundled:<name>, a JSONL/JSON/parquet file or directory",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    parser.add_argument(
        "--topk", type=int, default=3, help="topk when a request names none (default 3)"
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    retriever = local_bm25_retriever(args.corpus)
    server = make_server(
        retriever, args.host, args.port, default_topk=args.topk, verbose=args.verbose
    )
    print(
        f"Serving {len(retriever.documents)} documents on {_retrieve_url(server)} "
        f"(index built in {retriever.build_seconds:.2f} s)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
