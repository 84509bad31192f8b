"""The response parser: the agent protocol between a language model and an environment.

A model answers each turn with::

    <think> reasoning </think><answer> action1 || action2 </answer>

(or only ``<answer>…</answer>`` in answer-only mode).  :func:`parse_response` turns
that text into a :class:`ParsedResponse`.  The rules (each one a test in
``tests/envs/test_parsing.py``; the spec is ``docs/envs/README.md`` section "Answer format"):

1. Only the model's response is parsed, never the prompt.
2. Tags are lowercase and exact: ``<think>``, ``</think>``, ``<answer>``, ``</answer>``.
3. Think mode: exactly one think block followed by exactly one answer block.  Answer-
   only mode: exactly one answer block; a think block there counts as stray text.
   Any other arrangement (two blocks, nesting, an unclosed or stray tag, answer before
   think) is an invalid format: no actions, ``error`` says why.
4. A response cut off by the length limit (``finish_reason == "length"``) is invalid
   and yields no action, whatever it contains.
5. Non-whitespace text outside the blocks does not invalidate the answer; it is
   flagged (``stray_text``) and counted (``stray_chars``).
6. The answer is split on the separator (``||``); items are stripped; empty items are
   dropped.  An answer with no item is invalid (``empty_answer``).
7. With an action vocabulary, every item must be exactly one action name, compared
   case-insensitively, and is returned in its canonical spelling.  One unknown item
   makes the whole answer invalid (``unknown_action``): nothing is silently repaired.
8. With a per-turn budget ``max_actions``, only the first ``max_actions`` actions are
   returned; ``n_dropped`` reports how many were cut.

The parser never raises on any ``str`` input and runs in time linear in its length:
one left-to-right regular-expression scan for the four tags (no backtracking: the
pattern has no repetition), then slicing, ``strip`` and ``split`` over the text, so a
1 MiB flood of tags or separators parses in milliseconds
(``tests/envs/test_long_actions.py``).  It has no length cap of its own; each action it
returns meets the env's cap when stepped: an action longer than
``ragen_envs.core.MAX_ACTION_LENGTH`` (65,536 characters) is an invalid action, with the
env's format penalty, never an exception (``docs/envs/README.md``, "Action length cap").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ParsedResponse", "parse_response", "format_answer", "ParseError"]

_TAG_RE = re.compile(r"<(/?)(think|answer)>")

#: Error codes, in the order the rules are checked.
ParseError = str  # truncated, malformed_tags, no_answer, multiple_blocks, no_think, empty_answer, unknown_action


@dataclass(frozen=True)
class ParsedResponse:
    """The outcome of parsing one model response.

    Attributes:
        think: text of the think block (stripped), or ``None``.
        answer: text of the answer block (stripped), or ``None``.
        actions: the actions to execute, canonical names when a vocabulary was given,
            at most ``max_actions`` of them; empty when the response is invalid.
        format_valid: the think/answer structure follows rule 3 and was not truncated.
        error: ``None`` when valid, else a code: ``truncated``, ``malformed_tags``,
            ``no_answer``, ``multiple_blocks``, ``no_think`` (think mode without a think
            block), ``empty_answer``, ``unknown_action``.
        unknown_actions: answer items that matched no action name.
        stray_text: the non-whitespace text found outside the blocks, joined by
            newlines.
        stray_chars: number of non-whitespace characters outside the blocks.
        n_dropped: valid actions cut by the per-turn budget.
    """

    think: str | None = None
    answer: str | None = None
    actions: tuple[str, ...] = ()
    format_valid: bool = False
    error: str | None = None
    unknown_actions: tuple[str, ...] = ()
    stray_text: str = ""
    stray_chars: int = 0
    n_dropped: int = 0

    @property
    def valid(self) -> bool:
        """True when the response yields at least one action and no error."""
        return self.error is None and bool(self.actions)

    @property
    def has_stray_text(self) -> bool:
        """True when non-whitespace text sits outside the tags."""
        return self.stray_chars > 0


def _blocks(text: str) -> tuple[list[tuple[str, int, int, int, int]], str | None]:
    """Pair tags in one linear pass.

    Returns ``(blocks, error)`` where each block is ``(name, open_start, content_start,
    content_end, close_end)``.
    """
    blocks: list[tuple[str, int, int, int, int]] = []
    open_tag: tuple[str, int, int] | None = None
    for m in _TAG_RE.finditer(text):
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if open_tag is not None:
                return blocks, "malformed_tags"  # nested or unclosed
            open_tag = (name, m.start(), m.end())
        else:
            if open_tag is None or open_tag[0] != name:
                return blocks, "malformed_tags"  # stray or mismatched close
            blocks.append((name, open_tag[1], open_tag[2], m.start(), m.end()))
            open_tag = None
    if open_tag is not None:
        return blocks, "malformed_tags"  # unclosed (e.g. a truncated response)
    return blocks, None


def _outside(text: str, spans: Iterable[tuple[int, int]]) -> list[str]:
    pieces, pos = [], 0
    for start, end in sorted(spans):
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return [p.strip() for p in pieces if p.strip()]


def parse_response(
    response: str,
    *,
    action_names: Iterable[str] | None = None,
    max_actions: int | None = None,
    enable_think: bool = True,
    action_sep: str = "||",
    finish_reason: str | None = None,
) -> ParsedResponse:
    """Parse one model response under the agent protocol (module docstring, rules 1-8).

    Args:
        response: the text the model generated for this turn (never the prompt).
        action_names: the env's discrete action vocabulary; ``None`` for free-form
            actions (each answer item is returned as written, stripped).
        max_actions: per-turn action budget; ``None`` for no limit.
        enable_think: think mode (``<think>`` then ``<answer>``) or answer-only mode.
        action_sep: separator between actions inside the answer.
        finish_reason: the back-end's finish reason; ``"length"`` means truncated.

    Returns:
        A :class:`ParsedResponse`; never raises for a ``str`` input.
    """
    if not isinstance(response, str):
        return ParsedResponse(error="no_answer")
    if finish_reason == "length":
        return ParsedResponse(error="truncated")

    blocks, tag_error = _blocks(response)
    stray = _outside(response, ((b[1], b[4]) for b in blocks))
    stray_text = "\n".join(stray)
    stray_kw: dict[str, Any] = {
        "stray_text": stray_text,
        "stray_chars": sum(len("".join(s.split())) for s in stray),
    }
    if tag_error is not None:
        return ParsedResponse(error=tag_error, **stray_kw)

    thinks = [b for b in blocks if b[0] == "think"]
    answers = [b for b in blocks if b[0] == "answer"]
    if not answers:
        return ParsedResponse(error="no_answer", **stray_kw)
    if len(answers) > 1 or (enable_think and len(thinks) > 1):
        # In answer-only mode think blocks are stray text (rule 3), however many there are.
        return ParsedResponse(error="multiple_blocks", **stray_kw)

    ans = answers[0]
    think_text: str | None = None
    if enable_think:
        if not thinks:
            return ParsedResponse(error="no_think", **stray_kw)
        th = thinks[0]
        if th[4] > ans[1]:
            return ParsedResponse(error="malformed_tags", **stray_kw)  # answer before think
        think_text = response[th[2] : th[3]].strip()
    elif thinks:
        # Answer-only mode: a think block is text outside the answer.
        stray = _outside(response, [(ans[1], ans[4])])
        stray_kw = {
            "stray_text": "\n".join(stray),
            "stray_chars": sum(len("".join(s.split())) for s in stray),
        }

    answer_text = response[ans[2] : ans[3]].strip()
    items = (
        [item.strip() for item in answer_text.split(action_sep)] if action_sep else [answer_text]
    )
    items = [item for item in items if item]
    base = {"think": think_text, "answer": answer_text, "format_valid": True, **stray_kw}
    if not items:
        return ParsedResponse(error="empty_answer", **base)

    if action_names is not None:
        lookup = {name.casefold(): name for name in action_names}
        mapped = [lookup.get(item.casefold()) for item in items]
        unknown = tuple(item for item, m in zip(items, mapped) if m is None)
        if unknown:
            return ParsedResponse(error="unknown_action", unknown_actions=unknown, **base)
        items = [m for m in mapped if m is not None]

    n_dropped = 0
    if max_actions is not None and len(items) > max_actions:
        n_dropped = len(items) - max_actions
        items = items[:max_actions]
    return ParsedResponse(actions=tuple(items), n_dropped=n_dropped, **base)


def format_answer(
    actions: Iterable[str], think: str | None = None, *, action_sep: str = "||"
) -> str:
    """Render actions as a well-formed response (used by the oracle and random baselines).

    ``format_answer(["Up", "Left"], "push the box")`` gives
    ``"<think>push the box</think><answer>Up || Left</answer>"``; with ``think=None``
    only the answer block is written.
    """
    answer = f" {action_sep} ".join(actions)
    head = f"<think>{think}</think>" if think is not None else ""
    return f"{head}<answer>{answer}</answer>"
