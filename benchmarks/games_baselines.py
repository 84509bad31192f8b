"""Baseline quality on 2048 and the 2x2x2 cube, per registered id (a script, not a test).

* 2048: success rate of the expectimax baseline (``oracle_actions``, not an optimal
  policy) and of the uniform random baseline, with the mean largest tile and the mean
  number of moves; episodes of ``ragen_envs.baselines.run_episode`` with each id's
  default config (its ``max_steps``), test split, seeds ``0..N-1``.
* RubiksCube: the distribution of the optimal solution length (``optimal_distance``,
  the oracle's plan length) of the test-split scrambles, and the random baseline's
  success rate within the step limit.

Usage::

    python benchmarks/games_baselines.py            # 200 seeds per id
    python benchmarks/games_baselines.py --seeds 50

Prints two markdown tables (the ones in ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import collections
import time

import ragen_envs
from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode


def _rate(results: list) -> str:
    return f"{100.0 * sum(r.success for r in results) / len(results):.1f}%"


def game2048_table(seeds: int) -> str:
    rows = [
        "| id | target | max_steps | expectimax success | mean largest tile | mean moves | random success |"
        " s/episode (expectimax) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in ragen_envs.list_envs("2048"):
        env = ragen_envs.make(entry.id, split="test")
        start = time.perf_counter()
        best = [run_episode(env, oracle_policy, seed=s) for s in range(seeds)]
        per_episode = (time.perf_counter() - start) / seeds
        rand = [run_episode(env, make_random_policy(s), seed=s) for s in range(seeds)]
        tile = sum(r.infos[-1]["max_tile"] for r in best) / seeds
        moves = sum(len(r.actions) for r in best) / seeds
        c = env.unwrapped.config
        rows.append(
            f"| `{entry.id}` | {c['target_tile']} | {c['max_steps']} | {_rate(best)} | {tile:.0f} | "
            f"{moves:.0f} | {_rate(rand)} | {per_episode:.2f} |"
        )
    return "\n".join(rows)


def rubiks_table(seeds: int) -> str:
    rows = [
        "| id | scramble_depth | optimal length: mean | min-max | random success |",
        "|---|---:|---:|---:|---:|",
    ]
    for entry in ragen_envs.list_envs("RubiksCube"):
        env = ragen_envs.make(entry.id, split="test")
        lengths = collections.Counter(
            env.reset(seed=s)[1]["optimal_distance"] for s in range(seeds)
        )
        rand = [run_episode(env, make_random_policy(s), seed=s) for s in range(seeds)]
        mean = sum(k * n for k, n in lengths.items()) / seeds
        rows.append(
            f"| `{entry.id}` | {env.unwrapped.config['scramble_depth']} | {mean:.2f} | "
            f"{min(lengths)}-{max(lengths)} | {_rate(rand)} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=int, default=200, help="test-split seeds per id (default 200)"
    )
    args = parser.parse_args(argv)
    print(game2048_table(args.seeds))
    print()
    print(rubiks_table(args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
