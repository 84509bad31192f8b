"""End-to-end recipes: SFT warm start, StarPO, evaluation before and after, curves.

:func:`run_sft_then_starpo` is what ``ragen-train quickstart`` and
``examples/learning_demo.py`` run: build the model (the tiny preset when
``model.path == "tiny"``), SFT on demonstrations, evaluate the SFT checkpoint on held-out
seeds (the test split), train with StarPO, evaluate again with the same seeds, save
``summary.json`` and a PNG of the training curves.

``summary.json``: ``untrained``, ``before_rl`` and ``after_rl`` (test-split metrics, keyed
``test/<metric>``; ``val/`` keys are the validation split's, in ``metrics.jsonl``),
``started_from`` (the SFT checkpoint passed in as ``sft_model``, else ``null``),
``sft_model_dir`` (the ``sft_model/`` this run saved after its own SFT, else ``null``),
``final_model_dir``, ``eval_split``, ``eval_episodes``, ``wall_s``.

``sft_model/``, ``final_model/`` and ``summary.json`` are written atomically (complete or
absent after a crash; the model folders carry a ``manifest.json``, see
:mod:`ragen_train.checkpoint`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragen_bench.fileio import atomic_write_json
from ragen_bench.rollout import rollout_config

from .checkpoint import save_model
from .config import StarPOConfig
from .logger import MetricLogger
from .modeling import load_policy, load_tokenizer
from .plot import plot_metrics
from .progress import ProgressLines
from .sft import sft_samples, sft_total_steps, sft_train
from .trainer import StarPOTrainer


@dataclass
class PipelineResult:
    """Outcome of :func:`run_sft_then_starpo`."""

    out_dir: Path
    before: dict[str, float]
    after: dict[str, float]
    plot: Path | None
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "before": self.before,
            "after": self.after,
            "plot": str(self.plot) if self.plot else None,
            "wall_s": round(self.wall_s, 1),
        }


def run_sft_then_starpo(
    cfg: StarPOConfig,
    *,
    eval_episodes: int | None = None,
    log: Any = print,
    sft_model: str | Path | None = None,
) -> PipelineResult:
    """SFT → evaluate → StarPO → evaluate (test split, same seeds) → plot.

    Args:
        cfg: the config (its ``sft`` section drives the warm start).
        eval_episodes: held-out episodes per evaluation (default ``trainer.val_episodes``).
        log: a ``print``-like function for progress lines.
        sft_model: an SFT checkpoint (a ``sft_model/`` directory written by an earlier
            run) to start from instead of running SFT, so that several algorithms can
            start from the same weights; the policy, and the critic if any, load it.
    """
    t0 = time.perf_counter()
    if sft_model is not None:
        cfg = replace(cfg, model=replace(cfg.model, path=str(sft_model)))
    out = Path(cfg.trainer.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(cfg.model.path)
    model = load_policy(cfg.model)
    trainer = StarPOTrainer(cfg, model=model, tokenizer=tokenizer)
    n_eval = eval_episodes or cfg.trainer.val_episodes
    test = cfg.env.test_split

    base: dict[str, float] = {}
    sft_dir: Path | None = None
    if sft_model is None:
        base = trainer.evaluate(split=test, episodes=n_eval, prefix="test")
        log(f"[ragen] untrained model: test success {base.get('test/success', 0):.3f}")
    if sft_model is None and (cfg.sft.episodes > 0 or cfg.sft.demo_policy == "jsonl"):
        if cfg.sft.demo_policy != "jsonl":
            log(
                f"[ragen] SFT: playing {cfg.sft.episodes} demonstration episodes ({cfg.sft.demo_policy})"
            )
        samples = sft_samples(
            cfg, tokenizer, rollout_config(trainer.cfg.env.id, trainer.cfg.rollout, temperature=1.0)
        )
        total = sft_total_steps(cfg, len(samples))
        log(
            f"[ragen] SFT on {len(samples)} demonstration samples ({cfg.sft.demo_policy}), {total} steps"
        )
        if trainer.dist.is_main and (out / "sft" / "metrics.jsonl").exists():
            (
                out / "sft" / "metrics.jsonl"
            ).unlink()  # an earlier quickstart's SFT rows (a recipe overwrites)
        sft_log = MetricLogger(out / "sft", ["jsonl"], enabled=trainer.dist.is_main)
        progress = ProgressLines(log, "[ragen] SFT", total)

        def on_step(s: int, row: dict[str, float]) -> None:
            sft_log.log(s, row, phase="sft")
            progress(s, row)

        hist = sft_train(trainer.model, tokenizer, samples, cfg, device=trainer.device, log=on_step)
        sft_log.close()
        log(f"[ragen] SFT done: {len(hist)} steps, final loss {hist[-1]['sft/loss']:.3f}")
        sft_dir = out / "sft_model"
        if trainer.dist.is_main:
            save_model(trainer.model, tokenizer, sft_dir, config=cfg.to_dict())
    before = trainer.evaluate(split=test, episodes=n_eval, prefix="test")
    log(f"[ragen] after SFT (before RL): test success {before.get('test/success', 0):.3f}")
    trainer.fit()
    after = trainer.evaluate(split=test, episodes=n_eval, prefix="test")
    log(f"[ragen] after StarPO: test success {after.get('test/success', 0):.3f}")
    plot = None
    if trainer.dist.is_main:  # final_model/ was saved by fit()
        plot = plot_metrics(
            out / "metrics.jsonl", out / "training_curves.png", title=f"{cfg.name}: {cfg.env.id}"
        )
        res = {
            "untrained": base or None,
            "started_from": str(sft_model) if sft_model else None,
            "sft_model_dir": str(sft_dir) if sft_dir else None,
            "final_model_dir": str(out / "final_model"),
            "before_rl": before,
            "after_rl": after,
            "eval_split": test,
            "eval_episodes": n_eval,
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        atomic_write_json(out / "summary.json", res)
    return PipelineResult(out, before, after, plot, time.perf_counter() - t0)
