"""``ragen-train starpo --resume DIR`` reads its config from the
run (as ``ragen-bench run --resume`` does), and the "no checkpoint" error names the actual cause."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from ragen_train.cli import app
from ragen_train.config import load_config
from ragen_train.logger import read_metrics
from ragen_train.resume import interrupted_message, missing_checkpoint_message

runner = CliRunner()


def run_cfg(out: Path, *extra: str):
    # Settings that differ from the quickstart preset, so a resume that ignored the run's config shows.
    return load_config(
        "quickstart",
        [
            f"trainer.out_dir={out}",
            "trainer.total_steps=1",
            "trainer.save_every=1",
            "trainer.val_every=0",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "optim.lr=2e-4",
            "trainer.collapse_every=0",
            *extra,
        ],
    )


def error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_resume_dir_reads_the_runs_own_config_and_continues_where_the_run_now_is(
    tmp_path: Path,
) -> None:
    from ragen_train.trainer import StarPOTrainer

    first = tmp_path / "first"
    StarPOTrainer(run_cfg(first)).fit()
    moved = tmp_path / "moved"
    shutil.copytree(first, moved)
    result = runner.invoke(app, ["starpo", "--resume", str(moved), "trainer.total_steps=2"])
    assert result.exit_code == 0, result.output + result.stderr
    assert f"config: {moved / 'config.json'}" in result.stdout
    saved = json.loads((moved / "config.json").read_text())
    assert (
        saved["rollout"]["group_size"] == 2 and saved["optim"]["lr"] == 2e-4
    )  # the run's, not the preset's
    assert saved["trainer"]["out_dir"] == str(moved) and saved["trainer"]["total_steps"] == 2
    assert [r["step"] for r in read_metrics(moved / "metrics.jsonl") if r["phase"] == "train"] == [
        1,
        2,
    ]
    assert [r["step"] for r in read_metrics(first / "metrics.jsonl") if r["phase"] == "train"] == [
        1
    ]


def test_resume_a_checkpoint_dir_reads_the_config_of_its_run(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    out = tmp_path / "run"
    StarPOTrainer(run_cfg(out, "trainer.keep_checkpoints=0")).fit()
    step1 = out / "checkpoints" / "step_000001"
    result = runner.invoke(app, ["starpo", "--resume", str(step1), "trainer.total_steps=2"])
    assert result.exit_code == 0, result.output + result.stderr
    assert "resuming from" in result.stdout and "(step 1)" in result.stdout
    assert json.loads((out / "config.json").read_text())["rollout"]["group_size"] == 2


def test_no_checkpoint_errors_name_the_cause(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    missing = tmp_path / "nowhere"
    line = error_line(runner.invoke(app, ["starpo", "--resume", str(missing)]))
    assert "it does not exist" in line and "save_every" not in line

    # A run killed at step 2, before its first checkpoint (save_every=5): not a save_every=0 problem.
    killed = tmp_path / "killed"
    trainer = StarPOTrainer(run_cfg(killed, "trainer.save_every=5", "trainer.total_steps=10"))
    for _ in range(2):
        trainer.logger.log(trainer.step + 1, trainer.train_step())
    trainer.logger.close()
    line = error_line(runner.invoke(app, ["starpo", "--resume", str(killed)]))
    assert (
        "stopped at step 2, before its first checkpoint at step 5 (trainer.save_every=5)" in line
    ), line
    assert "set trainer.save_every > 0" not in line

    never = tmp_path / "never"
    StarPOTrainer(run_cfg(never, "trainer.save_every=0")).fit()
    line = error_line(runner.invoke(app, ["starpo", "--resume", str(never)]))
    assert "configured never to save" in line and "that run's: 0" in line, line

    # --resume latest with a config whose out_dir holds nothing: the directory is the cause.
    msg = missing_checkpoint_message("latest", tmp_path / "empty", 10)
    assert "the directory does not exist" in msg and "trainer.save_every=10" in msg

    odd = tmp_path / "odd"
    odd.mkdir()
    line = error_line(runner.invoke(app, ["starpo", "--resume", str(odd)]))
    assert "neither a checkpoint" in line and "nor a run directory" in line


def test_resume_is_refused_by_a_backend_registered_without_resume(tmp_path: Path) -> None:
    """Which back-ends resume is the ``resume`` metadata of ``TRAINER_BACKENDS``, not a name list."""
    from ragen_train.backends import TRAINER_BACKENDS

    assert TRAINER_BACKENDS.names(resume=True) == ("native", "trl")
    result = runner.invoke(
        app, ["starpo", "--trainer", "verl", "--resume", "latest", f"trainer.out_dir={tmp_path}"]
    )
    assert result.exit_code != 0
    assert "--resume is supported by the native and trl back-ends, not 'verl'" in error_line(result)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_interrupted_before_step_1_says_how_to_start_again(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "phase": "val"}) + "\n")
    (tmp_path / "config.json").write_text(json.dumps({"trainer": {"save_every": 10}}))
    line = interrupted_message(tmp_path, 10)
    assert line.endswith(
        "start it again with trainer.overwrite=true (its first files are in the way)"
    )
    assert "trainer.overwrite=true" in missing_checkpoint_message("latest", tmp_path, 10)
