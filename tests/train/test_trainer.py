"""A real StarPO update on the tiny model: every trainable parameter changes, every metric is
finite; a short fit writes metrics, checkpoints and curves."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
from ragen_bench.validate import validate_file
from ragen_train.batch import build_samples
from ragen_train.config import load_config
from ragen_train.sft import MixedPolicy, TokenizingPolicy
from ragen_train.trainer import StarPOTrainer


def tiny_cfg(tmp_path: Path, *extra: str):
    return load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "rollout.env_groups=2",
            "rollout.group_size=4",
            "rollout.max_new_tokens=16",
            "trainer.val_episodes=4",
            "trainer.val_every=1",
            "trainer.total_steps=2",
            "optim.micro_batch_size=3",
            "trainer.loggers=jsonl",
            *extra,
        ],
    )


def mixed_samples(trainer: StarPOTrainer, n_groups: int = 4, group_size: int = 4):
    """Token-exact samples with reward variance inside groups (oracle and random actions)."""
    policy = TokenizingPolicy(MixedPolicy(0.5, seed=3), trainer.tokenizer)
    specs = [
        EpisodeSpec(
            index=g * group_size + m, env_id="ragen/Bandit-Pairs-v0", seed=g, group=g, member=m
        )
        for g in range(n_groups)
        for m in range(group_size)
    ]
    records = RolloutEngine(
        policy, rollout_config(trainer.cfg.env.id, trainer.cfg.rollout, temperature=1.0)
    ).run(specs)
    samples, _ = build_samples(records, layout=trainer.layout)
    return samples


@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_update_changes_every_trainable_parameter(tmp_path: Path, estimator: str) -> None:
    extra = [
        "optim.lr=1e-2",
        f"algorithm.adv_estimator={estimator}",
        "optim.critic_lr=1e-2",
        "algorithm.kl_coef=0.01",
        "algorithm.entropy_coef=0.01",
    ]
    trainer = StarPOTrainer(tiny_cfg(tmp_path, *extra))
    samples = mixed_samples(trainer)
    assert len({s.score for s in samples}) > 1
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    critic_before = (
        {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
        if trainer.critic is not None
        else {}
    )
    metrics = trainer._update(samples, 1.0)
    for name, p in trainer.model.named_parameters():
        if p.requires_grad:
            assert not torch.equal(before[name], p.detach()), f"{name} did not change"
    for name, p in trainer.critic.named_parameters() if trainer.critic is not None else []:
        assert not torch.equal(critic_before[name], p.detach()), f"critic {name} did not change"
    assert metrics and all(math.isfinite(v) for v in metrics.values()), metrics
    for key in (
        "actor/pg_loss",
        "actor/entropy",
        "actor/grad_norm",
        "actor/clipfrac",
        "actor/approx_kl",
        "actor/kl_loss",
        "adv/abs_mean",
    ):
        assert key in metrics
    assert metrics["adv/abs_mean"] > 0
    if estimator == "gae":
        assert "critic/vf_loss" in metrics
    # The rollout-time log-probs are those the trainer recomputes (token-in / token-out) — here
    # demonstrations carry none, so the check is done in test_fit below with a real policy.


def test_nonfinite_gradient_step_is_skipped_and_counted(tmp_path: Path) -> None:
    trainer = StarPOTrainer(tiny_cfg(tmp_path, "optim.lr=1e-2"))
    samples = mixed_samples(trainer, n_groups=2)
    first = next(p for p in trainer.model.parameters())
    hook = first.register_hook(lambda g: g * float("nan"))
    before = first.detach().clone()
    metrics = trainer._update(samples, 1.0)
    hook.remove()
    assert metrics["actor/nonfinite_skip"] == 1.0 and trainer.nonfinite_skips == 1
    assert torch.equal(before, first.detach())


def test_reference_model_only_loaded_with_kl(tmp_path: Path) -> None:
    assert StarPOTrainer(tiny_cfg(tmp_path)).ref is None
    assert StarPOTrainer(tiny_cfg(tmp_path, "algorithm.kl_coef=0.1")).ref is not None


@pytest.mark.slow
def test_fit_writes_finite_metrics_checkpoint_and_curves(tmp_path: Path) -> None:
    cfg = tiny_cfg(
        tmp_path,
        "trainer.save_every=2",
        "algorithm.filter.value=0.5",
        "algorithm.filter.strategy=top_p",
    )
    trainer = StarPOTrainer(cfg)
    last = trainer.fit()
    assert "val/success" in last
    kind, n = validate_file(tmp_path / "metrics.jsonl", "metrics")
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["phase"] == "train"]
    assert [r["step"] for r in train_rows] == [1, 2]
    for r in train_rows:
        for k, v in r.items():
            if k not in ("phase",):
                assert v is not None and math.isfinite(v), (k, v)
        assert r["batch/episodes"] == 8.0
        # Sampled ids are trained as sampled: the recomputed log-probs match the rollout's.
        if "rollout/logprob_abs_diff" in r:
            assert r["rollout/logprob_abs_diff"] < 1e-3
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step_000002"
    model_dir = tmp_path / "checkpoints" / "step_000002" / "model"
    assert (model_dir / "model.safetensors").is_file() and (
        model_dir / "tokenizer_config.json"
    ).is_file()
    from ragen_train.plot import plot_metrics

    png = plot_metrics(tmp_path / "metrics.jsonl", tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_untrained_model_without_valid_answers_warns_that_there_is_no_signal(
    tmp_path: Path,
) -> None:
    """RL from the random-init tiny model cannot learn (no valid answer, constant groups): say so."""
    trainer = StarPOTrainer(
        tiny_cfg(tmp_path, "trainer.total_steps=1", "trainer.val_every=0", "trainer.save_every=0")
    )
    with pytest.warns(RuntimeWarning, match="no learning signal"):
        trainer.fit()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["train/format_valid_rate"] == 0.0


def test_rollout_where_every_episode_fails_in_the_env_raises(tmp_path: Path) -> None:
    """A broken env setup stops training with the env's message instead of training on zeros."""
    trainer = StarPOTrainer(tiny_cfg(tmp_path))
    trainer.cfg.env.config["no_such_field"] = 1  # bypasses load_config's check on purpose
    with pytest.raises(
        RuntimeError, match="every episode failed in the environment.*no_such_field"
    ):
        trainer.rollout(0)
    with pytest.raises(RuntimeError, match="no_such_field"):
        trainer.evaluate(episodes=2)


class _CrashingEngine:
    """The trainer's real policy whose every generation raises, as a local engine does when
    its model execution fails (vLLM logs "Dumping input data" and aborts the batch).  A real
    engine crash cannot be produced on purpose here, so this one is injected."""

    def __init__(self, policy: object) -> None:
        self.inner = policy

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def generate(self, requests: list, params: object) -> list:
        raise RuntimeError("model execution failed: engine died")


def test_rollout_engine_failure_stops_training_with_the_engine_error(tmp_path: Path) -> None:
    """Episodes whose generation failed are not trained on (a run once trained on 32 such
    episodes and exited 0): the rollout and the validation raise with the engine's message."""
    trainer = StarPOTrainer(tiny_cfg(tmp_path))
    trainer.policy = _CrashingEngine(trainer.policy)
    with pytest.raises(
        RuntimeError, match=r"rollout engine failed on (\d+) of \1 episodes.*engine died"
    ):
        trainer.rollout(0)
    with pytest.raises(RuntimeError, match="rollout engine failed.*engine died"):
        trainer.evaluate(episodes=2)


def test_learning_demo_script_runs_end_to_end(tmp_path: Path) -> None:
    """examples/learning_demo.py, shrunk to a few steps: SFT once, GRPO and PPO from the same
    SFT checkpoint, results JSON and plot written (the full run is in examples/README.md)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "examples" / "learning_demo.py"),
            "--env",
            "bandit",
            "--out",
            str(out),
            "--eval-episodes",
            "16",
            "--no-check",
            "trainer.total_steps=2",
            "trainer.val_every=1",
            "sft.steps=4",
            "sft.episodes=64",
            "rollout.env_groups=2",
            "rollout.group_size=4",
            "trainer.val_episodes=8",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    runs = {r["algorithm"]: r for r in res["runs"]}
    assert set(runs) == {"grpo", "ppo"}
    assert (
        runs["ppo"]["sft_model"] == runs["grpo"]["sft_model"]
    )  # both start from one SFT checkpoint
    assert runs["grpo"]["estimator"] == "grpo" and runs["ppo"]["estimator"] == "gae"
    for r in runs.values():
        assert 0.0 <= r["before"] <= 1.0 and 0.0 <= r["after"] <= 1.0
        assert [s for s, _ in r["val_curve"]] == [0, 1, 2]
    assert (out / "learning_demo.png").stat().st_size > 1000
    table = (out / "results.md").read_text()
    assert table.count("| Bandit-PairsAB") == 2 and "| grpo |" in table and "| ppo |" in table


def test_new_run_refuses_an_out_dir_that_holds_a_run_unless_overwrite(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 30}\n')
    with pytest.raises(
        FileExistsError, match="already holds a run.*--resume latest.*trainer.overwrite=true"
    ):
        StarPOTrainer(tiny_cfg(tmp_path))
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 30}\n'  # nothing touched
    (tmp_path / "checkpoints" / "step_000030").mkdir(parents=True)
    StarPOTrainer(tiny_cfg(tmp_path, "trainer.overwrite=true"))
    assert (tmp_path / "metrics.jsonl").read_text() == "" and not (
        tmp_path / "checkpoints"
    ).exists()


def test_pruning_keeps_the_newest_checkpoint_not_the_highest_step(tmp_path: Path) -> None:
    """A restarted run writes step_000002 after an old step_000030: `latest` must survive."""
    import os

    from ragen_train.checkpoint import _prune

    root = tmp_path / "checkpoints"
    for name, mtime in (("step_000030", 1_000_000), ("step_000002", 2_000_000)):
        (root / name).mkdir(parents=True)
        (root / name / "state.json").write_text("{}")
        os.utime(root / name / "state.json", (mtime, mtime))
    (root / "latest").write_text("step_000002")
    _prune(root, keep=1)
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000002"]


@pytest.mark.parametrize("kl_in_reward", [False, True])
def test_kl_beta_positive_zero_variance_groups_are_not_masked(
    tmp_path: Path, kl_in_reward: bool
) -> None:
    """With KL β > 0 a kept
    zero-variance group is *not* masked.  Its policy-gradient term is 0 (advantages 0), but its
    tokens stay in the KL term, so the update still moves the policy towards the reference;
    with ``kl_in_reward`` the KL shaping even gives it non-zero advantages.  Only the filter
    (``include_zero=false``) removes such groups."""
    extra = [
        "optim.lr=1e-2",
        "algorithm.entropy_coef=0.0",
        "algorithm.kl_coef=0.5",
        f"algorithm.kl_in_reward={str(kl_in_reward).lower()}",
    ]
    trainer = StarPOTrainer(tiny_cfg(tmp_path, *extra))
    samples = mixed_samples(trainer, n_groups=2)
    for s in samples:  # every group constant: no reward signal at all
        s.score = 1.0
        s.rewards = [1.0 if r else 0.0 for r in s.rewards]
    with torch.no_grad():  # the policy drifts from the reference, so the KL is not 0
        gen = torch.Generator().manual_seed(0)
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    metrics = trainer._update(samples, 1.0)
    changed = [
        n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())
    ]
    assert changed, "zero-variance groups were masked out of the KL update"
    assert metrics["actor/grad_norm"] > 0
    if kl_in_reward:
        assert metrics["adv/abs_mean"] > 0  # KL shaping makes the constant groups non-constant
    else:
        assert metrics["adv/abs_mean"] == 0.0 and metrics["actor/kl_loss"] > 0
    # Without KL the same batch has no gradient at all (masking would make KL behave the same).
    plain = StarPOTrainer(
        tiny_cfg(tmp_path / "plain", "optim.lr=1e-2", "algorithm.entropy_coef=0.0")
    )
    m0 = plain._update(samples, 1.0)
    assert m0["actor/grad_norm"] == 0.0 and m0["adv/abs_mean"] == 0.0
    doc = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert "*When KL β > 0 (`algorithm.kl_coef`), are zero-variance groups masked?* **No.**" in doc


def test_ppo_values_and_old_logprobs_come_from_eval_mode(tmp_path: Path) -> None:
    """With dropout in a model, GAE values and old log-probs are computed in
    eval mode even when the models were left in train mode by the last update, and the update
    itself runs in train mode again.  ``load_critic``'s value head has no dropout (for
    process-count independence), so the test gives the critic a 0.1 dropout of its own, as a
    user's own model could have."""
    from ragen_train.batch import collate
    from ragen_train.modeling import token_values

    trainer = StarPOTrainer(tiny_cfg(tmp_path, "algorithm.adv_estimator=gae", "optim.ppo_epochs=2"))
    assert not any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in trainer.critic.modules())
    trainer.critic.dropout = torch.nn.Dropout(0.1)  # the value head's dropout (transformers)
    assert any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in trainer.critic.modules())
    samples = mixed_samples(trainer, n_groups=2)
    batch = collate(samples, trainer.tokenizer.pad_token_id)
    trainer.critic.train()
    trainer.model.train()
    first = trainer.forwards.stats(batch, samples)
    trainer.critic.train()
    second = trainer.forwards.stats(batch, samples)
    assert "old_logp" in first and "values" in first
    assert torch.equal(first["values"], second["values"]) and torch.equal(
        first["old_logp"], second["old_logp"]
    )
    trainer.critic.eval()
    with torch.no_grad():
        want = token_values(trainer.critic, batch.input_ids, batch.attention_mask)
    # The update path pads each micro-batch only to its own longest sample: values agree on
    # the trained positions (the only ones GAE reads), to float32 rounding.
    m = batch.loss_mask
    assert torch.allclose(first["values"] * m, want * m, atol=1e-6, rtol=0)
    trainer._update(samples, 1.0)
    assert trainer.critic.training and trainer.model.training  # the update ran in train mode


@pytest.mark.slow
def test_degenerate_outputs_are_logged_warned_once_and_stop_training_with_checkpoint_kept(
    tmp_path: Path,
) -> None:
    """``train/degenerate_rate``
    is logged every step also without think blocks (quickstart); the first step above
    ``trainer.degenerate_warn_rate`` warns once; after ``degenerate_stop_steps`` such steps in a
    row training stops and a checkpoint of the last step is written."""
    import warnings

    from ragen_bench.diagnostics import DegenerateOutputWarning
    from tests.helpers.scripted import ScriptedPolicy

    cfg = tiny_cfg(
        tmp_path,
        "trainer.total_steps=8",
        "trainer.val_every=0",
        "trainer.save_every=5",
        "trainer.degenerate_stop_steps=3",
        "trainer.degenerate_warn_rate=0.5",
    )
    assert cfg.rollout.enable_think is False
    trainer = StarPOTrainer(cfg)
    calls = [0]

    def script(episode: int, turn: int) -> str:
        calls[0] += 1
        return "<answer>A</answer>" if calls[0] <= 8 else "!" * 12  # step 1 fine, then collapse

    trainer.policy = ScriptedPolicy(script, tokenizer=trainer.tokenizer, max_batch_size=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["phase"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert [r["train/degenerate_rate"] for r in train] == [0.0, 1.0, 1.0, 1.0]
    degenerate = [w for w in caught if issubclass(w.category, DegenerateOutputWarning)]
    assert len(degenerate) == 1 and "step 2" in str(degenerate[0].message)
    assert any("stopping" in str(w.message) and "since step 2" in str(w.message) for w in caught)
    assert (tmp_path / "checkpoints" / "step_000004" / "state.json").is_file()
    state = json.loads((tmp_path / "checkpoints" / "step_000004" / "state.json").read_text())
    assert state["degenerate_watch"]["streak"] == 3


def test_degenerate_watch_thresholds_and_config_fields() -> None:
    """The pieces: the watch resets below the threshold, 0 steps never stops,
    and the config fields are range-checked."""
    import warnings

    from ragen_bench.diagnostics import DegenerateWatch
    from ragen_train.config import TrainConfigError

    watch = DegenerateWatch(0.5, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [watch.update(r, s) for s, r in enumerate([0.6, 0.4, 0.9, None, 0.7], 1)] == [
            False,
            False,
            False,
            False,
            True,
        ]
    assert len(caught) == 1 and watch.first_step == 3
    never = DegenerateWatch(0.0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not any(never.update(1.0, s) for s in range(50))
    at = DegenerateWatch(0.5, 2)  # Exactly at the threshold counts (was `>`)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [at.update(0.5, s) for s in (1, 2)] == [False, True]
    assert len(caught) == 1 and "at or above trainer.degenerate_warn_rate=0.5" in str(
        caught[0].message
    )
    zero = DegenerateWatch(0.0, 1)  # threshold 0: a step without degenerate output never counts
    assert not zero.update(0.0, 1) and zero.update(0.25, 2)
    copy = DegenerateWatch(0.5, 2)
    copy.load_state_dict(watch.state_dict())
    assert (copy.streak, copy.warned, copy.first_step) == (2, True, 3)
    defaults = load_config("quickstart").trainer
    assert (defaults.degenerate_warn_rate, defaults.degenerate_stop_steps) == (0.5, 10)
    with pytest.raises(TrainConfigError, match="trainer.degenerate_warn_rate"):
        load_config("quickstart", ["trainer.degenerate_warn_rate=1.5"])
    with pytest.raises(TrainConfigError, match="trainer.degenerate_stop_steps"):
        load_config("quickstart", ["trainer.degenerate_stop_steps=-1"])
