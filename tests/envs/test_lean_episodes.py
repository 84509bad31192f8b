"""Lean episodes through the real env against Lean's recorded answers, on both back-ends.

``kimina``: a real HTTP server on 127.0.0.1 speaking the Kimina Lean Server API, spoken to
with httpx; ``repl``: a real subprocess speaking ``lake exe repl``'s framing.  Both answer
from the Lean REPL's own recorded transcripts (``tests/data/lean/repl-transcripts``) and
our written cases in the same shapes (``written/``, ``kimina-written.jsonl``); see
``lean_fakes.py``.  What they stand in for is Lean itself, which cannot run here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ragen_envs

from .lean_support import PROOF, KiminaServer, lean_env, repl_spec


class Backend:
    """The back-end under test: ``make(**config)`` builds envs on it (closed afterwards)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.server = KiminaServer().__enter__() if kind == "kimina" else None
        self.envs: list[Any] = []

    def make(self, *fault: str, **config: Any) -> Any:
        """An env on this back-end; ``fault`` are fake-REPL options (REPL only)."""
        env = lean_env(self.server.url if self.server is not None else repl_spec(*fault), **config)
        self.envs.append(env)
        return env

    def close(self) -> None:
        for env in self.envs:
            env.close()
        if self.server is not None:
            self.server.__exit__(None, None, None)


@pytest.fixture(params=["kimina", "repl"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "kimina":
        pytest.importorskip("httpx", reason="the Kimina back-end needs httpx (the 'lean' extra)")
    b = Backend(request.param)
    yield b
    b.close()


def _play(env: Any, theorem: str, tactics: list[str]) -> list[tuple[float, bool, bool, dict]]:
    env.reset(options={"theorem": theorem})
    out = []
    for t in tactics:
        _, reward, terminated, truncated, info = env.step(t)
        ragen_envs.validate_info("lean", info)
        out.append((reward, terminated, truncated, info))
    return out


def test_accepted_tactic_earns_progress(backend: Backend) -> None:
    env = backend.make()
    [(reward, term, trunc, info)] = _play(env, "complex_and", ["apply And.intro"])
    assert reward == pytest.approx(-0.1 + 1.0)
    assert (term, trunc, info["tactic_outcome"], info["action_is_effective"], info["progress"]) == (
        False,
        False,
        "accepted",
        True,
        True,
    )
    assert info["goals_open"] == 2 and env.proof == ("apply And.intro",)
    obs = env.render()
    assert "Open goals (2):" in obs and "case left" in obs and "✓ apply And.intro (progress)" in obs


def test_rejected_tactic(backend: Backend) -> None:
    env = backend.make()
    for theorem, tactic in (("my_theorem", "exact my_fake_premise"), ("f", "exat 42")):
        [(reward, term, _, info)] = _play(env, theorem, [tactic])
        assert reward == pytest.approx(-0.1 - 1.0) and not term
        assert info["tactic_outcome"] == "rejected" and not info["action_is_effective"]
        assert env.proof == () and info["tactics_accepted"] == 0
    assert "✗ exat 42 (rejected: Lean error)" in env.render()


@pytest.mark.parametrize("tactic", ["skip", "have h3 : p ∧ q := h1"])
def test_no_op_tactic_earns_no_plus_one(backend: Backend, tactic: str) -> None:
    """RAGEN pays +0.9 for these; here: accepted, -0.1, not effective, not kept."""
    env = backend.make()
    steps = _play(env, "complex_and", [tactic, tactic])
    for reward, term, _, info in steps:
        assert reward == pytest.approx(-0.1)
        assert (info["tactic_outcome"], info["action_is_effective"], info["progress"], term) == (
            "no_progress",
            False,
            False,
            False,
        )
    assert env.proof == () and steps[-1][3]["tactics_accepted"] == 2


def test_comment_is_a_no_op_on_kimina(backend: Backend) -> None:
    if backend.kind != "kimina":
        pytest.skip(
            "no recorded or written tactic-mode answer for a lone comment (the REPL's transcripts have "
            "none); the whole-proof check, as on Kimina, is where RAGEN's comment exploit lived"
        )
    env = backend.make()
    [(reward, _, _, info)] = _play(env, "complex_and", ["-- a comment"])
    assert reward == pytest.approx(-0.1) and info["tactic_outcome"] == "no_progress"


def test_completed_proof_scores_ten_and_succeeds(backend: Backend) -> None:
    env = backend.make()
    steps = _play(env, "complex_and", PROOF)
    rewards = [s[0] for s in steps]
    assert rewards == pytest.approx([0.9, 0.9, 0.9, 0.9 + 10.0])
    reward, term, trunc, info = steps[-1]
    assert (
        term
        and not trunc
        and info["success"]
        and info["status"] == "success"
        and info["proof_complete"]
    )
    assert env.proof == tuple(PROOF)
    assert "Goals: none, the proof is complete." in env.render()


def test_one_step_proof(backend: Backend) -> None:
    env = backend.make()
    [(reward, term, _, info)] = _play(env, "complex_and", ["exact ⟨h1.left, h2 h1.right⟩"])
    assert reward == pytest.approx(10.9) and term and info["success"]


@pytest.mark.parametrize(
    ("theorem", "tactic"),
    [("f", "sorry"), ("complex_and", "sorry"), ("foo", "have h : x = 1 := sorry")],
)
def test_proof_closed_with_sorry_is_not_success(
    backend: Backend, theorem: str, tactic: str
) -> None:
    env = backend.make()
    [(reward, term, trunc, info)] = _play(env, theorem, [tactic])
    assert reward == pytest.approx(-1.1)
    assert not term and not trunc and not info["success"] and info["status"] == "running"
    assert (
        info["uses_sorry"] and info["tactic_outcome"] == "rejected" and not info["proof_complete"]
    )
    assert env.proof == ()


def test_admit_is_rejected_even_without_a_sorries_entry(backend: Backend) -> None:
    if backend.kind != "kimina":
        pytest.skip(
            "the written Lean-without-a-sorries-entry case is a whole-proof answer (kimina-written.jsonl)"
        )
    env = backend.make()
    [(reward, term, _, info)] = _play(env, "complex_and", ["admit"])
    assert reward == pytest.approx(-1.1) and not term and info["uses_sorry"]


def test_invalid_actions_never_reach_lean(backend: Backend) -> None:
    env = backend.make(max_tactic_chars=50)
    obs0, _ = env.reset(options={"theorem": "complex_and"})
    for action in ("", "   \n  ", "x" * 51, "exact\x00h1", "apply\x1bAnd.intro"):
        obs, reward, term, trunc, info = env.step(action)
        assert (
            not info["action_is_valid"]
            and reward == -0.1
            and obs == obs0
            and "tactic_outcome" not in info
        )
    if backend.server is not None:
        assert backend.server.requests == []  # nothing was sent
    *_, info = env.step("apply And.intro")
    assert info["tactics_checked"] == 1 and info["step"] == 6


def test_lean_timeout_costs_one_and_the_episode_goes_on(backend: Backend) -> None:
    env = backend.make("--hang-on", "nlinarith", lean_timeout_s=1, start_timeout_s=5)
    if backend.server is not None:
        backend.server.timeout_tactics = {"nlinarith"}
    steps = _play(env, "complex_and", ["apply And.intro", "nlinarith", "exact h1.left"])
    assert [s[0] for s in steps] == pytest.approx([0.9, -1.1, 0.9])
    assert steps[1][3]["tactic_outcome"] == "timeout" and not steps[1][1] and not steps[1][2]
    assert env.proof == ("apply And.intro", "exact h1.left")  # the REPL was restarted and replayed
    assert "✗ nlinarith (timed out)" in env.render()


def test_step_limit_penalty_on_a_checked_tactic(backend: Backend) -> None:
    env = backend.make(max_steps=2)
    steps = _play(env, "complex_and", ["apply And.intro", "exact h1.left"])
    assert steps[-1][0] == pytest.approx(-0.1 + 1.0 - 2.0)
    assert steps[-1][2] and steps[-1][3]["status"] == "step_limit"
