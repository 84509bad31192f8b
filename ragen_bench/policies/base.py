"""The policy protocol every back-end implements."""

from __future__ import annotations

import abc
from typing import Any

from ..types import Generation, PolicyRequest, SamplingParams


class Policy(abc.ABC):
    """An asynchronous, batched text policy.

    Class attributes:
        name: back-end name (``"hf"``, ``"openai"``, ``"random"``, ...).
        max_batch_size: how many requests one :meth:`generate` call takes; the rollout
            engine groups concurrent requests up to this size (1 for endpoints, which
            are instead bounded by :attr:`max_concurrency`).
        max_concurrency: how many :meth:`generate` calls may be in flight at once.
        privileged: reads ``PolicyRequest.env`` (oracle / random baselines).
    """

    name: str = "policy"
    max_batch_size: int = 1
    max_concurrency: int = 1
    privileged: bool = False

    @property
    def tokenizer(self) -> Any:
        """A Hugging Face tokenizer with a chat template, or ``None``.

        When present the rollout engine counts context tokens with it and, in
        full-history mode, builds prompts token by token so that training sees exactly
        the sampled ids.
        """
        return None

    @property
    def model_name(self) -> str:
        """Model identifier recorded in results."""
        return self.name

    def describe(self) -> dict[str, Any]:
        """Back-end settings recorded in ``summary.json`` (never secrets)."""
        return {"backend": self.name, "model": self.model_name}

    @abc.abstractmethod
    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        """Generate one completion per request, in order.

        Args:
            requests: at most :attr:`max_batch_size` requests.
            params: sampling parameters shared by the batch.

        Returns:
            One :class:`Generation` per request.  A failure that must end the episode
            is returned as ``finish_reason="error"`` with ``extra["error"]`` set rather
            than raised, so that one bad request does not lose the batch.
        """

    async def aclose(self) -> None:
        """Release resources (servers, clients)."""
