"""The SFT warm start inside ``quickstart`` shows progress, and
Ctrl-C says how to ``--resume`` (a real ``ragen-train starpo`` process interrupted with SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ragen_train.config import load_config
from ragen_train.progress import ProgressLines
from ragen_train.resume import interrupted_message

ROOT = Path(__file__).resolve().parents[2]


def test_progress_lines_first_throttled_last() -> None:
    lines: list[str] = []
    now = [0.0]
    p = ProgressLines(lines.append, "[ragen] SFT", 10, every_s=5.0, clock=lambda: now[0])
    for step in range(1, 11):
        now[0] = step * 2.0  # one step every 2 s
        p(step, {"sft/loss": 1.0 / step})
    assert [ln.split("  ")[0] for ln in lines] == [
        "[ragen] SFT step 1/10",
        "[ragen] SFT step 4/10",
        "[ragen] SFT step 7/10",
        "[ragen] SFT step 10/10",
    ]
    assert lines[-1] == "[ragen] SFT step 10/10  loss 0.100  (20 s)"


def test_quickstart_sft_reports_its_steps(tmp_path: Path) -> None:
    from ragen_train.pipeline import run_sft_then_starpo

    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "trainer.total_steps=1",
            "trainer.val_every=0",
            "trainer.save_every=0",
            "trainer.val_before_train=false",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
            "sft.episodes=8",
            "sft.steps=3",
            "sft.batch_size=4",
            "sft.micro_batch_size=4",
        ],
    )
    lines: list[str] = []
    run_sft_then_starpo(cfg, eval_episodes=2, log=lines.append)
    assert f"[ragen] SFT: playing 8 demonstration episodes ({cfg.sft.demo_policy})" in lines
    steps = [ln for ln in lines if ln.startswith("[ragen] SFT step")]
    assert steps[0].startswith("[ragen] SFT step 1/3  loss ") and steps[-1].startswith(
        "[ragen] SFT step 3/3  loss "
    )


def _starpo(*overrides: str) -> subprocess.Popen:
    """A real ``ragen-train starpo --config quickstart OVERRIDES`` process (pipes for both streams)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "ragen_train", "starpo", "--config", "quickstart", *overrides],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        # A terminal gives the command Ctrl-C's default disposition; an ignored SIGINT
        # inherited from the test process (a backgrounded CI job, an in-process engine) passes
        # through exec and makes Python ignore Ctrl-C, which is not what this test is about.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _ctrl_c(proc: subprocess.Popen) -> str:
    """Send ``proc`` what Ctrl-C sends; its last non-empty stderr line, once it exited with 130
    and no traceback."""
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    return [ln for ln in err.splitlines() if ln.strip()][-1]


def test_ctrl_c_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _starpo(
        f"trainer.out_dir={out}",
        "trainer.total_steps=1000",
        "trainer.save_every=1",
        "trainer.val_every=0",
        "rollout.env_groups=1",
        "rollout.group_size=2",
        "rollout.max_new_tokens=4",
        "trainer.loggers=jsonl",
        "trainer.collapse_every=0",
    )
    deadline = time.monotonic() + 240
    while not list((out / "checkpoints").glob("step_*/manifest.json")):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate()[1][-2000:])
        time.sleep(0.5)
    last = _ctrl_c(proc)
    assert (
        last.startswith("interrupted: continue from checkpoint step ")
        and f"`ragen-train starpo --resume {out}`" in last
    ), last


def test_ctrl_c_while_the_model_loads_says_nothing_was_trained(tmp_path: Path) -> None:
    """The first seconds of ``starpo`` import torch and load the model and the sampler; Ctrl-C
    there used to exit 130 with no line at all."""
    out = tmp_path / "run"
    proc = _starpo(f"trainer.out_dir={out}", "trainer.allocator=system")
    seen: list[str] = []
    # The allocator line is the last before torch and the model load (it comes after the
    # config is read and before the trainer module is imported, which takes seconds).
    while not any(ln.startswith("memory allocator:") for ln in seen):
        line = proc.stderr.readline()
        if not line:  # the process ended first
            proc.kill()
            raise AssertionError(("".join(seen), proc.communicate()))
        seen.append(line)
    assert _ctrl_c(proc) == (
        f"interrupted: nothing to resume in {out} — stopped while loading the model and sampler, "
        "before step 1; run the same command again"
    )
    assert not (out / "metrics.jsonl").exists() or (out / "metrics.jsonl").stat().st_size == 0


def test_interrupt_before_any_checkpoint_says_there_is_nothing_to_resume(tmp_path: Path) -> None:
    msg = interrupted_message(tmp_path, 10, command="quickstart")
    assert msg == (
        f"interrupted: nothing to resume in {tmp_path} — no checkpoint was written yet (one every "
        "trainer.save_every=10 steps); run the quickstart again"
    )
    assert "trainer.save_every=0" in interrupted_message(tmp_path, 0)
