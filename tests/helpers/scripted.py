"""Scripted policies for harness tests: fixed responses per (episode, turn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragen_bench.policies.base import Policy
from ragen_bench.types import Generation, PolicyRequest, SamplingParams


class ScriptedPolicy(Policy):
    """Answers turn ``t`` of episode ``i`` with ``script(i, t)`` (a str or a Generation).

    Args:
        script: ``(episode_index, turn) -> str | Generation``.
        max_batch_size / max_concurrency: as for a real back-end.
        tokenizer: when given, responses get canonical completion token ids (plus EOS)
            and the prompt ids the engine sent, like a local model.
    """

    name = "scripted"

    def __init__(
        self,
        script: Callable[[int, int], Any],
        *,
        max_batch_size: int = 8,
        max_concurrency: int = 1,
        tokenizer: Any = None,
    ):
        self.script = script
        self.max_batch_size = max_batch_size
        self.max_concurrency = max_concurrency
        self._tok = tokenizer
        self.batches: list[int] = []
        self.requests: list[PolicyRequest] = []

    @property
    def tokenizer(self) -> Any:
        return self._tok

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        self.batches.append(len(requests))
        self.requests.extend(requests)
        out = []
        for r in requests:
            g = self.script(r.episode_index, r.turn)
            if isinstance(g, str):
                g = Generation(text=g)
            if self._tok is not None and g.completion_token_ids is None:
                ids = list(self._tok(g.text, add_special_tokens=False)["input_ids"]) + [
                    self._tok.eos_token_id
                ]
                g.completion_token_ids = ids
                g.prompt_token_ids = r.prompt_token_ids
                g.completion_tokens = len(ids)
                g.prompt_tokens = len(r.prompt_token_ids or [])
            out.append(g)
        return out
