"""The response parser, rule by rule (``ragen_envs/parsing.py`` module docstring, rules 1-8).

Every row of :data:`CASES` is one response with the exact outcome the documented rules
give: actions, error code, ``format_valid``, stray-text count and dropped actions.  The
cases the project's foundation spec lists ("Response parser") are marked ``issue``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ragen_envs.parsing import ParsedResponse, format_answer, parse_response

VOCAB = ("Up", "Down", "Left", "Right")

#: Every error code the parser documents (ParsedResponse.error).
ERROR_CODES = {
    "truncated",
    "malformed_tags",
    "no_answer",
    "multiple_blocks",
    "no_think",
    "empty_answer",
    "unknown_action",
}


@dataclass(frozen=True)
class Case:
    """One parser input and its documented outcome."""

    id: str
    response: str
    actions: tuple[str, ...] = ()
    error: str | None = None
    format_valid: bool = False
    stray_chars: int = 0
    n_dropped: int = 0
    unknown: tuple[str, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    think: str | None = None
    answer: str | None = None


def _nws(text: str) -> int:
    """Non-whitespace characters of ``text`` (what ``stray_chars`` counts)."""
    return len("".join(text.split()))


CASES: list[Case] = [
    # ---- well-formed responses
    Case(
        "think_then_answer",
        "<think>go up</think><answer>Up</answer>",
        ("Up",),
        None,
        True,
        think="go up",
        answer="Up",
    ),
    Case(
        "whitespace_between_blocks_is_not_stray",
        "  <think> a </think>\n\n <answer> Up </answer>\n",
        ("Up",),
        None,
        True,
        think="a",
        answer="Up",
    ),
    Case(
        "empty_think_block_is_allowed",
        "<think></think><answer>Down</answer>",
        ("Down",),
        None,
        True,
        think="",
        answer="Down",
    ),
    # ---- rule 2: tags are lowercase and exact
    Case(
        "uppercase_tags_are_not_tags",
        "<THINK>a</THINK><ANSWER>Up</ANSWER>",
        (),
        "no_answer",
        False,
        stray_chars=len("<THINK>a</THINK><ANSWER>Up</ANSWER>"),
    ),
    Case(
        "uppercase_answer_tag_only",
        "<think>a</think><ANSWER>Up</ANSWER>",
        (),
        "no_answer",
        False,
        stray_chars=len("<ANSWER>Up</ANSWER>"),
    ),
    Case(
        "capitalised_answer_tag",
        "<think>a</think><Answer>Up</Answer>",
        (),
        "no_answer",
        False,
        stray_chars=len("<Answer>Up</Answer>"),
    ),
    Case(
        "tag_with_inner_space_is_not_a_tag",
        "<think>a</think><answer >Up</answer >",
        (),
        "no_answer",
        False,
        stray_chars=_nws("<answer >Up</answer >"),
    ),
    # ---- rule 3: exactly one think block followed by exactly one answer block
    Case(
        "issue:two_think_answer_pairs",
        "<think>a</think><answer>Up</answer><think>b</think><answer>Down</answer>",
        (),
        "multiple_blocks",
        False,
    ),
    Case(
        "two_answer_blocks",
        "<think>a</think><answer>Up</answer><answer>Down</answer>",
        (),
        "multiple_blocks",
    ),
    Case(
        "two_think_blocks",
        "<think>a</think><think>b</think><answer>Up</answer>",
        (),
        "multiple_blocks",
    ),
    Case("answer_before_think", "<answer>Up</answer><think>a</think>", (), "malformed_tags"),
    # With a tag error, everything outside the blocks closed before the error is stray.
    Case(
        "answer_nested_in_think",
        "<think>I will say <answer>Up</answer></think>",
        (),
        "malformed_tags",
        stray_chars=_nws("<think>I will say <answer>Up</answer></think>"),
    ),
    Case(
        "think_nested_in_answer",
        "<think>a</think><answer><think>b</think>Up</answer>",
        (),
        "malformed_tags",
        stray_chars=_nws("<answer><think>b</think>Up</answer>"),
    ),
    Case(
        "unclosed_answer",
        "<think>a</think><answer>Up",
        (),
        "malformed_tags",
        stray_chars=len("<answer>Up"),
    ),
    Case(
        "unclosed_think",
        "<think>a<answer>Up</answer>",
        (),
        "malformed_tags",
        stray_chars=len("<think>a<answer>Up</answer>"),
    ),
    Case(
        "stray_closing_tag",
        "</think><think>a</think><answer>Up</answer>",
        (),
        "malformed_tags",
        stray_chars=len("</think><think>a</think><answer>Up</answer>"),
    ),
    Case(
        "mismatched_close",
        "<think>a</answer><answer>Up</answer>",
        (),
        "malformed_tags",
        stray_chars=len("<think>a</answer><answer>Up</answer>"),
    ),
    Case("think_without_answer", "<think>no idea</think>", (), "no_answer", stray_chars=0),
    Case("think_mode_needs_think_block", "<answer>Up</answer>", (), "no_think"),
    # answer-only mode
    Case(
        "issue:answer_only_mode",
        "<answer>Left</answer>",
        ("Left",),
        None,
        True,
        kwargs={"enable_think": False},
        answer="Left",
    ),
    Case(
        "answer_only_mode_think_block_is_stray",
        "<think>ab</think><answer>Left</answer>",
        ("Left",),
        None,
        True,
        stray_chars=len("<think>ab</think>"),
        kwargs={"enable_think": False},
    ),
    Case(
        "answer_only_mode_two_think_blocks_are_stray",
        "<think>a</think> <think>b</think><answer>Left</answer>",
        ("Left",),
        None,
        True,
        stray_chars=2 * len("<think>a</think>"),
        kwargs={"enable_think": False},
    ),
    Case(
        "answer_only_mode_think_after_answer_is_stray",
        "<answer>Left</answer><think>a</think>",
        ("Left",),
        None,
        True,
        stray_chars=len("<think>a</think>"),
        kwargs={"enable_think": False},
    ),
    Case(
        "answer_only_mode_two_answers",
        "<answer>Left</answer><answer>Up</answer>",
        (),
        "multiple_blocks",
        kwargs={"enable_think": False},
    ),
    Case(
        "answer_only_mode_unclosed_think_is_malformed",
        "<think>a <answer>Left</answer>",
        (),
        "malformed_tags",
        stray_chars=_nws("<think>a <answer>Left</answer>"),
        kwargs={"enable_think": False},
    ),
    # ---- rule 4: truncation
    Case(
        "issue:truncated_mid_think",
        "<think>I should push the box le",
        (),
        "malformed_tags",
        stray_chars=_nws("<think>I should push the box le"),
    ),
    Case(
        "issue:finish_reason_length_on_valid_text",
        "<think>a</think><answer>Up</answer>",
        (),
        "truncated",
        kwargs={"finish_reason": "length"},
    ),
    Case(
        "finish_reason_stop_is_normal",
        "<think>a</think><answer>Up</answer>",
        ("Up",),
        None,
        True,
        kwargs={"finish_reason": "stop"},
    ),
    # ---- rule 5: text outside the blocks is flagged and counted, actions still taken
    Case(
        "issue:stray_text_before_between_after",
        "Sure! <think>a</think> so: <answer>Up</answer> Done.",
        ("Up",),
        None,
        True,
        stray_chars=len("Sure!") + len("so:") + len("Done."),
    ),
    Case(
        "stray_text_whitespace_not_counted",
        "x y\tz\n<think>a</think><answer>Up</answer>",
        ("Up",),
        None,
        True,
        stray_chars=3,
    ),
    Case(
        "stray_non_ascii_counted_per_character",
        "é√ <think>a</think><answer>Up</answer>",
        ("Up",),
        None,
        True,
        stray_chars=2,
    ),
    # ---- rule 6: split on ||, strip, drop empty items
    Case(
        "issue:split_and_case_map",
        "<think>a</think><answer> right || UP </answer>",
        ("Right", "Up"),
        None,
        True,
        answer="right || UP",
    ),
    Case(
        "empty_items_dropped",
        "<think>a</think><answer>Up ||  || down||</answer>",
        ("Up", "Down"),
        None,
        True,
    ),
    Case(
        "issue:empty_answer",
        "<think>a</think><answer>   </answer>",
        (),
        "empty_answer",
        True,
        answer="",
    ),
    Case("only_separators", "<think>a</think><answer> || || </answer>", (), "empty_answer", True),
    # ---- rule 7: vocabulary, case-insensitive, nothing repaired
    Case(
        "issue:comma_separated_is_one_unknown_action",
        "<think>a</think><answer>Right, Up</answer>",
        (),
        "unknown_action",
        True,
        unknown=("Right, Up",),
    ),
    Case(
        "one_unknown_item_invalidates_all",
        "<think>a</think><answer>Up || Jump || Down</answer>",
        (),
        "unknown_action",
        True,
        unknown=("Jump",),
    ),
    Case(
        "no_fuzzy_repair",
        "<think>a</think><answer>Upp || move up</answer>",
        (),
        "unknown_action",
        True,
        unknown=("Upp", "move up"),
    ),
    Case(
        "free_form_without_vocabulary",
        "<think>a</think><answer> 3 + 4 * 5 </answer>",
        ("3 + 4 * 5",),
        None,
        True,
        kwargs={"action_names": None},
    ),
    Case(
        "free_form_still_split",
        "<think>a</think><answer>x || y</answer>",
        ("x", "y"),
        None,
        True,
        kwargs={"action_names": None},
    ),
    Case(
        "custom_separator",
        "<think>a</think><answer>up; left</answer>",
        ("Up", "Left"),
        None,
        True,
        kwargs={"action_sep": ";"},
    ),
    # ---- rule 8: per-turn budget
    Case(
        "issue:budget_keeps_first_two",
        "<think>a</think><answer>Up || Left || Down || Right</answer>",
        ("Up", "Left"),
        None,
        True,
        n_dropped=2,
        kwargs={"max_actions": 2},
    ),
    Case(
        "budget_not_reached",
        "<think>a</think><answer>Up || Left</answer>",
        ("Up", "Left"),
        None,
        True,
        n_dropped=0,
        kwargs={"max_actions": 5},
    ),
    Case(
        "unknown_in_dropped_tail_still_invalid",
        "<think>a</think><answer>Up || Left || Jump</answer>",
        (),
        "unknown_action",
        True,
        unknown=("Jump",),
        kwargs={"max_actions": 2},
    ),
    # ---- no answer at all
    Case(
        "plain_text", "I think it's Paris", (), "no_answer", stray_chars=_nws("I think it's Paris")
    ),
    Case("empty_string", "", (), "no_answer"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_table(case: Case) -> None:
    kwargs: dict[str, Any] = {"action_names": VOCAB, **case.kwargs}
    r = parse_response(case.response, **kwargs)
    assert isinstance(r, ParsedResponse)
    assert r.error in ERROR_CODES | {None}
    assert (r.actions, r.error, r.format_valid) == (case.actions, case.error, case.format_valid)
    assert r.stray_chars == case.stray_chars
    assert r.has_stray_text == (case.stray_chars > 0)
    assert r.n_dropped == case.n_dropped
    assert r.unknown_actions == case.unknown
    assert r.valid == (case.error is None and bool(case.actions))
    if case.error is not None:
        assert r.actions == () and not r.valid
    if case.think is not None:
        assert r.think == case.think
    if case.answer is not None:
        assert r.answer == case.answer


def test_issue_only_the_response_is_parsed_never_the_prompt() -> None:
    """Rule 1: the parser takes the response alone; the prompt's example never leaks in."""
    prompt = (
        "Example of the answer format: <answer> Beijing </answer>\nWhat is the capital of France?\n"
    )
    response = "I think it's Paris"
    r = parse_response(response, enable_think=False)
    assert r.answer is None and r.actions == () and r.error == "no_answer" and not r.valid
    # Why it matters: parsing prompt + response (RAGEN-style regex search over the whole
    # text) would "find" the prompt's example answer.
    leaked = parse_response(prompt + response, enable_think=False)
    assert leaked.actions == ("Beijing",)
    # The signature has no prompt argument at all.
    with pytest.raises(TypeError):
        parse_response(response, prompt=prompt)  # type: ignore[call-arg]


def test_issue_two_blocks_never_get_format_credit() -> None:
    r = parse_response(
        "<think>a</think><answer>Up</answer><think>b</think><answer>Down</answer>",
        action_names=VOCAB,
    )
    assert r.error == "multiple_blocks" and not r.format_valid and not r.valid and r.actions == ()


def test_stray_text_is_reported_verbatim() -> None:
    r = parse_response("Sure! <think>a</think> so: <answer>Up</answer> Done.", action_names=VOCAB)
    assert r.stray_text == "Sure!\nso:\nDone."
    assert r.actions == ("Up",)


@pytest.mark.parametrize("finish_reason", [None, "length"])
def test_issue_truncated_response_is_invalid_without_exception(finish_reason: str | None) -> None:
    r = parse_response(
        "<think>I should push the box le", action_names=VOCAB, finish_reason=finish_reason
    )
    assert r.actions == () and not r.valid and not r.format_valid
    assert r.error == ("truncated" if finish_reason == "length" else "malformed_tags")


def test_canonical_spelling_comes_from_the_vocabulary() -> None:
    r = parse_response(
        "<answer>treasure hunter || LIBRARIAN</answer>",
        action_names=("Librarian", "Treasure Hunter"),
        enable_think=False,
    )
    assert r.actions == ("Treasure Hunter", "Librarian")
    # Inner whitespace is part of the name: nothing is repaired.
    r = parse_response(
        "<answer>treasure  hunter</answer>",
        action_names=("Librarian", "Treasure Hunter"),
        enable_think=False,
    )
    assert r.error == "unknown_action" and r.unknown_actions == ("treasure  hunter",)


def test_budget_zero_drops_everything() -> None:
    r = parse_response(
        "<answer>Up || Down</answer>", action_names=VOCAB, enable_think=False, max_actions=0
    )
    assert r.actions == () and r.n_dropped == 2 and not r.valid


@pytest.mark.parametrize("bad", [None, 3, b"<answer>Up</answer>", ["<answer>Up</answer>"]])
def test_non_string_input_never_raises(bad: Any) -> None:
    r = parse_response(bad, action_names=VOCAB)  # type: ignore[arg-type]
    assert r.error == "no_answer" and r.actions == ()


@pytest.mark.parametrize("think", [None, "plan: up then left"])
@pytest.mark.parametrize("actions", [["Up"], ["Up", "Left", "Down"]])
def test_format_answer_round_trips(think: str | None, actions: list[str]) -> None:
    text = format_answer(actions, think)
    r = parse_response(text, action_names=VOCAB, enable_think=think is not None)
    assert r.valid and list(r.actions) == actions and r.stray_chars == 0 and r.think == think


def test_format_answer_documented_example() -> None:
    assert (
        format_answer(["Up", "Left"], "push the box")
        == "<think>push the box</think><answer>Up || Left</answer>"
    )
    assert format_answer(["Up"]) == "<answer>Up</answer>"
