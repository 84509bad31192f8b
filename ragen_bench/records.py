"""Turn and episode records: what the rollout engine produces and ``episodes.jsonl`` holds.

One line of ``episodes.jsonl`` is ``EpisodeRecord.to_json()``; the schema is
``schemas/episode.schema.json``.  The trainer reads the same objects in memory (with the
prompt token ids, which the JSON omits unless asked for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import Message

SCHEMA_VERSION = 1


@dataclass
class TurnRecord:
    """One turn: the prompt, the response, what was parsed and executed, the rewards.

    Token fields (``prompt_token_ids``, ``completion_token_ids``, ``completion_logprobs``)
    are ``None`` when the back-end does not provide them.  ``reward`` is the turn's
    total: the sum of the env rewards of the executed actions plus the format penalty
    when the answer was invalid.
    """

    turn: int
    observation: str
    user_message: str
    prompt_messages: list[Message]
    response: str
    finish_reason: str
    parsed: dict[str, Any]
    actions: list[str] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    env_reward: float = 0.0
    format_penalty: float = 0.0
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    reasoning: str | None = None
    context_dropped_turns: int = 0
    incremental_tokens: bool = False
    generate_s: float = 0.0
    env_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(
        self, *, prompt_token_ids: bool = False, prompt_messages: bool = True
    ) -> dict[str, Any]:
        d = {
            "turn": self.turn,
            "observation": self.observation,
            "user_message": self.user_message,
            "response": self.response,
            "finish_reason": self.finish_reason,
            "parsed": self.parsed,
            "actions": self.actions,
            "step_rewards": self.step_rewards,
            "infos": self.infos,
            "env_reward": self.env_reward,
            "format_penalty": self.format_penalty,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            },
            "completion_token_ids": self.completion_token_ids,
            "completion_logprobs": self.completion_logprobs,
            "context": {
                "dropped_turns": self.context_dropped_turns,
                "incremental_tokens": self.incremental_tokens,
            },
            "timing": {"generate_s": round(self.generate_s, 6), "env_s": round(self.env_s, 6)},
        }
        if self.reasoning is not None:
            d["reasoning"] = self.reasoning
        if prompt_messages:
            d["prompt_messages"] = self.prompt_messages
        if prompt_token_ids:
            d["prompt_token_ids"] = self.prompt_token_ids
        if self.extra:
            d["extra"] = self.extra
        return d


@dataclass
class EpisodeRecord:
    """One finished episode (see ``schemas/episode.schema.json``)."""

    episode_index: int
    env_id: str
    env_version: int
    env_config: dict[str, Any]
    seed: int
    group: int
    member: int
    status: str = "running"
    success: bool = False
    error: str | None = None
    messages: list[Message] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    started_at: float = 0.0
    wall_s: float = 0.0

    # ---------------------------------------------------------------- metrics
    @property
    def episode_return(self) -> float:
        """Total reward: env rewards plus format penalties."""
        return float(sum(t.reward for t in self.turns))

    @property
    def env_return(self) -> float:
        """Sum of the env's rewards only."""
        return float(sum(t.env_reward for t in self.turns))

    @property
    def num_actions(self) -> int:
        return sum(len(t.actions) for t in self.turns)

    @property
    def num_valid_actions(self) -> int:
        return sum(bool(i.get("action_is_valid")) for t in self.turns for i in t.infos)

    @property
    def num_format_valid(self) -> int:
        return sum(t.parsed.get("error") is None for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    def metrics(self) -> dict[str, float]:
        """Per-episode metrics that the summary aggregates."""
        n_turns = len(self.turns)
        n_actions = self.num_actions
        return {
            "success": float(self.success),
            "return": self.episode_return,
            "env_return": self.env_return,
            "turns": float(n_turns),
            "actions": float(n_actions),
            "valid_action_rate": (self.num_valid_actions / n_actions) if n_actions else 0.0,
            "format_valid_rate": (self.num_format_valid / n_turns) if n_turns else 0.0,
            "tokens": float(self.completion_tokens),
        }

    def to_json(
        self, *, prompt_token_ids: bool = False, prompt_messages: bool = True
    ) -> dict[str, Any]:
        """The JSON object written to ``episodes.jsonl``."""
        return {
            "schema_version": SCHEMA_VERSION,
            "episode_index": self.episode_index,
            "env_id": self.env_id,
            "env_version": self.env_version,
            "env_config": self.env_config,
            "seed": self.seed,
            "group": self.group,
            "member": self.member,
            "status": self.status,
            "success": self.success,
            "return": self.episode_return,
            "env_return": self.env_return,
            "metrics": self.metrics(),
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            },
            "error": self.error,
            "messages": self.messages,
            "turns": [
                t.to_json(prompt_token_ids=prompt_token_ids, prompt_messages=prompt_messages)
                for t in self.turns
            ],
            "timing": {"started_at": self.started_at, "wall_s": round(self.wall_s, 6)},
        }
