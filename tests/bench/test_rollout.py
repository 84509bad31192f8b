"""The rollout engine: batching, statuses, penalties, context modes, token-level prompts."""

from __future__ import annotations

import asyncio

import pytest

import ragen_envs
from ragen_bench.policies import OraclePolicy, make_policy
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine, make_specs
from ragen_bench.types import Generation, PolicyRequest, SamplingParams
from tests.helpers.scripted import ScriptedPolicy


def test_make_specs_groups_share_seeds() -> None:
    specs = make_specs("ragen/Bandit-v0", episodes=6, group_size=3, seed=10)
    assert [(s.index, s.seed, s.group, s.member) for s in specs] == [
        (0, 10, 0, 0),
        (1, 10, 0, 1),
        (2, 10, 0, 2),
        (3, 11, 1, 0),
        (4, 11, 1, 1),
        (5, 11, 1, 2),
    ]
    with pytest.raises(ValueError, match="multiple of group_size"):
        make_specs("ragen/Bandit-v0", episodes=5, group_size=2)


def test_make_specs_places_groups_inside_a_larger_run() -> None:
    """The trainer's group 3 of a step (group size 2, env seed 40) on the rank that plays it."""
    specs = make_specs(
        "ragen/Bandit-v0",
        episodes=4,
        group_size=2,
        seed=40,
        env_config={"split": "train"},
        start_index=6,
        first_group=3,
    )
    assert [(s.index, s.seed, s.group, s.member) for s in specs] == [
        (6, 40, 3, 0),
        (7, 40, 3, 1),
        (8, 41, 4, 0),
        (9, 41, 4, 1),
    ]
    assert all(s.env_config == {"split": "train"} for s in specs)
    with pytest.raises(ValueError, match="first_group must be >= 0"):
        make_specs("ragen/Bandit-v0", episodes=2, first_group=-1)


def test_batches_never_exceed_max_batch_size() -> None:
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>nope</answer>", max_batch_size=4)
    engine = RolloutEngine(policy, RolloutConfig(max_turns=2, max_actions_per_turn=1))
    records = engine.run(make_specs("ragen/Bandit-v0", episodes=10))
    assert max(policy.batches) == 4
    assert sum(policy.batches) == 20  # 10 episodes x 2 turns, every request answered once
    assert all(r.status == "turn_limit" for r in records)


def test_full_batches_when_all_episodes_wait() -> None:
    """With 8 live episodes and max_batch 8, every turn is generated as one batch of 8."""
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>nope</answer>", max_batch_size=8)
    RolloutEngine(policy, RolloutConfig(max_turns=3, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=8)
    )
    assert policy.batches == [8, 8, 8]


def test_concurrency_bound_for_endpoint_like_policies() -> None:
    state = {"now": 0, "peak": 0}

    class Slow(ScriptedPolicy):
        async def generate(
            self, requests: list[PolicyRequest], params: SamplingParams
        ) -> list[Generation]:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.01)
            state["now"] -= 1
            return await super().generate(requests, params)

    policy = Slow(lambda e, t: "<answer>x</answer>", max_batch_size=1, max_concurrency=3)
    RolloutEngine(policy, RolloutConfig(max_turns=2, max_actions_per_turn=1), max_parallel=10).run(
        make_specs("ragen/Bandit-v0", episodes=10)
    )
    assert state["peak"] == 3
    assert policy.batches == [1] * 20


def test_invalid_answer_penalty_feedback_and_turn_limit() -> None:
    policy = ScriptedPolicy(lambda e, t: "I pick the risky one")
    rec = RolloutEngine(
        policy, RolloutConfig(max_turns=3, max_actions_per_turn=1, format_penalty=-0.25)
    ).run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    assert rec.status == "turn_limit"
    assert [t.reward for t in rec.turns] == [-0.25, -0.25, -0.25]
    assert rec.episode_return == pytest.approx(-0.75)
    assert rec.turns[0].parsed["error"] == "no_answer"
    assert rec.turns[1].user_message.startswith(
        "Your last answer was invalid: it has no <answer>...</answer> block."
    )
    assert rec.metrics()["format_valid_rate"] == 0.0
    assert rec.success is False


def test_max_invalid_answers_ends_episode() -> None:
    policy = ScriptedPolicy(lambda e, t: "<answer></answer>")
    rec = RolloutEngine(policy, RolloutConfig(max_turns=5, max_invalid_answers=2)).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    assert rec.status == "invalid_format_limit"
    assert len(rec.turns) == 2


def test_unknown_action_lists_valid_actions_in_feedback() -> None:
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>Astronaut</answer>")
    rec = RolloutEngine(policy, RolloutConfig(max_turns=2, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    msg = rec.turns[1].user_message
    env = ragen_envs.make("ragen/Bandit-v0", split="train")
    env.reset(seed=0)
    arms = env.unwrapped.action_names
    assert f"(Astronaut); valid actions: {arms[0]}, {arms[1]}" in msg


def test_valid_answer_steps_env_and_records_infos() -> None:
    env = ragen_envs.make("ragen/Bandit-v0")
    env.reset(seed=0)
    best = env.unwrapped.oracle_actions()[0]
    policy = ScriptedPolicy(lambda e, t: f"<think>go</think><answer>{best.upper()}</answer>")
    rec = RolloutEngine(policy, RolloutConfig(max_turns=1, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=1, env_config={"split": "train"})
    )[0]
    assert rec.status == "success" and rec.success
    assert rec.turns[0].actions == [best]
    assert rec.turns[0].infos[-1]["chose_best"] is True
    assert rec.turns[0].terminated is True


def test_env_exception_is_recorded_as_env_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragen_envs.envs.bandit import BanditEnv

    def boom(self, action):  # noqa: ANN001
        raise RuntimeError("simulated env bug")

    # patched on the public step: Bandit's first exactly spelled action takes a direct path
    # that never reaches _step, and an env bug may sit anywhere in step
    monkeypatch.setattr(BanditEnv, "step", boom)
    policy = OraclePolicy()
    rec = RolloutEngine(policy, RolloutConfig(max_turns=2, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    assert rec.status == "env_error"
    assert "simulated env bug" in rec.error


def test_policy_exception_is_endpoint_error() -> None:
    class Broken(ScriptedPolicy):
        async def generate(self, requests, params):  # noqa: ANN001
            raise ConnectionError("server went away")

    rec = RolloutEngine(Broken(lambda e, t: ""), RolloutConfig()).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    assert rec.status == "endpoint_error"
    assert "server went away" in rec.error
    assert rec.turns == []


def test_a_signal_inside_a_task_leaves_no_unretrieved_task_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ctrl-C / SIGTERM raised while a rollout task runs stops the run with one exception and
    no extra "Task exception was never retrieved" line (the flaky SIGTERM CLI test's cause)."""
    import gc

    class Interrupted(ScriptedPolicy):
        async def generate(self, requests, params):  # noqa: ANN001
            raise KeyboardInterrupt  # what the signal handler raises in the running task

    with pytest.raises(KeyboardInterrupt):
        RolloutEngine(Interrupted(lambda e, t: ""), RolloutConfig()).run(
            make_specs("ragen/Bandit-v0", episodes=4)
        )
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_context_modes() -> None:
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>nope</answer>")
    last_k = RolloutEngine(
        policy,
        RolloutConfig(max_turns=4, max_actions_per_turn=1, context_mode="last_k", context_window=1),
    ).run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    roles = [[m["role"] for m in t.prompt_messages] for t in last_k.turns]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user"],
    ]
    assert last_k.turns[3].prompt_messages[1]["content"] == last_k.turns[2].user_message
    single = RolloutEngine(
        policy, RolloutConfig(max_turns=3, max_actions_per_turn=1, context_mode="single_turn")
    ).run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    assert all(len(t.prompt_messages) == 2 for t in single.turns)
    third = single.turns[2].prompt_messages[1]["content"]
    assert third.startswith(
        "Summary of your earlier turns:\nTurn 1: invalid answer (unknown_action), reward -0.1.\n"
        "Turn 2: invalid answer (unknown_action), reward -0.1.\n\n"
    )
    full = RolloutEngine(policy, RolloutConfig(max_turns=3, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    assert len(full.turns[2].prompt_messages) == 6
    # The transcript is the whole dialogue whatever the mode.
    assert len(single.messages) == len(full.messages) == 7


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from transformers import AutoTokenizer

    from ragen_bench.tiny import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


def test_token_budget_drops_oldest_turns_never_system(tiny_tokenizer) -> None:
    policy = ScriptedPolicy(
        lambda e, t: "<think>x</think><answer>nope</answer>", tokenizer=tiny_tokenizer
    )
    engine = RolloutEngine(policy, RolloutConfig(max_turns=4, max_actions_per_turn=1))
    full = engine.run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    sizes = [len(t.prompt_token_ids) for t in full.turns]
    msgs = full.turns[2].prompt_messages  # system, u1, a1, u2, a2, u3
    budget = len(engine.chat.prompt_ids([msgs[0]] + msgs[3:]))  # room for one earlier turn, not two
    limited = RolloutEngine(
        policy, RolloutConfig(max_turns=4, max_actions_per_turn=1, max_context_tokens=budget)
    ).run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    assert [t.context_dropped_turns for t in limited.turns] == [0, 0, 1, 2]
    for t in limited.turns:
        assert t.prompt_messages[0]["role"] == "system"
        assert t.prompt_messages[-1]["content"] == t.user_message
        assert len(t.prompt_token_ids) <= budget
    tiny_budget = RolloutEngine(
        policy, RolloutConfig(max_turns=4, max_context_tokens=sizes[0] - 1)
    ).run(make_specs("ragen/Bandit-v0", episodes=1))[0]
    assert tiny_budget.status == "context_limit" and tiny_budget.turns == []


def test_full_mode_prompts_extend_the_sampled_tokens(tiny_tokenizer) -> None:
    """Turn t+1's prompt ids start with turn t's prompt + sampled completion ids; with a
    canonical completion they equal the template rendering of the messages."""
    from ragen_bench.chat import ChatTokens

    chat = ChatTokens(tiny_tokenizer)
    policy = ScriptedPolicy(
        lambda e, t: f"<think>turn {t}</think><answer>nope</answer>", tokenizer=tiny_tokenizer
    )
    rec = RolloutEngine(policy, RolloutConfig(max_turns=3, max_actions_per_turn=1)).run(
        make_specs("ragen/Bandit-v0", episodes=1)
    )[0]
    assert [t.incremental_tokens for t in rec.turns] == [False, True, True]
    for prev, cur in zip(rec.turns, rec.turns[1:]):
        n = len(prev.prompt_token_ids) + len(prev.completion_token_ids)
        assert cur.prompt_token_ids[:n] == prev.prompt_token_ids + prev.completion_token_ids
    for t in rec.turns:
        assert t.prompt_token_ids == chat.prompt_ids(t.prompt_messages)


@pytest.mark.parametrize("env_id", [e.id for e in ragen_envs.list_envs() if e.procedural])
def test_oracle_backend_succeeds_on_every_procedural_preset(env_id: str) -> None:
    """Under each preset's own agent protocol (turns x actions), on the test split."""
    from ragen_bench.rollout import rollout_config

    env = ragen_envs.make(env_id)
    env.reset(seed=0)
    exact = getattr(env.unwrapped, "oracle_is_exact", True)
    specs = make_specs(env_id, episodes=16, env_config={"split": "test"})
    records = RolloutEngine(OraclePolicy(), rollout_config(env_id)).run(specs)
    rate = sum(r.success for r in records) / len(records)
    if exact:
        assert rate == 1.0, [r.status for r in records]
    else:
        # Slippery ice: no policy can guarantee success; the oracle is the optimal policy
        # (tests/envs/test_frozenlake.py checks its success rate against value iteration).
        assert all(r.status in ("success", "failure", "step_limit", "turn_limit") for r in records)
        assert rate > 0


def test_random_policy_episodes_finish_while_most_are_still_queued() -> None:
    """A long random run saves episodes from the start: the default number of episodes
    alive at once is bounded (64), so the first episode is handed to ``on_episode`` (and
    written) before most of the run has started; with 1,024 alive a 3,000-episode run
    saved nothing in its first 10 s."""
    from ragen_bench.policies import RandomPolicy

    started: set[int] = set()
    at_first_finish: list[int] = []
    engine = RolloutEngine(
        RandomPolicy(seed=0),
        RolloutConfig(max_turns=3),
        on_turn=lambda index, turn: started.add(index),
        on_episode=lambda record: at_first_finish.append(len(started)),
    )
    assert engine.max_parallel == 64
    records = engine.run(make_specs("ragen/Sokoban-v0", episodes=200))
    assert len(records) == 200
    assert at_first_finish[0] <= 64  # 200 before: every episode alive at once


def test_negative_seed_is_refused_before_any_episode() -> None:
    with pytest.raises(ValueError, match="seed must be >= 0"):
        make_specs("ragen/FrozenLake-v0", episodes=4, seed=-1)
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        make_specs("ragen/FrozenLake-v0", episodes=4, group_size=0)


def test_env_whose_reset_raised_is_not_reused_for_later_episodes() -> None:
    specs = [
        EpisodeSpec(
            index=i, env_id="ragen/FrozenLake-v0", env_config={}, seed=seed, group=i, member=0
        )
        for i, seed in enumerate((-1, 0, 1, 2))
    ]
    engine = RolloutEngine(
        make_policy("oracle", None),
        RolloutConfig(max_turns=5, max_actions_per_turn=2),
        max_parallel=1,
    )
    records = engine.run(specs)
    assert records[0].status == "env_error" and "Seed" in (records[0].error or "")
    assert [r.status for r in records[1:]] == ["success"] * 3, [
        (r.status, r.error) for r in records[1:]
    ]
