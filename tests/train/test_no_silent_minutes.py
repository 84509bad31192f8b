"""No silent minutes: long validation and rollout phases print progress,
Ctrl-C stops a generation in flight at once, and ``ragen-train presets`` marks GPU-scale
presets with what a full run plays."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from ragen_train import cli as train_cli
from ragen_train.config import load_config
from ragen_train.progress import PhaseProgress, UpdateProgress
from tests.helpers.cli import in_process_cli


def test_phase_progress_beats_while_nothing_finishes() -> None:
    lines: list[str] = []
    with PhaseProgress(lines.append, "[ragen] validation", 256, every_s=0.05) as p:
        time.sleep(0.3)  # a batched generation: no episode finishes for a while
        p.on_turn(0, None)
        p.on_episode(None)
        time.sleep(0.12)
    assert len(lines) >= 3
    assert re.fullmatch(
        r"\[ragen\] validation: 0/256 episodes finished, 0 turns played \(0 s\)", lines[0]
    )
    assert lines[-1].startswith("[ragen] validation: 1/256 episodes finished, 1 turns played")
    quiet: list[str] = []
    with PhaseProgress(quiet.append, "x", 4, every_s=5.0):
        pass
    assert quiet == []  # a short phase prints nothing


def test_trainer_validation_and_rollouts_print_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from ragen_train.trainer import StarPOTrainer

    monkeypatch.setattr(StarPOTrainer, "progress_every_s", 0.01)
    cfg = load_config("tiny-bandit-grpo", [f"trainer.out_dir={tmp_path}"])
    trainer = StarPOTrainer(cfg)
    trainer.evaluate(episodes=16)
    trainer.rollout(0)
    out = capsys.readouterr().out
    assert re.search(r"\[ragen\] val \(validation split\): 16/16 episodes finished", out)
    assert re.search(r"\[ragen\] step 1 rollouts: 64/64 episodes finished", out)


def test_update_progress_counts_samples_and_epochs() -> None:
    lines: list[str] = []
    with UpdateProgress(lines.append, "[ragen] step 2 update", 64, epochs=2, every_s=0.05) as p:
        time.sleep(0.12)
        p.epoch = 1
        p.on_samples(40)
        time.sleep(0.12)
    assert re.fullmatch(
        r"\[ragen\] step 2 update: 0/64 samples trained, epoch 1/2 \(0 s\)", lines[0]
    )
    assert lines[-1].startswith("[ragen] step 2 update: 40/64 samples trained, epoch 2/2")


def test_a_trainer_update_prints_its_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A CPU update of a real model runs for minutes with no other output (a
    FrozenLake run: 15+ minutes); the trainer's update now beats like a rollout."""
    from ragen_train.trainer import StarPOTrainer

    monkeypatch.setattr(StarPOTrainer, "progress_every_s", 0.001)
    cfg = load_config(
        "tiny-bandit-grpo",
        [f"trainer.out_dir={tmp_path}", "trainer.val_every=0", "optim.ppo_epochs=2"],
    )
    trainer = StarPOTrainer(cfg)
    trainer.train_step()
    out = capsys.readouterr().out
    # 64 episodes, each one sample, 2 PPO epochs: the closing line counts all 128 passes.
    # the first step's update line says step 1, as the first step's `train` metrics line does
    assert re.search(r"\[ragen\] step 1 update: 128/128 samples trained, epoch 2/2", out), out[
        -2000:
    ]


def test_a_cancelled_generation_stops_at_once() -> None:
    """Ctrl-C cancels the asyncio task; the worker thread (which the interpreter waits for
    before exiting) stops at the next token instead of finishing the batch."""
    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.types import PolicyRequest, SamplingParams

    policy = HFPolicy("tiny")
    policy._eos_ids = lambda: [10**6]  # no end of text: every row runs to max_new_tokens
    reqs = [
        PolicyRequest(messages=[{"role": "user", "content": "hi"}], episode_index=i, turn=0)
        for i in range(8)
    ]
    params = SamplingParams(max_new_tokens=300, temperature=1.0)
    t0 = time.monotonic()
    full = policy.generate_sync(reqs, params)
    t_full = time.monotonic() - t0
    assert all(g.completion_tokens == 300 for g in full)

    async def cancel_midway(wait_s: float) -> float | None:
        task = asyncio.create_task(policy.generate(reqs, params))
        await asyncio.sleep(wait_s)
        if task.done():  # this batch ran faster than the timed one: no cancel to test
            await task
            return None
        task.cancel()
        t = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        while policy._lock.locked():  # the thread still generating
            await asyncio.sleep(0.002)
        return time.monotonic() - t

    # A quarter of the timed batch; shorter if this batch outran it (a shared, loaded CPU
    # can run the same batch several times faster a moment later).
    for wait_s in (t_full / 4, t_full / 16, t_full / 64):
        t_stop = asyncio.run(cancel_midway(wait_s))
        if t_stop is not None:
            break
    assert t_stop is not None, "every batch finished before its cancel"
    assert t_stop < t_full / 4  # was: the rest of the batch (~3/4 of t_full)
    assert (
        policy.generate_sync(reqs[:1], SamplingParams(max_new_tokens=5))[0].completion_tokens == 5
    )


def test_presets_mark_gpu_scale_and_what_a_run_plays(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = in_process_cli(monkeypatch, train_cli)("presets")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "env=" in line}
    assert rows["ragen2-ppo-sokoban-3b"][1] == "GPU" and rows["tiny-bandit-grpo"][1] == "CPU"
    assert rows["quickstart"][1] == "CPU"
    # tiny-bandit-grpo: 30 steps x 8 groups x 8 = 1920; validations at 0, 5, ..., 30: 7 x 64
    assert " ".join(rows["tiny-bandit-grpo"]).endswith("episodes=1920 train + 448 val")
    assert "GPU: a GPU-scale preset" in out


def test_gpu_preset_on_cpu_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(train_cli, "_warn", warned.append)
    cfg = load_config("sudoku", ["model.path=tiny", "model.device=cpu"])
    train_cli._warn_gpu_preset_on_cpu("sudoku", cfg)
    assert len(warned) == 1 and warned[0].startswith("sudoku is a GPU-scale preset run on the CPU")
    train_cli._warn_gpu_preset_on_cpu("tiny-bandit-grpo", load_config("tiny-bandit-grpo"))
    assert len(warned) == 1
