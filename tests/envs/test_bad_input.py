"""Bad input never raises: arbitrary strings into every env's ``step`` and into the parser.

The contract (``ragen_envs.core.TextEnv.step``, foundation issue "Must show"): ``step``
accepts any ``str``; one that does not parse under the env's action grammar is an
*invalid action* -- reward ``config["invalid_action_reward"]``, not terminated, the
state unchanged, the step counted toward ``max_steps``.  "State unchanged" is checked
three ways: the observation is identical, the env's random stream
(``np_random``) was not advanced, and (in :func:`test_invalid_action_does_not_change_the_future`)
the rest of an oracle episode after the invalid action is the same as without it.

Property-based with hypothesis (derandomized, so CI runs the same examples every time),
plus explicit 1 MiB inputs.  The parser must run in linear time: the 1 MiB cases would
take minutes under a quadratic scan, but no timing is asserted.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.baselines import oracle_policy
from ragen_envs.parsing import parse_response

from .conftest import ALL_IDS

#: Examples per hypothesis test; the step tests run once per registered id.
N_STEP_EXAMPLES = int(os.environ.get("RAGEN_HYPOTHESIS_STEP_EXAMPLES", "25"))
N_PARSE_EXAMPLES = int(os.environ.get("RAGEN_HYPOTHESIS_PARSE_EXAMPLES", "300"))

_SETTINGS = dict(
    deadline=None,
    derandomize=True,  # reproducible in CI: the same examples on every run
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

MIB = 1 << 20

#: Fragments that make strings look almost like answers.
TAG_PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<THINK>",
    "<Answer>",
    "<",
    ">",
    "/",
    "think",
    "answer",
    "||",
    "|",
    " ",
    "\n",
    "\t",
    "Up",
    "left",
    "place",
    "1",
    "9",
    "+",
    "*",
    "/",
    "(",
    ")",
    "=",
    "**",
    "//",
    "row",
    "col",
    ",",
    ".",
    "-",
    "\x00",
    "√",
]

#: Arbitrary strings: empty, any surrogate-free unicode, control/format characters,
#: lone surrogates (a Python ``str`` can hold them), and strings of tag fragments.
BAD_STRINGS = st.one_of(
    st.just(""),
    st.text(max_size=200),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), max_size=50),
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=5),
    st.lists(st.sampled_from(TAG_PIECES), max_size=40).map("".join),
    st.binary(max_size=50).map(lambda b: b.decode("latin-1")),
)

#: Explicit large and pathological inputs (each about 1 MiB of characters).
BIG_STRINGS = {
    "1MiB_x": "x" * MIB,
    "1MiB_answer_tags": "<answer>" * (MIB // len("<answer>")),
    "1MiB_closed_blocks": "<answer></answer>" * (MIB // len("<answer></answer>")),
    "1MiB_separators": "<answer>" + "||" * (MIB // 2) + "</answer>",
    "1MiB_nul": "\x00" * MIB,
    "1MiB_non_ascii": "√é\u2028" * (MIB // 3),
    "1MiB_open_paren": "(" * MIB,
}


@functools.cache
def _env(env_id: str) -> gym.Env:
    return ragen_envs.make(env_id)


def _rng_state(base: Any) -> Any:
    return copy.deepcopy(base.np_random.bit_generator.state)


def _step_and_check(env_id: str, seed: int, action: str) -> bool:
    """Reset ``env_id`` with ``seed``, step ``action``, check the contract; return validity."""
    env = _env(env_id)
    base = env.unwrapped
    key = ragen_envs.get_entry(env_id).env_key
    obs0, _ = env.reset(seed=seed)
    rng0 = _rng_state(base)
    obs1, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs1, str) and obs1 in env.observation_space
    assert isinstance(reward, float) and reward == reward  # not NaN
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert info["step"] == 1
    ragen_envs.validate_info(key, info)
    if not info["action_is_valid"]:
        assert reward == base.config["invalid_action_reward"], (
            "invalid action must get the documented penalty"
        )
        assert terminated is False
        assert truncated is (int(base.config["max_steps"]) <= 1)
        assert info["action_is_effective"] is False and info["success"] is False
        assert info["episode_return"] == reward
        assert obs1 == obs0, "an invalid action must leave the observation unchanged"
        assert _rng_state(base) == rng0, "an invalid action must not consume the env's randomness"
    return bool(info["action_is_valid"])


# ----------------------------------------------------------------------------- step


@pytest.mark.parametrize("env_id", ALL_IDS)
@settings(max_examples=N_STEP_EXAMPLES, **_SETTINGS)
@given(seed=st.integers(0, 2**31 - 1), action=BAD_STRINGS)
def test_step_never_raises_on_arbitrary_strings(env_id: str, seed: int, action: str) -> None:
    _step_and_check(env_id, seed, action)


@pytest.mark.parametrize("env_id", ALL_IDS)
@pytest.mark.parametrize("name", sorted(BIG_STRINGS))
def test_step_on_one_mebibyte_strings(env_id: str, name: str) -> None:
    valid = _step_and_check(env_id, seed=0, action=BIG_STRINGS[name])
    assert not valid, f"{name} must not be a valid action"


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_repeated_invalid_actions_truncate_at_max_steps(env_id: str) -> None:
    env = _env(env_id)
    base = env.unwrapped
    max_steps = int(base.config["max_steps"])
    obs0, _ = env.reset(seed=1)
    for k in range(1, max_steps + 1):
        obs, reward, terminated, truncated, info = env.step("\x00 definitely not an action \x00")
        assert not info["action_is_valid"] and reward == base.config["invalid_action_reward"]
        assert obs == obs0 and terminated is False
        assert truncated is (k == max_steps)
    assert info["status"] == "step_limit"
    assert info["episode_return"] == pytest.approx(max_steps * base.config["invalid_action_reward"])


def _oracle_trace(env: gym.Env, seed: int, prefix: list[str]) -> list[tuple[str, float, bool]]:
    """Reset, send ``prefix`` (must all be invalid), then follow the oracle until the end."""
    env.reset(seed=seed)
    for action in prefix:
        *_, info = env.step(action)
        assert not info["action_is_valid"]
    trace: list[tuple[str, float, bool]] = []
    base = env.unwrapped
    for _ in range(10_000):
        if base.status.value != "running":
            break
        plan = oracle_policy(base, "")
        assert plan, "the oracle returned no action for a running episode"
        for action in plan:
            obs, reward, terminated, truncated, _ = env.step(action)
            trace.append((obs, reward, terminated))
            if terminated or truncated:
                break
    return trace


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_invalid_action_does_not_change_the_future(env_id: str) -> None:
    """After an invalid action the oracle episode unfolds exactly as without it."""
    env = _env(env_id)
    bad = "\x00?\x00"
    env.reset(seed=0)
    if env.step(bad)[4]["action_is_valid"]:
        pytest.skip(f"{bad!r} is a valid action of {env_id}")
    if int(env.unwrapped.config["max_steps"]) < 2:
        pytest.skip("max_steps < 2 leaves no step after an invalid one")
    for seed in range(3):
        clean = _oracle_trace(env, seed, [])
        after_bad = _oracle_trace(env, seed, [bad])
        # The invalid action used up one step, so the second run may be truncated earlier.
        assert after_bad == clean[: len(after_bad)]
        assert len(after_bad) >= min(len(clean), int(env.unwrapped.config["max_steps"]) - 1)


# --------------------------------------------------------------------------- parser


@settings(max_examples=N_PARSE_EXAMPLES, **_SETTINGS)
@given(
    text=BAD_STRINGS,
    vocab=st.sampled_from([None, ("Up", "Down", "Left", "Right"), ("Librarian", "Gambler")]),
    max_actions=st.one_of(st.none(), st.integers(0, 5)),
    enable_think=st.booleans(),
    finish_reason=st.sampled_from([None, "stop", "length"]),
)
def test_parser_never_raises(
    text: str,
    vocab: tuple[str, ...] | None,
    max_actions: int | None,
    enable_think: bool,
    finish_reason: str | None,
) -> None:
    r = parse_response(
        text,
        action_names=vocab,
        max_actions=max_actions,
        enable_think=enable_think,
        finish_reason=finish_reason,
    )
    assert r.valid == (r.error is None and bool(r.actions))
    if r.error is not None:
        assert r.actions == ()
    if finish_reason == "length":
        assert r.error == "truncated"
    if max_actions is not None:
        assert len(r.actions) <= max_actions
    if vocab is not None:
        assert set(r.actions) <= set(vocab)
    assert 0 <= r.stray_chars <= len(text) and r.n_dropped >= 0
    if "<answer>" not in text:
        assert r.actions == ()


@given(pieces=st.lists(st.sampled_from(TAG_PIECES), max_size=60))
@settings(max_examples=N_PARSE_EXAMPLES, **_SETTINGS)
def test_parser_on_tag_soup_matches_a_clean_wrapper(pieces: list[str]) -> None:
    """Wrapping a well-formed response in arbitrary tag soup never makes it *more* valid."""
    soup = "".join(pieces)
    r = parse_response(soup + "<think>a</think><answer>Up</answer>", action_names=("Up",))
    if "<" not in soup and ">" not in soup:
        assert r.valid and r.stray_chars == len("".join(soup.split()))


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "n_actions", "n_dropped"),
    [
        ("1MiB_x", {}, "no_answer", 0, 0),
        ("1MiB_answer_tags", {}, "malformed_tags", 0, 0),
        ("1MiB_closed_blocks", {}, "multiple_blocks", 0, 0),
        ("1MiB_separators", {"enable_think": False}, "empty_answer", 0, 0),
        ("1MiB_nul", {}, "no_answer", 0, 0),
        ("1MiB_non_ascii", {}, "no_answer", 0, 0),
        ("1MiB_open_paren", {}, "no_answer", 0, 0),
    ],
)
def test_parser_on_one_mebibyte_strings(
    name: str, kwargs: dict[str, Any], error: str, n_actions: int, n_dropped: int
) -> None:
    r = parse_response(BIG_STRINGS[name], action_names=("Up", "Down"), **kwargs)
    assert (r.error, len(r.actions), r.n_dropped) == (error, n_actions, n_dropped)


def test_parser_on_a_mebibyte_of_actions_keeps_the_budget() -> None:
    n = MIB // len("Up || ")
    text = "<think>a</think><answer>" + "Up || " * n + "</answer>"
    r = parse_response(text, action_names=("Up", "Down"), max_actions=2)
    assert r.valid and r.actions == ("Up", "Up") and r.n_dropped == n - 2


def test_parser_on_a_mebibyte_think_block() -> None:
    r = parse_response(
        "<think>" + "hmm " * (MIB // 4) + "</think><answer>down</answer>",
        action_names=("Up", "Down"),
    )
    assert r.valid and r.actions == ("Down",)
    r = parse_response(
        "<think>" + "hmm " * (MIB // 4), action_names=("Up", "Down")
    )  # cut off mid-thought
    assert r.error == "malformed_tags" and r.actions == ()
