"""Linear-time parsing and the action length cap.

``"```" * 200000`` as a DeepCoder action took 296 s in ``extract_code`` (a regular
expression with a per-position scan for a line break).  Now every parser is linear and
``TextEnv.step`` refuses actions longer than ``MAX_ACTION_LENGTH`` as invalid actions.
The time bounds here are generous hang bounds (pytest-timeout), not speed assertions:
the old code exceeds them by orders of magnitude.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.core import MAX_ACTION_LENGTH
from ragen_envs.envs.deepcoder.judge import extract_code
from ragen_envs.parsing import parse_response

from .conftest import ALL_IDS

#: Units repeated to build adversarial actions: fence floods (the reported input),
#: answer/think tag floods, separators, nested brackets, arithmetic and digit runs (an
#: int of 60,000 digits exceeds Python's int-conversion limit), each env's own action
#: syntax repeated, control and non-ASCII characters.
UNITS = [
    "```",
    "```python\n",
    "```\n",
    "<answer>",
    "<think></think><answer>",
    "</answer>",
    "||",
    "(",
    "((1+",
    "1+",
    "9",
    "\\boxed{",
    "search[",
    "click[",
    "Up ",
    "(1, 2, 3) ",
    " ",
    "\n",
    "\u00e9\u221a",
    "\x00",
]


def _flood(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


# ------------------------------------------------------------------ extract_code
@pytest.mark.timeout(30)
def test_quadratic_code_extraction_fence_flood_is_linear() -> None:
    # The reported input (old code: 296 s); and variants that defeat a line-break scan.
    assert (
        extract_code("```" * 200000) == "```" * 200000
    )  # no line break: no fence, the whole answer
    assert extract_code("```python\n" * 100000) is None  # only empty blocks
    flood = "```" * 200000 + "\n" + "print(1)\n"
    assert extract_code(flood) == "print(1)"  # one block opened by the first fence


#: The extraction rule as the old regular expression stated it (a test oracle only: it
#: is correct but quadratic, so it only sees short inputs here).
_OLD_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _old_extract(answer: str) -> str | None:
    blocks = [(m.group(1).lower(), m.group(2)) for m in _OLD_FENCE.finditer(answer)]
    if blocks:
        py = [code for lang, code in blocks if lang in {"", "python", "py", "python3", "py3"}]
        code = (py or [blocks[-1][1]])[-1]
    else:
        code = answer
    code = code.strip("\n")
    return code if code.strip() else None


@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.sampled_from(["```", "`", "\n", "python", "Py", "cpp", " ", "\t", "x", "print(1)", "#"]),
        max_size=30,
    ).map("".join)
)
def test_quadratic_code_extraction_same_blocks_as_the_old_rule(answer: str) -> None:
    assert extract_code(answer) == _old_extract(answer)


# ---------------------------------------------------------------- answer parser
@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", UNITS)
def test_quadratic_code_extraction_answer_parser_is_linear(unit: str) -> None:
    text = _flood(unit, 1 << 20)  # 1 MiB, 16x the action cap
    for think in (True, False):
        parsed = parse_response(text, action_names=("Up", "Down"), enable_think=think)
        assert isinstance(parsed.error, (str, type(None)))
        wrapped = parse_response(f"<think>x</think><answer>{text}</answer>", enable_think=think)
        assert wrapped.error is not None or wrapped.actions


# --------------------------------------------------------------- every env's step
@pytest.mark.timeout(600)
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_quadratic_code_extraction_long_adversarial_actions_every_env(env_id: str) -> None:
    """Each flood just under the cap is parsed (in bounded time, never an exception); one
    character over it is an invalid action with the env's penalty; info stays valid."""
    env = ragen_envs.make(env_id).unwrapped
    key = ragen_envs.get_entry(env_id).env_key
    penalty = float(env.config.get("invalid_action_reward", -0.1))
    seed = 0
    for unit in UNITS:
        for length, over in ((MAX_ACTION_LENGTH, False), (MAX_ACTION_LENGTH + 1, True)):
            env.reset(seed=seed)
            seed += 1
            obs, reward, terminated, truncated, info = env.step(_flood(unit, length))
            ragen_envs.validate_info(key, info)
            assert isinstance(obs, str) and isinstance(reward, float)
            if over:
                assert info["action_is_valid"] is False
                assert reward == penalty
                assert "limit is 65536" in info["invalid_reason"]
                assert not terminated


def test_quadratic_code_extraction_deepcoder_reported_input_is_refused_at_once() -> None:
    env = ragen_envs.make("ragen/DeepCoder-v0")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("```" * 200000)
    assert info["action_is_valid"] is False and not terminated
    assert reward == float(env.unwrapped.config["invalid_action_reward"])
    assert "600000 characters long" in info["invalid_reason"]


def test_action_space_states_the_cap() -> None:
    env = ragen_envs.make("ragen/Sokoban-v0")
    assert env.action_space.max_length == MAX_ACTION_LENGTH
    assert "x" * MAX_ACTION_LENGTH in env.action_space
    assert "x" * (MAX_ACTION_LENGTH + 1) not in env.action_space
