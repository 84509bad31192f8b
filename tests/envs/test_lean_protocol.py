"""Deciding on structured fields only, checked on every recorded answer of the Lean REPL."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ragen_envs.envs.lean.protocol import (
    ProtocolError,
    command_check,
    goal_signature,
    mentions_sorry,
    state_signature,
    tactic_check,
)

from .lean_fakes import load_transcripts, read_blocks
from .lean_support import DATA

RECORDED = load_transcripts([DATA / "repl-transcripts"])
TACTIC_ANSWERS = [ans for tr in RECORDED for req, ans in tr if "tactic" in req]


def _scramble_text(answer: Any) -> Any:
    """The same answer with every message text and proofStatus detail changed (another Lean version)."""
    out = copy.deepcopy(answer)
    for m in out.get("messages") or []:
        m["data"] = "völlig anderer Text " + m["data"][::-1]
    if "message" in out:
        out["message"] = "Lean-Fehler: " + out["message"][::-1]
    if isinstance(out.get("proofStatus"), str):
        word, _, rest = out["proofStatus"].partition(":")
        out["proofStatus"] = word + (": anders" if rest else "")
    return out


def test_every_recorded_tactic_answer_is_classified() -> None:
    assert len(TACTIC_ANSWERS) >= 12
    outcomes = {tactic_check(a).outcome for a in TACTIC_ANSWERS}
    assert outcomes == {"accepted", "rejected"}


@pytest.mark.parametrize("answer", TACTIC_ANSWERS, ids=range(len(TACTIC_ANSWERS)))
def test_verdict_does_not_read_message_text(answer: dict) -> None:
    a, b = tactic_check(answer), tactic_check(_scramble_text(answer))
    assert (a.outcome, a.goals, a.complete, a.uses_sorry) == (
        b.outcome,
        b.goals,
        b.complete,
        b.uses_sorry,
    )


def _answer(transcript: str, index: int) -> dict:
    return read_blocks(DATA / "repl-transcripts" / f"{transcript}.expected.out")[index]


@pytest.mark.parametrize(
    ("transcript", "index", "outcome", "complete", "uses_sorry"),
    [
        ("proof_branching", 1, "accepted", False, False),  # apply And.intro: two goals
        ("proof_branching", 4, "accepted", True, False),  # proofStatus Completed
        (
            "invalid_tactic",
            1,
            "rejected",
            False,
            False,
        ),  # severity error (and "contains sorry" from recovery)
        ("unknown_tactic", 1, "rejected", False, False),  # {"message": "Lean error: ..."}
        ("tactic_mode_sorry", 1, "rejected", False, True),  # goals [] but sorries: never complete
        ("sorry_hypotheses", 1, "rejected", False, True),  # have h : x = 1 := sorry
        ("have_by_sorry", 2, "rejected", False, True),
    ],
)
def test_recorded_answers(
    transcript: str, index: int, outcome: str, complete: bool, uses_sorry: bool
) -> None:
    check = tactic_check(_answer(transcript, index))
    assert (check.outcome, check.complete, check.uses_sorry) == (outcome, complete, uses_sorry)


def test_goals_empty_but_not_completed_is_rejected() -> None:
    for status in ("Error: kernel type check failed: ...", "Incomplete: contains metavariable(s)"):
        check = tactic_check({"proofState": 3, "goals": [], "proofStatus": status})
        assert check.outcome == "rejected" and not check.complete
    assert tactic_check({"proofState": 3, "goals": []}).complete  # REPL versions before proofStatus


def test_command_check_probe_line() -> None:
    goal = {"pos": {"line": 3, "column": 12}, "goal": "⊢ p"}
    assert command_check({"env": 0, "sorries": [goal]}, probe_line=3).goals == ("⊢ p",)
    assert command_check({"env": 0}, probe_line=3).complete
    user = command_check(
        {"env": 0, "sorries": [{"pos": {"line": 2, "column": 2}, "goal": "⊢ p"}]}, probe_line=3
    )
    assert user.outcome == "rejected" and user.uses_sorry
    err = {
        "env": 0,
        "messages": [{"severity": "error", "pos": {"line": 2, "column": 2}, "data": "x"}],
    }
    assert command_check(err, probe_line=3).outcome == "rejected"
    warn = {
        "env": 0,
        "messages": [{"severity": "warning", "pos": {"line": 1, "column": 8}, "data": "sorry"}],
    }
    assert (
        command_check(warn, probe_line=3, first_line=2).messages == ()
    )  # the probe's warning is not shown
    with pytest.raises(ProtocolError, match="refused the command"):
        command_check({"message": "Unknown environment."}, probe_line=3)


def test_goal_signature_ignores_names_order_and_repeats() -> None:
    g = "case left\nx y : ℤ\nh₀ : 0 < y\n⊢ x = 26"
    assert goal_signature(g) == goal_signature(
        "x y : ℤ\nh₀ : 0 < y\nh₀' : 0 < y\n⊢ x = 26"
    )  # repeated have
    assert goal_signature(g) == goal_signature("a b : ℤ\nh : 0 < y\n⊢ x = 26")  # renamed
    assert goal_signature(g) != goal_signature(
        "x y : ℤ\nh₀ : 0 < y\nh₁ : y < x\n⊢ x = 26"
    )  # a new fact
    assert goal_signature("h : ∀ x : ℕ,\n    x = x\n⊢ True") == (("∀ x : ℕ, x = x",), "True")
    assert state_signature(["⊢ p", "⊢ q"]) == state_signature(["⊢ q", "⊢ p"])


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("sorry", True),
        ("exact sorry", True),
        ("admit", True),
        ("exact sorryAx _ false", True),
        ("have h : x = 1 := by\n  sorry", True),
        ("exact no_sorry_lemma", False),
        ("exact h.sorry'", False),
        ("simp [admitted]", False),
        ("norm_num", False),
    ],
)
def test_mentions_sorry(text: str, found: bool) -> None:
    assert mentions_sorry(text) is found
