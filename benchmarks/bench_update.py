"""What a StarPO update computes and how fast: one preset, several update paths, the same
rollouts replayed (issue 27 item 6).

    python benchmarks/bench_update.py --preset cpu-bandit-lora --model PATH --steps 1
    python benchmarks/bench_update.py --preset quickstart --steps 2 --out /tmp/u.json

For each of ``--steps`` steps it plays one rollout with the preset's policy (``--sampler``,
default ``hf``; rollouts are not what is measured) and keeps the filtered samples, or reads
them back from ``--samples FILE`` (written on the first run, so a second run replays the same
tokens).  Then, from the same starting weights, optimizer state and RNG seed, it runs the
trainer's ``_update`` with every path of ``--paths`` (``trainer.update_path``, default
``shared_prefix,plain``) and reports per path and step:

* ``tokens_processed``: tokens the training forward computed (padding included) and
  ``tokens_trained`` (response tokens); ``lm_head_positions``;
* ``update_flops``: ``(1 + b) · 2 · N_linear · tokens_processed + (1 + b) · 2 · d · V · head
  positions`` for the training passes (plus ``2 ·`` the same for forward-only passes: old and
  reference log-probs), where ``N_linear`` is the decoder's linear-layer parameter count
  (LoRA adapters included), ``b = 1`` when the base weights are frozen (LoRA: the backward
  computes input gradients only) and ``2`` for full fine-tuning (Kaplan et al. 2020,
  arXiv 2001.08361, the ``6N`` rule); attention's score/value products (~3% at 250-token
  contexts for a 0.5B model) are left out;
* ``update_s`` (``time/update_s`` + ``time/old_logprob_s``), achieved GFLOP/s, and the peak
  of an fp32 matmul of the model's MLP shape measured in the same run;
* the largest difference of the updated trainable parameters and of ``actor/grad_norm``
  against the first path (identical gradients give the same update);
* before each path, an untimed update on ``--warmup`` samples (one-time kernel set-up);
* the process's peak RSS (``ru_maxrss``) after each path, the load average, the CPU flags.

The JSON goes to ``--out`` (default ``benchmarks/results/update_efficiency.json``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ragen_bench.portable import portable_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "update_efficiency.json"


def matmul_peak_gflops(m: int, k: int, n: int, seconds: float = 2.0) -> float:
    """Best GFLOP/s of an fp32 ``(m,k) @ (k,n)`` over repeated runs for about ``seconds``."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b  # warm-up
    best = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        a @ b
        dt = time.perf_counter() - t0
        best = max(best, 2.0 * m * k * n / dt / 1e9)
    return best


def linear_params(model: Any) -> tuple[int, int, int]:
    """``(decoder linear parameters, hidden size, vocabulary)`` of a (peft) causal LM."""
    from ragen_train.logprobs import _parts

    base, _, head = _parts(model)
    head_ids = {id(p) for p in head.parameters()} if head is not None else set()
    n = 0
    for mod in base.modules():
        if isinstance(mod, torch.nn.Linear):
            n += sum(p.numel() for p in mod.parameters(recurse=False) if id(p) not in head_ids)
    return n, int(base.config.hidden_size), int(base.config.vocab_size)


def head_positions(trainer: Any, batch: Any, samples: list, rows: list[int]) -> int:
    """LM-head positions a path computes for these rows (training forward)."""
    total = 0
    for mb in trainer.forwards.plan(samples, rows):
        if trainer.update_path == "plain":
            m = batch.loss_mask[mb.rows]
            cols = torch.nonzero(m.any(0)).flatten()
            start = int(cols.min()) if len(cols) else 0
            total += len(mb.rows) * (m.shape[1] - start)
        else:
            total += int(batch.loss_mask[mb.rows].sum())
    return total


def flops(
    trainer: Any, samples: list, n_lin: int, d: int, vocab: int, frozen: bool
) -> dict[str, float]:
    """Tokens and FLOPs of one update on ``samples`` (see the module docstring)."""
    from ragen_train.batch import collate

    batch = collate(samples, trainer.tokenizer.pad_token_id)
    rows = list(range(len(samples)))
    tokens = sum(
        trainer.forwards.tokens_processed(batch, samples, mb)
        for mb in trainer.forwards.plan(samples, rows)
    )
    heads = head_positions(trainer, batch, samples, rows)
    per_pass = 2.0 * n_lin * tokens + 2.0 * d * vocab * heads
    back = 1.0 if frozen else 2.0
    opt = trainer.cfg.optim
    fwd_only = (0 if trainer.forwards.single_pass else 1) + (1 if trainer.ref is not None else 0)
    total = opt.ppo_epochs * (1.0 + back) * per_pass + fwd_only * per_pass
    return {
        "tokens_processed": float(tokens * opt.ppo_epochs),
        "tokens_trained": float(batch.loss_mask.sum()),
        "lm_head_positions": float(heads * opt.ppo_epochs),
        "update_flops": total,
    }


def snapshot(trainer: Any) -> dict[str, Any]:
    return {
        "params": {
            n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad
        },
        "opt": copy.deepcopy(trainer.optimizer.state_dict()),
        "sched": copy.deepcopy(trainer.scheduler.state_dict()),
    }


def restore(trainer: Any, snap: dict[str, Any]) -> None:
    with torch.no_grad():
        for n, p in trainer.model.named_parameters():
            if n in snap["params"]:
                p.copy_(snap["params"][n])
    trainer.optimizer.load_state_dict(copy.deepcopy(snap["opt"]))
    trainer.scheduler.load_state_dict(copy.deepcopy(snap["sched"]))


def collect_steps(trainer: Any, steps: int, path: Path | None) -> list[dict[str, Any]]:
    """Per step: the kept samples and the filter's loss scale (replayed from ``path`` when
    it exists, else played now and written there)."""
    from ragen_train.batch import Sample, build_samples
    from ragen_train.step_filter import filter_step

    if path is not None and path.exists():
        raw = json.loads(path.read_text())
        return [
            {"samples": [Sample(**s) for s in st["samples"]], "scale": st["scale"]} for st in raw
        ]
    out = []
    for k in range(steps):
        records = trainer.rollout(k)
        samples, _ = build_samples(
            records, layout=trainer.layout, reward_placement=trainer.cfg.rollout.reward_placement
        )
        kept, _, scale = filter_step(
            samples,
            records,
            trainer.filter_cfg,
            trainer.env_of_group,
            trainer.dist,
            trainer.train_envs if trainer.multi_env else None,
        )
        out.append({"samples": kept, "scale": scale})
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                [
                    {
                        "samples": [dataclasses.asdict(s) for s in st["samples"]],
                        "scale": st["scale"],
                    }
                    for st in out
                ]
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="cpu-bandit-lora")
    ap.add_argument("--model", default=None, help="model.path (default: the preset's)")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--paths", default="shared_prefix,plain")
    ap.add_argument(
        "--sampler", default=None, help="rollout.sampler for the rollouts: hf (default), vllm, auto"
    )
    ap.add_argument("--engine", default=None, help=argparse.SUPPRESS)  # deprecated --sampler
    ap.add_argument("--samples", type=Path, default=None, help="replay file (written if absent)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--warmup", type=int, default=2, help="samples of an untimed update per path (0: none)"
    )
    ap.add_argument("overrides", nargs="*", help="extra config key=value")
    args = ap.parse_args(argv)
    if args.engine is not None:  # the old spelling, kept for one release
        if args.sampler not in (None, args.engine):
            print(
                f"error: --sampler {args.sampler} and --engine {args.engine} disagree; use --sampler",
                file=sys.stderr,
            )
            return 2
        print(
            "warning: --engine is deprecated in bench_update.py (removed in the next release); "
            f"use --sampler {args.engine}",
            file=sys.stderr,
        )
        args.sampler = args.engine
    args.sampler = args.sampler or "hf"
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if args.steps < 1 or not paths:
        print("error: --steps must be >= 1 and --paths non-empty", file=sys.stderr)
        return 2

    from ragen_train.config import TrainConfigError, load_config
    from ragen_train.rollout_engine import NATIVE_BF16_FLAGS, cpu_flags
    from ragen_train.trainer import StarPOTrainer

    tmp = tempfile.mkdtemp(prefix="bench_update_")
    overrides = [
        f"trainer.out_dir={tmp}",
        "trainer.loggers=jsonl",
        "trainer.collapse_every=0",
        f"rollout.sampler={args.sampler}",
        *([f"model.path={args.model}"] if args.model else []),
        *args.overrides,
    ]
    try:
        cfg = load_config(args.preset, overrides)
        trainer = StarPOTrainer(cfg)
    except (TrainConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.manual_seed(cfg.trainer.seed)
    t0 = time.perf_counter()
    steps = collect_steps(trainer, args.steps, args.samples)
    rollout_s = time.perf_counter() - t0
    n_lin, d, vocab = linear_params(trainer.model)
    frozen = cfg.model.lora.rank > 0
    inter = int(getattr(trainer.model.config, "intermediate_size", 4 * d))
    peak = matmul_peak_gflops(512, d, inter)
    start = snapshot(trainer)
    result: dict[str, Any] = {
        "preset": args.preset,
        "model": portable_path(cfg.model.path),
        "torch_threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_native_bf16": sorted(set(NATIVE_BF16_FLAGS) & cpu_flags()),
        "load_average_start": list(os.getloadavg()),
        "linear_params": n_lin,
        "lora": frozen,
        "matmul_peak_gflops": round(peak, 1),
        "rollout_s": round(rollout_s, 1),
        "samples_per_step": [len(st["samples"]) for st in steps],
        "paths": {},
    }
    reference: dict[str, Any] | None = None
    for path in paths:
        trainer.cfg.trainer.update_path = path
        trainer.forwards._update_path = None  # re-resolve (and warn if the model cannot run it)
        if args.warmup:  # first calls pay one-time kernel set-up: not part of the figure
            trainer._update(steps[0]["samples"][: args.warmup], steps[0]["scale"])
        restore(trainer, start)
        torch.manual_seed(cfg.trainer.seed)
        rows = []
        for k, st in enumerate(steps):
            trainer.step = k
            fl = flops(trainer, st["samples"], n_lin, d, vocab, frozen)
            m = trainer._update(st["samples"], st["scale"])
            secs = m.get("time/update_s", 0.0) + m.get("time/old_logprob_s", 0.0)
            rows.append(
                {
                    **fl,
                    "update_s": round(secs, 2),
                    "gflops_per_s": round(fl["update_flops"] / secs / 1e9, 1) if secs else None,
                    "grad_norm": m.get("actor/grad_norm"),
                }
            )
        params = {
            n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad
        }
        entry: dict[str, Any] = {
            "steps": rows,
            "update_s": round(sum(r["update_s"] for r in rows) / len(rows), 2),
            "update_flops": sum(r["update_flops"] for r in rows) / len(rows),
            "tokens_processed": sum(r["tokens_processed"] for r in rows) / len(rows),
            "tokens_trained": sum(r["tokens_trained"] for r in rows) / len(rows),
            "peak_rss_gib_so_far": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
            ),
            "load_average_after": list(os.getloadavg()),
        }
        entry["gflops_per_s"] = round(entry["update_flops"] / entry["update_s"] / 1e9, 1)
        entry["fraction_of_matmul_peak"] = round(entry["gflops_per_s"] / peak, 3)
        if reference is None:
            reference = {"path": path, "params": params, "rows": rows}
        else:
            entry["max_param_diff_vs_" + reference["path"]] = max(
                float((params[n] - reference["params"][n]).abs().max()) for n in params
            )
            entry["grad_norm_diff_vs_" + reference["path"]] = max(
                abs((a["grad_norm"] or 0.0) - (b["grad_norm"] or 0.0))
                for a, b in zip(rows, reference["rows"])
            )
        result["paths"][path] = entry
        print(f"{path}: {json.dumps(entry)}", flush=True)
    if "plain" in result["paths"] and len(result["paths"]) > 1:
        base = result["paths"]["plain"]
        result["vs_plain"] = {
            p: {
                "flops_ratio": round(base["update_flops"] / e["update_flops"], 2),
                "time_ratio": round(base["update_s"] / e["update_s"], 2),
                "tokens_processed_ratio": round(
                    base["tokens_processed"] / e["tokens_processed"], 2
                ),
            }
            for p, e in result["paths"].items()
            if p != "plain"
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
