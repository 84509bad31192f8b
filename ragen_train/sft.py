"""Supervised warm start on demonstrations, with the same tokens and masks as StarPO.

Demonstrations come from

* ``oracle`` — the environment's oracle, played through the real agent loop (same
  prompts, same answer format), so the model learns the protocol before RL;
* ``mixed`` — per turn, the oracle's actions with probability ``oracle_fraction`` and
  uniformly random well-formed actions otherwise: the format is always right but the
  policy is only partly good, which leaves RL something to improve;
* ``jsonl`` — an ``episodes.jsonl`` written by ``ragen-bench run`` (successful episodes
  only), re-tokenised with the model's chat template.

The response text of a demonstration is tokenised canonically and followed by the
end-of-turn token; the loss is the token-mean negative log-likelihood over exactly the
positions StarPO would train (``loss_mask``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen_bench.chat import ChatTokens
from ragen_bench.policies.base import Policy
from ragen_bench.policies.privileged import OraclePolicy, RandomPolicy
from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine
from ragen_bench.types import Generation, PolicyRequest, SamplingParams
from ragen_envs.safeload import read_json_lines

from .batch import Sample, build_samples, collate
from .config import StarPOConfig
from .modeling import token_logprobs

#: Think text of every demonstration (the same for oracle and random actions).
DEMO_THINK = "I choose my next actions."


class MixedPolicy(Policy):
    """Oracle actions with probability ``oracle_fraction`` per turn, else random ones.

    The coin for turn ``t`` of episode ``i`` comes from ``default_rng([seed, i, t])``.
    """

    name = "mixed"
    privileged = True
    max_batch_size = 1 << 16

    def __init__(self, oracle_fraction: float, seed: int = 0, think: str = DEMO_THINK):
        self.fraction = float(oracle_fraction)
        self.seed = int(seed)
        self.oracle = OraclePolicy(think=think)
        self.random = RandomPolicy(seed=seed + 1, think=think)

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        out = []
        for r in requests:
            coin = np.random.default_rng([self.seed, r.episode_index, r.turn]).random()
            inner = self.oracle if coin < self.fraction else self.random
            out.extend(await inner.generate([r], params))
        return out


class TokenizingPolicy(Policy):
    """Wraps a text policy and adds canonical token ids, like a local model would return.

    ``completion_token_ids = tokenize(text) + [eos]``; ``prompt_token_ids`` are the ids
    the engine built for the request.
    """

    def __init__(self, inner: Policy, tokenizer: Any):
        self.inner = inner
        self._tok = tokenizer
        self.name = inner.name
        self.privileged = inner.privileged
        self.max_batch_size = inner.max_batch_size
        self.max_concurrency = inner.max_concurrency

    @property
    def tokenizer(self) -> Any:
        return self._tok

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        gens = await self.inner.generate(requests, params)
        for r, g in zip(requests, gens):
            ids = list(self._tok(g.text, add_special_tokens=False)["input_ids"]) + [
                self._tok.eos_token_id
            ]
            g.completion_token_ids = ids
            g.prompt_token_ids = (
                list(r.prompt_token_ids) if r.prompt_token_ids is not None else None
            )
            g.completion_tokens = len(ids)
            g.prompt_tokens = len(r.prompt_token_ids or [])
        return gens


def collect_demos(cfg: StarPOConfig, tokenizer: Any, rollout: RolloutConfig) -> list[EpisodeRecord]:
    """Play ``cfg.sft.episodes`` demonstration episodes on the train split.

    Seeds ``seed_offset + i`` keep demonstrations away from the seeds StarPO trains on
    first (both come from the train split; validation and test stay unseen).
    """
    s = cfg.sft
    inner: Policy = (
        OraclePolicy(think=DEMO_THINK)
        if s.demo_policy == "oracle"
        else MixedPolicy(s.oracle_fraction, cfg.trainer.seed)
    )
    policy = TokenizingPolicy(inner, tokenizer)
    specs = [
        EpisodeSpec(
            index=i,
            env_id=cfg.env.id,
            seed=s.seed_offset + i,
            group=i,
            env_config={**cfg.env.config, "split": cfg.env.train_split},
        )
        for i in range(s.episodes)
    ]
    return RolloutEngine(policy, rollout).run(specs)


def _demo_messages(ep: Any) -> tuple[list[dict[str, str]] | None, str]:
    """The episode's chat messages if every one has a string ``role`` and ``content``,
    else ``(None, why)``."""
    if not isinstance(ep, dict):
        return None, f"a {type(ep).__name__}, not an episode object"
    msgs = ep.get("messages")
    if not isinstance(msgs, list):
        return None, "no 'messages' list"
    for key, kind in (("return", (int, float)), ("episode_index", int)):
        value = ep.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            return None, f"{key!r} is a {type(value).__name__}, not a number"
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            return None, f"message {i} is a {type(m).__name__}, not an object"
        for key in ("role", "content"):
            if not isinstance(m.get(key), str):
                return None, f"message {i} has no string {key!r}"
    return msgs, ""


def demos_from_jsonl(
    path: str | Path, tokenizer: Any, *, only_success: bool = True
) -> list[Sample]:
    """Samples from an ``episodes.jsonl``: each transcript re-tokenised with the chat template.

    Token ids of the assistant turns are the canonical tokenisation of the recorded text
    followed by the end-of-turn token; everything else has mask 0.  The file is read
    with :func:`ragen_envs.safeload.read_json_lines`: a line that is not JSON, nested
    deeper than :data:`ragen_envs.jsonutil.MAX_DEPTH`, or (when its episode would be
    used) holds a message without a string ``role`` / ``content`` is skipped, and all
    skipped lines are named (``file:line: reason``) in one ``RuntimeWarning``.

    Raises:
        ragen_envs.jsonutil.JSONFileError: the file cannot be opened.
    """
    chat = ChatTokens(tokenizer)
    samples: list[Sample] = []
    skipped: list[str] = []
    for lineno, ep in read_json_lines(path, skipped=skipped, invalid="skip"):
        if only_success and not (isinstance(ep, dict) and ep.get("success")):
            continue
        msgs, why = _demo_messages(ep)
        if msgs is None:
            skipped.append(f"{path}:{lineno}: {why} (skipped)")
            continue
        if len(msgs) < 3 or msgs[0]["role"] != "system":
            continue
        ids = chat.prompt_ids(msgs[:2])
        mask = [0] * len(ids)
        turn_ids = [-1] * len(ids)
        k = 0
        for i in range(2, len(msgs)):
            m = msgs[i]
            if m["role"] == "assistant":
                comp = list(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) + [
                    tokenizer.eos_token_id
                ]
                ids += comp
                mask += [1] * len(comp)
                turn_ids += [k] * len(comp)
                k += 1
                if i + 1 < len(msgs):
                    delta = chat.continuation_ids(msgs[: i + 1], [msgs[i + 1]], True)
                    ids += delta
                    mask += [0] * len(delta)
                    turn_ids += [-1] * len(delta)
        if sum(mask):
            samples.append(
                Sample(
                    input_ids=ids,
                    loss_mask=mask,
                    turn_ids=turn_ids,
                    rewards=[0.0] * len(ids),
                    rollout_logprobs=None,
                    score=float(ep.get("return", 0.0)),
                    group=len(samples),
                    episode=int(ep.get("episode_index", len(samples))),
                )
            )
    if skipped:
        shown = "; ".join(skipped[:5]) + (
            f"; ... {len(skipped) - 5} more" if len(skipped) > 5 else ""
        )
        warnings.warn(
            f"sft.demos_path: skipped {len(skipped)} unusable line(s): {shown}",
            RuntimeWarning,
            stacklevel=2,
        )
    return samples


def sft_samples(cfg: StarPOConfig, tokenizer: Any, rollout: RolloutConfig) -> list[Sample]:
    """The demonstration samples for ``cfg.sft``."""
    if cfg.sft.demo_policy == "jsonl":
        if not cfg.sft.demos_path:
            raise ValueError("sft.demo_policy=jsonl needs sft.demos_path")
        return demos_from_jsonl(cfg.sft.demos_path, tokenizer)
    layout = "trajectory" if rollout.context_mode == "full" else "turn"
    records = collect_demos(cfg, tokenizer, rollout)
    samples, _ = build_samples(records, layout=layout)
    return samples


def sft_total_steps(cfg: StarPOConfig, n_samples: int) -> int:
    """Optimizer steps of :func:`sft_train` on ``n_samples`` samples: ``sft.steps``, else
    ``sft.epochs`` epochs of ``max(1, n_samples // sft.batch_size)`` steps."""
    return cfg.sft.steps or max(1, n_samples // cfg.sft.batch_size) * cfg.sft.epochs


def sft_train(
    model: Any,
    tokenizer: Any,
    samples: Sequence[Sample],
    cfg: StarPOConfig,
    *,
    device: str = "cpu",
    log: Any = None,
) -> list[dict[str, float]]:
    """Minimise the token-mean NLL of the demonstrations' masked tokens.

    Returns one metrics dict per optimizer step: ``sft/loss``, ``sft/confident_frac``
    (share of target tokens with probability above 1/2) and ``sft/lr``.

    Raises:
        ValueError: no samples.
    """
    if not samples:
        raise ValueError("no demonstration samples to train on")
    s = cfg.sft
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.trainer.seed)
    history: list[dict[str, float]] = []
    steps_per_epoch = max(1, len(samples) // s.batch_size)
    total = sft_total_steps(cfg, len(samples))
    step = 0
    model.train()
    while step < total:
        order = torch.randperm(len(samples), generator=gen).tolist()
        for b in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[b * s.batch_size : (b + 1) * s.batch_size]
            batch_samples = [samples[i] for i in idx]
            n_tok = float(sum(x.response_tokens for x in batch_samples))
            opt.zero_grad(set_to_none=True)
            loss_sum, correct = 0.0, 0.0
            for mb in range(0, len(batch_samples), s.micro_batch_size):
                tb = collate(batch_samples[mb : mb + s.micro_batch_size], tokenizer.pad_token_id)
                ids, att = tb.input_ids.to(device), tb.attention_mask.to(device)
                mask = tb.loss_mask.to(device)
                logp, _ = token_logprobs(model, ids, att)
                loss = -(logp * mask).sum() / max(n_tok, 1.0)
                loss.backward()
                loss_sum += float(loss.detach())
                correct += float(((logp > np.log(0.5)).float() * mask).sum())
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            row = {
                "sft/loss": loss_sum,
                "sft/confident_frac": correct / max(n_tok, 1.0),
                "sft/lr": float(opt.param_groups[0]["lr"]),
            }
            history.append(row)
            if log is not None:
                log(step, row)
    model.eval()
    return history
