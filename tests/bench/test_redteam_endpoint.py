"""Issue 28, endpoint client: a hostile OpenAI-compatible server, one payload per case.

A real ``openai`` client (through :class:`OpenAIPolicy` and the bench runner) talks to a
real HTTP server on 127.0.0.1 that answers with whatever bytes and headers a case
scripts: a gzip bomb (the 16 MiB cap counted compressed bytes: 510 KiB expanded to
512 MiB), a 307 redirect to another origin (the prompt was re-posted there), and a
completion that echoes the ``Authorization`` header (the key landed in
``episodes.jsonl``, ``report.html`` and the site).  Each case failed before the fix.
"""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ragen_bench import redaction
from ragen_bench.console import print_error
from ragen_bench.leaderboard import add_run
from ragen_bench.report import write_run_report
from ragen_bench.results import RunDir
from ragen_bench.runner import RunRequest, start_run
from ragen_bench.site import build_site

Answer = tuple[int, dict[str, str], bytes]
FAST = dict(
    backoff_base=0.01,
    backoff_max=0.05,
    connect_timeout=2.0,
    read_timeout=5.0,
    total_timeout=20.0,
)


class RawServer:
    """An HTTP server on 127.0.0.1 whose answers come from ``script(path, headers, body)``;
    it records every request as ``(path, headers, body)``."""

    def __init__(self, script: Callable[[str, dict[str, str], bytes], Answer]):
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.requests.append((self.path, headers, body))
                status, extra, payload = script(self.path, headers, body)
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def make(script):
        servers.append(RawServer(script))
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


JSON = {"Content-Type": "application/json"}
GOOD = "<think>x</think><answer>Left</answer>"


def run(srv: RawServer, tmp_path: Path, run_id: str, episodes: int = 1, **opts: Any) -> dict:
    path = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=episodes,
            out=str(tmp_path),
            run_id=run_id,
            policy_options={"base_url": srv.base_url, "max_retries": 1, **FAST, **opts},
        )
    )
    return RunDir(path).read_episodes()


# ------------------------------------------------------------------- gzip bomb
def test_gzip_bomb_is_capped_on_decoded_bytes(serve, tmp_path: Path) -> None:
    """A valid completion of 64 MiB, gzip-compressed to ~64 KiB, against a 4 MiB cap."""
    bomb = gzip.compress(completion("<answer>Left</answer>" + "a" * (64 << 20)), 6)
    assert len(bomb) < 512 << 10
    srv = serve(lambda *_: (200, {**JSON, "Content-Encoding": "gzip"}, bomb))
    eps = run(srv, tmp_path, "bomb", max_response_bytes=4 << 20)
    (ep,) = eps.values()
    assert ep["status"] == "endpoint_error"
    assert ep["error"].startswith("response_too_large: response body over ")
    assert "after decompression" in ep["error"]
    assert len(srv.requests) == 1, "not retried"


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_small_compressed_answers_are_still_decoded(serve, tmp_path: Path, coding: str) -> None:
    body = completion(GOOD)
    packed = gzip.compress(body) if coding == "gzip" else zlib.compress(body)
    srv = serve(lambda *_: (200, {**JSON, "Content-Encoding": coding}, packed))
    (ep,) = run(srv, tmp_path, coding).values()
    assert ep["status"] != "endpoint_error", ep["error"]
    assert ep["turns"][0]["response"] == GOOD
    assert srv.requests[0][1]["accept-encoding"] == "gzip, deflate"


def test_unknown_content_encoding_is_refused(serve, tmp_path: Path) -> None:
    srv = serve(lambda *_: (200, {**JSON, "Content-Encoding": "br"}, b"\x00" * 64))
    (ep,) = run(srv, tmp_path, "br").values()
    assert ep["error"] == "refused_response: unsupported Content-Encoding 'br'"


# ------------------------------------------------------------------- redirects
@pytest.mark.parametrize("status", [307, 308])
def test_cross_origin_redirect_is_refused_and_the_prompt_stays(
    serve, tmp_path: Path, status: int
) -> None:
    other = serve(lambda *_: (200, JSON, completion(GOOD)))
    first = serve(
        lambda path, *_: (status, {"Location": other.base_url + "/chat/completions"}, b"")
    )
    (ep,) = run(first, tmp_path, f"r{status}").values()
    assert other.requests == [], "the prompt was re-posted to another origin"
    assert ep["status"] == "endpoint_error"
    assert ep["error"].startswith(f"refused_response: refused a {status} redirect from ")
    assert len(first.requests) == 1, "not retried"


def test_same_origin_redirect_is_followed(serve, tmp_path: Path) -> None:
    def script(path: str, headers: dict, body: bytes) -> Answer:
        if path.endswith("/old/chat/completions"):
            return 307, {"Location": "/v1/chat/completions"}, b""
        return 200, JSON, completion(GOOD)

    srv = serve(script)
    path = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=1,
            out=str(tmp_path),
            run_id="same",
            policy_options={"base_url": srv.base_url[:-3] + "/old", "max_retries": 0, **FAST},
        )
    )
    (ep,) = RunDir(path).read_episodes().values()
    assert ep["turns"][0]["response"] == GOOD
    assert [r[0] for r in srv.requests] == ["/old/chat/completions", "/v1/chat/completions"]


# ------------------------------------------------------------------- key echo
SECRET = "sk-redteam-28-Qm4vT9xLp2Wz7Ks"


def test_an_echoed_key_is_written_nowhere(serve, tmp_path: Path, monkeypatch) -> None:
    """The server puts the Authorization header into every completion; the key must not
    reach episodes.jsonl, run.json, summary.json, report.html, the leaderboard or the site."""
    monkeypatch.setenv("RAGEN_RT_KEY", SECRET)
    monkeypatch.setattr(redaction, "_SECRETS", ())

    def script(path: str, headers: dict, body: bytes) -> Answer:
        echo = f"{GOOD} (you sent Authorization: {headers['authorization']}, key {SECRET})"
        return 200, JSON, completion(echo)

    srv = serve(script)
    eps = run(srv, tmp_path / "runs", "echo", episodes=2, api_key_env="RAGEN_RT_KEY")
    assert srv.requests[0][1]["authorization"] == f"Bearer {SECRET}"  # the key was used
    assert all(
        "Authorization: Bearer ***, key ***" in e["turns"][0]["response"] for e in eps.values()
    )
    run_dir = tmp_path / "runs" / "echo"
    write_run_report(run_dir)
    board = tmp_path / "board.json"
    add_run(board, run_dir)
    build_site([board], tmp_path / "site", runs_roots=[tmp_path / "runs"], reports=True)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"episodes.jsonl", "run.json", "summary.json", "report.html", "index.html"} <= names
    assert len([p for p in files if p.suffix == ".html"]) >= 3
    for p in files:
        assert SECRET not in p.read_text(errors="replace"), p


def test_messages_are_redacted(monkeypatch) -> None:
    import io

    from rich.console import Console

    monkeypatch.setattr(redaction, "_SECRETS", ())
    assert redaction.register_secret(SECRET)
    assert not redaction.register_secret("short")
    buf = io.StringIO()
    print_error(
        Console(file=buf, width=300), f"server said {SECRET}; Authorization: Basic Zm9vOmJhcg=="
    )
    assert buf.getvalue().strip() == "error: server said ***; Authorization: Basic ***"
