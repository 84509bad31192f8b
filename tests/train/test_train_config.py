"""Training configs: presets, key=value overrides, errors that name the field, the JSON Schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from ragen_train.cli import app
from ragen_train.config import (
    StarPOConfig,
    TrainConfigError,
    apply_overrides,
    config_json_schema,
    load_config,
)
from ragen_train.presets import PRESETS
from tests.helpers.cli import one_line as _one_line
from tests.helpers.cli import train  # noqa: F401  (a fixture)

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "train_config.schema.json"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_validates_against_the_schema(name: str) -> None:
    cfg = load_config(name)
    jsonschema.validate(cfg.to_dict(), json.loads(SCHEMA_PATH.read_text()))


def test_checked_in_schema_matches_the_dataclasses() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == config_json_schema(), (
        "regenerate: python scripts/config_reference.py"
    )


def test_overrides_are_typed() -> None:
    cfg = load_config(
        "quickstart",
        [
            "optim.lr=1e-5",
            "rollout.env_groups=3",
            "algorithm.dual_clip=null",
            "trainer.loggers=jsonl,tensorboard",
            'env.config={"split_by": "names"}',
            "rollout.enable_think=false",
        ],
    )
    assert cfg.optim.lr == 1e-5 and cfg.rollout.env_groups == 3 and cfg.algorithm.dual_clip is None
    assert cfg.trainer.loggers == ["jsonl", "tensorboard"]
    assert cfg.env.config == {"split_by": "names"} and cfg.rollout.enable_think is False


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("optim.lr=fast", "optim.lr"),
        ("optim.lrr=1", "optim.lrr"),
        ("nosuch.x=1", "nosuch"),
        ("algorithm.adv_estimator=remax", "algorithm.adv_estimator"),
        ("algorithm.loss_agg_mode=mean", "algorithm.loss_agg_mode"),
        ("rollout.group_size=1", "rollout.group_size"),
        ("rollout.env_groups=0", "rollout.env_groups"),
        ("algorithm.kl_estimator=low-var-kl", "algorithm.kl_estimator"),
        ("rollout.temperature=0", "rollout.temperature"),
        ("rollout.max_turns=2.5", "rollout.max_turns"),
        ("env.id=ragen/Sokobn-v0", "env.id"),
        ("env.config.risky_prob=2", "env.config.risky_prob"),
        (
            "env.id=ragen/Sokoban-v0",
            "env.config.risky_prob",
        ),  # the Bandit preset's env setting does not fit Sokoban
    ],
)
def test_bad_overrides_name_the_field(override: str, field: str) -> None:
    with pytest.raises(TrainConfigError) as exc:
        load_config("quickstart", [override])
    assert exc.value.field == field


def test_switching_env_with_an_empty_env_config_is_accepted() -> None:
    cfg = load_config("quickstart", ["env.id=ragen/Sokoban-v0", "env.config={}"])
    assert cfg.env.id == "ragen/Sokoban-v0" and cfg.env.config == {}


def test_unknown_preset_or_file() -> None:
    with pytest.raises(TrainConfigError, match="neither a preset"):
        load_config("no-such-preset")


def test_a_misspelt_preset_gets_a_did_you_mean_not_the_whole_list() -> None:
    with pytest.raises(TrainConfigError) as exc:
        load_config("quickstrat")
    assert exc.value.field == "--config"
    assert exc.value.reason == (
        "'quickstrat' is neither a preset nor a file; did you mean quickstart? "
        f"(`ragen-train presets` lists all {len(PRESETS)})"
    )
    with pytest.raises(TrainConfigError) as exc:
        load_config("zzzz")
    assert "did you mean" not in exc.value.reason
    assert "tiny-sokoban-grpo" not in exc.value.reason  # no list of every preset
    assert f"lists all {len(PRESETS)}" in exc.value.reason


def test_episodes_a_step_are_bounded_across_groups_and_group_size() -> None:
    with pytest.raises(TrainConfigError) as exc:
        load_config("quickstart", ["rollout.env_groups=4096", "rollout.group_size=32"])
    assert exc.value.field == "rollout.env_groups"
    assert exc.value.reason == (
        "4096 groups x rollout.group_size=32 is 131,072 episodes a step, over the bound of 65,536"
    )
    ok = load_config("quickstart", ["rollout.env_groups=4096", "rollout.group_size=16"])
    assert ok.rollout.env_groups * ok.rollout.group_size == 65_536  # the bound itself is allowed


def test_the_config_module_imports_without_torch() -> None:
    """``show-config --explain`` and config checks start in a fraction of torch's load time."""
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys, ragen_train.config, ragen_train.cli; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_json_config_file_roundtrip(tmp_path: Path) -> None:
    cfg = load_config("sokoban", ["optim.lr=3e-6"])
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg.to_dict()))
    again = load_config(str(p))
    assert again == cfg
    bad = cfg.to_dict()
    bad["optim"]["beta3"] = 1
    p.write_text(json.dumps(bad))
    with pytest.raises(TrainConfigError, match="optim.beta3"):
        load_config(str(p))


def test_defaults_follow_ragen_base_yaml() -> None:
    c = StarPOConfig()
    # RAGEN-AI/RAGEN config/base.yaml: clip 0.2/0.28, entropy 0.001, gamma=lam=1,
    # turn gamma 0.95, lr 1e-6 / 1e-5
    assert (c.algorithm.clip_low, c.algorithm.clip_high, c.algorithm.entropy_coef) == (
        0.2,
        0.28,
        0.001,
    )
    assert (c.algorithm.gamma, c.algorithm.lam, c.algorithm.turn_gamma) == (1.0, 1.0, 0.95)
    assert (c.optim.lr, c.optim.critic_lr, c.algorithm.dual_clip) == (1e-6, 1e-5, 3.0)
    assert apply_overrides(c, []) == c


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "bad.yaml",
            "name: x\noptim:\n  lr: 1e-5\n  beta1: [0.9\n",
            r"bad\.yaml: invalid YAML at line \d+",
        ),
        ("tab.yaml", "name: x\n\toptim: 1\n", r"tab\.yaml: invalid YAML at line 2"),
        ("bad.json", '{"name": "x",\n "optim": }', r"bad\.json: invalid JSON at line 2, column 11"),
        ("list.json", "[1, 2]", r"list\.json holds a list, expected a mapping"),
        ("list.yaml", "- 1\n- 2\n", r"list\.yaml holds a list"),
        ("empty.yaml", "", r"empty\.yaml is empty"),
    ],
)
def test_unreadable_config_files_are_config_errors_naming_file_and_line(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(TrainConfigError, match=expected) as exc:
        load_config(str(p))
    assert exc.value.field == "--config"
    assert str(exc.value).startswith("--config: ")


def test_bad_field_in_a_config_file_names_the_field_and_the_file(tmp_path: Path) -> None:
    p = tmp_path / "cfg.yaml"
    p.write_text("name: x\noptim:\n  lr: fast\n")
    with pytest.raises(TrainConfigError) as exc:
        load_config(str(p))
    assert exc.value.field == "optim.lr" and str(p) in str(exc.value)


def test_unknown_logger_names_the_field() -> None:
    with pytest.raises(TrainConfigError, match="unknown logger 'foo'") as exc:
        load_config("quickstart", ["trainer.loggers=jsonl,foo"])
    assert exc.value.field == "trainer.loggers"
    cfg = load_config("quickstart", ["trainer.loggers=jsonl,console,tensorboard,wandb"])
    assert cfg.trainer.loggers == ["jsonl", "console", "tensorboard", "wandb"]


runner = CliRunner()
HINT = "override env.config={}"


@pytest.mark.parametrize(
    ("overrides", "field", "hint"),
    [
        # the Bandit preset's risky_prob is unknown to Sokoban: the hint helps
        (["env.id=ragen/Sokoban-v0"], "env.config.risky_prob", True),
        # a known field with a bad value the user wrote: the preset is not the cause
        (
            ["env.id=ragen/Sokoban-v0", "env.config={}", "env.config.dim_room=abc"],
            "env.config.dim_room",
            False,
        ),
        (["env.config.risky_prob=2"], "env.config.risky_prob", False),
        # a misspelt field the user typed: the preset is not the cause either
        (
            ["env.id=ragen/Sokoban-v0", "env.config={}", "env.config.dim_rom=[6,6]"],
            "env.config.dim_rom",
            False,
        ),
        (
            ["env.id=ragen/Sokoban-v0", 'env.config={"dim_rom": [6, 6]}'],
            "env.config.dim_rom",
            False,
        ),
    ],
)
def test_env_config_hint_only_for_unknown_fields_from_the_preset(
    overrides: list[str], field: str, hint: bool
) -> None:
    with pytest.raises(TrainConfigError) as exc:
        load_config("quickstart", overrides)
    assert exc.value.field == field
    assert (HINT in str(exc.value)) is hint


def test_env_config_fields_written_in_a_file_get_no_preset_hint(tmp_path: Path) -> None:
    data = load_config("quickstart").to_dict()
    data["env"]["id"] = "ragen/Sokoban-v0"  # risky_prob stays: the file's author wrote it
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(data))
    with pytest.raises(TrainConfigError) as exc:
        load_config(str(p))
    assert exc.value.field == "env.config.risky_prob" and HINT not in str(exc.value)


# ------------------------------------------------ NaN and out-of-range numbers
@pytest.mark.parametrize(
    ("override", "field", "reason"),
    [
        (
            "optim.lr=NaN",
            "optim.lr",
            "must be a finite number, got nan",
        ),  # used to reach torch as a NaN
        ("optim.lr=Infinity", "optim.lr", "must be a finite number"),
        ("optim.lr=1e999", "optim.lr", "must be a finite number"),
        (
            "rollout.temperature=NaN",
            "rollout.temperature",
            "must be a finite number",
        ),  # used to train, exit 0
        ("rollout.format_penalty=-inf", "rollout.format_penalty", "must be a finite number"),
        ("algorithm.clip_low=-3", "algorithm.clip_low", "must be in [0, 1], got -3.0"),
        ("algorithm.gamma=2", "algorithm.gamma", "must be in [0, 1], got 2.0"),
        ("algorithm.lam=-0.5", "algorithm.lam", "must be in [0, 1]"),
        ("optim.beta2=1", "optim.beta2", "must be in [0, 1), got 1.0"),
        ("rollout.top_p=0", "rollout.top_p", "must be in (0, 1], got 0.0"),
        ("algorithm.dual_clip=1", "algorithm.dual_clip", "must be > 1, got 1.0"),
        ("trainer.val_temperature=-1", "trainer.val_temperature", "must be >= 0"),
        ("env.config.risky_prob=NaN", "env.config.risky_prob", "must be a finite number, got nan"),
        # huge counts are refused at once (1e9 groups used to be accepted and play for minutes)
        ("rollout.env_groups=1e9", "rollout.env_groups", "must be in [1, 4096], got 1000000000"),
        ("rollout.group_size=100000", "rollout.group_size", "must be in [1, 1024], got 100000"),
        ("trainer.total_steps=1e12", "trainer.total_steps", "must be in [1, 1000000], got"),
        ("trainer.val_episodes=1e9", "trainer.val_episodes", "must be in [1, 1000000], got"),
        ("sft.episodes=1e9", "sft.episodes", "must be in [1, 1000000], got"),
    ],
)
def test_nan_and_out_of_range_overrides_name_the_field(
    override: str, field: str, reason: str
) -> None:
    with pytest.raises(TrainConfigError) as exc:
        load_config("quickstart", [override])
    assert exc.value.field == field
    assert reason in exc.value.reason and "\n" not in str(exc.value)


def test_nan_in_a_config_file_names_the_field_and_the_file(tmp_path: Path) -> None:
    cfg = load_config("quickstart").to_dict()
    p = tmp_path / "cfg.json"
    p.write_text(
        json.dumps(cfg).replace('"gamma": 1.0', '"gamma": NaN')
    )  # Python's json writes/reads NaN
    with pytest.raises(TrainConfigError) as exc:
        load_config(str(p))
    assert exc.value.field == "algorithm.gamma" and str(p) in str(exc.value)


def test_schema_and_runtime_ranges_agree() -> None:
    """Every range is declared once: for each bounded field a value just outside is refused
    both by ``validate`` (naming that field) and by the checked-in JSON Schema."""
    from ragen_train.config import FIELD_SPECS

    schema = json.loads(SCHEMA_PATH.read_text())
    base = load_config("quickstart").to_dict()
    checked = 0
    bounded = [(s.path, s.range) for s in FIELD_SPECS if s.range is not None and not s.in_list]
    for key, allowed in bounded:
        for end, step in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):  # just outside each end
            bound = getattr(allowed, end)
            if bound is None:
                continue
            bad_value = bound + step
            data = json.loads(json.dumps(base))
            node = data
            *parents, leaf = key.split(".")
            for part in parents:
                node = node[part]
            node[leaf] = bad_value
            assert not jsonschema.Draft202012Validator(schema).is_valid(data), (key, bad_value)
            with pytest.raises(TrainConfigError) as exc:
                apply_overrides(StarPOConfig(), [f"{key}={json.dumps(bad_value)}"])
            assert exc.value.field == key, (key, exc.value)
            checked += 1
    assert checked >= 50


def test_train_cli_rejects_nan_with_one_line_exit_2() -> None:
    from typer.testing import CliRunner

    from ragen_train.cli import app

    res = CliRunner().invoke(app, ["show-config", "optim.lr=NaN"])
    assert res.exit_code == 2
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "optim.lr" in lines[0] and "finite" in lines[0]


def test_rollout_engine_is_a_deprecated_spelling_of_rollout_sampler(tmp_path: Path) -> None:
    """``rollout.engine`` (the token sampler) is now ``rollout.sampler``; the
    old key still works for one release, in overrides, config files and saved configs."""
    from ragen_train.config import explain_fields
    from ragen_train.run_dir import config_changes

    with pytest.warns(FutureWarning, match=r"rollout\.engine is deprecated.*use rollout\.sampler"):
        cfg = load_config("tiny-bandit-grpo", ["rollout.engine=hf"])
    assert cfg.rollout.sampler == "hf" and not hasattr(cfg.rollout, "engine")
    old = load_config("tiny-bandit-grpo").to_dict()
    old["rollout"]["engine"] = old["rollout"].pop("sampler")
    old["rollout"]["engine"] = "hf"
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    with pytest.warns(FutureWarning, match=r"rollout\.engine"):
        assert load_config(str(p)).rollout.sampler == "hf"
    # a run saved before the rename resumes without a spurious "changed" field
    new = load_config("tiny-bandit-grpo", ["rollout.sampler=hf"]).to_dict()
    assert config_changes(old, new) == []
    assert explain_fields("rollout.engine") == explain_fields("rollout.sampler")
    both = dict(old, rollout=dict(old["rollout"], sampler="hf"))
    p.write_text(json.dumps(both))
    with pytest.raises(TrainConfigError, match=r"rollout\.engine.*give rollout\.sampler only"):
        with pytest.warns(FutureWarning):
            load_config(str(p))


def test_cli_shows_the_rollout_engine_deprecation_as_one_line() -> None:
    from typer.testing import CliRunner

    from ragen_train.cli import app

    res = CliRunner().invoke(app, ["show-config", "-c", "tiny-bandit-grpo", "rollout.engine=hf"])
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert lines == [
        "warning: rollout.engine is deprecated and will be removed in the next release; "
        "use rollout.sampler"
    ]
    assert json.loads(res.stdout)["rollout"]["sampler"] == "hf"


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
        # Other trainers' names (Hugging Face TrainingArguments) for ours.
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


# 5. A misplaced key (`lr=1`) got no suggestion.
@pytest.mark.parametrize(
    "override, suggestion",
    [
        ("lr=1", "did you mean optim.lr, sft.lr?"),
        ("kl_coef=0.1", "did you mean algorithm.kl_coef?"),
        ("optim.kl_coef=0.1", "did you mean algorithm.kl_coef?"),
        ("total_step=3", "did you mean trainer.total_steps?"),
        ("optim.lrr=1", "did you mean optim.lr?"),  # the same-section match still comes first
    ],
)
def test_misplaced_override_suggests_the_nested_field(
    train, override: str, suggestion: str
) -> None:
    code, out, err = train("show-config", override)
    line = _one_line(err)
    assert code == 2 and out == "", err
    assert (
        line
        == f"config error: config field '{override.split('=')[0]}': unknown field; {suggestion}"
    ), line
