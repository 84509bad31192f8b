"""The Kimina Lean Server back-end against a real HTTP server on 127.0.0.1: the request it
sends, retries of transient failures, timeouts, keys, and failures that end the episode
with a clear ``env_error`` (never a hang).  The server answers from Lean's recorded
answers (``lean_fakes.KiminaServer``)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
from gymnasium.error import ResetNeeded

import ragen_envs

from .lean_support import PROOF, KiminaServer, lean_env

pytest.importorskip("httpx", reason="the Kimina back-end needs httpx (the 'lean' extra)")


@pytest.fixture
def server() -> Iterator[KiminaServer]:
    with KiminaServer() as s:
        yield s


def _checks(server: KiminaServer) -> list[dict]:
    return [body for path, body in server.requests if path == "/api/check"]


def test_kimina_request_shape(server: KiminaServer) -> None:
    env = lean_env(server.url, lean_timeout_s=7)
    env.reset(options={"theorem": "complex_and"})
    env.step(PROOF[0])
    env.step(PROOF[1])
    paths = [p for p, _ in server.requests]
    assert paths == [
        "/health",
        "/api/check",
        "/api/check",
        "/api/check",
    ]  # health once, the statement, 2 tactics
    body = _checks(server)[-1]
    assert (
        set(body) == {"snippets", "timeout", "debug", "reuse", "infotree"} and body["timeout"] == 7
    )
    (snippet,) = body["snippets"]
    assert snippet["code"] == (
        "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by\n"
        "  apply And.intro\n  exact h1.left\n  all_goals sorry\n"
    )
    env.close()


def test_kimina_429_and_500_are_retried_then_recorded(server: KiminaServer) -> None:
    env = lean_env(server.url, max_retries=2)
    env.reset(options={"theorem": "complex_and"})
    server.fail_first = [429, 500]  # the health probe gets both and answers on its third try
    _, reward, term, trunc, info = env.step(PROOF[0])
    assert (reward, term, trunc) == (pytest.approx(0.9), False, False)
    assert info["tactic_outcome"] == "accepted"
    server.fail_first = [503, 429]
    _, reward, _, _, info = env.step(PROOF[1])
    assert reward == pytest.approx(0.9) and info["verifier_attempts"] == 3
    ragen_envs.validate_info("lean", info)
    env.close()


def test_kimina_persistent_500_is_an_env_error(server: KiminaServer) -> None:
    env = lean_env(server.url, max_retries=1)
    env.reset(options={"theorem": "complex_and"})
    server.fail_first = [500] * 10
    obs, reward, term, trunc, info = env.step(PROOF[0])
    assert (reward, term, trunc, info["status"]) == (0.0, False, True, "env_error")
    assert info["verifier_error"] == (
        f"Kimina Lean Server {server.url}/health: HTTP 500 "
        '{"detail": "REPL failure"} (after 2 tries)'
    )
    assert (
        "\n" not in info["verifier_error"]
        and f"Verifier error: Kimina Lean Server {server.url}" in obs
    )
    with pytest.raises(ResetNeeded, match="env_error"):
        env.step(PROOF[0])
    server.fail_first = []
    env.reset(options={"theorem": "complex_and"})  # a new episode works again
    assert env.step(PROOF[0])[4]["tactic_outcome"] == "accepted"
    env.close()


def test_kimina_lean_timeout_result(server: KiminaServer) -> None:
    env = lean_env(server.url, lean_timeout_s=5)
    env.reset(options={"theorem": "complex_and"})
    server.timeout_tactics = {"nlinarith"}
    _, reward, term, trunc, info = env.step("nlinarith")
    assert (
        reward == pytest.approx(-1.1)
        and info["tactic_outcome"] == "timeout"
        and not (term or trunc)
    )
    assert "Lean REPL command timed out in 5.0 seconds" in env.render()
    env.close()


@pytest.mark.timeout(60)
def test_kimina_server_that_does_not_answer_in_time(server: KiminaServer) -> None:
    env = lean_env(server.url, request_timeout_s=0.3, max_retries=1)
    env.reset(options={"theorem": "complex_and"})
    env.step(PROOF[0])
    server.delay_s = 2.0
    _, reward, _, trunc, info = env.step(PROOF[1])
    assert info["status"] == "env_error" and trunc and reward == 0.0
    assert info["verifier_error"] == (
        f"Kimina Lean Server {server.url}/api/check: no answer within 0.3 s "
        "(ReadTimeout) (after 2 tries)"
    )
    env.close()


def test_kimina_unreachable_server_is_a_clear_env_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}"
    env = lean_env(url, max_retries=2)
    env.reset(options={"theorem": "complex_and"})
    obs, reward, term, trunc, info = env.step(PROOF[0])
    assert (reward, term, trunc, info["status"], info["tactic_outcome"]) == (
        0.0,
        False,
        True,
        "env_error",
        "env_error",
    )
    msg = info["verifier_error"]
    assert msg.startswith(
        f"Kimina Lean Server {url}/health: cannot connect (ConnectError"
    ) and msg.endswith("(after 3 tries)")
    assert env.status is ragen_envs.EpisodeStatus.ENV_ERROR
    env.close()


def test_kimina_bearer_key(server: KiminaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.api_key = "s3cret"
    env = lean_env(server.url)
    env.reset(options={"theorem": "complex_and"})
    info = env.step(PROOF[0])[4]
    assert info["status"] == "env_error"
    assert info["verifier_error"] == (
        f"Kimina Lean Server {server.url}/health refused the request (HTTP 401 "
        '{"detail": "Missing API key"}); set $LEAN_SERVER_API_KEY to the server\'s key'
    )
    monkeypatch.setenv("LEAN_SERVER_API_KEY", "s3cret")
    env = lean_env(server.url)
    env.reset(options={"theorem": "complex_and"})
    assert env.step(PROOF[0])[4]["tactic_outcome"] == "accepted"
    env.close()


def test_kimina_without_httpx_is_a_clear_env_error(
    server: KiminaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # as in an install without the 'lean' extra
    env = lean_env(server.url)
    env.reset(options={"theorem": "complex_and"})
    info = env.step(PROOF[0])[4]
    assert info["status"] == "env_error"
    assert "install it with pip install 'ragen-envs[lean]'" in info["verifier_error"]
