"""examples/real_model_run.py: the training time budget of the real-model run."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ragen_train.config import apply_overrides, load_config
from ragen_train.trainer import StarPOTrainer
from tests.helpers.scripts import load_script


def _script():
    return load_script("examples/real_model_run.py")


def test_train_budget_stops_fit_before_the_step_that_would_overrun(tmp_path: Path) -> None:
    """A real tiny StarPO run planned for 1000 steps, on a clock that reads 5 s later at every
    call (so each step lasts 5 s and starts 5 s after the previous one ended): with a 32 s
    budget, step 3 ends at 30 s and the next would end near 35 s, so fit() stops after 3."""
    cfg = apply_overrides(
        load_config("tiny-bandit-grpo"),
        [
            f"trainer.out_dir={tmp_path / 'run'}",
            "trainer.total_steps=1000",
            "trainer.val_every=0",
            "rollout.env_groups=2",
            "rollout.group_size=2",
        ],
    )
    trainer = StarPOTrainer(cfg)
    ticks = itertools.count(5, 5)
    _script()._stop_within(trainer, 32.0, 0.0, clock=lambda: float(next(ticks)))
    trainer.fit()
    assert trainer.step == 3
    assert cfg.trainer.total_steps == 3
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert sum('"phase": "train"' in x for x in lines) == 3


def test_evaluate_hands_back_the_episodes_behind_its_metrics(tmp_path: Path) -> None:
    """``evaluate(records_out=...)`` returns the episodes it scored (the
    per-episode outcomes of a paired before/after test): one per seed, and the success share
    of the rows equals the ``val/success`` metric."""
    cfg = apply_overrides(
        load_config("tiny-bandit-grpo"),
        [f"trainer.out_dir={tmp_path / 'run'}", "trainer.val_every=0", "rollout.batch_size=8"],
    )
    trainer = StarPOTrainer(cfg)
    records: list = []
    metrics = trainer.evaluate(split=cfg.env.test_split, episodes=20, records_out=records)
    rows = [_script().episode_outcome(r) for r in records]
    assert sorted(r["seed"] for r in rows) == list(range(20))
    assert sum(r["success"] for r in rows) / 20 == pytest.approx(metrics["val/success"])
    assert all(r["turns"] >= 1 and r["actions"] for r in rows if r["well_formed"])
