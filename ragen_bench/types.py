"""Data types shared by the policy back-ends and the rollout engine.

A *policy* receives chat messages (and, when the engine tracks tokens, the exact prompt
token ids) and returns a :class:`Generation`: the text, why generation stopped, token
usage and — when the back-end can — the prompt and completion token ids and the
per-token log-probabilities of the completion.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragen_envs.ranges import Range

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}

FinishReason = Literal["stop", "length", "error", "content_filter"]


#: Allowed values of the numeric sampling parameters (finite, within the range).
SAMPLING_RANGES = {
    "temperature": Range(ge=0),
    "top_p": Range(gt=0, le=1),
    "max_new_tokens": Range(ge=1),
}


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters for one generation call.

    Attributes:
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass in (0, 1].
        max_new_tokens: upper bound on generated tokens per turn (a response that hits
            it has finish reason ``"length"`` and counts as truncated).
        stop: extra stop strings (the model's end-of-turn token always stops).
        seed: base seed for sampling, where the back-end supports it.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        for name, allowed in SAMPLING_RANGES.items():
            allowed.check(name, getattr(self, name))

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (recorded in ``summary.json``)."""
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass
class PolicyRequest:
    """One item of a generation batch.

    Attributes:
        messages: the chat so far, ending with a user message.
        prompt_token_ids: the exact prompt tokens, when the engine builds them
            incrementally (full-history mode); back-ends that accept token ids must use
            them instead of re-rendering ``messages``.
        env: the environment (only privileged baselines such as ``oracle`` read it).
        max_actions: the per-turn action budget (baselines use it).
        enable_think: whether the answer format includes a think block.
        episode_index / turn: where the request comes from, so that seeded baselines
            give the same answer whatever the batching order.
    """

    messages: list[Message]
    prompt_token_ids: list[int] | None = None
    env: Any = None
    max_actions: int = 1
    enable_think: bool = True
    episode_index: int = 0
    turn: int = 0


@dataclass
class Generation:
    """What a policy returned for one request.

    Attributes:
        text: the completion text (special tokens removed).
        finish_reason: ``"stop"`` (end-of-turn token or stop string), ``"length"``
            (``max_new_tokens`` reached: truncated), ``"error"`` or ``"content_filter"``.
        prompt_tokens / completion_tokens: token usage (0 when unknown).
        prompt_token_ids: ``(prompt_tokens,)`` ids the model conditioned on, if known.
        completion_token_ids: ``(completion_tokens,)`` sampled ids, including the
            end-of-turn token when generation stopped on it, if known.
        completion_logprobs: ``(completion_tokens,)`` natural-log probabilities of the
            sampled ids under the model at temperature 1, if known.
        reasoning_text: a separate reasoning channel (``reasoning_content``), if any.
        extra: back-end specific details (retries, endpoint, latency).
    """

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    reasoning_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
