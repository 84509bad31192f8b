"""The Lean env's reward rules, observation and verifier choice, on the in-process replay back-end.

The replay files here are written by the tests (REPL answer shapes); they check the env's
own rules, not Lean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
from ragen_envs.envs.lean.verifier import DEFAULT_SPEC, ENV_VAR, parse_spec

from .lean_support import THEOREMS

G0 = "p q r : Prop\nh1 : p ∧ q\nh2 : q → r\n⊢ p ∧ r"
G_HAVE = "p q r : Prop\nh1 : p ∧ q\nh2 : q → r\nh : True\n⊢ p ∧ r"


def _step(goals: list[str]) -> dict:
    return {
        "proofStatus": "Incomplete: open goals remain" if goals else "Completed",
        "proofState": 1,
        "goals": goals,
    }


def _replay(tmp_path: Path, rows: list[tuple[list[str], Any]], unrecorded: str = "error") -> str:
    p = tmp_path / "answers.jsonl"
    lines = [{"format": "ragen-lean-replay", "version": 0, "unrecorded": unrecorded}]
    lines += [{"theorem": "complex_and", "tactics": t, "answer": a} for t, a in rows]
    p.write_text(
        "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8"
    )
    return "replay:" + str(p)


def _env(spec: str, env_id: str = "ragen/Lean-v0", **config: Any) -> Any:
    env = ragen_envs.make(
        env_id, verifier=spec, data_source=str(THEOREMS), split="test", render_mode="ansi", **config
    ).unwrapped
    env.reset(options={"theorem": "complex_and"})
    return env


def test_have_clear_cycle_pays_once(tmp_path: Path) -> None:
    """A cycle back to a seen state is effective but earns no second +1."""
    have, clear = "have h : True := trivial", "clear h"
    spec = _replay(
        tmp_path,
        [
            ([have], _step([G_HAVE])),
            ([have, clear], _step([G0])),
            ([have, clear, have], _step([G_HAVE])),
        ],
    )
    env = _env(spec)
    rewards, notes = [], []
    for t in (have, clear, have):
        _, r, _, _, info = env.step(t)
        rewards.append(r)
        notes.append((info["action_is_effective"], info["progress"]))
    assert rewards == pytest.approx([0.9, -0.1, -0.1])
    assert notes == [(True, True), (True, False), (True, False)]
    assert "(accepted, back to a state seen before)" in env.render()


def test_progress_reward_is_capped(tmp_path: Path) -> None:
    facts = [f"have h{i} : {i} = {i} := rfl" for i in range(4)]
    rows = [
        (
            facts[: i + 1],
            _step([G0.replace("⊢", "".join(f"h{j} : {j} = {j}\n" for j in range(i + 1)) + "⊢")]),
        )
        for i in range(4)
    ]
    env = _env(_replay(tmp_path, rows), max_progress_rewards=2)
    rewards = [env.step(t)[1] for t in facts]
    assert rewards == pytest.approx(
        [0.9, 0.9, -0.1, -0.1]
    )  # new facts forever cannot outearn a proof
    assert "(accepted, progress reward cap reached)" in env.render()


def test_sparse_preset(tmp_path: Path) -> None:
    spec = _replay(
        tmp_path,
        [
            (["apply And.intro"], _step(["⊢ p", "⊢ r"])),
            (["bad"], {"message": "Lean error"}),
            (["apply And.intro", "done_it"], _step([])),
        ],
    )
    env = _env(spec, "ragen/Lean-Sparse-v0")
    assert [env.step(t)[1] for t in ("bad", "apply And.intro", "done_it")] == pytest.approx(
        [-0.1, -0.1, 9.9]
    )
    assert env.status.value == "success"


def test_unrecorded_request_is_an_env_error(tmp_path: Path) -> None:
    env = _env(_replay(tmp_path, []))
    obs, reward, term, trunc, info = env.step("simp")
    assert (reward, term, trunc, info["status"]) == (0.0, False, True, "env_error")
    assert (
        info["verifier_error"].startswith("replay ")
        and "no recorded answer for theorem complex_and" in obs
    )
    ragen_envs.validate_info("lean", info)


def test_oracle_plays_a_known_proof(tmp_path: Path) -> None:
    spec = _replay(
        tmp_path,
        [(["apply And.intro"], _step(["⊢ p", "⊢ r"])), (["apply And.intro", "done_it"], _step([]))],
    )
    env = _env(spec)
    assert env.oracle_actions() == ["apply And.intro", "done_it"]
    result = run_episode(env, oracle_policy, options={"theorem": "complex_and"})
    assert result.success and result.rewards == pytest.approx([0.9, 10.9])


def test_observation_grammar(tmp_path: Path) -> None:
    tactics = [f"have h{i} : {i} = {i} := rfl" for i in range(7)]
    rows = [(tactics[: i + 1], _step([f"h{i} : {i} = {i}\n⊢ p ∧ r"])) for i in range(7)]
    env = _env(
        _replay(tmp_path, rows), proof_lines_shown=3, log_entries_shown=2, max_progress_rewards=None
    )
    obs0 = env.render()
    assert obs0.startswith(
        "Theorem complex_and: 0 tactics checked, 0 accepted.\n\nProblem: If p and q hold"
    )
    assert "Goal (from the data set, before any check):\n  p q r : Prop" in obs0
    for t in tactics:
        env.step(t)
    obs = env.render()
    sections = obs.split("\n\n")
    assert sections[0] == "Theorem complex_and: 7 tactics checked, 7 accepted."
    assert "Proof so far (last 3 of 7 lines):\n  5 | have h4 : 4 = 4 := rfl\n  6 | have h5" in obs
    assert (
        "Recent tactics:\n  ✓ have h5 : 5 = 5 := rfl (progress)\n  ✓ have h6 : 6 = 6 := rfl (progress)"
        in obs
    )
    assert "Open goals (1):\n  [1] h6 : 6 = 6\n      ⊢ p ∧ r" in obs


def test_verifier_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_spec("http://lean:8000/").describe() == "http://lean:8000"
    assert parse_spec("repl:").command == ("lake", "exe", "repl")
    assert parse_spec("repl:'/opt/my repl' --x").command == ("/opt/my repl", "--x")
    monkeypatch.delenv(ENV_VAR, raising=False)
    _, info = ragen_envs.make("ragen/Lean-v0").reset(seed=0)
    assert info["verifier"] == DEFAULT_SPEC == "http://127.0.0.1:8000"
    monkeypatch.setenv(ENV_VAR, "repl:lake exe repl")
    assert ragen_envs.make("ragen/Lean-v0").reset(seed=0)[1]["verifier"] == "repl:lake exe repl"
    assert (
        ragen_envs.make("ragen/Lean-v0", verifier="https://x.org").reset(seed=0)[1]["verifier"]
        == "https://x.org"
    )
    with pytest.raises(ragen_envs.ConfigError, match="verifier") as exc:
        ragen_envs.make("ragen/Lean-v0", verifier="lean://nope")
    assert exc.value.field == "verifier"
    with pytest.raises(ragen_envs.ConfigError, match="replay: needs a file"):
        ragen_envs.make("ragen/Lean-v0", verifier="replay:")
    monkeypatch.setenv(ENV_VAR, "lean-server:8000")
    with pytest.raises(
        ragen_envs.ConfigError, match=r"\$RAGEN_LEAN_VERIFIER: unknown verifier 'lean-server:8000'"
    ):
        ragen_envs.make("ragen/Lean-v0")


def test_instruction_states_rewards_and_format() -> None:
    text = ragen_envs.make("ragen/Lean-v0").unwrapped.instruction
    assert "<answer>norm_num at h₀ || nlinarith [sq_nonneg (x - 1)]</answer>" in text
    assert "+10 when it completes the proof" in text and "at most 5 times" in text


def test_bad_replay_file_is_a_one_line_env_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"format": "ragen-lean-replay", "version": 0}\n\n{"theorem": "t", "tactics": "simp"}\n',
        encoding="utf-8",
    )
    for spec, expected in (
        (f"replay:{bad}", f"{bad}:3: an answer needs 'theorem' (string), 'tactics'"),
        (f"replay:{tmp_path / 'none.jsonl'}", "replay file: no such data file"),
    ):
        info = _env(spec).step("simp")[4]
        assert info["status"] == "env_error" and info["verifier_error"].startswith(expected), info[
            "verifier_error"
        ]
