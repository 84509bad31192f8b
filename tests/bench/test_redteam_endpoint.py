"""Endpoint client: a hostile OpenAI-compatible server, one payload per case.

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

#: ``(status, headers, body)``; a body that is an iterator of bytes is streamed (no
#: ``Content-Length``, connection closed after it) until it ends or the client goes away.
Answer = tuple[int, dict[str, str], "bytes | Iterator[bytes]"]
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
                if isinstance(payload, bytes):
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for piece in payload:
                        self.wfile.write(piece)
                        self.wfile.flush()
                except OSError:  # the client went away
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
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


# ------------------------------------------------------------- lone surrogates
def sse(*events: dict) -> bytes:
    """A server-sent event stream of ``events`` (chat.completion.chunk objects), then [DONE]."""
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def chunk(content: str | None = None, finish: str | None = None) -> dict:
    delta = {} if content is None else {"content": content}
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


SSE = {"Content-Type": "text/event-stream"}


def session_counters(tmp_path: Path, run_id: str) -> dict:
    (session,) = RunDir(tmp_path / run_id).read_run()["sessions"]
    return session["endpoint"]


def test_an_emoji_split_over_two_stream_chunks_is_joined(serve, tmp_path: Path) -> None:
    """``"\\ud83d"`` then ``"\\ude00"`` in two chunks: ``ragen-bench run`` exited 2 with 0 of 16
    episodes written ("surrogates not allowed")."""
    stream = sse(
        chunk("<think>happy \ud83d"),
        chunk("\ude00</think><answer>Left</answer>"),
        chunk(None, "stop"),
    )
    assert b"\\ud83d" in stream and b"\\ude00" in stream  # JSON escapes, as servers send them
    srv = serve(lambda *_: (200, SSE, stream))
    eps = run(srv, tmp_path, "emoji", episodes=16, stream=True)
    assert len(eps) == 16
    assert all(e["status"] != "endpoint_error" for e in eps.values())
    assert {e["turns"][0]["response"] for e in eps.values()} == {
        "<think>happy \U0001f600</think><answer>Left</answer>"
    }
    counters = session_counters(tmp_path, "emoji")
    assert (counters["surrogates_joined"], counters["surrogates_replaced"]) == (16, 0)


@pytest.mark.parametrize(
    "stream, parts",
    [
        (False, ["<answer>Left</answer> \ud83d"]),
        (False, ["\ude00<answer>Left</answer>"]),
        (True, ["<answer>Left</answer>", " \udbff"]),
        (True, ["\udc00", "<answer>Left</answer>"]),
    ],
)
def test_a_lone_surrogate_is_replaced_and_counted(
    serve, tmp_path: Path, stream: bool, parts: list[str]
) -> None:
    if stream:
        srv = serve(lambda *_: (200, SSE, sse(*(chunk(p) for p in parts), chunk(None, "stop"))))
    else:
        srv = serve(lambda *_: (200, JSON, completion("".join(parts))))
    eps = run(srv, tmp_path, "lone", episodes=2, stream=stream)
    assert len(eps) == 2
    expected = "".join(parts)
    expected = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in expected)
    assert {e["turns"][0]["response"] for e in eps.values()} == {expected}
    counters = session_counters(tmp_path, "lone")
    assert (counters["surrogates_joined"], counters["surrogates_replaced"]) == (0, 2)
    (tmp_path / "lone" / "episodes.jsonl").read_text(encoding="utf-8")  # valid UTF-8


def test_a_lone_surrogate_in_an_error_message_is_written(serve, tmp_path: Path) -> None:
    """A 400 whose message holds a lone surrogate: the episode's error is still written."""
    body = json.dumps({"error": {"message": "bad \ud83d request", "code": 400}}).encode()
    srv = serve(lambda *_: (400, JSON, body))
    (ep,) = run(srv, tmp_path, "err").values()
    assert ep["status"] == "endpoint_error"
    assert "bad \ufffd request" in ep["error"]


# ------------------------------------------------------------ URL credentials
URL_USER_KEY = "redteam-user-key-Hq7Zt2"
URL_QUERY_KEY = "redteam-query-key-Vb8Lm4"


def test_credentials_in_the_base_url_are_written_nowhere(
    serve, tmp_path: Path, monkeypatch
) -> None:
    """``--base-url http://u:KEY@host/v1?api_key=KEY2`` put both keys in run.json
    (``policy_options.base_url``), while ``policy.base_urls`` beside it was redacted."""
    from ragen_bench.runner import resume_run

    monkeypatch.setattr(redaction, "_SECRETS", ())

    def script(path: str, headers: dict, body: bytes) -> Answer:
        return 200, JSON, completion(f"{GOOD} (I saw {path} and {URL_USER_KEY})")

    srv = serve(script)
    host = srv.base_url.removeprefix("http://")
    url = f"http://u:{URL_USER_KEY}@{host}?api_key={URL_QUERY_KEY}"
    path = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=2,
            out=str(tmp_path / "runs"),
            run_id="creds",
            policy_options={"base_url": url, "max_retries": 0, **FAST},
        )
    )
    assert srv.requests, "the server was reached"
    meta = RunDir(path).read_run()
    assert meta["policy_options"]["base_url"] == f"http://***@{host}?api_key=***"
    assert meta["policy"]["base_urls"] == [srv.base_url]
    eps = RunDir(path).read_episodes()
    assert all("***" in e["turns"][0]["response"] for e in eps.values())
    write_run_report(path)
    for p in (tmp_path / "runs").rglob("*"):
        if p.is_file():
            text = p.read_text(errors="replace")
            assert URL_USER_KEY not in text and URL_QUERY_KEY not in text, p
    # The masked URL read back by --resume is refused in one line, not sent "***".
    (tmp_path / "runs" / "creds" / "episodes.jsonl").write_text("")
    with pytest.raises(ValueError, match="masked as \\*\\*\\*.*give --base-url"):
        resume_run(path, check=False)


def test_url_credentials_are_masked_in_any_written_text() -> None:
    text = 'GET http://u:KEY1@h:8/v1?x=1&api_key=KEY2&token=KEY3#f said "https://a:b@c/?key=KEY4"'
    assert redaction.redact(text) == (
        'GET http://***@h:8/v1?x=1&api_key=***&token=***#f said "https://***@c/?key=***"'
    )
    code = "sorted(xs, key=len) at user@example.com; if (a&&key==b) q?token=1"
    assert redaction.redact(code) == code


# -------------------------------------------------------------------- usage
@pytest.mark.parametrize("value", [-5, 1e30, 10**9 + 1, 2.5])
def test_impossible_usage_counts_are_recorded_as_missing(
    serve, tmp_path: Path, value: float
) -> None:
    """Usage of -5 or 1e30 tokens was stored and reached the summaries."""
    answer = json.loads(completion(GOOD))
    answer["usage"] = {"prompt_tokens": value, "completion_tokens": 7, "total_tokens": 7}
    srv = serve(lambda *_: (200, JSON, json.dumps(answer).encode()))
    (ep,) = run(srv, tmp_path, "usage").values()
    turn = ep["turns"][0]
    assert turn["usage"] == {"prompt_tokens": 0, "completion_tokens": 7}
    counters = session_counters(tmp_path, "usage")
    assert counters["usage_invalid"] == 1
    assert (counters["prompt_tokens"], counters["completion_tokens"]) == (0, 7)


# -------------------------------------------------------- slow-drip servers
def drip(gap: float, stopped: threading.Event) -> Iterator[bytes]:
    """One empty-content stream chunk every ``gap`` seconds until ``stopped``: never idle
    long enough for ``idle_timeout``, never finished."""
    event = f"data: {json.dumps(chunk(''))}\n\n".encode()
    while not stopped.wait(gap):
        yield event


def test_a_slow_drip_server_is_bounded_by_the_episode_budget(serve, tmp_path: Path) -> None:
    """A chunk every 0.1 s never trips idle_timeout; each attempt then ran to total_timeout
    and was retried max_retries times (900 s x 6 with the defaults).  The episode budget
    ends the episode at its first attempt instead."""
    from ragen_bench.policies.openai_api import EPISODE_TIMEOUT, OpenAIPolicy

    stopped = threading.Event()
    srv = serve(lambda *_: (200, SSE, drip(0.1, stopped)))
    try:
        opts = {**FAST, "idle_timeout": 1.0, "total_timeout": 30.0, "max_retries": 5}
        eps = run(srv, tmp_path, "drip", stream=True, episode_timeout=1.5, **opts)
    finally:
        stopped.set()
    (ep,) = eps.values()
    assert ep["status"] == "endpoint_error"
    assert ep["error"].startswith(
        "episode_timeout: the episode's wall-clock budget of 1.5s ran out"
    )
    assert len(srv.requests) == 1, "not retried past the budget"
    counters = session_counters(tmp_path, "drip")
    assert counters["failed"] == {"episode_timeout": 1}
    # The default bounds an episode to minutes, whatever total_timeout and max_retries are.
    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1")
    assert policy.episode_timeout == EPISODE_TIMEOUT == 600.0
    assert policy.describe()["timeouts_s"]["episode"] == 600.0


def test_the_episode_budget_starts_again_at_each_episode_first_turn() -> None:
    from ragen_bench.policies.openai_api import OpenAIPolicy
    from ragen_bench.types import PolicyRequest

    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", episode_timeout=100.0)
    first = policy._deadline(PolicyRequest(messages=[], episode_index=3, turn=1))
    later = policy._deadline(PolicyRequest(messages=[], episode_index=3, turn=2))
    assert later == first  # the same episode: the same deadline
    policy._episode_start[3] -= 1000.0  # as if turn 1 was long ago
    again = policy._deadline(PolicyRequest(messages=[], episode_index=3, turn=1))
    assert again > first - 1.0  # a replayed episode starts a new budget
    assert (
        OpenAIPolicy("m", base_url="http://h/v1", episode_timeout=0)._deadline(
            PolicyRequest(messages=[])
        )
        is None
    )
