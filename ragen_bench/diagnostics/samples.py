"""From episode records to (X, Z) token sequences.

Definitions (ours, following RAGEN-2, arXiv 2604.06268, and RAGEN's code: "X = tokens up to and including
the generation-prompt ``<think>``; Z = reasoning tokens between the tags (tags
excluded). Empty Z is dropped"):

* **X** (the input of a turn) = the chat-templated prompt of that turn *up to and
  including the generation prompt* (``tokenizer.apply_chat_template(messages,
  add_generation_prompt=True)``: for ChatML ``…<|im_start|>assistant\\n``), followed by
  the tokens of the opening tag ``<think>``.  RAGEN puts ``<think>`` into the generation
  prompt; our prompts ask the model to write it, so we append it: the reasoning is then
  scored exactly where it starts.  Anything a model wrote *before* its ``<think>`` is
  not part of X (so that samples of one prompt share one X).
* **Z** (the reasoning) = the tokens strictly between the first ``<think>`` of the
  response and the first ``</think>`` after it.  A turn whose response lacks either tag,
  or whose Z has no token, has no sample ("empty Z is dropped").  The answer's format
  validity does not matter: a truncated answer after a closed think block still has a Z.

Token ids come from one of two places:

* ``use_token_ids=True`` (in-memory records of the model being scored, e.g. in the
  trainer): X = the turn's recorded ``prompt_token_ids`` + the tag's ids, Z = the
  *sampled* completion ids between the tag ids, so the scorer sees exactly what the
  policy generated.  Falls back to text when the ids are missing or the tags are not
  found as whole token runs (a BPE merge across a tag).
* otherwise (``episodes.jsonl``, or a scorer with another vocabulary): X = the scorer's
  chat template applied to the turn's ``prompt_messages`` + ``encode("<think>")``, and
  Z = ``encode(reasoning text)`` with the scorer's tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..types import Message

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


@runtime_checkable
class TextTokenizer(Protocol):
    """Tokenisation in a scorer's vocabulary."""

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Chat-template ``messages`` with the generation prompt; return token ids."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS / special tokens added)."""
        ...


class HFTextTokenizer:
    """:class:`TextTokenizer` over a Hugging Face tokenizer with a chat template."""

    def __init__(self, tokenizer: Any):
        from ..chat import ChatTokens

        self.chat = ChatTokens(tokenizer)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        return self.chat.prompt_ids(messages)

    def encode(self, text: str) -> list[int]:
        return self.chat.encode(text)


@dataclass(frozen=True)
class ReasoningSample:
    """One turn seen by the diagnostics.

    Attributes:
        x: input token ids (see module docstring); ``()`` when the turn has no Z.
        z: reasoning token ids; ``()`` when the turn has no reasoning (invalid sample).
        episode: episode key (samples of one trajectory share it).
        group: group index (episodes of one group share the env seed).
        turn: 1-based turn number.
        response: the response text.
        answer: the parsed answer text, or ``None``.
        logprobs: log-probabilities of the sampled completion tokens, or ``None``.
    """

    x: tuple[int, ...]
    z: tuple[int, ...]
    episode: int
    group: int
    turn: int
    response: str = ""
    answer: str | None = None
    logprobs: tuple[float, ...] | None = None

    @property
    def valid(self) -> bool:
        """The turn has a non-empty reasoning."""
        return len(self.z) > 0


def reasoning_span(text: str) -> tuple[int, int] | None:
    """Character span ``(start, end)`` of the reasoning in ``text`` (tags excluded), or ``None``."""
    o = text.find(OPEN_TAG)
    if o < 0:
        return None
    start = o + len(OPEN_TAG)
    c = text.find(CLOSE_TAG, start)
    return None if c < 0 else (start, c)


def _find(seq: Sequence[int], sub: Sequence[int], start: int = 0) -> int:
    n = len(sub)
    if n == 0:
        return -1
    first = sub[0]
    for i in range(start, len(seq) - n + 1):
        if seq[i] == first and list(seq[i : i + n]) == list(sub):
            return i
    return -1


def _field(turn: Any, name: str, default: Any = None) -> Any:
    if isinstance(turn, dict):
        return turn.get(name, default)
    return getattr(turn, name, default)


def sample_from_turn(
    turn: Any, tokenizer: TextTokenizer, *, episode: int, group: int, use_token_ids: bool = False
) -> ReasoningSample:
    """Extract the (X, Z) sample of one turn (a :class:`~ragen_bench.records.TurnRecord`
    or a turn object of ``episodes.jsonl``).

    Raises:
        ValueError: a text-path extraction needs ``prompt_messages`` and the turn has none.
    """
    response = _field(turn, "response") or ""
    parsed = _field(turn, "parsed") or {}
    lps = _field(turn, "completion_logprobs")
    common = dict(
        episode=episode,
        group=group,
        turn=int(_field(turn, "turn", 0)),
        response=response,
        answer=parsed.get("answer"),
        logprobs=tuple(lps) if lps else None,
    )
    span = reasoning_span(response)
    if span is None or span[0] == span[1]:
        return ReasoningSample(x=(), z=(), **common)
    open_ids = tokenizer.encode(OPEN_TAG)
    if use_token_ids:
        prompt_ids = _field(turn, "prompt_token_ids")
        comp = _field(turn, "completion_token_ids")
        if prompt_ids and comp:
            close_ids = tokenizer.encode(CLOSE_TAG)
            o = _find(comp, open_ids)
            c = _find(comp, close_ids, o + len(open_ids)) if o >= 0 else -1
            if o >= 0 and c >= 0:
                z = tuple(int(t) for t in comp[o + len(open_ids) : c])
                x = tuple(int(t) for t in prompt_ids) + tuple(open_ids)
                return ReasoningSample(x=x if z else (), z=z, **common)
    messages = _field(turn, "prompt_messages")
    if not messages:
        raise ValueError(
            "turn has no prompt_messages: cannot rebuild its prompt (write episodes with prompt messages)"
        )
    z = tuple(tokenizer.encode(response[span[0] : span[1]]))
    x = tuple(tokenizer.prompt_ids(messages)) + tuple(open_ids)
    return ReasoningSample(x=x if z else (), z=z, **common)


def samples_from_records(
    records: Iterable[Any], tokenizer: TextTokenizer, *, use_token_ids: bool = False
) -> list[ReasoningSample]:
    """One :class:`ReasoningSample` per turn of every episode, in order.

    Args:
        records: :class:`~ragen_bench.records.EpisodeRecord` objects or ``episodes.jsonl``
            objects (dicts).  Episodes are keyed by ``episode_index``.
        tokenizer: the scorer's :class:`TextTokenizer`.
        use_token_ids: take X and Z from recorded token ids when possible (only when the
            records come from the scorer's own model; see the module docstring).
    """
    out: list[ReasoningSample] = []
    for n, rec in enumerate(records):
        ep = int(_field(rec, "episode_index", n))
        group = int(_field(rec, "group", 0))
        for turn in _field(rec, "turns", []) or []:
            out.append(
                sample_from_turn(
                    turn, tokenizer, episode=ep, group=group, use_token_ids=use_token_ids
                )
            )
    return out
