"""Training-step throughput: native StarPO vs TRL's GRPOTrainer (through our adapter), same env, same batches.

    python benchmarks/bench_native_vs_trl.py [--config quickstart] [--steps 6] [--warmup 1]
                                             [--mode replay|live] [--json out.json] [key=value ...]

Both trainers start from the same weights (the ``--config`` model, default the tiny
model) and train on ``--steps`` rollout batches of the same env:

* ``replay`` (default): the batches are played once before timing, by demonstrations
  with reward variance inside every group (``MixedPolicy``: oracle actions with
  probability 1/2, random well-formed ones otherwise; canonical token ids), and both
  trainers are fed exactly these records — the native trainer through its ``rollout``
  method, TRL through :class:`~ragen_train.backends.trl_backend.RagenRolloutFunc` with
  ``records_fn``.  The token counts per step are asserted equal.
* ``live``: each trainer plays its own episodes with its current policy (same seeds);
  the batches then differ after the first update.

Per step it records the update time (step wall time minus rollout time; for TRL this
includes its reward / advantage bookkeeping) and the trained tokens (``loss_mask`` = 1,
i.e. the tokens the policy generated) and all sequence tokens.  It prints tokens/s over
the update time, the rollout share, and the ratio native / TRL; the first ``--warmup``
steps are excluded.  Not a test: nothing about speed is asserted.  The machine is
shared; run it twice and quote the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ragen_bench.rollout import RolloutEngine, rollout_config  # noqa: E402
from ragen_train.backends.common import train_specs  # noqa: E402
from ragen_train.config import load_config  # noqa: E402
from ragen_train.logger import MetricLogger, read_metrics  # noqa: E402
from ragen_train.modeling import load_policy, load_tokenizer  # noqa: E402
from ragen_train.sft import MixedPolicy, TokenizingPolicy  # noqa: E402
from ragen_train.trainer import StarPOTrainer  # noqa: E402


def demo_batches(cfg: Any, tokenizer: Any, steps: int) -> list[list[Any]]:
    """``steps`` rollout batches with reward variance (oracle / random mixture), on the native seeds."""
    policy = TokenizingPolicy(MixedPolicy(0.5, seed=cfg.trainer.seed), tokenizer)
    engine = RolloutEngine(policy, rollout_config(cfg.env.id, cfg.rollout))
    return [engine.run(train_specs(cfg, k)) for k in range(steps)]


def run_native(cfg: Any, batches: list[list[Any]] | None) -> list[dict[str, float]]:
    trainer = StarPOTrainer(cfg)
    play = trainer.rollout
    played: list[list[Any]] = []

    def rollout(step: int) -> list[Any]:
        if batches is None:
            played.append(play(step))
        else:
            # What the trainer's own rollout also records: the training env of each group
            # (one env here), read by train_step to split the metrics per env.
            played.append(batches[step])
            trainer.env_of_group = {rec.group: 0 for rec in played[-1]}
        return played[-1]

    trainer.rollout = rollout  # type: ignore[method-assign]
    rows = []
    for _ in range(cfg.trainer.total_steps):
        m = trainer.train_step()
        rows.append(
            {
                "update_s": m["time/step_s"] - m["time/rollout_s"],
                "rollout_s": m["time/rollout_s"],
                "tokens": m.get("batch/response_tokens", 0.0),
                "seq_tokens": seq_tokens(played[-1]),
            }
        )
    return rows


def run_trl(cfg: Any, batches: list[list[Any]] | None, out: Path) -> list[dict[str, float]]:
    from ragen_train.backends.trl_backend import RagenRolloutFunc, build_trl_trainer

    tok = load_tokenizer(cfg.model.path)
    model = load_policy(cfg.model)
    fn = (lambda step, specs: batches[step]) if batches is not None else None
    rollout = RagenRolloutFunc(cfg, tok, records_fn=fn)
    logger = MetricLogger(out, ["jsonl"])
    trainer, _, _ = build_trl_trainer(cfg, model, tok, rollout_func=rollout, logger=logger)
    trainer.train()
    logger.close()
    return [
        {
            "update_s": r["time/update_s"],
            "rollout_s": r["time/rollout_s"],
            "tokens": r["batch/response_tokens"],
            "seq_tokens": r["batch/total_tokens"],
        }
        for r in read_metrics(out / "metrics.jsonl")
        if r["phase"] == "train"
    ]


def seq_tokens(batch: list[Any]) -> float:
    """All tokens of the training sequences of a batch (the last turn's prompt + completion per episode)."""
    return float(
        sum(
            len(r.turns[-1].prompt_token_ids) + len(r.turns[-1].completion_token_ids) for r in batch
        )
    )


def summarise(rows: list[dict[str, float]], warmup: int) -> dict[str, float]:
    kept = rows[warmup:] or rows
    upd = sum(r["update_s"] for r in kept)
    roll = sum(r["rollout_s"] for r in kept)
    return {
        "steps": len(kept),
        "median_update_s": statistics.median(r["update_s"] for r in kept),
        "trained_tokens_per_s": sum(r["tokens"] for r in kept) / upd,
        "seq_tokens_per_s": sum(r["seq_tokens"] for r in kept) / upd,
        "rollout_s_per_step": roll / len(kept),
        "update_s_per_step": upd / len(kept),
        "trained_tokens_per_step": sum(r["tokens"] for r in kept) / len(kept),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="quickstart")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--mode", choices=("replay", "live"), default="replay")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-native-trl-"))
    base = [
        f"trainer.total_steps={a.steps}",
        "trainer.val_every=0",
        "trainer.val_before_train=false",
        "trainer.collapse_every=0",
        "trainer.save_every=0",
        "trainer.loggers=jsonl",
        *a.overrides,
    ]
    cfg_n = load_config(a.config, [*base, f"trainer.out_dir={tmp / 'native'}"])
    cfg_t = load_config(a.config, [*base, f"trainer.out_dir={tmp / 'trl'}"])
    tok = load_tokenizer(cfg_n.model.path)
    batches = demo_batches(cfg_n, tok, a.steps) if a.mode == "replay" else None

    t0 = time.perf_counter()
    native = run_native(cfg_n, batches)
    t_native = time.perf_counter() - t0
    t0 = time.perf_counter()
    trl = run_trl(cfg_t, batches, tmp / "trl")
    t_trl = time.perf_counter() - t0
    if batches is not None:
        for k, (n, t) in enumerate(zip(native, trl)):
            assert n["tokens"] == t["tokens"], (
                f"step {k}: native trained {n['tokens']} tokens, TRL {t['tokens']}"
            )
    sn, st = summarise(native, a.warmup), summarise(trl, a.warmup)
    import transformers
    import trl as trl_mod

    r = cfg_n.rollout
    result = {
        "config": a.config,
        "env": cfg_n.env.id,
        "model": cfg_n.model.path,
        "mode": a.mode,
        "steps": a.steps,
        "warmup": a.warmup,
        "episodes_per_step": r.env_groups * r.group_size,
        "loss": {"native": cfg_n.algorithm.loss_agg_mode, "trl": "dapo (token-mean)"},
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "trl": trl_mod.__version__,
        "transformers": transformers.__version__,
        "native": sn,
        "trl_grpo": st,
        "ratio_native_over_trl_trained_tokens_per_s": sn["trained_tokens_per_s"]
        / st["trained_tokens_per_s"],
        "wall_s": {"native": round(t_native, 1), "trl": round(t_trl, 1)},
    }
    print(
        f"\n{cfg_n.env.id}, {r.env_groups}x{r.group_size} episodes/step, model {cfg_n.model.path}, mode {a.mode}, "
        f"{sn['steps']} timed steps after {a.warmup} warm-up, torch threads {torch.get_num_threads()}"
    )
    print(
        f"{'trainer':<12}{'trained tok/s':>15}{'all tok/s':>12}{'update s/step':>15}{'rollout s/step':>16}"
        f"{'trained tok/step':>18}"
    )
    for name, s in (("native", sn), ("TRL GRPO", st)):
        print(
            f"{name:<12}{s['trained_tokens_per_s']:>15.1f}{s['seq_tokens_per_s']:>12.1f}{s['update_s_per_step']:>15.3f}"
            f"{s['rollout_s_per_step']:>16.3f}{s['trained_tokens_per_step']:>18.1f}"
        )
    print(
        f"ratio native / TRL (trained tokens per second of update): "
        f"{result['ratio_native_over_trl_trained_tokens_per_s']:.2f}"
    )
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
