"""Item 9, training side (issue 17): ``ragen-train --version``; suggestions for mistyped config
fields; ``quickstart``'s ``summary.json`` keys its test-split results ``test/``; ``trainer.overwrite``
clears the earlier run's files; the training plot has loss, KL, learning-rate and critic panels
with labelled axes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragen_envs
from ragen_train.cli import app
from ragen_train.config import TrainConfigError, load_config
from ragen_train.plot import PANELS, Y_LABELS, plot_metrics, training_figure

runner = CliRunner()


def test_version_flag() -> None:
    result = runner.invoke(app, ["--version"])
    assert (
        result.exit_code == 0 and result.stdout.strip() == f"ragen-train {ragen_envs.__version__}"
    )


@pytest.mark.parametrize(
    "override, field, hint",
    [
        ("optim.lrr=1e-5", "optim.lrr", "did you mean optim.lr?"),
        ("rollout.temprature=0.7", "rollout.temprature", "did you mean rollout.temperature?"),
        (
            "algorithm.filter.stratgy=top_k",
            "algorithm.filter.stratgy",
            "did you mean algorithm.filter.strategy?",
        ),
        ("optimm.lr=1e-5", "optimm", "did you mean optim.lr?"),
        # Other trainers' names (Hugging Face TrainingArguments) for ours (issue 29 item 9).
        ("optim.learning_rate=1e-5", "optim.learning_rate", "did you mean optim.lr?"),
        ("optim.max_grad_norm=1.0", "optim.max_grad_norm", "did you mean optim.grad_clip?"),
    ],
)
def test_mistyped_config_fields_get_a_suggestion(override: str, field: str, hint: str) -> None:
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", [override])
    assert err.value.field == field and err.value.reason.endswith(hint), err.value
    line = runner.invoke(app, ["show-config", override])
    assert line.exit_code == 2 and hint in line.stderr


def test_mistyped_field_in_a_config_file_gets_a_suggestion(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"optim": {"lrr": 1e-5}}))
    with pytest.raises(TrainConfigError, match=r"did you mean optim\.lr\?") as err:
        load_config(str(f))
    assert err.value.field == "optim.lrr"
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", ["optim.zzz=1"])
    assert "did you mean" not in str(err.value)  # nothing close: no guess


def test_quickstart_summary_keys_test_results_test(tmp_path: Path) -> None:
    from ragen_train.pipeline import run_sft_then_starpo

    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "trainer.total_steps=1",
            "trainer.val_every=1",
            "trainer.val_episodes=2",
            "trainer.save_every=0",
            "trainer.val_before_train=false",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
            "sft.episodes=4",
            "sft.steps=1",
            "sft.batch_size=4",
            "sft.micro_batch_size=4",
        ],
    )
    res = run_sft_then_starpo(cfg, eval_episodes=2, log=lambda _: None)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("untrained", "before_rl", "after_rl"):
        assert summary[key] and all(k.startswith("test/") for k in summary[key]), summary[key]
        assert "test/success" in summary[key]
    assert res.after == summary["after_rl"]
    val_rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert any("val/success" in r for r in val_rows if r["phase"] == "val")  # validation keeps val/


def test_overwrite_clears_the_earlier_runs_files(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    out = tmp_path / "run"
    for d in (
        "checkpoints/step_000005",
        "final_model",
        "eval_reports",
        "tensorboard",
        "trl/checkpoint-5",
        "sft_model",
    ):
        (out / d).mkdir(parents=True)
    for f in (
        "metrics.jsonl",
        "summary.json",
        "report.html",
        "training_curves.png",
        "config.resumed_from.json",
        "config.resumed_from.2.json",
        "final_model/model.safetensors",
        "sft_model/config.json",
    ):
        (out / f).write_text("{}\n")
    cfg = load_config(
        "quickstart", [f"trainer.out_dir={out}", "trainer.total_steps=1", "trainer.loggers=jsonl"]
    )
    with pytest.raises(FileExistsError, match="trainer.overwrite=true"):
        StarPOTrainer(cfg)
    overwrite = load_config(
        "quickstart",
        [
            f"trainer.out_dir={out}",
            "trainer.total_steps=1",
            "trainer.loggers=jsonl",
            "trainer.overwrite=true",
        ],
    )
    trainer = StarPOTrainer(overwrite)
    trainer.logger.close()
    left = sorted(p.name for p in out.iterdir())
    assert left == ["config.json", "metrics.jsonl", "sft_model"], (
        left
    )  # a fresh (empty) metrics.jsonl
    assert (out / "metrics.jsonl").read_text() == ""


def test_overwrite_keeps_what_the_new_run_reads(tmp_path: Path) -> None:
    from ragen_train.outputs import clear_run_outputs

    (tmp_path / "final_model").mkdir()
    (tmp_path / "final_model" / "config.json").write_text("{}")
    (tmp_path / "summary.json").write_text("{}")
    removed = clear_run_outputs(
        tmp_path, keep=[tmp_path / "final_model"]
    )  # model.path=<out_dir>/final_model
    assert (
        removed == [tmp_path / "summary.json"]
        and (tmp_path / "final_model" / "config.json").is_file()
    )


def test_plot_has_loss_kl_lr_and_critic_panels_with_labelled_axes(tmp_path: Path) -> None:
    rows = [
        {
            "step": s,
            "phase": "train",
            "train/success": 0.1 * s,
            "actor/pg_loss": -0.01 * s,
            "actor/kl_loss": 0.001 * s,
            "actor/lr": 1e-6 * s,
            "critic/vf_loss": 1.0 / s,
            "critic/value_mean": 0.2,
            "actor/grad_norm": 1.0,
        }
        for s in range(1, 4)
    ]
    rows.append({"step": 3, "phase": "val", "val/success": 0.5})
    fig = training_figure(rows)
    axes = {ax.get_title(): ax for ax in fig.axes}
    assert list(axes) == [title for title, _ in PANELS]
    for title in ("policy loss", "KL to the reference", "learning rate", "critic"):
        assert title in axes
    for title, ax in axes.items():
        assert ax.get_xlabel() == "training step" and ax.get_ylabel() == Y_LABELS[title]
    labels = lambda t: [ln.get_label() for ln in axes[t].get_lines()]  # noqa: E731
    assert labels("learning rate") == ["actor/lr"] and labels("critic") == [
        "critic/vf_loss",
        "critic/value_mean",
    ]
    assert labels("KL to the reference") == ["actor/kl_loss"] and labels("policy loss") == [
        "actor/pg_loss"
    ]
    assert list(axes["learning rate"].get_lines()[0].get_ydata()) == pytest.approx(
        [1e-6, 2e-6, 3e-6]
    )
    assert [t.get_text() for t in axes["policy entropy"].texts] == ["not logged in this run"]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    png = plot_metrics(path, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
