"""From rollout records to training samples: the exact sampled tokens and the loss mask.

A :class:`Sample` is one training sequence.  Two layouts (``sample_layout``):

* ``trajectory`` (full-history context mode): one sequence per episode, the last turn's
  prompt ids followed by its completion ids.  Because the engine builds each prompt as
  the previous prompt + the sampled completion + template delta
  (:mod:`ragen_bench.chat`), every earlier completion sits verbatim inside it; the loss
  mask is 1 exactly on each turn's completion span (the sampled tokens, including the
  end-of-turn token when the model emitted it) and 0 on system, user, observation and
  chat-template header tokens.  An episode whose prompts do not extend each other
  (context dropped, or no token ids) is flagged and dropped, never re-tokenised.
* ``turn`` (``last_k`` / ``single_turn`` modes): one sequence per turn, that turn's
  prompt ids + completion ids, mask on the completion.

Rewards: ``score`` is the episode return (env rewards + format penalties).  With
``reward_placement="last_token"`` the whole return sits on the last generated token;
with ``"turn_end"`` each turn's reward sits on that turn's last generated token
(trajectory layout) — in the turn layout each turn sample carries its own turn reward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ragen_bench.records import EpisodeRecord


@dataclass
class Sample:
    """One training sequence.

    Attributes:
        input_ids: ``(L,)`` token ids.
        loss_mask: ``(L,)`` 1 on generated tokens.
        turn_ids: ``(L,)`` turn index (0-based) of generated tokens, -1 elsewhere.
        rewards: ``(L,)`` token-level rewards (see module docstring).
        rollout_logprobs: ``(L,)`` log-probs recorded at generation time (0 elsewhere),
            or ``None`` when the back-end gave none.
        score: scalar outcome score for group estimators (the episode return).
        group / episode / turn: provenance (``turn`` is ``None`` for trajectories).
        entropy: mean token entropy, filled in by the trainer (for filtering).
    """

    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]
    rewards: list[float]
    rollout_logprobs: list[float] | None
    score: float
    group: int
    episode: int
    turn: int | None = None
    entropy: float = float("nan")

    @property
    def response_tokens(self) -> int:
        return int(sum(self.loss_mask))


@dataclass
class BuildStats:
    """What :func:`build_samples` dropped and why."""

    episodes: int = 0
    samples: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def metrics(self) -> dict[str, float]:
        out = {
            "batch/episodes": float(self.episodes),
            "batch/samples": float(self.samples),
            "batch/dropped": float(sum(self.dropped.values())),
        }
        for k, v in self.dropped.items():
            out[f"batch/dropped_{k}"] = float(v)
        return out


def _turn_ok(t: Any) -> bool:
    return t.prompt_token_ids is not None and t.completion_token_ids is not None


def build_samples(
    records: Sequence[EpisodeRecord],
    *,
    layout: str = "trajectory",
    reward_placement: str = "last_token",
) -> tuple[list[Sample], BuildStats]:
    """Turn episode records into samples (module docstring).

    Raises:
        ValueError: unknown layout or reward placement.
    """
    if layout not in ("trajectory", "turn"):
        raise ValueError(f"layout must be 'trajectory' or 'turn', got {layout!r}")
    if reward_placement not in ("last_token", "turn_end"):
        raise ValueError(
            f"reward_placement must be 'last_token' or 'turn_end', got {reward_placement!r}"
        )
    stats = BuildStats(episodes=len(records))
    samples: list[Sample] = []
    for rec in records:
        turns = [t for t in rec.turns if t.completion_token_ids]
        if not rec.turns:
            stats.drop("no_turns")
            continue
        if any(not _turn_ok(t) for t in rec.turns):
            stats.drop("no_token_ids")
            continue
        score = rec.episode_return
        if not math.isfinite(score):
            stats.drop("nonfinite_reward")
            continue
        if not turns:
            stats.drop("empty_completions")
            continue
        if layout == "trajectory":
            s = _trajectory_sample(rec, score, reward_placement)
            if s is None:
                stats.drop("not_prefix")
                continue
            samples.append(s)
        else:
            for k, t in enumerate(rec.turns):
                if not t.completion_token_ids:
                    continue
                p, c = list(t.prompt_token_ids), list(t.completion_token_ids)
                n = len(p) + len(c)
                rewards = [0.0] * n
                rewards[-1] = float(t.reward) if reward_placement == "turn_end" else score
                lp = t.completion_logprobs
                samples.append(
                    Sample(
                        input_ids=p + c,
                        loss_mask=[0] * len(p) + [1] * len(c),
                        turn_ids=[-1] * len(p) + [k] * len(c),
                        rewards=rewards,
                        rollout_logprobs=([0.0] * len(p) + list(lp)) if lp is not None else None,
                        score=score,
                        group=rec.group,
                        episode=rec.episode_index,
                        turn=k,
                    )
                )
    stats.samples = len(samples)
    return samples, stats


def _trajectory_sample(rec: EpisodeRecord, score: float, placement: str) -> Sample | None:
    turns = rec.turns
    for prev, cur in zip(turns, turns[1:]):
        head = list(prev.prompt_token_ids) + list(prev.completion_token_ids)
        if list(cur.prompt_token_ids[: len(head)]) != head:
            return None
    last = turns[-1]
    ids = list(last.prompt_token_ids) + list(last.completion_token_ids)
    mask = [0] * len(ids)
    turn_ids = [-1] * len(ids)
    rewards = [0.0] * len(ids)
    have_lp = all(t.completion_logprobs is not None for t in turns)
    lps = [0.0] * len(ids) if have_lp else None
    end = -1
    for k, t in enumerate(turns):
        start = len(t.prompt_token_ids)
        n = len(t.completion_token_ids)
        for j in range(start, start + n):
            mask[j] = 1
            turn_ids[j] = k
        if lps is not None:
            lps[start : start + n] = list(t.completion_logprobs)
        if n:
            end = start + n - 1
            if placement == "turn_end":
                rewards[end] += float(t.reward)
        elif placement == "turn_end" and end >= 0:
            rewards[end] += float(
                t.reward
            )  # an empty completion's penalty goes on the previous turn end
    if end < 0:
        return None
    if placement == "last_token":
        rewards[end] = score
    return Sample(
        input_ids=ids,
        loss_mask=mask,
        turn_ids=turn_ids,
        rewards=rewards,
        rollout_logprobs=lps,
        score=score,
        group=rec.group,
        episode=rec.episode_index,
    )


@dataclass
class TensorBatch:
    """Right-padded tensors of a list of samples, aligned for next-token prediction.

    ``input_ids``/``attention_mask``: ``(B, L)``; the per-token fields are ``(B, L-1)``
    aligned with the *targets* ``input_ids[:, 1:]`` (position ``j`` is about token
    ``j+1``).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    rewards: torch.Tensor
    turn_ids: torch.Tensor
    rollout_logprobs: torch.Tensor | None
    scores: torch.Tensor
    groups: torch.Tensor

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def collate(samples: Sequence[Sample], pad_id: int) -> TensorBatch:
    """Pad samples on the right into a :class:`TensorBatch`."""
    if not samples:
        raise ValueError("cannot collate an empty list of samples")
    width = max(len(s.input_ids) for s in samples)
    b = len(samples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    att = torch.zeros((b, width), dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.float32)
    rew = torch.zeros((b, width), dtype=torch.float32)
    tid = torch.full((b, width), -1, dtype=torch.long)
    have_lp = all(s.rollout_logprobs is not None for s in samples)
    lp = torch.zeros((b, width), dtype=torch.float32) if have_lp else None
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        ids[i, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        att[i, :n] = 1
        mask[i, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
        rew[i, :n] = torch.tensor(s.rewards, dtype=torch.float32)
        tid[i, :n] = torch.tensor(s.turn_ids, dtype=torch.long)
        if lp is not None:
            lp[i, :n] = torch.tensor(s.rollout_logprobs, dtype=torch.float32)
    return TensorBatch(
        input_ids=ids,
        attention_mask=att,
        loss_mask=mask[:, 1:].contiguous(),
        rewards=rew[:, 1:].contiguous(),
        turn_ids=tid[:, 1:].contiguous(),
        rollout_logprobs=lp[:, 1:].contiguous() if lp is not None else None,
        scores=torch.tensor([s.score for s in samples], dtype=torch.float64),
        groups=torch.tensor([s.group for s in samples], dtype=torch.long),
    )
