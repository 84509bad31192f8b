"""Learning demo: SFT warm start, then StarPO with GRPO and with PPO, on Bandit and Sokoban.

For each environment the tiny offline model is warm-started once with SFT (the
``tiny-<env>-grpo`` preset's ``sft`` section), then trained twice from that same SFT
checkpoint: with GRPO (``tiny-<env>-grpo``) and with PPO + GAE and a critic
(``tiny-<env>-ppo``). Each run evaluates on the **test** split (seeds disjoint from
training) before and after RL with the same seeds, and writes its curves.

    python examples/learning_demo.py                 # both envs, ~10 minutes on 2 CPU cores
    python examples/learning_demo.py --env bandit    # one env
    python examples/learning_demo.py --out outputs/demo --eval-episodes 256

Results: ``<out>/results.json`` (machine-readable), ``<out>/results.md`` (a table) and
``<out>/learning_demo.png`` (validation success of every run against the RL step).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ragen_envs.jsonutil import dumps, iter_jsonl
from ragen_train.config import load_config
from ragen_train.pipeline import run_sft_then_starpo

ENVS = {"bandit": "Bandit-PairsAB (deterministic payoffs)", "sokoban": "Sokoban-Easy 6x6"}


def _val_curve(metrics: Path) -> list[tuple[int, float]]:
    rows = [row for _, row in iter_jsonl(metrics)]
    return [(int(r["step"]), float(r["val/success"])) for r in rows if "val/success" in r]


def _plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["env"] for r in results})
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for r in (r for r in results if r["env"] == env):
            steps, vals = zip(*r["val_curve"]) if r["val_curve"] else ((), ())
            ax.plot(
                steps,
                vals,
                marker="o",
                ms=3,
                label=f"{r['algorithm']} (test {r['before']:.2f} -> {r['after']:.2f})",
            )
        ax.set_title(ENVS[env])
        ax.set_xlabel("RL step")
        ax.set_ylabel("validation success")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", choices=[*ENVS, "all"], default="all")
    ap.add_argument("--out", default="outputs/learning_demo")
    ap.add_argument(
        "--eval-episodes", type=int, default=512, help="held-out test episodes per evaluation"
    )
    ap.add_argument(
        "--no-check",
        action="store_true",
        help="exit 0 even if a run did not improve held-out success (for smoke tests)",
    )
    ap.add_argument(
        "overrides",
        nargs="*",
        help="extra key=value overrides for every run (e.g. trainer.total_steps=10)",
    )
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = []
    for env in ENVS if args.env == "all" else [args.env]:
        sft_dir = None
        for alg in ("grpo", "ppo"):
            run_dir = out / f"{env}-{alg}"
            cfg = load_config(
                f"tiny-{env}-{alg}",
                [f"trainer.out_dir={run_dir}", "trainer.overwrite=true", *args.overrides],
            )
            print(f"\n=== {env} / {alg} ({cfg.env.id}) ===", flush=True)
            res = run_sft_then_starpo(cfg, eval_episodes=args.eval_episodes, sft_model=sft_dir)
            if sft_dir is None:
                sft_dir = (
                    run_dir / "sft_model"
                )  # the next algorithm starts from the same SFT weights
            results.append(
                {
                    "env": env,
                    "env_id": cfg.env.id,
                    "env_config": cfg.env.config,
                    "algorithm": alg,
                    "estimator": cfg.algorithm.adv_estimator,
                    "rl_steps": cfg.trainer.total_steps,
                    "episodes_per_step": cfg.rollout.env_groups * cfg.rollout.group_size,
                    "eval_split": cfg.env.test_split,
                    "eval_episodes": args.eval_episodes,
                    "before": res.before.get("test/success", 0.0),
                    "after": res.after.get("test/success", 0.0),
                    "before_return": res.before.get("test/return", 0.0),
                    "after_return": res.after.get("test/return", 0.0),
                    "wall_s": round(res.wall_s, 1),
                    "val_curve": _val_curve(run_dir / "metrics.jsonl"),
                    "sft_model": str(sft_dir),
                }
            )
    wall = time.perf_counter() - t0
    (out / "results.json").write_text(
        dumps({"runs": results, "wall_s": round(wall, 1)}, indent=2) + "\n"
    )
    lines = [
        "| env | algorithm | RL steps × episodes | test success after SFT | after StarPO | wall (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {ENVS[r['env']]} | {r['algorithm']} | {r['rl_steps']} × {r['episodes_per_step']} | "
            f"{r['before']:.3f} | {r['after']:.3f} | {r['wall_s']:.0f} |"
        )
    table = (
        "\n".join(lines)
        + f"\n\nTotal wall time {wall:.0f} s; {args.eval_episodes} test episodes per evaluation.\n"
    )
    (out / "results.md").write_text(table)
    _plot(results, out / "learning_demo.png")
    print("\n" + table + f"plot: {out / 'learning_demo.png'}")
    improved = all(r["after"] > r["before"] for r in results)
    if not improved:
        print("not every run improved held-out success over its SFT checkpoint")
    return 0 if improved or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
