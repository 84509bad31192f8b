"""``ragen-train`` as a new user meets it: ``eval`` plays a model with its training protocol,
mistakes are one ``error:`` line naming the option or field (exit 2), output goes to
stdout and problems to stderr, resume keeps the previous config, devices are checked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import ragen_envs
from ragen_train.cli import _logged_val, _val_text, app
from ragen_train.config import TrainConfigError, load_config
from ragen_train.evaluation import EvalSetupError, find_training_config, model_folders, plan_eval
from ragen_train.logger import MetricLogger
from tests.helpers.cli import one_line as _one_line
from tests.helpers.cli import stop_when as _stop_when
from tests.helpers.cli import subprocess_env as _env
from tests.helpers.cli import train  # noqa: F401  (a fixture)

runner = CliRunner()

# A training protocol that differs from the env's defaults in every setting eval must copy.
PROTOCOL = [
    "rollout.enable_think=false",
    "rollout.system_prompt=minimal",
    "rollout.context_mode=last_k",
    "rollout.context_window=3",
    "rollout.max_new_tokens=24",
    "rollout.max_turns=2",
    "rollout.max_actions_per_turn=1",
    "rollout.format_penalty=-0.5",
    "rollout.max_invalid_answers=2",
    "trainer.val_temperature=0.3",
    "env.test_split=validation",
]


def fake_model(path: Path) -> Path:
    """A folder that looks like a Hugging Face model (enough for the checks before loading)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    return path


def fake_run(tmp_path: Path, overrides: list[str] | None = None) -> tuple[Path, object]:
    """A run folder as the trainer lays it out: config.json, final_model, sft_model, a checkpoint."""
    run = tmp_path / "run"
    cfg = load_config("quickstart", [f"trainer.out_dir={run}", *(overrides or [])])
    run.mkdir()
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    for sub in (
        "final_model",
        "sft_model",
        "checkpoints/step_000002/model",
        "checkpoints/step_000004/model",
    ):
        fake_model(run / sub)
    return run, cfg


def one_error_line(result, prefix: str) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]


# ------------------------------------------------------------------ eval protocol
def test_eval_takes_the_whole_training_protocol_from_config_json(tmp_path: Path) -> None:
    from ragen_bench.rollout import rollout_config

    run, cfg = fake_run(tmp_path, PROTOCOL)
    plan = plan_eval(run / "final_model")
    assert plan.source == (run / "config.json").absolute() and plan.run_name == "quickstart"
    # exactly what the trainer's validation plays (same function, val temperature)
    assert plan.resolved == rollout_config(cfg.env.id, cfg.rollout, temperature=0.3)
    r = plan.resolved
    assert (r.enable_think, r.system_prompt, r.context_mode, r.context_window) == (
        False,
        "minimal",
        "last_k",
        3,
    )
    assert (r.max_turns, r.max_actions_per_turn, r.format_penalty, r.max_invalid_answers) == (
        2,
        1,
        -0.5,
        2,
    )
    assert (r.sampling.max_new_tokens, r.sampling.temperature) == (24, 0.3)
    assert plan.env_id == "ragen/Bandit-PairsAB-v0" and plan.env_config == {"risky_prob": 1.0}
    assert plan.split == "validation" and plan.overridden == [] and plan.notes == []
    assert str(run / "config.json") in plan.describe() and "think off" in plan.describe()


@pytest.mark.parametrize("sub", ["final_model", "sft_model", "checkpoints/step_000002/model"])
def test_training_config_is_found_for_every_model_layout(tmp_path: Path, sub: str) -> None:
    run, _ = fake_run(tmp_path)
    found = find_training_config(run / sub)
    assert found is not None and found[0] == (run / "config.json").absolute()


def test_checkpoint_without_run_config_uses_its_state_json(tmp_path: Path) -> None:
    run, cfg = fake_run(tmp_path, ["rollout.max_new_tokens=12"])
    (run / "config.json").unlink()
    (run / "checkpoints" / "step_000002" / "state.json").write_text(
        json.dumps({"step": 2, "config": cfg.to_dict()})
    )
    plan = plan_eval(run / "checkpoints" / "step_000002" / "model")
    assert plan.source.name == "state.json" and plan.resolved.sampling.max_new_tokens == 12


def test_eval_options_override_single_settings(tmp_path: Path) -> None:
    run, _ = fake_run(tmp_path, PROTOCOL)
    plan = plan_eval(
        run / "final_model",
        split="train",
        temperature=0.0,
        max_new_tokens=8,
        context_mode="full",
        think=True,
        episodes=5,
    )
    r = plan.resolved
    assert (r.enable_think, r.context_mode, r.sampling.max_new_tokens, r.sampling.temperature) == (
        True,
        "full",
        8,
        0.0,
    )
    assert (r.system_prompt, r.max_turns, r.format_penalty) == (
        "minimal",
        2,
        -0.5,
    )  # the rest stays
    assert (plan.split, plan.episodes) == ("train", 5)
    assert plan.overridden == [
        "--split",
        "--temperature",
        "--max-new-tokens",
        "--context-mode",
        "--think/--no-think",
    ]


def test_eval_on_another_env_drops_env_specific_settings(tmp_path: Path) -> None:
    import ragen_envs

    run, _ = fake_run(tmp_path, PROTOCOL)
    plan = plan_eval(run / "final_model", env="ragen/Sokoban-v0")
    defaults = ragen_envs.get_entry("ragen/Sokoban-v0").agent_defaults
    assert plan.env_config == {}  # the Bandit's risky_prob would not fit
    assert plan.resolved.max_turns == defaults["max_turns"]
    assert (
        plan.resolved.enable_think is False and plan.resolved.sampling.max_new_tokens == 24
    )  # the model's protocol
    assert any("not the trained env" in n for n in plan.notes)


def test_eval_without_training_config_uses_env_defaults_and_says_so(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "somewhere" / "model")
    with pytest.raises(EvalSetupError) as exc:
        plan_eval(model)
    assert exc.value.option == "--env"
    plan = plan_eval(model, env="ragen/Bandit-v0")
    assert plan.source is None and plan.resolved.enable_think is True  # the harness default
    assert plan.resolved.max_turns == 1  # Bandit's agent_defaults
    assert any("no training config" in n for n in plan.notes)
    assert "env's defaults" in plan.describe()


def test_run_folder_lists_its_model_folders(tmp_path: Path) -> None:
    run, _ = fake_run(tmp_path)
    assert model_folders(run) == [
        run / "final_model",
        run / "sft_model",
        run / "checkpoints/step_000004/model",
        run / "checkpoints/step_000002/model",
    ]
    with pytest.raises(EvalSetupError, match="training run folder") as exc:
        plan_eval(run)
    assert exc.value.option == "CHECKPOINT" and "final_model" in str(exc.value)


@pytest.mark.parametrize(
    ("args", "prefix", "mentions"),
    [
        (["--env", "ragen/Sokobn-v0"], "error: --env:", "did you mean"),
        (["--episodes", "-5"], "error: --episodes:", ">= 1"),
        (["--split", "dev"], "error: --split:", "train, validation, test"),
        (["--context-mode", "bogus"], "error: --context-mode:", "single_turn"),
        (["--max-new-tokens", "0"], "error: --max-new-tokens:", ">= 1"),
        (["--temperature", "-1"], "error: --temperature:", ">= 0"),
    ],
)
def test_eval_mistakes_are_one_line(
    tmp_path: Path, args: list[str], prefix: str, mentions: str
) -> None:
    run, _ = fake_run(tmp_path)
    line = one_error_line(runner.invoke(app, ["eval", str(run / "final_model"), *args]), prefix)
    assert mentions in line


def test_eval_of_a_run_folder_is_one_line_naming_the_model_folders(tmp_path: Path) -> None:
    run, _ = fake_run(tmp_path)
    line = one_error_line(runner.invoke(app, ["eval", str(run)]), "error: CHECKPOINT:")
    assert "final_model" in line and "sft_model" in line and "checkpoints/step_000004/model" in line


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder whose final_model is the tiny model (real weights and tokenizer)."""
    from ragen_bench.tiny import tiny_model_path

    run = tmp_path_factory.mktemp("trained") / "run"
    cfg = load_config("quickstart", [f"trainer.out_dir={run}", "rollout.max_new_tokens=8"])
    run.mkdir()
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    shutil.copytree(tiny_model_path(), run / "final_model")
    return run


def test_eval_runs_the_training_protocol_and_prints_it_on_stdout(
    trained: Path, tmp_path: Path
) -> None:
    res = runner.invoke(
        app, ["eval", str(trained / "final_model"), "--episodes", "2", "--out", str(tmp_path)]
    )
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert res.stderr == ""
    assert f"protocol from the training config {trained / 'config.json'}" in res.stdout
    run_json = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    assert run_json["env_id"] == "ragen/Bandit-PairsAB-v0"
    assert run_json["env_config"] == {"split": "test", "risky_prob": 1.0}
    r = run_json["rollout"]
    assert (r["enable_think"], r["system_prompt"], r["context_mode"]) == (
        False,
        "minimal",
        "single_turn",
    )
    assert (r["sampling"]["max_new_tokens"], r["sampling"]["temperature"]) == (8, 0.5)


def test_eval_without_training_config_warns_on_stderr(trained: Path, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    shutil.copytree(trained / "final_model", lone)
    res = runner.invoke(
        app,
        [
            "eval",
            str(lone),
            "--env",
            "ragen/Bandit-v0",
            "--episodes",
            "1",
            "--no-think",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert res.stderr.startswith("warning: no training config found")
    assert "env's defaults" in res.stdout
    r = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())["rollout"]
    assert r["enable_think"] is False and r["sampling"]["max_new_tokens"] == 64


# ------------------------------------------------------------------ config and device errors
def test_config_file_errors_are_one_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\noptim:\n  lr: [1\n")
    line = one_error_line(
        runner.invoke(app, ["show-config", "--config", str(p)]), "config error: --config:"
    )
    assert "bad.yaml" in line and "line" in line


@pytest.mark.parametrize(
    ("args", "override"),
    [
        (["starpo", "--trainer.total_steps", "3"], "trainer.total_steps=3"),
        (["show-config", "--optim.lr=1e-5"], "optim.lr=1e-5"),
        (["quickstart", "--rollout.env_groups"], "rollout.env_groups=VALUE"),
    ],
)
def test_a_config_field_written_as_an_option_gives_the_override(
    args: list[str], override: str
) -> None:
    line = one_error_line(runner.invoke(app, args), "error:")
    name = override.split("=")[0]
    assert line == (
        f"error: --{name} is not an option: config fields are set as overrides without the "
        f"dashes, e.g. {override} (`ragen-train show-config --explain {name}` documents the field)"
    )
    assert "--trainer " not in line  # click's own guess for --trainer.total_steps


def test_unknown_logger_is_one_line(tmp_path: Path) -> None:
    line = one_error_line(
        runner.invoke(app, ["show-config", "trainer.loggers=jsonl,foo"]), "config error:"
    )
    assert "trainer.loggers" in line and "'foo'" in line


def test_cuda_without_cuda_names_model_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragen_train.modeling import check_device
    from ragen_train.trainer import StarPOTrainer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for bad in ("cuda", "cuda:1", "gpu"):
        with pytest.raises(TrainConfigError) as exc:
            check_device(bad)
        assert exc.value.field == "model.device"
    check_device("cpu")
    cfg = load_config("quickstart", [f"trainer.out_dir={tmp_path / 'o'}", "model.device=cuda"])
    with pytest.raises(TrainConfigError, match="CUDA is not available") as exc:
        StarPOTrainer(cfg)
    assert exc.value.field == "model.device"
    line = one_error_line(
        runner.invoke(app, ["starpo", f"trainer.out_dir={tmp_path / 'o'}", "model.device=cuda"]),
        "config error:",
    )
    assert "model.device" in line


# ------------------------------------------------------------------ output streams
def test_presets_and_show_config_go_to_stdout() -> None:
    res = runner.invoke(app, ["presets"])
    assert res.exit_code == 0 and res.stderr == ""
    assert any(line.startswith("tiny-sokoban-grpo") for line in res.stdout.splitlines())
    res = runner.invoke(app, ["show-config", "--config", "quickstart"])
    assert (
        res.exit_code == 0 and res.stderr == "" and json.loads(res.stdout)["name"] == "quickstart"
    )


def test_metric_lines_are_one_line_on_stdout_and_sft_lines_show_the_loss(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    log = MetricLogger(tmp_path, ["jsonl", "console"])
    row = {
        "train/success": 0.5,
        "train/return": 0.25,
        "train/format_valid_rate": 1.0,
        "actor/pg_loss": -0.012,
        "actor/entropy": 3.21,
        "actor/grad_norm": 0.77,
        "filter/kept_ratio": 1.0,
        "time/step_s": 12.3,
    }
    log.log(7, row)
    log.log(10, {"sft/loss": 1.2345, "sft/confident_frac": 0.5, "sft/lr": 2e-3}, phase="sft")
    log.close()
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert captured.err == "" and len(lines) == 2, captured.out  # not wrapped at 80 columns
    assert len(lines[0]) > 80 and lines[0].startswith("train    7") and lines[0].endswith("s 12.3")
    assert (
        lines[1].startswith("sft   10") and "loss 1.2345" in lines[1] and "lr 2.0e-03" in lines[1]
    )
    with pytest.raises(ValueError, match="unknown logger"):
        MetricLogger(tmp_path, ["jsonl", "foo"])


# ------------------------------------------------------------------ resume
def tiny_cfg(out: Path, *extra: str):
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
            *extra,
        ],
    )


def test_resume_without_checkpoint_hints_at_save_every(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    out = tmp_path / "never"
    with pytest.raises(
        FileNotFoundError, match=r"trainer\.save_every.*0 = never.*this config: 0"
    ) as exc:
        StarPOTrainer(tiny_cfg(out, "trainer.save_every=0"), resume="latest")
    assert "set trainer.save_every > 0" in str(exc.value)
    assert not (out / "config.json").exists()  # nothing written before the error
    line = one_error_line(
        runner.invoke(app, ["starpo", f"trainer.out_dir={out}", "--resume", "latest"]), "error:"
    )
    assert "trainer.save_every" in line


def test_resume_with_changed_config_warns_and_keeps_the_previous_one(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer, config_changes

    out = tmp_path / "run"
    first = tiny_cfg(out)
    StarPOTrainer(first).fit()
    original = (out / "config.json").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unchanged config resumes silently
        StarPOTrainer(tiny_cfg(out), resume="latest").logger.close()
    assert not (out / "config.resumed_from.json").exists()

    changed = tiny_cfg(out, "optim.lr=1e-3", "trainer.total_steps=2")
    with pytest.warns(RuntimeWarning) as rec:
        trainer = StarPOTrainer(changed, resume="latest")
    message = str(rec[0].message)
    assert "optim.lr: 0.0002 -> 0.001" in message and "trainer.total_steps: 1 -> 2" in message
    assert (out / "config.resumed_from.json").read_text().strip() == original.strip()
    assert json.loads((out / "config.json").read_text()) == changed.to_dict()
    assert trainer.step == 1
    trainer.logger.close()
    renamed = replace(first, name="other").to_dict()
    assert config_changes(first.to_dict(), renamed) == [f'name: "{first.name}" -> "other"']


# ------------------------------------------------------------------ pipeline summary
def test_pipeline_summary_names_start_point_and_saved_sft_model(tmp_path: Path) -> None:
    from ragen_train.pipeline import run_sft_then_starpo

    out = tmp_path / "pipe"
    cfg = tiny_cfg(
        out,
        "sft.episodes=4",
        "sft.steps=1",
        "sft.batch_size=4",
        "sft.micro_batch_size=4",
        "trainer.val_before_train=false",
        "trainer.save_every=0",
    )
    run_sft_then_starpo(cfg, eval_episodes=1, log=lambda m: None)
    summary = json.loads((out / "summary.json").read_text())
    assert "sft_model" not in summary
    assert summary["started_from"] is None and summary["sft_model_dir"] == str(out / "sft_model")
    assert (out / "sft_model" / "config.json").is_file()

    again = tmp_path / "again"
    run_sft_then_starpo(
        replace(cfg, trainer=replace(cfg.trainer, out_dir=str(again))),
        eval_episodes=1,
        log=lambda m: None,
        sft_model=out / "sft_model",
    )
    summary = json.loads((again / "summary.json").read_text())
    assert summary["started_from"] == str(out / "sft_model") and summary["sft_model_dir"] is None
    assert not (again / "sft_model").exists()


ROOT = Path(__file__).resolve().parents[2]


def test_resume_of_a_finished_run_reports_its_last_validation(tmp_path: Path) -> None:
    rows = [
        {"step": 0, "phase": "val", "val/success": 0.25, "val/return": 0.1},
        {"step": 1, "phase": "train", "train/success": 0.5},
        {"step": 1, "phase": "val", "val/success": 0.75, "val/return": 0.5},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _val_text(_logged_val(tmp_path)) == "val/success=0.750, val/return=0.500"
    assert _logged_val(tmp_path / "nope") == {}


def test_version_flag() -> None:
    result = runner.invoke(app, ["--version"])
    assert (
        result.exit_code == 0 and result.stdout.strip() == f"ragen-train {ragen_envs.__version__}"
    )


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


# 2. `ragen-train starpo` on Lean without a verifier sat for minutes before failing.
def test_starpo_on_lean_without_a_verifier_exits_2_before_loading_a_model(
    tmp_path: Path, train
) -> None:
    port = _free_port()
    out = tmp_path / "run"
    t0 = time.monotonic()
    code, _, err = train(
        "starpo",
        "--config",
        "quickstart",
        "env.id=ragen/Lean-v0",
        f'env.config={{"verifier": "http://127.0.0.1:{port}", "max_retries": 0}}',
        f"trainer.out_dir={out}",
    )
    line = _one_line(err)
    assert code == 2, err
    assert line.startswith("error: ragen/Lean-v0: ") and f"http://127.0.0.1:{port}" in line, line
    assert "env.config.verifier=" in line and "--env-config verifier=" in line, line
    assert not out.exists()  # nothing written, no model loaded
    assert time.monotonic() - t0 < 60


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# 6. `ragen-train presets` broke its columns for names over 22 characters.
def test_presets_columns_fit_the_longest_name(train) -> None:
    code, out, _ = train("presets")
    assert code == 0
    rows = [ln for ln in out.splitlines() if " env=" in ln]
    assert max(len(r.split()[0]) for r in rows) > 22  # the case that broke
    for col in ("env=", "model=", "estimator="):
        assert len({r.index(" " + col) for r in rows}) == 1, (
            col
        )  # every column starts at one offset
    assert all(r == r.rstrip() for r in rows)


# 7. The "no learning signal" warning printed Python's source line.
def test_no_learning_signal_warning_is_one_clean_line(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragen_train",
            "starpo",
            "--config",
            "quickstart",
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
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    warned = [ln for ln in res.stderr.splitlines() if "no learning signal" in ln]
    assert len(warned) == 1 and warned[0].startswith(
        "warning: step 1: no rollout produced a valid answer"
    ), res.stderr[-2000:]
    assert (
        "RuntimeWarning" not in res.stderr
        and "trainer.fit()" not in res.stderr
        and ".py:" not in res.stderr
    )


def test_sigterm_during_starpo_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragen_train",
            "starpo",
            "--config",
            "quickstart",
            f"trainer.out_dir={out}",
            "trainer.total_steps=1000",
            "trainer.save_every=1",
            "trainer.val_every=0",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    err = _stop_when(
        proc, lambda: bool(list((out / "checkpoints").glob("step_*/manifest.json"))), "a checkpoint"
    )
    assert proc.returncode == 143, err[-2000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert (
        last.startswith("stopped by SIGTERM: continue from checkpoint step ")
        and f"`ragen-train starpo --resume {out}`" in last
    ), err[-2000:]
    assert "Traceback" not in err


def test_ragen_train_eval_of_a_multi_env_model_needs_an_env_too(tmp_path: Path, train) -> None:
    from ragen_train.config import load_config
    from ragen_train.evaluation import plan_eval

    cfg = load_config(
        "quickstart",
        [
            "env.config={}",
            'env.train=[{"id": "ragen/Sokoban-Easy-v0"}, '
            '{"id": "ragen/FrozenLake-v0", "config": {"size": 5}}]',
        ],
    )
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    code, out, err = train("eval", str(model), "--episodes", "2")
    line = _one_line(err)
    assert code == 2 and out == "", (out, err)
    assert (
        "was trained on 2 envs (ragen/Sokoban-Easy-v0, ragen/FrozenLake-v0)" in line
        and "--env ID" in line
    ), line
    plan = plan_eval(model, env="ragen/FrozenLake-v0", episodes=2)
    assert (
        plan.env_id == "ragen/FrozenLake-v0" and plan.env_config == {"size": 5} and not plan.notes
    )
