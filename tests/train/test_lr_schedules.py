"""Learning-rate schedules beyond warm-up + constant (cosine,
linear decay), logged as ``actor/lr`` and resumed with the checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ragen_train.config import TrainConfigError, load_config
from ragen_train.logger import read_metrics
from ragen_train.schedules import build_lr_scheduler, hf_scheduler_type


def lrs(
    schedule: str, *, warmup: int, total: int, min_ratio: float = 0.0, steps: int | None = None
) -> list[float]:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=2.0)
    sched = build_lr_scheduler(
        opt, schedule, warmup_steps=warmup, total_steps=total, min_lr_ratio=min_ratio
    )
    out = []
    for _ in range(steps or total):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out


def test_cosine_and_linear_decay_match_transformers_schedules() -> None:
    """Without warm-up and with min_lr_ratio 0 our decays are transformers' (the reference)."""
    from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

    for ours, theirs in (
        ("cosine", get_cosine_schedule_with_warmup),
        ("linear", get_linear_schedule_with_warmup),
    ):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.AdamW([p], lr=2.0)
        ref = theirs(opt, num_warmup_steps=0, num_training_steps=10)
        expected = []
        for _ in range(10):
            expected.append(ref.get_last_lr()[0])
            opt.step()
            ref.step()
        assert lrs(ours, warmup=0, total=10) == pytest.approx(expected, abs=1e-12), ours


def test_warmup_then_decay_to_the_floor() -> None:
    # Warm-up: (s + 1) / w of the peak (the first step already learns), as before this change.
    assert lrs("constant", warmup=4, total=8) == pytest.approx(
        [0.5, 1.0, 1.5, 2.0, 2.0, 2.0, 2.0, 2.0]
    )
    cos = lrs("cosine", warmup=2, total=10, min_ratio=0.1)
    assert cos[:3] == pytest.approx([1.0, 2.0, 2.0])
    d = 8  # decay steps after the warm-up
    assert cos[2 + 4] == pytest.approx(
        0.2 + 1.8 * (1 + math.cos(math.pi * 4 / d)) / 2
    )  # SGDR eq. 5
    lin = lrs("linear", warmup=2, total=10, min_ratio=0.25, steps=11)
    assert lin[2 + 4] == pytest.approx(2.0 - (2.0 - 0.5) * 4 / d) and lin[10] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(lin[2:], lin[3:]))  # monotone decay


def test_config_fields_and_trl_mapping() -> None:
    cfg = load_config("quickstart", ["optim.lr_schedule=cosine", "optim.min_lr_ratio=0.1"])
    assert (cfg.optim.lr_schedule, cfg.optim.min_lr_ratio) == ("cosine", 0.1)
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", ["optim.lr_schedule=exponential"])
    assert err.value.field == "optim.lr_schedule"
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", ["optim.min_lr_ratio=1.5"])
    assert err.value.field == "optim.min_lr_ratio"
    assert hf_scheduler_type("cosine", 0.1) == ("cosine_with_min_lr", {"min_lr_rate": 0.1})
    assert hf_scheduler_type("linear", 0.0) == ("linear", {})
    from ragen_train.backends.trl_backend import trl_settings

    args = trl_settings(
        load_config("quickstart", ["optim.lr_schedule=cosine", "optim.min_lr_ratio=0.1"])
    ).args
    assert args["lr_scheduler_type"] == "cosine_with_min_lr" and args["lr_scheduler_kwargs"] == {
        "min_lr_rate": 0.1
    }
    with pytest.raises(TrainConfigError) as err:
        trl_settings(
            load_config("quickstart", ["optim.lr_schedule=linear", "optim.min_lr_ratio=0.1"])
        )
    assert err.value.field == "optim.min_lr_ratio"
    from ragen_train.backends.verl_backend import verl_settings

    def verl(*o: str) -> dict[str, str]:
        return verl_settings(
            load_config("quickstart", list(o)),
            train_files="t.parquet",
            val_files="v.parquet",
            agent_loop_config="a.yaml",
        ).as_dict()

    v = verl("optim.lr_schedule=cosine", "optim.min_lr_ratio=0.1")
    assert v["actor_rollout_ref.actor.optim.lr_scheduler_type"] == "cosine"
    assert v["actor_rollout_ref.actor.optim.min_lr_ratio"] == "0.1"
    assert verl()["actor_rollout_ref.actor.optim.lr_scheduler_type"] == "constant"
    with pytest.raises(TrainConfigError) as err:
        verl("optim.lr_schedule=linear")
    assert err.value.field == "optim.lr_schedule"


def test_a_cosine_run_logs_the_scheduled_lr_and_resumes_it(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    extra = [
        f"trainer.out_dir={tmp_path}",
        "rollout.env_groups=2",
        "rollout.group_size=2",
        "rollout.max_new_tokens=8",
        "trainer.val_every=0",
        "trainer.total_steps=4",
        "trainer.save_every=2",
        "trainer.loggers=jsonl",
        "trainer.collapse_every=0",
        "optim.lr=1e-3",
        "optim.lr_schedule=cosine",
        "optim.warmup_steps=1",
        "optim.micro_batch_size=4",
    ]
    cfg = load_config("quickstart", extra)
    trainer = StarPOTrainer(cfg)
    for _ in range(2):
        trainer.logger.log(trainer.step + 1, trainer.train_step())
    trainer.save()
    trainer.logger.close()
    resumed = StarPOTrainer(cfg, resume="latest")
    resumed.fit()
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["phase"] == "train"]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    # 1 warm-up step (at the peak: (0 + 1) / 1), then 3 decay steps t = 0, 1, 2 of D = 3.
    expected = [1e-3] + [1e-3 * (1 + math.cos(math.pi * t / 3)) / 2 for t in range(3)]
    assert [r["actor/lr"] for r in rows] == pytest.approx(expected, rel=1e-9)


def test_lr_schedules_are_a_registry_read_by_config_schema_and_mappings(tmp_path) -> None:
    """``optim.lr_schedule`` takes the names of ``LR_SCHEDULES`` (the registry pattern of the estimators): a
    schedule registered at run time is accepted by the config and maps through its metadata."""
    from torch.optim import lr_scheduler as S

    from ragen_train.backends.verl_backend import verl_settings
    from ragen_train.config import config_json_schema
    from ragen_train.schedules import LR_SCHEDULES

    assert config_json_schema()["properties"]["optim"]["properties"]["lr_schedule"]["enum"] == list(
        LR_SCHEDULES
    )
    LR_SCHEDULES.add(
        "halved",
        lambda opt, steps, m: S.ConstantLR(opt, factor=0.5, total_iters=steps),
        hf=lambda m: ("constant", {}),
        verl="constant",
    )
    try:
        cfg = load_config("quickstart", [f"trainer.out_dir={tmp_path}", "optim.lr_schedule=halved"])
        assert hf_scheduler_type("halved", 0.0) == ("constant", {})
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2)
        build_lr_scheduler(opt, "halved", warmup_steps=0, total_steps=4)
        assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
        verl = verl_settings(
            cfg, train_files="t.parquet", val_files="v.parquet", agent_loop_config="a.yaml"
        ).as_dict()
        assert verl["actor_rollout_ref.actor.optim.lr_scheduler_type"] == "constant"
    finally:
        LR_SCHEDULES.remove("halved")
    with pytest.raises(TrainConfigError, match="must be one of") as err:
        load_config("quickstart", ["optim.lr_schedule=halved"])
    assert err.value.field == "optim.lr_schedule"
