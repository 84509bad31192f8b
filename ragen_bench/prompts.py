"""What the agent reads: the system prompt, the per-turn user messages, and the context modes.

The exact texts are part of the benchmark protocol (a change to them changes results),
so they live here, in one place, and ``tests/data/golden_conversations/`` pins them.

Per turn the agent gets one user message::

    Reward for your last answer: -0.1            (from turn 2 on; or an invalid-answer notice)
    Turn 2 of 5.
    Observation:
    <the environment's observation>
    You may take up to 2 action(s) this turn.

and answers ``<think>…</think><answer>…</answer>``.  Context modes (``context_mode``):

* ``full``: the system message and every earlier user/assistant message;
* ``last_k``: the system message and the last ``context_window`` earlier turns;
* ``single_turn``: the system message and one user message that starts with a compact
  summary of earlier turns (actions and rewards) followed by the current turn.

A token budget (``max_context_tokens``) drops the oldest turns first and never the
system message or the current turn (``Conversation.build``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragen_envs.parsing import ParsedResponse

from .types import Message

SYSTEM_PREAMBLE = (
    "You are an agent acting in a text environment. Read each observation carefully, then act."
)

ERROR_TEXT = {
    "truncated": "it was cut off at the length limit",
    "malformed_tags": "its <think>/<answer> tags are malformed",
    "no_answer": "it has no <answer>...</answer> block",
    "multiple_blocks": "it has more than one think or answer block",
    "no_think": "it has no <think>...</think> block before the answer",
    "empty_answer": "the answer is empty",
    "unknown_action": "it names an unknown action",
}


def answer_format(enable_think: bool) -> str:
    """The answer format line shown to the agent."""
    if enable_think:
        return "<think>your reasoning</think><answer>your action(s)</answer>"
    return "<answer>your action(s)</answer>"


def system_message(
    instruction: str,
    *,
    enable_think: bool,
    max_actions_per_turn: int,
    max_new_tokens: int | None,
    action_sep: str = "||",
    style: str = "full",
    max_turns: int | None = None,
) -> str:
    """The system prompt.

    With ``max_turns`` (``style="full"``) it states the agent loop's budget, "The episode
    ends after N turns (at most N x M actions) ...": an env's own step limit (Sokoban's
    ``max_steps`` = 100) may be larger than what the loop allows, and the agent must know
    which one binds.

    ``style="full"``: preamble, the env's instruction, the answer protocol.
    ``style="minimal"``: only the answer protocol — for policies that learn the task from
    reward alone (e.g. a model trained from scratch), where the rules are dead weight in
    the context.  The style is part of the protocol recorded with every run.
    """
    if style not in ("full", "minimal"):
        raise ValueError(f"system prompt style must be 'full' or 'minimal', got {style!r}")
    lines = [SYSTEM_PREAMBLE, "", instruction.strip(), ""] if style == "full" else []
    lines.append(f"Always reply in exactly this format: {answer_format(enable_think)}")
    if max_actions_per_turn > 1:
        lines.append(
            f'You may give up to {max_actions_per_turn} actions per turn, separated by "{action_sep}"; '
            "they are executed in order."
        )
    else:
        lines.append("Give exactly one action per turn.")
    if max_turns and style == "full":
        total = max_turns * max_actions_per_turn
        lines.append(
            f"The episode ends after {max_turns} turn{'s' if max_turns != 1 else ''} "
            f"(at most {total} action{'s' if total != 1 else ''} in all), or earlier when the "
            "environment ends it."
        )
    if max_new_tokens and style == "full":
        lines.append(
            f"Replies longer than {max_new_tokens} tokens are cut off and count as invalid."
        )
    return "\n".join(lines)


def feedback_text(
    reward: float | None,
    parsed: ParsedResponse | None,
    format_penalty: float,
    valid_actions: Sequence[str] | None = None,
    actions: Sequence[str] = (),
    infos: Sequence[dict] = (),
) -> str:
    """The line(s) that report the previous turn's outcome at the top of the next user message.

    For a well-formed answer: the reward, then one line per action the environment
    rejected, with its reason (``info["invalid_reason"]``), e.g. a Sudoku move that
    conflicts with a given.
    """
    if parsed is None:
        return ""
    if not parsed.valid:
        why = ERROR_TEXT.get(parsed.error or "", "it could not be parsed")
        extra = ""
        if parsed.error == "unknown_action":
            extra = f" ({', '.join(parsed.unknown_actions)})"
            if valid_actions:
                extra += f"; valid actions: {', '.join(valid_actions)}"
        return (
            f"Your last answer was invalid: {why}{extra}. The environment did not change. "
            f"Penalty: {format_penalty:g}."
        )
    lines = [f"Reward for your last answer: {reward:g}."]
    for action, info in zip(actions, infos):
        if not info.get("action_is_valid", True):
            reason = info.get("invalid_reason") or "not a valid action here"
            lines.append(f'The action "{action}" was rejected: {reason}.')
    return "\n".join(lines)


def turn_text(
    turn: int,
    max_turns: int,
    observation: str,
    max_actions: int,
    feedback: str = "",
    reminder: str = "",
) -> str:
    """The user message for one turn; ``reminder`` (if any) is its last line."""
    head = f"{feedback}\n" if feedback else ""
    tail = f"\n{reminder}" if reminder else ""
    return (
        f"{head}Turn {turn} of {max_turns}.\nObservation:\n{observation}\n"
        f"You may take up to {max_actions} action(s) this turn.{tail}"
    )


def format_reminder(enable_think: bool) -> str:
    """The last line of every user message with ``format_reminder`` on.

    Small instruct models follow the answer format when it is restated, with a concrete
    example, right before they answer.  Qwen2.5-Coder-0.5B-Instruct, first turn, 16 samples
    at temperature 1: tags present in Bandit 1/16 -> 12/16, FrozenLake 6/16 -> 9/16,
    Sokoban-Easy 8/16 -> 12/16 (restating the format with the placeholder "your action(s)"
    instead helped nowhere).
    """
    think = "<think>...</think>" if enable_think else ""
    return f"Reply with your action(s) inside <answer></answer> tags, e.g. {think}<answer>ACTION</answer>"


@dataclass
class TurnText:
    """The text of one finished (or current) turn of the conversation."""

    user: str
    assistant: str | None = None
    summary: str = ""


@dataclass
class Conversation:
    """The dialogue of one episode and how it is shown to the policy.

    Attributes:
        system: the system message.
        turns: every turn so far; the last one may still lack its assistant text.
        mode: ``full`` | ``last_k`` | ``single_turn``.
        window: earlier turns kept in ``last_k`` mode.
    """

    system: str
    mode: str = "full"
    window: int = 2
    turns: list[TurnText] = field(default_factory=list)

    def transcript(self) -> list[Message]:
        """Every message of the episode (independent of the context mode)."""
        out: list[Message] = [{"role": "system", "content": self.system}]
        for t in self.turns:
            out.append({"role": "user", "content": t.user})
            if t.assistant is not None:
                out.append({"role": "assistant", "content": t.assistant})
        return out

    def _messages(self, first: int) -> list[Message]:
        """Prompt messages keeping earlier turns ``first..`` (the last turn is current)."""
        current = self.turns[-1]
        if self.mode == "single_turn":
            lines = [t.summary for t in self.turns[first:-1] if t.summary]
            prefix = (
                ("Summary of your earlier turns:\n" + "\n".join(lines) + "\n\n") if lines else ""
            )
            return [
                {"role": "system", "content": self.system},
                {"role": "user", "content": prefix + current.user},
            ]
        out: list[Message] = [{"role": "system", "content": self.system}]
        for t in self.turns[first:-1]:
            out.append({"role": "user", "content": t.user})
            out.append({"role": "assistant", "content": t.assistant or ""})
        out.append({"role": "user", "content": current.user})
        return out

    def build(
        self,
        count_tokens: Callable[[list[Message]], int] | None = None,
        max_tokens: int | None = None,
    ) -> tuple[list[Message], int, bool]:
        """The prompt for the current (last) turn.

        Args:
            count_tokens: measures a message list in tokens (with the generation prompt).
            max_tokens: budget for the prompt; ``None`` for no budget.

        Returns:
            ``(messages, dropped_turns, fits)``: the earliest turns are dropped one at a
            time until the prompt fits; ``fits`` is ``False`` when even the system
            message plus the current turn exceed the budget.
        """
        earlier = len(self.turns) - 1
        first = 0
        if self.mode == "last_k":
            first = max(0, earlier - self.window)
        elif self.mode not in ("full", "single_turn"):
            raise ValueError(f"unknown context mode {self.mode!r}")
        messages = self._messages(first)
        if count_tokens is None or max_tokens is None:
            return messages, first, True
        while count_tokens(messages) > max_tokens:
            if first >= earlier:
                return messages, first, False
            first += 1
            messages = self._messages(first)
        return messages, first, True
