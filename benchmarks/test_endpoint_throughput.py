"""Throughput of the ``openai`` back-end against a server with fixed latency (issue 4).

A test chat-completions server (``tests/helpers/fault_server.py``, in its own process so that it
does not share the interpreter lock with the client) answers every request after
``LATENCY`` seconds.  With ``C`` requests in flight and ``T`` turns (one request each) per
episode, no client can beat the bound ``C / (T × LATENCY)`` episodes per second; we
report ``ratio = measured episodes/s ÷ bound`` (the issue asks for >= 0.8 at 200 ms and
concurrency 32).  The measured time is the whole ``RolloutEngine.arun`` (env resets and
steps, prompt building, parsing, the openai client, HTTP) from the first request to the
last episode, so the ratio is the share of the ideal that the harness delivers.

Run::

    pytest benchmarks/test_endpoint_throughput.py --benchmark-only -s
    python benchmarks/test_endpoint_throughput.py            # plain script, prints a table

Not collected by the default ``pytest`` run (``testpaths = ["tests"]``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragen_bench.policies.openai_api import OpenAIPolicy
from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs

REPO = Path(__file__).resolve().parent.parent
LATENCY = float(os.environ.get("RAGEN_BENCH_LATENCY", "0.2"))
CONCURRENCY = int(os.environ.get("RAGEN_BENCH_CONCURRENCY", "32"))

#: (env id, turns per episode, episodes).  Every answer names an unknown action, so the
#: turn is invalid and every episode lasts exactly ``turns`` turns.
CASES = [("ragen/Bandit-v0", 1, 640), ("ragen/Sokoban-v0", 5, 192)]


class ServerProcess:
    """``python -m tests.helpers.fault_server`` with a fixed latency, on a free port."""

    def __init__(self, latency: float):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.fault_server",
                "--port",
                "0",
                "--latency",
                str(latency),
                "--served-model-name",
                "bench-model",
                "--answer",
                "<think>t</think><answer>Nothing</answer>",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"test server did not start: {line!r}")
        self.base_url = line.split(" ", 1)[1]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server process has used so far (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def measure(
    base_url: str,
    env_id: str,
    turns: int,
    episodes: int,
    concurrency: int = CONCURRENCY,
    latency: float = LATENCY,
    server: ServerProcess | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` and return episodes/s, the bound, their ratio, and CPU per request.

    ``client_cpu_ms_per_request`` is this process's CPU time (harness + openai client)
    per request, ``server_cpu_ms_per_request`` the test server's; ``load_avg_1m`` the
    machine's load when the measurement started (on a shared machine a low ratio with
    a high load means the client was starved of CPU, not that it waited).
    """
    policy = OpenAIPolicy("bench-model", base_url=base_url, concurrency=concurrency, max_retries=0)
    cfg = RolloutConfig(max_turns=turns, max_actions_per_turn=1)
    engine = RolloutEngine(policy, cfg)
    specs = make_specs(env_id, episodes=episodes)

    async def go() -> tuple[list[Any], float]:
        try:
            await engine.arun(
                make_specs(env_id, episodes=min(concurrency, episodes), start_index=10**6)
            )  # warm-up
            cpu0[:] = [time.process_time(), server.cpu_s() if server else float("nan")]
            t0 = time.perf_counter()
            records = await engine.arun(specs)
            wall = time.perf_counter() - t0
            cpu0[:] = [
                time.process_time() - cpu0[0],
                (server.cpu_s() if server else float("nan")) - cpu0[1],
            ]
            return records, wall
        finally:
            await policy.aclose()

    cpu0: list[float] = []
    load = os.getloadavg()[0]
    records, wall = asyncio.run(go())
    played = sum(len(r.turns) for r in records)
    errors = sum(r.status == "endpoint_error" for r in records)
    assert errors == 0, f"{errors} endpoint errors"
    assert played == turns * episodes, "every episode must last exactly `turns` turns"
    eps_per_s = episodes / wall
    bound = concurrency / (turns * latency)
    return {
        "env_id": env_id,
        "turns": turns,
        "episodes": episodes,
        "concurrency": concurrency,
        "latency_s": latency,
        "wall_s": wall,
        "episodes_per_s": eps_per_s,
        "bound_episodes_per_s": bound,
        "ratio": eps_per_s / bound,
        "client_cpu_ms_per_request": 1000 * cpu0[0] / played,
        "server_cpu_ms_per_request": 1000 * cpu0[1] / played,
        "load_avg_1m": load,
    }


@pytest.fixture(scope="module")
def server():
    srv = ServerProcess(LATENCY)
    yield srv
    srv.stop()


@pytest.mark.parametrize("env_id,turns,episodes", CASES, ids=[c[0].split("/")[1] for c in CASES])
def test_endpoint_throughput(
    benchmark: Any, server: ServerProcess, env_id: str, turns: int, episodes: int
) -> None:
    result: dict[str, Any] = {}

    def once() -> None:
        result.update(measure(server.base_url, env_id, turns, episodes, server=server))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print(
        f"\n{env_id}: {result['episodes_per_s']:.1f} episodes/s, bound {result['bound_episodes_per_s']:.1f}, "
        f"ratio {result['ratio']:.3f} (CPU per request: client {result['client_cpu_ms_per_request']:.2f} ms, "
        f"server {result['server_cpu_ms_per_request']:.2f} ms; load {result['load_avg_1m']:.1f})"
    )
    assert result["ratio"] >= 0.8, result


def main() -> None:
    srv = ServerProcess(LATENCY)
    try:
        print(f"latency {LATENCY * 1000:.0f} ms, concurrency {CONCURRENCY}")
        print(
            f"{'env':<20} {'turns':>5} {'episodes':>8} {'wall s':>7} {'eps/s':>7} {'bound':>7} {'ratio':>6} "
            f"{'client ms/req':>13} {'server ms/req':>13} {'load':>5}"
        )
        for env_id, turns, episodes in CASES:
            r = measure(srv.base_url, env_id, turns, episodes, server=srv)
            print(
                f"{env_id:<20} {turns:>5} {episodes:>8} {r['wall_s']:>7.2f} {r['episodes_per_s']:>7.1f} "
                f"{r['bound_episodes_per_s']:>7.1f} {r['ratio']:>6.3f} {r['client_cpu_ms_per_request']:>13.2f} "
                f"{r['server_cpu_ms_per_request']:>13.2f} {r['load_avg_1m']:>5.1f}"
            )
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
