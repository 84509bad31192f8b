"""Same prompts, seeds, rewards and loss masks under every trainer back-end.

For a fixed script of responses (valid moves, several actions, malformed answers,
unknown actions), the native trainer's samples are compared token by token with

* what TRL's ``GRPOTrainer`` sees after our ``rollout_func`` (its own
  ``_generate_and_score_completions``: padded prompt / completion ids, the loss mask
  ``completion_mask * tool_mask``, the rewards it logs, its group advantages), and
* what the verl agent loop returns for the same dataset rows (``prompt_ids``,
  ``response_ids``, ``response_mask``, ``reward_score``), through a fake server with
  verl's ``generate(request_id, prompt_ids=, sampling_params=)`` interface.

Two settings: Bandit-PairsAB (one turn, the ``quickstart`` preset) and Sokoban in
full-history mode (three turns: observation tokens between turns must have mask 0).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ragen_train.advantages import group_advantages
from ragen_train.backends.common import episode_rows, train_specs
from ragen_train.backends.verl_agent_loop import RagenLoopSettings, row_fields, run_ragen_episode
from ragen_train.backends.verl_backend import dataset_rows
from ragen_train.batch import build_samples
from ragen_train.config import load_config
from ragen_train.trainer import StarPOTrainer
from tests.helpers.scripted import ScriptedPolicy

STEP = 3  # a training step other than 0, so the seed formula k * env_groups + g is exercised

BANDIT = [
    "<think>A pays more.</think><answer>A</answer>",
    "<think>B.</think><answer>B</answer>",
    "<answer>A</answer>",
    "<think>x</think><answer>C</answer>",
    "I pick A",
    "<think>t</think><answer>B</answer>",
]
SOKOBAN = [
    "<think>go</think><answer>Up || Left</answer>",
    "<think>hm</think><answer>Right</answer>",
    "<think>bad</think><answer>Jump</answer>",
    "Down",
    "<think>d</think><answer>Down || Down</answer>",
    "<think>l</think><answer>Left</answer>",
]


def script_for(texts: list[str]):
    return lambda episode, turn: texts[(3 * episode + turn) % len(texts)]


CASES = {
    "bandit": (["rollout.env_groups=3", "rollout.group_size=4"], BANDIT),
    "sokoban": (
        [
            "env.id=ragen/Sokoban-v0",
            "rollout.context_mode=full",
            "rollout.max_turns=3",
            "rollout.max_actions_per_turn=2",
            "rollout.env_groups=2",
            "rollout.group_size=3",
        ],
        SOKOBAN,
    ),
}


def make_cfg(tmp_path: Path, case: str):
    extra, _ = CASES[case]
    return load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "trainer.loggers=jsonl",
            "optim.micro_batch_size=4",
            "env.config={}",
            *extra,
        ],
    )


def native(tmp_path: Path, case: str):
    """The native trainer's step-STEP records and samples under the script."""
    cfg = make_cfg(tmp_path, case)
    trainer = StarPOTrainer(cfg)
    trainer.policy = ScriptedPolicy(
        script_for(CASES[case][1]), tokenizer=trainer.tokenizer, max_batch_size=64
    )
    records = trainer.rollout(STEP)
    samples, _ = build_samples(
        records, layout=trainer.layout, reward_placement=cfg.rollout.reward_placement
    )
    assert len(samples) == len(records)  # one sample per episode in both settings
    return cfg, trainer, records, samples


@pytest.mark.parametrize("case", sorted(CASES))
def test_trl_adapter_sees_native_tokens_masks_rewards(tmp_path: Path, case: str) -> None:
    pytest.importorskip("trl")
    from ragen_train.backends.trl_backend import PROMPT_TAG, RagenRolloutFunc, build_trl_trainer

    cfg, trainer, records, samples = native(tmp_path, case)
    tok = trainer.tokenizer
    G, E = cfg.rollout.group_size, cfg.rollout.env_groups
    assert [r.seed for r in records] == [STEP * E + g for g in range(E) for _ in range(G)]
    assert len({s.score for s in samples}) > 1  # the script gives different rewards

    policy = ScriptedPolicy(script_for(CASES[case][1]), tokenizer=tok, max_batch_size=64)
    rollout = RagenRolloutFunc(cfg, tok, policy=policy)
    rollout.step = STEP
    trl, _, _ = build_trl_trainer(cfg, trainer.model, tok, rollout_func=rollout)
    inputs = [
        {"prompt": [{"role": "user", "content": PROMPT_TAG.format(env_id=cfg.env.id, group=g)}]}
        for g in range(E)
        for _ in range(G)
    ]
    trl.model.train()
    out = trl._generate_and_score_completions(inputs)

    assert [r.seed for r in rollout.last["records"]] == [r.seed for r in records]
    loss_mask = out["completion_mask"] * out["tool_mask"]
    n_masked_env_tokens = 0
    for i, s in enumerate(samples):
        p = out["prompt_ids"][i][out["prompt_mask"][i].bool()].tolist()
        keep = out["completion_mask"][i].bool()
        c = out["completion_ids"][i][keep].tolist()
        m = loss_mask[i][keep].tolist()
        assert p + c == s.input_ids, (
            f"row {i}: TRL trains on other token ids than the native trainer"
        )
        assert [0] * len(p) + m == s.loss_mask, f"row {i}: loss masks differ"
        n_masked_env_tokens += sum(1 for x in m if x == 0)
    if case == "sokoban":
        assert (
            n_masked_env_tokens > 0
        )  # observation tokens between turns are in the completion, masked out
    rewards = list(trl._logs["rewards"]["ragen_env_return"])[-len(samples) :]
    assert rewards == pytest.approx([s.score for s in samples], abs=1e-6)
    native_adv, _ = group_advantages(
        torch.tensor([s.score for s in samples]),
        torch.tensor([s.group for s in samples]),
        eps=cfg.algorithm.grpo_eps,
    )
    # TRL divides by (std + 1e-4), we by (std + 1e-6): equal to 1e-3 relative (docs/backends.md).
    assert out["advantages"].tolist() == pytest.approx(native_adv.tolist(), rel=2e-3, abs=1e-4)


class ScriptedServer:
    """verl's server interface (``generate(request_id, *, prompt_ids, sampling_params)``) answering from a script."""

    def __init__(self, script, tokenizer, episode: int):
        self.script, self.tok, self.episode, self.turn = script, tokenizer, episode, 0
        self.calls: list[tuple[str, list[int], dict]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.turn += 1
        self.calls.append((request_id, list(prompt_ids), dict(sampling_params)))
        ids = list(
            self.tok(self.script(self.episode, self.turn), add_special_tokens=False)["input_ids"]
        )
        return SimpleNamespace(
            token_ids=ids + [self.tok.eos_token_id], log_probs=None, stop_reason="completed"
        )


@pytest.mark.parametrize("case", sorted(CASES))
def test_verl_agent_loop_sees_native_tokens_masks_rewards(tmp_path: Path, case: str) -> None:
    cfg, trainer, records, samples = native(tmp_path, case)
    tok = trainer.tokenizer
    G, E = cfg.rollout.group_size, cfg.rollout.env_groups
    settings = RagenLoopSettings.from_json(
        RagenLoopSettings.from_config(cfg).to_json()
    )  # as the YAML carries it
    train_rows, _ = dataset_rows(cfg)
    for i, s in enumerate(samples):
        g, m = divmod(i, G)
        info = row_fields(
            train_rows[STEP * E + g]
        )  # verl repeats each row rollout.n = group_size times
        server = ScriptedServer(script_for(CASES[case][1]), tok, episode=g * G + m)
        ep = asyncio.run(
            run_ragen_episode(
                server,
                tok,
                settings,
                seed=info["ragen_seed"],
                split=info["ragen_split"],
                group=info["ragen_group"],
                member=m,
                episode_index=g * G + m,
                step=info["ragen_step"],
                sampling_params={"temperature": 1.0},
            )
        )
        assert info["ragen_seed"] == records[i].seed
        assert ep.prompt_ids + ep.response_ids == s.input_ids
        assert [0] * len(ep.prompt_ids) + ep.response_mask == s.loss_mask
        assert ep.reward_score == pytest.approx(s.score, abs=1e-9)
        assert len({c[0] for c in server.calls}) == 1  # one request id per episode (sticky routing)
        assert all(c[2]["max_tokens"] == cfg.rollout.max_new_tokens for c in server.calls)


class TinyModelServer:
    """verl's server interface with the tiny model underneath (greedy when temperature is 0)."""

    def __init__(self, policy):
        self.policy = policy

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from ragen_bench.types import PolicyRequest, SamplingParams

        sp = SamplingParams(
            temperature=sampling_params["temperature"], max_new_tokens=sampling_params["max_tokens"]
        )
        (gen,) = self.policy.generate_sync(
            [PolicyRequest(messages=[], prompt_token_ids=list(prompt_ids))], sp
        )
        return SimpleNamespace(
            token_ids=gen.completion_token_ids,
            log_probs=gen.completion_logprobs,
            stop_reason="completed",
        )


def test_verl_agent_loop_with_tiny_model_matches_native_rollout(tmp_path: Path) -> None:
    """A real model behind verl's interface: the agent loop's output equals the native sample (greedy)."""
    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.rollout import RolloutEngine, rollout_config

    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "env.id=ragen/Sokoban-v0",
            "env.config={}",
            "rollout.context_mode=full",
            "rollout.max_turns=2",
            "rollout.max_new_tokens=12",
            "rollout.env_groups=2",
            "rollout.group_size=2",
        ],
    )
    trainer = StarPOTrainer(cfg)
    policy = HFPolicy(trainer.model, trainer.tokenizer, max_batch_size=1)
    rcfg = rollout_config(cfg.env.id, cfg.rollout, temperature=0.0)
    specs = [
        s for s in train_specs(cfg, 1) if s.member == 0
    ]  # greedy: one member per seed suffices
    records = RolloutEngine(policy, rcfg, max_parallel=1).run(specs)
    rows, _ = episode_rows(records, layout="trajectory")
    settings = RagenLoopSettings.from_config(cfg)
    settings.rollout["sampling"]["temperature"] = 0.0
    for spec, row, rec in zip(specs, rows, records):
        ep = asyncio.run(
            run_ragen_episode(
                TinyModelServer(policy),
                trainer.tokenizer,
                settings,
                seed=spec.seed,
                split="train",
                group=spec.group,
                episode_index=spec.index,
                sampling_params={"temperature": 0.0},
            )
        )
        assert ep.prompt_ids == row.prompt_ids and ep.response_ids == row.completion_ids
        assert ep.response_mask == row.completion_mask
        assert len(rec.turns) == 2 and 0 in ep.response_mask and ep.response_mask[-1] == 1
        assert ep.response_logprobs is not None and len(ep.response_logprobs) == len(
            ep.response_ids
        )
        assert all(lp == 0.0 for lp, mk in zip(ep.response_logprobs, ep.response_mask) if mk == 0)
        assert ep.reward_score == pytest.approx(rec.episode_return) and math.isfinite(
            ep.reward_score
        )
        assert ep.num_turns == 4
