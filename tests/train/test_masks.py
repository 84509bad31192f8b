"""Loss masks cover exactly the sampled assistant tokens (plus their end-of-turn token),
and training uses exactly the sampled token ids — with two chat templates."""

from __future__ import annotations

import copy

import pytest

from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs
from ragen_bench.tiny import tiny_model_path
from ragen_bench.types import Generation
from ragen_train.batch import build_samples, collate
from tests.helpers.scripted import ScriptedPolicy

# A Qwen2.5-style template, written for this test: ChatML, but a default system message is
# inserted when the conversation has none and the assistant header differs in spacing from
# ours only through the template text itself.
QWEN_STYLE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def tiny_tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path())


def two_turn_records(tokenizer, *, odd_tokens: bool = False):
    responses = {
        1: "<think>first</think><answer>nope</answer>",
        2: "<think>second one</think><answer>again</answer>",
    }

    def script(ep: int, turn: int):
        text = responses[turn]
        if not odd_tokens:
            return text
        # A non-canonical tokenisation, as a sampler may produce: one token per character.
        ids = [i for ch in text for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]
        return Generation(
            text=text,
            completion_token_ids=ids + [tokenizer.eos_token_id],
            completion_tokens=len(ids) + 1,
        )

    policy = ScriptedPolicy(script, tokenizer=tokenizer)
    if odd_tokens:
        orig = policy.generate

        async def gen(requests, params):
            out = await orig(requests, params)
            for r, g in zip(requests, out):
                g.prompt_token_ids = r.prompt_token_ids
            return out

        policy.generate = gen  # type: ignore[method-assign]
    cfg = RolloutConfig(max_turns=2, max_actions_per_turn=1)
    return RolloutEngine(policy, cfg).run(make_specs("ragen/Bandit-v0", episodes=1)), responses


@pytest.mark.parametrize("template", ["tiny", "qwen_style"])
def test_mask_is_exactly_the_sampled_assistant_tokens(tiny_tok, template: str) -> None:
    tok = copy.deepcopy(tiny_tok)
    if template == "qwen_style":
        tok.chat_template = QWEN_STYLE
    records, responses = two_turn_records(tok)
    samples, stats = build_samples(records, layout="trajectory")
    assert stats.metrics()["batch/dropped"] == 0 and len(samples) == 1
    s = samples[0]
    rec = records[0]
    # The training ids ARE the rollout ids: last prompt + last completion.
    assert s.input_ids == rec.turns[-1].prompt_token_ids + rec.turns[-1].completion_token_ids
    # Masked spans, in order, are exactly the two completions (text + end-of-turn token).
    spans, cur = [], []
    for tid, m in zip(s.input_ids, s.loss_mask):
        if m:
            cur.append(tid)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    assert spans == [t.completion_token_ids for t in rec.turns]
    for span, turn in zip(spans, (1, 2)):
        assert span[-1] == tok.eos_token_id
        assert tok.decode(span[:-1]) == responses[turn]
    # Nothing else is trained: not the system/user text, not the "<|im_start|>assistant\n" header.
    unmasked = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask) if not m])
    assert unmasked.count("<|im_start|>assistant\n") == 2
    assert "You are an agent" in unmasked and "Observation:" in unmasked
    assert sum(s.loss_mask) == sum(len(t.completion_token_ids) for t in rec.turns)
    # Reward on the last generated token only.
    nz = [i for i, r in enumerate(s.rewards) if r != 0]
    assert nz == [len(s.input_ids) - 1] and s.rewards[-1] == pytest.approx(rec.episode_return)


def test_sampled_non_canonical_tokens_are_trained_as_sampled(tiny_tok) -> None:
    records, _ = two_turn_records(tiny_tok, odd_tokens=True)
    samples, _ = build_samples(records)
    rec = records[0]
    first = rec.turns[0].completion_token_ids
    start = len(rec.turns[0].prompt_token_ids)
    assert samples[0].input_ids[start : start + len(first)] == first
    # Re-tokenising the text would give different (fewer) ids: exactly what we avoid.
    canonical = tiny_tok(tiny_tok.decode(first[:-1]), add_special_tokens=False)["input_ids"]
    assert len(canonical) < len(first) - 1


def test_sample_whose_prompts_do_not_extend_is_flagged_and_dropped(tiny_tok) -> None:
    records, _ = two_turn_records(tiny_tok)
    rec = records[0]
    rec.turns[1].prompt_token_ids = list(rec.turns[1].prompt_token_ids)
    rec.turns[1].prompt_token_ids[len(rec.turns[0].prompt_token_ids) + 1] ^= (
        1  # tamper inside turn 1's completion
    )
    samples, stats = build_samples(records)
    assert samples == [] and stats.dropped == {"not_prefix": 1}


def test_turn_layout_and_turn_end_rewards(tiny_tok) -> None:
    records, _ = two_turn_records(tiny_tok)
    samples, _ = build_samples(records, layout="turn", reward_placement="turn_end")
    assert len(samples) == 2
    for s, t in zip(samples, records[0].turns):
        assert s.input_ids == t.prompt_token_ids + t.completion_token_ids
        assert sum(s.loss_mask) == len(t.completion_token_ids)
        assert s.rewards[-1] == pytest.approx(t.reward)
    traj, _ = build_samples(records, reward_placement="turn_end")
    ends = [i for i, r in enumerate(traj[0].rewards) if r != 0]
    assert len(ends) == 2  # one reward per turn end
    b = collate(traj, tiny_tok.pad_token_id)
    # Targets are shifted by one: the mask at position j is about token j+1.
    assert b.loss_mask.shape[1] == b.input_ids.shape[1] - 1
    assert b.loss_mask[0].tolist() == [float(x) for x in traj[0].loss_mask[1:]]
