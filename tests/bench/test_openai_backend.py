"""The ``openai`` / ``vllm-server`` / ``vllm`` back-ends against a real HTTP server with faults.

Every test talks to :class:`tests.helpers.fault_server.FaultServer` (a real chat-completions server
on 127.0.0.1) through the official ``openai`` client.  The fault table:

=========================================  ==============================================  ===========================================
fault                                      required behaviour                              test
=========================================  ==============================================  ===========================================
content null + reasoning_content           no exception, invalid answer (format penalty)   test_content_null_is_an_invalid_answer
  ... with --answer-from-reasoning         answer parsed from reasoning, counted           test_answer_from_reasoning_is_parsed_and_counted
finish_reason length                       truncated, format penalty, exactly one request  test_finish_length_is_truncated_and_not_retried
400 context too long (vLLM / OpenAI)       context_limit, rewards kept, not retried        test_context_too_long_ends_episode_with_rewards_so_far
stream, last chunk choices [] + usage      text and usage kept                             test_usage_only_last_chunk_keeps_text_and_usage
stalled stream                             idle timeout aborts, bounded retries            test_stalled_stream_is_aborted_and_retried_boundedly
429 Retry-After / 500 / connection reset   retried (Retry-After honoured), then recorded   test_transient_faults_are_retried, test_persistent_faults_are_recorded_after_bounded_retries, test_retry_after_is_honoured
20% faults over 200 episodes               nothing lost; --resume completes                test_nothing_lost_under_20_percent_faults_then_resume_completes
=========================================  ==============================================  ===========================================
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ragen_bench.endpoints import EndpointsError, load_endpoints
from ragen_bench.policies import make_policy
from ragen_bench.policies.openai_api import (
    OpenAIPolicy,
    RetryPolicy,
    is_context_length_error,
    parse_retry_after,
)
from ragen_bench.results import RunDir
from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs
from ragen_bench.runner import RunRequest, resume_run, start_run
from ragen_bench.types import PolicyRequest, SamplingParams
from ragen_bench.validate import validate_file
from tests.helpers.fault_server import (
    FaultServer,
    Reply,
    context_too_long,
    http_error,
    rate_limited,
    reset,
    server_error,
    stall,
)

REPO = Path(__file__).resolve().parents[2]
ARMS = re.compile(r"in front of you: (.+?) and (.+?)\. Which")
FAST = dict(
    backoff_base=0.01,
    backoff_max=0.05,
    connect_timeout=2.0,
    read_timeout=5.0,
    idle_timeout=5.0,
    total_timeout=20.0,
)


def bandit_answer(req) -> str:
    """A valid Bandit answer in think mode: the first arm named in the observation."""
    m = ARMS.search(req.last_user)
    return f"<think>pick</think><answer>{m.group(1) if m else 'none'}</answer>"


def turn_of(req) -> int:
    """Turn number from the user message (``Turn k of N.``)."""
    m = re.search(r"Turn (\d+) of", req.last_user)
    return int(m.group(1)) if m else 0


def policy_for(server: FaultServer | list[FaultServer], **kw) -> OpenAIPolicy:
    servers = server if isinstance(server, list) else [server]
    opts = {**FAST, **kw}
    return OpenAIPolicy("test-model", base_url=[s.base_url for s in servers], jitter_seed=0, **opts)


def play(policy, env_id: str = "ragen/Bandit-v0", episodes: int = 1, **cfg):
    """Play episodes in one event loop and close the policy's connections."""
    cfg.setdefault("max_turns", 1 if "Bandit" in env_id else 5)
    cfg.setdefault("max_actions_per_turn", 1)
    engine = RolloutEngine(policy, RolloutConfig(**cfg))

    async def go():
        try:
            return await engine.arun(make_specs(env_id, episodes=episodes))
        finally:
            await policy.aclose()

    return asyncio.run(go())


def one(policy, messages=None, params: SamplingParams | None = None):
    """One generation through the policy (outside the rollout engine)."""
    req = PolicyRequest(messages=messages or [{"role": "user", "content": "hi"}])

    async def go():
        try:
            return (await policy.generate([req], params or SamplingParams(max_new_tokens=32)))[0]
        finally:
            await policy.aclose()

    return asyncio.run(go())


@pytest.fixture
def server():
    servers: list[FaultServer] = []

    def make(script=None, **kw) -> FaultServer:
        s = FaultServer(script, **kw).start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


# --------------------------------------------------------------- content: null
@STREAM
def test_content_null_is_an_invalid_answer(server, stream: bool) -> None:
    srv = server(
        lambda r: Reply(
            content=None, reasoning_content="The safe arm. <answer>Government Bond</answer>"
        )
    )
    [ep] = play(policy_for(srv, stream=stream))
    turn = ep.turns[0]
    assert ep.status != "endpoint_error" and ep.error is None
    assert turn.response == "" and turn.parsed["error"] == "no_answer"
    assert turn.format_penalty == pytest.approx(-0.1) and turn.actions == []
    assert turn.reasoning == "The safe arm. <answer>Government Bond</answer>"
    assert "answer_from_reasoning" not in turn.extra


@STREAM
def test_answer_from_reasoning_is_parsed_and_counted(server, tmp_path: Path, stream: bool) -> None:
    def script(req):
        arm = ARMS.search(req.last_user).group(1)
        return Reply(content=None, reasoning_content=f"I will pull {arm}. <answer>{arm}</answer>")

    srv = server(script)
    run = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=6,
            out=str(tmp_path),
            run_id="r",
            rollout={"answer_from_reasoning": True, "enable_think": False},
            policy_options={"base_url": srv.base_url, "stream": stream, **FAST},
        )
    )
    eps = RunDir(run).read_episodes()
    assert len(eps) == 6
    for e in eps.values():
        [t] = e["turns"]
        assert t["parsed"]["error"] is None and len(t["actions"]) == 1
        assert t["extra"]["answer_from_reasoning"] is True and t["response"] == ""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["answer_from_reasoning_turns"]["mean"] == 1.0
    assert summary["metrics"]["format_valid_rate"]["mean"] == 1.0
    assert summary["policy"]["requests"]["reasoning_only"] == 6
    validate_file(run / "summary.json")
    validate_file(run / "episodes.jsonl")


# ------------------------------------------------------------- finish: length
@STREAM
def test_finish_length_is_truncated_and_not_retried(server, stream: bool) -> None:
    srv = server(
        lambda r: Reply(
            content="<think>I am still thinking about", finish_reason="length", completion_tokens=32
        )
    )
    [ep] = play(policy_for(srv, stream=stream, max_retries=5))
    assert srv.count() == 1, "a length-truncated answer must not be retried"
    [turn] = ep.turns
    assert turn.finish_reason == "length" and turn.parsed["error"] == "truncated"
    assert turn.format_penalty == pytest.approx(-0.1) and turn.reward == pytest.approx(-0.1)
    assert turn.completion_tokens == 32


# ------------------------------------------------------ 400 context too long
@pytest.mark.parametrize("shape", ["vllm", "vllm-legacy", "openai"])
@STREAM
def test_context_too_long_ends_episode_with_rewards_so_far(
    server, tmp_path: Path, shape: str, stream: bool
) -> None:
    def script(req):
        return (
            context_too_long(shape)
            if turn_of(req) == 3
            else Reply(content="<think>go</think><answer>Up</answer>")
        )

    srv = server(script)
    policy = policy_for(srv, stream=stream, max_retries=4)
    run = start_run(
        RunRequest(
            env_id="ragen/Sokoban-v0",
            backend="openai",
            model="test-model",
            episodes=1,
            out=str(tmp_path),
            run_id="ctx",
            rollout={"max_turns": 5},
        ),
        policy=policy,
    )
    [ep] = RunDir(run).read_episodes().values()
    assert srv.count() == 3, "the identical too-long request must not be retried"
    assert ep["status"] == "context_limit" and ep["error"] is None
    assert len(ep["turns"]) == 2
    rewards = [r for t in ep["turns"] for r in t["step_rewards"]]
    assert (
        len(rewards) == 2
        and ep["env_return"] == pytest.approx(sum(rewards))
        and ep["env_return"] != 0
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"]["scored"] == 1 and summary["counts"] == {"context_limit": 1}
    assert summary["policy"]["requests"]["failed"] == {"context_length": 1}
    assert summary["policy"]["requests"]["retries"] == 0


def test_context_length_detection_shapes() -> None:
    from tests.helpers.fault_server import (
        OPENAI_CONTEXT_ERROR,
        VLLM_CONTEXT_ERROR,
        VLLM_LEGACY_CONTEXT_ERROR,
    )

    for body in (
        VLLM_CONTEXT_ERROR["error"],
        VLLM_LEGACY_CONTEXT_ERROR,
        OPENAI_CONTEXT_ERROR["error"],
    ):
        assert is_context_length_error(400, "Error code: 400", body)
    assert is_context_length_error(
        400, "Input length (3000) exceeds model's maximum context length (2048)."
    )
    assert not is_context_length_error(
        400, "Error code: 400 - temperature must be >= 0", {"message": "bad"}
    )
    assert not is_context_length_error(500, "maximum context length", None)


# ---------------------------------------------------------- streaming usage
def test_usage_only_last_chunk_keeps_text_and_usage(server) -> None:
    text = "<think>a fairly long answer</think><answer>Left</answer>"
    srv = server(
        lambda r: Reply(content=text, prompt_tokens=123, completion_tokens=17, chunk_chars=3)
    )
    gen = one(policy_for(srv, stream=True))
    assert gen.text == text and gen.finish_reason == "stop"
    assert (gen.prompt_tokens, gen.completion_tokens) == (123, 17)
    assert srv.requests[0].body["stream_options"] == {"include_usage": True}
    assert "usage_missing" not in gen.extra
    # A server that ignores include_usage: the text survives, usage is flagged missing.
    srv2 = server(lambda r: Reply(content=text, usage_chunk=False))
    gen2 = one(policy_for(srv2, stream=True))
    assert gen2.text == text and gen2.completion_tokens == 0 and gen2.extra["usage_missing"] is True


# ------------------------------------------------------------ stalled streams
def test_stalled_stream_is_aborted_and_retried_boundedly(server) -> None:
    srv = server(
        lambda r: Reply(
            content="<think>x</think><answer>Left</answer>", stall_after_chunks=2, stall_s=30
        )
    )
    gen = one(policy_for(srv, stream=True, idle_timeout=0.3, max_retries=2))
    assert srv.count() == 3, "first attempt + 2 retries, then stop"
    assert gen.finish_reason == "error" and gen.extra["error_kind"] == "stream_idle"
    assert gen.extra["retries"] == 2 and "after 2 retries" in gen.extra["error"]
    assert all(o == "client_gone" or o.startswith("stall") for o in srv.outcomes.values())
    # A stall that happens once: the retry succeeds and is counted.
    srv2 = server(
        lambda r: Reply(
            content="<think>x</think><answer>Left</answer>",
            stall_after_chunks=1 if r.n == 0 else None,
        )
    )
    gen2 = one(policy_for(srv2, stream=True, idle_timeout=0.3, max_retries=2))
    assert gen2.text == "<think>x</think><answer>Left</answer>"
    assert gen2.extra["retries"] == 1 and gen2.extra["faults"] == ["stream_idle"]


def test_stall_before_any_byte_times_out_and_is_retried(server) -> None:
    srv = server(lambda r: stall(30) if r.n == 0 else Reply(content="ok"))
    gen = one(policy_for(srv, read_timeout=0.3, max_retries=1))
    assert gen.text == "ok" and gen.extra["faults"] == ["timeout"] and srv.count() == 2


# ------------------------------------------------- 429 / 500 / connection reset
FAULTS = {
    "429": (lambda: rate_limited(0), "rate_limit"),
    "500": (lambda: server_error(500), "server_error"),
    "503": (lambda: server_error(503), "server_error"),
    "reset": (reset, "connection"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@STREAM
def test_transient_faults_are_retried(server, fault: str, stream: bool) -> None:
    make, kind = FAULTS[fault]
    srv = server(
        lambda r: make() if r.n < 2 else Reply(content="<think>x</think><answer>Left</answer>")
    )
    policy = policy_for(srv, stream=stream, max_retries=3)
    gen = one(policy)
    assert gen.finish_reason == "stop" and gen.text.endswith("<answer>Left</answer>")
    assert srv.count() == 3 and gen.extra["retries"] == 2 and gen.extra["faults"] == [kind, kind]
    assert policy.stats()["retried"] == {kind: 2} and policy.stats()["attempts"] == 3


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_persistent_faults_are_recorded_after_bounded_retries(server, fault: str) -> None:
    make, kind = FAULTS[fault]
    srv = server(lambda r: make())
    [ep] = play(policy_for(srv, max_retries=2))
    assert srv.count() == 3
    assert ep.status == "endpoint_error" and ep.turns == []
    assert ep.error.startswith(f"{kind}: ") and "after 2 retries" in ep.error


def test_mid_stream_reset_and_bad_json_are_retried(server) -> None:
    srv = server(
        lambda r: (
            Reply(content="<answer>Left</answer>", reset_after_chunks=2)
            if r.n == 0
            else Reply(content="<answer>Left</answer>")
        )
    )
    gen = one(policy_for(srv, stream=True, max_retries=1))
    assert gen.text == "<answer>Left</answer>" and gen.extra["faults"] == ["connection"]
    srv2 = server(
        lambda r: http_error(200, body="this is not json") if r.n == 0 else Reply(content="fine")
    )
    gen2 = one(policy_for(srv2, max_retries=1))
    assert gen2.text == "fine" and gen2.extra["faults"] == ["invalid_response"]


def test_retry_after_is_honoured(server) -> None:
    srv = server(lambda r: rate_limited(0.6) if r.n == 0 else Reply(content="ok"))
    t0 = time.monotonic()
    gen = one(policy_for(srv, max_retries=1, backoff_base=0.001))
    assert gen.text == "ok" and gen.extra["retries"] == 1
    assert (
        time.monotonic() - t0 >= 0.6
    )  # a lower bound: the client must not come back before Retry-After


def test_backoff_and_retry_after_rules() -> None:
    import random

    rp = RetryPolicy(max_retries=5, backoff_base=1.0, backoff_max=8.0, retry_after_max=60.0)
    rng = random.Random(0)
    for k, cap in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (6, 8.0)]:
        for _ in range(50):
            d = rp.delay(k, None, rng)
            assert cap / 2 <= d <= cap
    assert rp.delay(0, 30.0, rng) == 30.0 and rp.delay(0, 500.0, rng) == 60.0
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


def test_client_errors_are_not_retried(server) -> None:
    for status, kind in [(401, "auth"), (404, "not_found"), (400, "bad_request")]:
        srv = server(lambda r, s=status: http_error(s, "nope"))
        gen = one(policy_for(srv, max_retries=3))
        assert (
            srv.count() == 1 and gen.extra["error_kind"] == kind and gen.extra["status"] == status
        )


# ------------------------------------------------------------- concurrency
def test_concurrency_bound_is_respected(server) -> None:
    srv = server(bandit_answer, latency=0.05)
    eps = play(policy_for(srv, concurrency=4), episodes=24)
    assert all(e.status != "endpoint_error" for e in eps)
    assert srv.max_in_flight == 4, (
        "at most --concurrency requests in flight, and the bound is reached"
    )
    srv_many = server(bandit_answer, latency=0.05)
    play(policy_for(srv_many, concurrency=16), episodes=48)
    assert srv_many.max_in_flight == 16


def test_several_base_urls_are_load_balanced_and_fail_over(server) -> None:
    a, b = server(bandit_answer, latency=0.02), server(bandit_answer, latency=0.02)
    eps = play(policy_for([a, b], concurrency=8), episodes=40)
    assert all(e.success or e.status != "endpoint_error" for e in eps)
    assert a.count() + b.count() == 40 and min(a.count(), b.count()) >= 12
    assert a.max_in_flight <= 5 and b.max_in_flight <= 5  # least outstanding: 8 split about evenly
    dead, alive = server(lambda r: reset()), server(bandit_answer)
    eps = play(policy_for([dead, alive], concurrency=4, max_retries=1), episodes=12)
    assert all(e.status != "endpoint_error" for e in eps), "a retry goes to the other endpoint"
    assert alive.count() == 12


# ----------------------------------------------------------------- log-probs
@STREAM
def test_logprobs_are_requested_and_returned(server, stream: bool) -> None:
    srv = server(
        lambda r: Reply(content="<answer>Left</answer>", chunk_chars=7, logprobs=[-0.5, -1e-9, 0.0])
    )
    gen = one(policy_for(srv, stream=stream, logprobs=True))
    assert srv.requests[0].body["logprobs"] is True
    assert gen.completion_logprobs == [-0.5, -1e-9, 0.0]
    plain = server(lambda r: Reply(content="<answer>Left</answer>"))
    gen2 = one(policy_for(plain, stream=stream))
    assert "logprobs" not in plain.requests[0].body and gen2.completion_logprobs is None


def test_request_carries_sampling_parameters(server) -> None:
    srv = server(lambda r: Reply(content="x"))
    one(
        policy_for(srv, extra_body={"top_k": 20}),
        params=SamplingParams(
            temperature=0.3, top_p=0.9, max_new_tokens=77, stop=("</answer>",), seed=5
        ),
    )
    body = srv.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (
        0.3,
        0.9,
        77,
        ["</answer>"],
    )
    assert body["top_k"] == 20 and isinstance(body["seed"], int) and body["model"] == "test-model"


# ------------------------------------------------------- nothing lost, resume
def test_nothing_lost_under_20_percent_faults_then_resume_completes(server, tmp_path: Path) -> None:
    kinds = [lambda: server_error(500), lambda: rate_limited(0), reset, lambda: stall(30)]
    expected_kind = ["server_error", "rate_limit", "connection", "timeout"]

    def script(req):  # every 5th request fails (exactly 20%), cycling through four faults
        if req.n % 5 == 4:
            return kinds[(req.n // 5) % 4]()
        return bandit_answer(req)

    srv = server(script)
    opts = {
        "base_url": srv.base_url,
        "concurrency": 32,
        "max_retries": 0,
        **FAST,
        "read_timeout": 0.5,
    }
    run = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=200,
            out=str(tmp_path),
            run_id="faulty",
            policy_options=opts,
        )
    )
    first = RunDir(run).read_episodes()
    assert sorted(first) == list(range(200)), "every episode is recorded"
    errors = [e for e in first.values() if e["status"] == "endpoint_error"]
    assert len(errors) == 40 and srv.count() == 200
    kinds_seen = sorted(e["error"].split(":")[0] for e in errors)
    assert kinds_seen == sorted(expected_kind * 10)
    assert all(
        e["status"] == "success" or e["status"] == "failure"
        for e in first.values()
        if e not in errors
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == {"requested": 200, "recorded": 200, "scored": 160, "missing": 40}
    assert summary["counts"]["endpoint_error"] == 40
    for _ in range(6):  # each resume replays exactly the endpoint errors (20% of them fail again)
        if not any(e["status"] == "endpoint_error" for e in RunDir(run).read_episodes().values()):
            break
        resume_run(run)
    final = RunDir(run).read_episodes()
    assert sorted(final) == list(range(200)) and all(
        e["status"] != "endpoint_error" for e in final.values()
    )
    for i, e in first.items():  # finished episodes were never replayed
        if e["status"] != "endpoint_error":
            assert final[i] == e
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == {"requested": 200, "recorded": 200, "scored": 200, "missing": 0}
    assert summary["policy"]["requests"]["requests"] == srv.count()
    validate_file(run / "episodes.jsonl")
    validate_file(run / "summary.json")
    validate_file(run / "run.json")


def test_random_faults_with_retries_lose_nothing(server, tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    faults = [lambda: server_error(502), lambda: rate_limited(0), reset]

    def script(req):
        if rng.random() < 0.2:
            return rng.choice(faults)()
        return bandit_answer(req)

    srv = server(script)
    opts = {"base_url": srv.base_url, "concurrency": 32, "max_retries": 1, **FAST}
    run = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=200,
            out=str(tmp_path),
            run_id="r",
            policy_options=opts,
        )
    )
    eps = RunDir(run).read_episodes()
    assert sorted(eps) == list(range(200))
    assert all(e["status"] in ("success", "failure", "endpoint_error") for e in eps.values())
    stats = json.loads((run / "summary.json").read_text())["policy"]["requests"]
    n_err = sum(e["status"] == "endpoint_error" for e in eps.values())
    assert stats["retries"] > 0 and sum(stats["failed"].values()) == n_err
    assert stats["attempts"] == srv.count() == stats["requests"] + stats["retries"]
    for _ in range(4):
        resume_run(run)
    assert all(e["status"] != "endpoint_error" for e in RunDir(run).read_episodes().values())


# -------------------------------------------------------------- secrets, CLI
def test_api_key_appears_in_no_file_or_output(server, tmp_path: Path) -> None:
    secret = "sk-test-Zq8fK2mX9pLw4RtY7uVb"

    def script(req):  # a hostile server that echoes the Authorization header in its errors
        auth = req.headers.get("authorization", "")
        if req.n % 3 == 0:
            return http_error(400, f"bad request from {auth}")
        if req.n % 3 == 1:
            return http_error(503, f"overloaded, your header was {auth}")
        return bandit_answer(req)

    srv = server(script)
    env = {**os.environ, "RAGEN_TEST_KEY": secret}
    args = [
        sys.executable,
        "-m",
        "ragen_bench",
        "run",
        "--backend",
        "openai",
        "--base-url",
        srv.base_url,
        "--model",
        "test-model",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "6",
        "--api-key-env",
        "RAGEN_TEST_KEY",
        "--max-retries",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path),
        "--run-id",
        "k",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert srv.requests[0].headers["authorization"] == f"Bearer {secret}"  # the key was used...
    files = [p for p in (tmp_path / "k").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "episodes.jsonl", "summary.json"}
    for p in files:  # ...and written nowhere
        assert secret not in p.read_text(errors="replace"), p
    assert secret not in proc.stdout + proc.stderr
    eps = RunDir(tmp_path / "k").read_episodes()
    assert any("***" in (e["error"] or "") for e in eps.values()), (
        "echoed keys are scrubbed, not dropped"
    )
    meta = json.loads((tmp_path / "k" / "run.json").read_text())
    assert meta["policy_options"]["api_key_env"] == "RAGEN_TEST_KEY"


def test_missing_key_variable_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("RAGEN_NOT_SET", raising=False)
    with pytest.raises(ValueError, match="RAGEN_NOT_SET"):
        OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", api_key_env="RAGEN_NOT_SET")
    with pytest.raises(ValueError, match="--base-url"):
        make_policy("openai", "m")


def test_endpoint_aliases_from_toml(server, tmp_path: Path) -> None:
    srv = server(bandit_answer)
    cfg = tmp_path / "endpoints.toml"
    cfg.write_text(f"""
[endpoints.local]
base_urls = ["{srv.base_url}"]
model = "served-name"
concurrency = 3
max_retries = 0
[endpoints.local.sampling]
temperature = 0.0
max_new_tokens = 40
""")
    aliases = load_endpoints(cfg)
    assert aliases["local"].model == "served-name" and aliases["local"].options["concurrency"] == 3
    args = [
        sys.executable,
        "-m",
        "ragen_bench",
        "run",
        "--endpoints",
        str(cfg),
        "--model",
        "local",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--no-progress",
        "--out",
        str(tmp_path),
        "--run-id",
        "a",
        "--max-new-tokens",
        "50",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "a" / "run.json").read_text())
    assert meta["backend"] == "openai" and meta["model"] == "served-name"
    assert meta["policy"]["concurrency"] == 3
    assert meta["rollout"]["sampling"]["temperature"] == 0.0  # alias default
    assert meta["rollout"]["sampling"]["max_new_tokens"] == 50  # the flag wins
    assert (
        srv.requests[0].body["model"] == "served-name" and srv.requests[0].body["max_tokens"] == 50
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[endpoints.x]\nbase_url = "http://h/v1"\nmodle = "typo"\n')
    with pytest.raises(EndpointsError, match="modle"):
        load_endpoints(bad)
    bad.write_text('[endpoints.x]\nbase_url = "http://h/v1"\napi_key_env = "sk-abc-123"\n')
    with pytest.raises(EndpointsError, match="NAME of an environment variable"):
        load_endpoints(bad)


# ------------------------------------------------------------------ vLLM
def test_vllm_backend_without_vllm_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed, whatever the machine has
    with pytest.raises(ImportError, match=re.escape("pip install 'ragen[vllm]'")):
        make_policy("vllm", "tiny")


def test_vllm_server_backend_without_vllm_names_the_extra(tmp_path: Path) -> None:
    """vLLM is looked for before the model folder (an empty folder here: the model check
    must not answer first), and the error names ``--vllm-python``."""
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('vllm') else 1)"
    if subprocess.run([sys.executable, "-c", code]).returncode == 0:
        pytest.skip("vllm is installed in this interpreter")
    with pytest.raises(ImportError, match=re.escape("pip install 'ragen[vllm]'")) as err:
        make_policy("vllm-server", str(tmp_path), python=sys.executable, startup_timeout=60)
    assert "--vllm-python" in str(err.value) and sys.executable in str(err.value)


def test_vllm_server_backend_starts_evaluates_and_stops(tmp_path: Path) -> None:
    """The process management of ``vllm-server``, with the test server standing in for vLLM."""
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    # A model folder has a config.json (the back-end refuses any other folder before starting
    # a server); the stand-in server never reads it.
    (model_dir / "config.json").write_text("{}")
    opts = {
        "python": sys.executable,
        "module": "tests.helpers.fault_server",
        "server_args": [
            "--latency",
            "0.01",
            "--answer",
            "<think>t</think><answer>Up</answer>",
            "--startup-delay",
            "0.5",
        ],
        "server_env": {"PYTHONPATH": str(REPO)},
        "startup_timeout": 60,
        "concurrency": 2,
        **FAST,
    }
    run = start_run(
        RunRequest(
            env_id="ragen/Sokoban-v0",
            backend="vllm-server",
            model=str(model_dir),
            episodes=2,
            out=str(tmp_path),
            run_id="vs",
            rollout={"max_turns": 2},
            policy_options=opts,
        )
    )
    meta = json.loads((run / "run.json").read_text())
    eps = RunDir(run).read_episodes()
    assert all(e["status"] != "endpoint_error" for e in eps.values())
    assert eps[0]["turns"][0]["actions"] == ["Up"]
    assert meta["policy"]["backend"] == "vllm-server" and meta["policy"]["model"] == "my-model"
    port = int(meta["policy"]["base_urls"][0].rsplit(":", 1)[1].split("/")[0])
    import socket

    with socket.socket() as s:  # the server is gone: its port accepts no connection
        assert s.connect_ex(("127.0.0.1", port)) != 0
    # A server that dies while starting: one line with the root cause and the kept log.
    bad = {**opts, "module": "tests.no_such_module", "log_path": str(tmp_path / "bad.log")}
    with pytest.raises(RuntimeError, match="exited with code") as err:
        make_policy("vllm-server", str(model_dir), **bad)
    msg = str(err.value)
    assert "\n" not in msg and msg.endswith(f"(full log: {tmp_path / 'bad.log'})")
    assert "No module named tests.no_such_module" in msg
    assert (tmp_path / "bad.log").is_file()


def test_vllm_server_stops_its_process_group(tmp_path: Path) -> None:
    from ragen_bench.policies.vllm_backend import ManagedServer

    srv = ManagedServer(
        str(tmp_path),
        python=sys.executable,
        module="tests.helpers.fault_server",
        env={"PYTHONPATH": str(REPO)},
        startup_timeout=60,
    )
    srv.start()
    pid = srv.proc.pid
    log = Path(srv.log_path)
    assert log.is_file() and log.parent == Path(tempfile.gettempdir())
    assert os.getpgid(pid) == pid, "the server leads its own process group"
    srv.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, signal.SIG_DFL or 0)
    assert not log.exists(), "a clean stop leaves no log in the temp folder"
    srv.stop()  # idempotent


# ------------------------------------- wrong-shaped and oversized answers
def _valid_choice(content: str = "<think>x</think><answer>Left</answer>") -> dict:
    return {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }


WRONG_SHAPES = {
    "choices-string": {"choices": "nope"},  # used to be an AttributeError: not retried, not counted
    "choice-string": {"choices": ["nope"]},
    "message-string": {"choices": [{"index": 0, "message": "hi", "finish_reason": "stop"}]},
    "content-number": {
        "choices": [{**_valid_choice(), "message": {"role": "assistant", "content": 123}}]
    },
    "usage-text": {
        "choices": [_valid_choice()],
        "usage": {"prompt_tokens": "many", "completion_tokens": 1},
    },
    "not-an-object": [1, 2, 3],
}


@pytest.mark.parametrize("shape", sorted(WRONG_SHAPES))
def test_wrong_shaped_answer_is_a_typed_retried_counted_error(server, shape: str) -> None:
    from tests.helpers.fault_server import answer_body

    body = WRONG_SHAPES[shape]
    srv = server(
        lambda r: (
            answer_body(body) if r.n < 2 else Reply(content="<think>x</think><answer>Left</answer>")
        )
    )
    policy = policy_for(srv, max_retries=3)
    gen = one(policy)
    assert gen.finish_reason == "stop" and gen.text.endswith("<answer>Left</answer>")
    assert srv.count() == 3 and gen.extra["faults"] == ["invalid_response", "invalid_response"]
    assert policy.stats()["retried"] == {"invalid_response": 2}
    # Persistent: recorded as a typed endpoint error after the bounded retries, and counted.
    srv2 = server(lambda r: answer_body(body))
    policy2 = policy_for(srv2, max_retries=1)
    [ep] = play(policy2)
    assert srv2.count() == 2 and ep.status == "endpoint_error"
    assert (
        ep.error.startswith("invalid_response: the answer is not a chat completion")
        and "after 1 retry" in ep.error
    )
    assert policy2.stats()["failed"] == {"invalid_response": 1}


def test_wrong_shaped_stream_event_is_a_typed_error(server) -> None:
    from tests.helpers.fault_server import answer_events

    srv = server(
        lambda r: (
            answer_events([{"id": "x", "object": "chat.completion.chunk", "choices": "nope"}])
            if r.n == 0
            else Reply(content="fine")
        )
    )
    policy = policy_for(srv, stream=True, max_retries=1)
    gen = one(policy)
    assert gen.text == "fine" and gen.extra["faults"] == ["invalid_response"]
    assert policy.stats()["retried"] == {"invalid_response": 1}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversized_body_is_a_typed_error_and_no_huge_file(
    server, tmp_path: Path, chunked: bool
) -> None:
    """A 30 MB answer (it made a 126 MB episodes file) is refused at the default 16 MiB cap:
    with ``Content-Length`` before any body byte is read, without it as soon as the bytes
    read pass the cap.  Not retried (the identical request would send it again)."""
    from tests.helpers.fault_server import answer_body

    huge = {"choices": [_valid_choice("<answer>Left</answer>" + "x" * 30_000_000)]}
    body = json.dumps(huge).encode()
    srv = server(lambda r: answer_body(body, chunked=chunked))
    opts = {"base_url": srv.base_url, "max_retries": 3, **FAST}
    run = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0",
            backend="openai",
            model="test-model",
            episodes=2,
            out=str(tmp_path),
            run_id="huge",
            policy_options=opts,
        )
    )
    eps = RunDir(run).read_episodes()
    assert [e["status"] for e in eps.values()] == ["endpoint_error", "endpoint_error"]
    how = "(more than that was sent)" if chunked else f"({len(body)} bytes declared)"
    assert all(
        e["error"] == f"response_too_large: response body over max_response_bytes=16777216 {how}"
        for e in eps.values()
    ), [e["error"] for e in eps.values()]
    assert srv.count() == 2, "not retried"
    assert (run / "episodes.jsonl").stat().st_size < 100_000
    requests = json.loads((run / "summary.json").read_text())["policy"]["requests"]
    assert requests["failed"] == {"response_too_large": 2}
    assert json.loads((run / "run.json").read_text())["policy"]["max_response_bytes"] == 16 * 2**20


@STREAM
def test_long_completion_is_cut_to_the_cap_and_flagged(
    server, tmp_path: Path, stream: bool
) -> None:
    long_answer = "<think>" + "y" * 5000 + "</think><answer>Left</answer>"
    srv = server(lambda r: Reply(content=long_answer, chunk_chars=100))
    policy = policy_for(srv, stream=stream, max_completion_chars=1000, logprobs=True)
    [ep] = play(policy)
    [turn] = ep.turns
    assert len(turn.response) == 1000 and turn.response == long_answer[:1000]
    assert turn.finish_reason == "length" and turn.parsed["error"] is not None, (
        "a cut answer is invalid"
    )
    assert turn.format_penalty == pytest.approx(-0.1) and turn.completion_logprobs is None
    assert (
        turn.extra["truncated_chars"] == {"response": len(long_answer)}
        if not stream
        else turn.extra["truncated_chars"]["response"] <= 1100
    )  # streaming stops reading just past the cap
    assert policy.stats()["truncated"] == 1 and policy.stats()["length"] == 0
    assert ep.status != "endpoint_error" and srv.count() == 1, (
        "a cut answer is an answer, not retried"
    )


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("backoff_base", float("nan"), "backoff_base must be a finite number, got nan"),
        ("connect_timeout", float("inf"), "connect_timeout must be a finite number, got inf"),
        ("read_timeout", 0, "read_timeout must be > 0, got 0"),
        ("max_response_bytes", 0, "max_response_bytes must be >= 1, got 0"),
        ("max_completion_chars", -5, "max_completion_chars must be >= 1, got -5"),
    ],
)
def test_caps_and_timeouts_are_checked(option: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", **{**FAST, option: value})
