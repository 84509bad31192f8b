"""Reading an OpenAI-compatible answer into a :class:`~ragen_bench.types.Generation`.

The answer side of the ``openai`` back-end (the HTTP side is
:mod:`ragen_bench.policies.openai_transport`): a chat completion, or the chunks of a
streamed one, become text, reasoning text, finish reason, token usage, per-token
log-probabilities and token ids.  What a server may send that must not reach a results
file is made safe here:

* **Shape.** An answer of the wrong shape (``{"choices": "nope"}``, a choice without a
  message, a non-string content, usage that is not a number) raises the retryable
  ``invalid_response`` :class:`~ragen_bench.policies.openai_transport.EndpointFailure`.
* **Lone surrogates.** JSON may spell a character outside the Basic Multilingual Plane as
  two ``\\uXXXX`` escapes, and a streaming server that cuts at token boundaries can put
  the halves in two chunks (``"\\ud83d"`` then ``"\\ude00"``); Python decodes each half to
  a lone surrogate, which no UTF-8 writer accepts ("surrogates not allowed" ended a run
  with no episode written).  :func:`repair_surrogates` joins every high/low pair into its
  character and replaces every lone half by U+FFFD, on the assembled text (so a pair
  split over chunks is joined), the reasoning text, the raw finish reason and error
  messages; ``Generation.extra["surrogates"]`` (``{"joined": n, "replaced": m}``) and the
  policy's counters record how many.
* **Usage.** A token count that is not finite, negative or above :data:`MAX_USAGE_TOKENS`
  is recorded as missing (``0`` and ``extra["usage_missing"] = True``, with the value the
  server sent in ``extra["usage_invalid"]``), so that ``-5`` or ``1e30`` tokens never reach
  a summary.
* **Size.** A completion (or reasoning text) longer than ``max_completion_chars`` is cut
  and returned as truncated (finish reason ``length``, ``extra["truncated_chars"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..redaction import repair_surrogates
from ..types import Generation
from .openai_transport import EndpointFailure

__all__ = [
    "MAX_COMPLETION_CHARS",
    "MAX_USAGE_TOKENS",
    "AnswerReader",
    "StreamAnswer",
]

#: Default cap of a stored completion (and of its reasoning text), characters.
MAX_COMPLETION_CHARS = 2**20
#: Largest token count a ``usage`` field may hold; larger (or negative) ones are recorded
#: as missing.
MAX_USAGE_TOKENS = 10**9


def _shape_error(what: str) -> EndpointFailure:
    """The retryable ``invalid_response`` failure for an answer of the wrong shape."""
    return EndpointFailure(
        "invalid_response", f"the answer is not a chat completion: {what}", retryable=True
    )


def _clamp_logprob(value: Any) -> float:
    """A log-probability as a float <= 0 (servers may send -0.0, tiny positives or -9999)."""
    v = float(value)
    return min(0.0, v) if math.isfinite(v) else -9999.0


def extra_field(obj: Any, *names: str) -> Any:
    """A field that the openai types may not declare (``reasoning_content``...)."""
    if obj is None:
        return None
    for n in names:
        v = getattr(obj, n, None)
        if v is None:
            extra = getattr(obj, "model_extra", None) or {}
            v = extra.get(n)
        if v is not None:
            return v
    return None


def _finish(raw: str | None) -> str:
    if raw == "length":
        return "length"
    if raw == "content_filter":
        return "content_filter"
    if raw == "abort":
        raise EndpointFailure(
            "aborted", "the server aborted the request (finish_reason 'abort')", retryable=True
        )
    return "stop"


def _token_count(value: Any) -> int | None:
    """A usage count as an ``int`` in ``[0, MAX_USAGE_TOKENS]``, else ``None`` (missing).

    Raises:
        ValueError / TypeError: not a number (the answer is malformed).
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"usage is a {type(value).__name__}, not a number")
    v = float(value)
    if not math.isfinite(v) or v < 0 or v > MAX_USAGE_TOKENS or v != int(v):
        return None
    return int(v)


def _usage(gen: Generation, usage: Any) -> None:
    """Set ``gen``'s token counts from ``usage``, recording absent or impossible ones as missing."""
    if usage is None:
        gen.extra["usage_missing"] = True
        return
    bad: dict[str, Any] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        raw = getattr(usage, name, 0)
        count = _token_count(raw)
        if count is None:
            finite = isinstance(raw, (int, float)) and math.isfinite(raw)
            bad[name] = raw if finite else str(raw)
            count = 0
        setattr(gen, name, count)
    if bad:
        gen.extra["usage_missing"] = True
        gen.extra["usage_invalid"] = bad


@dataclass
class AnswerReader:
    """Turns answers into generations under one policy's settings.

    Attributes:
        logprobs: whether log-probabilities were asked for (kept only then).
        max_completion_chars: longest completion / reasoning text kept, characters.
    """

    logprobs: bool = False
    max_completion_chars: int = MAX_COMPLETION_CHARS

    def from_completion(self, resp: Any) -> Generation:
        """A non-streamed chat completion as a generation.

        Raises:
            EndpointFailure: ``invalid_response`` (wrong shape) or ``aborted``.
        """
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _shape_error("it has no choices")
        if not isinstance(choices, list):
            raise _shape_error(f"'choices' is a {type(choices).__name__}, not a list")
        choice = choices[0]
        if not hasattr(choice, "message"):
            raise _shape_error(f"choices[0] is a {type(choice).__name__}, not a choice object")
        msg = choice.message
        if isinstance(msg, (str, bytes, int, float, list)):
            raise _shape_error(
                f"choices[0].message is a {type(msg).__name__}, not a message object"
            )
        content = getattr(msg, "content", None)
        if content is not None and not isinstance(content, str):
            raise _shape_error(f"message content is a {type(content).__name__}, not a string")
        reasoning = extra_field(msg, "reasoning_content", "reasoning")
        gen = Generation(
            text=content or "",
            finish_reason=_finish(choice.finish_reason),
            reasoning_text=reasoning if isinstance(reasoning, str) else None,
        )
        _usage(gen, getattr(resp, "usage", None))
        lp = getattr(choice, "logprobs", None)
        if self.logprobs and lp is not None and getattr(lp, "content", None):
            gen.completion_logprobs = [_clamp_logprob(t.logprob) for t in lp.content]
        if choice.finish_reason not in (None, "stop", "length"):
            gen.extra["raw_finish_reason"] = choice.finish_reason
        ids = extra_field(choice, "token_ids")
        if isinstance(ids, list):
            gen.completion_token_ids = [int(i) for i in ids]
        pids = extra_field(resp, "prompt_token_ids")
        if isinstance(pids, list):
            gen.prompt_token_ids = [int(i) for i in pids]
        return self.finished(gen)

    def stream(self) -> StreamAnswer:
        """An empty accumulator for the chunks of one streamed answer."""
        return StreamAnswer(self)

    def finished(self, gen: Generation) -> Generation:
        """``gen`` with its server-sent strings repaired (:func:`repair_surrogates`) and cut
        to ``max_completion_chars``: a cut is flagged in ``extra["truncated_chars"]``
        (``{"response"|"reasoning": full length}``) and finishes ``length``; a cut answer
        loses its token ids and log-probabilities (they no longer match the text)."""
        joined = replaced = 0
        gen.text, j, r = repair_surrogates(gen.text)
        joined, replaced = joined + j, replaced + r
        if gen.reasoning_text is not None:
            gen.reasoning_text, j, r = repair_surrogates(gen.reasoning_text)
            joined, replaced = joined + j, replaced + r
        raw = gen.extra.get("raw_finish_reason")
        if isinstance(raw, str):
            gen.extra["raw_finish_reason"], j, r = repair_surrogates(raw)
            joined, replaced = joined + j, replaced + r
        if joined or replaced:
            gen.extra["surrogates"] = {"joined": joined, "replaced": replaced}
        limit, flag = self.max_completion_chars, {}
        if len(gen.text) > limit:
            flag["response"], gen.text = len(gen.text), gen.text[:limit]
        if gen.reasoning_text is not None and len(gen.reasoning_text) > limit:
            flag["reasoning"], gen.reasoning_text = (
                len(gen.reasoning_text),
                gen.reasoning_text[:limit],
            )
        if flag:
            gen.extra["truncated_chars"] = flag
            gen.finish_reason = "length"
            gen.completion_token_ids = gen.completion_logprobs = None
        return gen


@dataclass
class StreamAnswer:
    """The chunks of one streamed answer, accumulated (:meth:`add`, then :meth:`result`)."""

    reader: AnswerReader
    parts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    prompt_ids: list[int] | None = None
    finish: str | None = None
    usage: Any = None
    text_chars: int = 0
    reasoning_chars: int = 0
    cut: bool = False

    def add(self, chunk: Any) -> bool:
        """Take one chunk; returns whether reading may stop (the text already passed
        ``max_completion_chars``: the rest would be cut anyway).

        Raises:
            EndpointFailure: ``invalid_response`` (a chunk of the wrong shape).
        """
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        pids = extra_field(chunk, "prompt_token_ids")
        if isinstance(pids, list):
            self.prompt_ids = [int(i) for i in pids]
        choices = getattr(chunk, "choices", None) or []  # the usage chunk has choices == []
        if not isinstance(choices, list):
            raise _shape_error(
                f"a stream chunk's 'choices' is a {type(choices).__name__}, not a list"
            )
        for ch in choices:
            if getattr(ch, "index", 0) != 0:
                continue
            delta = ch.delta
            if delta is not None:
                if isinstance(delta.content, str):
                    self.parts.append(delta.content)
                    self.text_chars += len(delta.content)
                r = extra_field(delta, "reasoning_content", "reasoning")
                if isinstance(r, str):
                    self.reasoning.append(r)
                    self.reasoning_chars += len(r)
            lp = getattr(ch, "logprobs", None)
            if lp is not None and getattr(lp, "content", None):
                self.logprobs.extend(_clamp_logprob(t.logprob) for t in lp.content)
            ids = extra_field(ch, "token_ids")
            if isinstance(ids, list):
                self.token_ids.extend(int(i) for i in ids)
            if ch.finish_reason:
                self.finish = ch.finish_reason
        if max(self.text_chars, self.reasoning_chars) > self.reader.max_completion_chars:
            self.cut = True
        return self.cut

    def result(self) -> Generation:
        """The generation of the chunks read.

        Raises:
            EndpointFailure: ``stream_incomplete`` (no finish reason and not cut) or
                ``aborted``.
        """
        if self.finish is None and not self.cut:
            raise EndpointFailure(
                "stream_incomplete", "the stream ended without a finish reason", retryable=True
            )
        gen = Generation(
            text="".join(self.parts),
            finish_reason=_finish(self.finish),
            reasoning_text="".join(self.reasoning) if self.reasoning else None,
        )
        _usage(gen, self.usage)
        if self.reader.logprobs and self.logprobs:
            gen.completion_logprobs = self.logprobs
        if self.token_ids:
            gen.completion_token_ids = self.token_ids
        if self.prompt_ids is not None:
            gen.prompt_token_ids = self.prompt_ids
        if self.finish not in ("stop", "length", None):
            gen.extra["raw_finish_reason"] = self.finish
        return self.reader.finished(gen)
