"""``trainer.loggers=[jsonl,console,tensorboard]`` (the list syntax
docs/training.md and RAGEN's Hydra configs write) is accepted, and the loggers it names run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen_train.config import TrainConfigError, load_config


@pytest.mark.parametrize(
    "value",
    [
        "[jsonl,console,tensorboard]",
        "[jsonl, console, tensorboard]",
        "['jsonl','console','tensorboard']",
        '["jsonl","console","tensorboard"]',
        "jsonl,console,tensorboard",
    ],
)
def test_list_syntaxes_give_the_same_loggers(value: str) -> None:
    assert load_config("quickstart", [f"trainer.loggers={value}"]).trainer.loggers == [
        "jsonl",
        "console",
        "tensorboard",
    ]


def test_an_unknown_logger_in_brackets_is_named_without_brackets() -> None:
    with pytest.raises(TrainConfigError, match=r"unknown logger 'tensorbord'"):
        load_config("quickstart", ["trainer.loggers=[jsonl,tensorbord]"])


def test_a_run_with_the_documented_loggers_writes_tensorboard_events(tmp_path: Path) -> None:
    pytest.importorskip(
        "tensorboard", reason="the tensorboard logger needs the tensorboard package"
    )
    from ragen_train.trainer import StarPOTrainer

    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "trainer.loggers=[jsonl,console,tensorboard]",
            "trainer.total_steps=1",
            "trainer.val_every=0",
            "trainer.save_every=0",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.collapse_every=0",
        ],
    )
    StarPOTrainer(cfg).fit()
    assert (tmp_path / "metrics.jsonl").stat().st_size > 0
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
