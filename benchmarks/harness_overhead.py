"""Harness overhead: episodes/s with the random policy, and the share of wall time spent
outside the policy with the hf tiny model.

    python benchmarks/harness_overhead.py [--episodes 256] [--hf-episodes 32]

1. *Random policy* (no model): ``RolloutEngine`` plays N episodes of Sokoban (10 turns ×
   2 actions) and of Bandit; everything measured is harness + env (prompt building,
   parsing, stepping, records) — an upper bound on how fast the harness can feed a policy.
2. *hf tiny model*: the same engine with the local transformers back-end; a wrapper
   times every ``generate`` call, so ``1 − policy_time / wall`` is the share of wall time
   the harness itself costs (the back-end runs one call at a time, so calls never overlap).
"""

from __future__ import annotations

import argparse
import time

from ragen_bench.policies import RandomPolicy
from ragen_bench.policies.base import Policy
from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs, rollout_config
from ragen_bench.types import SamplingParams


class Timed(Policy):
    """Forwards to a policy and sums the time spent inside ``generate``."""

    def __init__(self, inner: Policy):
        self.inner = inner
        self.name = inner.name
        self.max_batch_size = inner.max_batch_size
        self.max_concurrency = inner.max_concurrency
        self.privileged = inner.privileged
        self.seconds = 0.0
        self.calls = 0

    @property
    def tokenizer(self):  # noqa: ANN201
        return self.inner.tokenizer

    async def generate(self, requests, params):  # noqa: ANN001, ANN201
        t0 = time.perf_counter()
        out = await self.inner.generate(requests, params)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def random_throughput(env_id: str, episodes: int) -> tuple[float, float]:
    cfg = rollout_config(env_id)
    engine = RolloutEngine(RandomPolicy(seed=0), cfg)
    specs = make_specs(env_id, episodes=episodes)
    t0 = time.perf_counter()
    records = engine.run(specs)
    wall = time.perf_counter() - t0
    turns = sum(len(r.turns) for r in records)
    return episodes / wall, turns / wall


def hf_share(env_id: str, episodes: int, max_new_tokens: int) -> dict[str, float]:
    from ragen_bench.policies.hf import HFPolicy

    policy = Timed(HFPolicy("tiny", max_batch_size=episodes))
    cfg = RolloutConfig(
        **{
            **rollout_config(env_id).as_dict(),
            "sampling": SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens),
        }
    )
    engine = RolloutEngine(policy, cfg)
    t0 = time.perf_counter()
    records = engine.run(make_specs(env_id, episodes=episodes))
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "policy_s": policy.seconds,
        "calls": policy.calls,
        "outside_share": 1.0 - policy.seconds / wall,
        "turns": sum(len(r.turns) for r in records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--hf-episodes", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()
    for env_id in ("ragen/Bandit-v0", "ragen/Sokoban-v0"):
        eps, tps = random_throughput(env_id, args.episodes)
        print(f"random policy  {env_id:20s} {eps:9.1f} episodes/s  {tps:9.1f} turns/s")
    for env_id in ("ragen/Bandit-v0", "ragen/Sokoban-v0"):
        r = hf_share(env_id, args.hf_episodes, args.max_new_tokens)
        print(
            f"hf tiny        {env_id:20s} wall {r['wall_s']:.2f} s, in policy {r['policy_s']:.2f} s "
            f"({r['calls']} batched calls, {r['turns']} turns): {100 * r['outside_share']:.1f}% outside the policy"
        )


if __name__ == "__main__":
    main()
