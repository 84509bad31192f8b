"""The agent loop renders a multi-turn conversation exactly as the golden files say.

A scripted policy answers four turns of one Sokoban and one FrozenLake episode: a
well-formed two-action answer with a think block, a malformed answer (format penalty),
an answer with an unknown action, then the env's oracle until the episode ends. The
conversation the loop builds (``EpisodeRecord.messages``), the prompt each turn sent to
the policy, and every turn's reward and parse result must equal
``tests/data/golden_conversations/<env>.json`` message for message.

The golden files were written by this test with ``RAGEN_UPDATE_GOLDEN=1`` and then read
by hand against docs/envs/README.md (agent protocol), docs/envs/sokoban.md and
docs/envs/frozenlake.md (rules, symbols, rewards). Regenerate them only for an
intentional change of the prompt format, and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragen_bench.policies.base import Policy
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine
from ragen_bench.types import Generation, PolicyRequest, SamplingParams
from ragen_envs.parsing import format_answer

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_conversations"

SCRIPT = [
    "<think>I try two moves first.</think><answer>Up || Left</answer>",
    "I would push the box now.",  # no tags: invalid format, format penalty, no env step
    "<think>Let me jump over it.</think><answer>Jump</answer>",  # not an action of the env
]


class ScriptThenOracle(Policy):
    """Scripted answers for the first turns, then the env's oracle (privileged)."""

    name = "script-then-oracle"
    privileged = True
    max_batch_size = 1

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        out = []
        for req in requests:
            env = req.env.unwrapped
            oracle = env.oracle_actions()[: req.max_actions]
            k = sum(m["role"] == "assistant" for m in req.messages)  # answers given so far
            if k < len(SCRIPT):
                text = SCRIPT[k]
            else:
                text = format_answer(oracle, "Following the plan.")
            out.append(Generation(text=text, finish_reason="stop"))
        return out


CASES = {"sokoban": ("ragen/Sokoban-v0", 3), "frozenlake": ("ragen/FrozenLake-v0", 5)}


def _play(env_id: str, seed: int) -> dict:
    cfg = RolloutConfig(max_turns=8, max_actions_per_turn=2)
    rec = RolloutEngine(ScriptThenOracle(), cfg).run([EpisodeSpec(0, env_id, seed)])[0]
    return {
        "source": "tests/bench/test_golden_conversation.py (scripted policy), checked by hand against docs/envs/",
        "env_id": env_id,
        "seed": seed,
        "status": rec.status,
        "success": rec.success,
        "messages": rec.messages,
        "turns": [
            {
                "prompt_messages": t.prompt_messages,
                "response": t.response,
                "parsed": t.parsed,
                "actions": t.actions,
                "step_rewards": t.step_rewards,
                "format_penalty": t.format_penalty,
                "reward": t.reward,
                "terminated": t.terminated,
                "truncated": t.truncated,
            }
            for t in rec.turns
        ],
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_conversation_matches_golden(name: str) -> None:
    env_id, seed = CASES[name]
    got = json.loads(json.dumps(_play(env_id, seed)))
    path = GOLDEN / f"{name}.json"
    if os.environ.get("RAGEN_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got["status"] == want["status"] and got["success"] == want["success"]
    assert len(got["messages"]) == len(want["messages"])
    for i, (g, w) in enumerate(zip(got["messages"], want["messages"])):
        assert g == w, f"message {i} differs"
    assert got["turns"] == want["turns"]


def test_golden_conversations_cover_the_protocol() -> None:
    """The golden files exercise what they claim: a penalty, an invalid action, an ending."""
    for name in CASES:
        want = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
        turns = want["turns"]
        assert [m["role"] for m in want["messages"][:3]] == ["system", "user", "assistant"]
        assert turns[1]["actions"] == [] and turns[1]["format_penalty"] == pytest.approx(-0.1)
        assert turns[2]["actions"] == [] and turns[2]["parsed"]["unknown_actions"] == ["Jump"]
        assert turns[-1]["terminated"] and want["success"] is True
        # Each turn's prompt is the conversation so far (full-history mode).
        for k, t in enumerate(turns):
            assert t["prompt_messages"] == want["messages"][: 2 + 2 * k]
