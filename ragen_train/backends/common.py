"""What every back-end shares: seeds, episodes → (prompt, completion, mask, reward) rows, filtering, validation.

The native trainer is the reference; these functions reproduce its rules so that an
external trainer sees exactly what :class:`~ragen_train.trainer.StarPOTrainer` sees:

* :func:`train_specs` / :func:`val_specs` — the native seeds and splits (group ``g`` of
  step ``k`` plays train seed ``k · env_groups + g``; validation plays seeds
  ``0..N-1`` of the validation split);
* :func:`episode_rows` — one training row per episode, cut out of the sample that
  :func:`ragen_train.batch.build_samples` builds: ``prompt_ids`` = the first turn's
  prompt, ``completion_ids`` = everything after it (the sampled tokens of every turn and,
  between them, the observation / chat-template tokens), ``completion_mask`` = the native
  loss mask on that span (1 exactly on sampled tokens, 0 on environment tokens), and
  ``reward`` = the episode return (env rewards + format penalties, the native GRPO score);
* :func:`filter_groups` — the native rollout filter on group scores;
* :func:`evaluate_policy` — the native validation (same seeds, same sampling seed).

External trainers take one completion per prompt row, so a back-end other than
``native`` needs one sequence per episode: the full-history context mode, or episodes of
one turn (:func:`require_one_row_per_episode`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, make_specs, rollout_config

from ..batch import BuildStats, Sample, build_samples
from ..config import StarPOConfig, TrainConfigError
from ..filtering import FilterConfig, group_scores, group_values, select_groups


# ------------------------------------------------------------------- seeds
def env_config(cfg: StarPOConfig, split: str) -> dict[str, Any]:
    """The env config overrides of ``cfg`` on ``split``."""
    return {**cfg.env.config, "split": split}


def train_specs(
    cfg: StarPOConfig, step: int, groups: Sequence[int] | None = None
) -> list[EpisodeSpec]:
    """Episodes of training step ``step`` (0-based), as the native trainer plays them.

    Group ``g`` uses env seed ``step · env_groups + g`` on ``env.train_split``; its
    ``group_size`` members share the seed; episode index ``g · group_size + m``.

    Args:
        groups: the groups to play (default: all ``env_groups``).
    """
    r = cfg.rollout
    base = step * r.env_groups
    groups = range(r.env_groups) if groups is None else groups
    conf = env_config(cfg, cfg.env.train_split)
    return [
        spec
        for g in groups
        for spec in make_specs(
            cfg.env.id,
            episodes=r.group_size,
            group_size=r.group_size,
            seed=base + g,
            env_config=conf,
            start_index=g * r.group_size,
            first_group=g,
        )
    ]


def val_specs(
    cfg: StarPOConfig, split: str | None = None, episodes: int | None = None
) -> list[EpisodeSpec]:
    """Validation episodes: fixed seeds ``0..N-1`` of ``split`` (default ``env.val_split``)."""
    split = split or cfg.env.val_split
    n = episodes or cfg.trainer.val_episodes
    return make_specs(cfg.env.id, episodes=n, env_config=env_config(cfg, split))


def layout_of(rollout: RolloutConfig) -> str:
    """The native sample layout: ``trajectory`` in full-history mode, else ``turn``."""
    return "trajectory" if rollout.context_mode == "full" else "turn"


def require_one_row_per_episode(cfg: StarPOConfig, rollout: RolloutConfig, backend: str) -> None:
    """Refuse settings an external trainer (one completion per prompt) cannot express token-exactly.

    Raises:
        TrainConfigError: ``turn`` layout with more than one turn per episode (one sample per
            turn, each with its own prompt), turn-level reward placement across turns, or
            several envs (``env.train`` / ``env.val``; :mod:`ragen_train.multienv`).
    """
    if cfg.env.train or cfg.env.val:
        raise TrainConfigError(
            "env.train" if cfg.env.train else "env.val",
            f"the {backend} back-end trains and validates on the one env env.id; several envs "
            "(env.train / env.val) need the native back-end (--trainer native)",
        )
    if layout_of(rollout) == "turn" and rollout.max_turns > 1:
        raise TrainConfigError(
            "rollout.context_mode",
            f"the {backend} back-end trains one sequence per episode; context_mode "
            f"{rollout.context_mode!r} with max_turns={rollout.max_turns} gives one sample per turn "
            "(use context_mode=full, or an env with one turn)",
        )
    if cfg.rollout.reward_placement == "turn_end" and rollout.max_turns > 1:
        raise TrainConfigError(
            "rollout.reward_placement",
            f"the {backend} back-end takes one scalar reward per sequence (placed on its last token); "
            "turn_end placement over several turns cannot be expressed",
        )


# -------------------------------------------------------------- settings map
@dataclass(frozen=True)
class MappingNote:
    """How one of our settings is expressed by an external trainer.

    ``status``: ``mapped`` (the same quantity), ``approximate`` (close; the difference is
    stated), ``unsupported`` (no counterpart; a non-default value is refused).
    """

    field: str
    status: str
    detail: str


#: What an external back-end does with a config field (:class:`FieldHandling`).
HANDLING_STATUSES = {
    "mapped": "passed to the back-end's own setting (the same quantity)",
    "ours": "done by ragen's own code inside the back-end run (rollout engine, callback, model "
    "loading), as in the native trainer",
    "approximate": "passed on with a stated difference",
    "unused": "has no effect on this back-end (the reason is stated)",
    "refused": "only the default is accepted; another value raises TrainConfigError",
}


@dataclass(frozen=True)
class FieldHandling:
    """How an external back-end handles one config field, declared in the back-end's module
    (``TRL_FIELDS``, ``VERL_FIELDS``) and checked by a test: every field of
    :class:`~ragen_train.config.StarPOConfig` has one, and every ``refused`` example raises.

    Attributes:
        status: a key of :data:`HANDLING_STATUSES`.
        detail: the back-end setting it becomes, or why it is approximate / unused.
        refused: overrides (space-separated ``key=value``) that the back-end refuses with a
            :class:`~ragen_train.config.TrainConfigError` naming the field; empty when every
            value is accepted.
    """

    status: str
    detail: str
    refused: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in HANDLING_STATUSES:
            raise ValueError(
                f"status must be one of {list(HANDLING_STATUSES)}, got {self.status!r}"
            )


def handling(status: str, detail: str, *refused: str) -> FieldHandling:
    """Shorthand for :class:`FieldHandling` (``refused``: override strings it refuses)."""
    return FieldHandling(status, detail, refused)


def field_coverage(table: dict[str, FieldHandling]) -> dict[str, FieldHandling]:
    """``table`` with its section keys (``sft``, ``rollout.vllm``) expanded to one entry per
    config field.

    Raises:
        ValueError: a key that is neither a config field nor a section, or a field named
            twice (directly and through its section).
    """
    from ..config import FIELD_SPECS

    paths = [s.path for s in FIELD_SPECS if not s.in_list]
    out: dict[str, FieldHandling] = {}
    for key, how in table.items():
        matched = [p for p in paths if p == key or p.startswith(key + ".")]
        if not matched:
            raise ValueError(f"{key!r} is not a config field or section")
        for p in matched:
            if p in out:
                raise ValueError(f"{p!r} is declared twice")
            out[p] = how
    return out


# ---------------------------------------------------------------- episode rows
@dataclass
class EpisodeRow:
    """One episode as a (prompt, completion) training row.

    Attributes:
        prompt_ids: ``(P,)`` the first turn's prompt tokens.
        completion_ids: ``(C,)`` every token after the prompt: sampled tokens and the
            environment / template tokens between turns.
        completion_mask: ``(C,)`` 1 on sampled tokens (the native loss mask), 0 elsewhere.
        completion_logprobs: ``(C,)`` rollout log-probs at temperature 1 (0 on
            environment tokens and when the back-end gave none).
        reward: the episode return (NaN for a dropped episode: no learning signal).
        episode / group / member / seed: provenance.
        dropped: why the native batch builder dropped the episode, else ``None``.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]
    reward: float
    episode: int
    group: int
    member: int
    seed: int
    dropped: str | None = None


def row_from_sample(sample: Sample, record: EpisodeRecord) -> EpisodeRow:
    """Cut a native trajectory (or single-turn) sample at its first sampled token."""
    start = sample.loss_mask.index(1)
    lps = (
        sample.rollout_logprobs[start:]
        if sample.rollout_logprobs is not None
        else [0.0] * (len(sample.input_ids) - start)
    )
    return EpisodeRow(
        prompt_ids=list(sample.input_ids[:start]),
        completion_ids=list(sample.input_ids[start:]),
        completion_mask=list(sample.loss_mask[start:]),
        completion_logprobs=[float(x) for x in lps],
        reward=float(sample.score),
        episode=record.episode_index,
        group=record.group,
        member=record.member,
        seed=record.seed,
    )


def episode_rows(
    records: Sequence[EpisodeRecord],
    *,
    layout: str,
    reward_placement: str = "last_token",
    pad_id: int = 0,
) -> tuple[list[EpisodeRow], BuildStats]:
    """One row per record, in record order (module docstring).

    An episode the native builder drops (no token ids, prompts that do not extend each
    other, a non-finite return) becomes a row with an all-zero mask and a NaN reward, so
    the external trainer's batch keeps its shape but learns nothing from it — exactly as
    the native trainer, which leaves it out.

    Raises:
        ValueError: the layout gives more than one sample for some episode.
    """
    samples, stats = build_samples(records, layout=layout, reward_placement=reward_placement)
    by_episode: dict[int, Sample] = {}
    for s in samples:
        if s.episode in by_episode:
            raise ValueError(
                f"episode {s.episode} gives several samples (layout {layout!r}); one row per episode "
                "needs the full-history context mode or one-turn episodes"
            )
        by_episode[s.episode] = s
    rows = []
    for rec in records:
        s = by_episode.get(rec.episode_index)
        if s is not None:
            rows.append(row_from_sample(s, rec))
            continue
        first = rec.turns[0] if rec.turns else None
        prompt = (
            list(first.prompt_token_ids)
            if first is not None and first.prompt_token_ids
            else [pad_id]
        )
        comp = (
            list(first.completion_token_ids)
            if first is not None and first.completion_token_ids
            else [pad_id]
        )
        rows.append(
            EpisodeRow(
                prompt_ids=prompt,
                completion_ids=comp,
                completion_mask=[0] * len(comp),
                completion_logprobs=[0.0] * len(comp),
                reward=float("nan"),
                episode=rec.episode_index,
                group=rec.group,
                member=rec.member,
                seed=rec.seed,
                dropped="dropped",
            )
        )
    return rows, stats


# ------------------------------------------------------------------ filtering
def filter_config(cfg: StarPOConfig) -> FilterConfig:
    """The :class:`~ragen_train.filtering.FilterConfig` of ``cfg`` (as the native trainer builds it)."""
    return FilterConfig.from_section(cfg.algorithm.filter)


def filter_groups(
    records: Sequence[EpisodeRecord],
    fcfg: FilterConfig,
    gather: Callable[[dict[int, list[float]]], list[dict[int, list[float]]]] | None = None,
) -> tuple[set[int], dict[str, float], float]:
    """The native rollout filter over the groups of ``records``.

    Args:
        gather: merges the per-group values of every process (``all_gather_object``);
            default: this process only.

    Returns:
        ``(kept group ids, filter/* metrics, loss scale)``.

    Raises:
        ValueError: ``metric == "entropy"`` (needs the trainer's forward pass).
    """
    if fcfg.metric == "entropy":
        raise ValueError("the entropy filter metric needs the trainer's own forward pass")
    per_group = group_values(records, fcfg.metric)  # NaN-reward episodes (dropped) score nothing
    merged: dict[int, list[float]] = {}
    for part in gather(dict(per_group)) if gather else [dict(per_group)]:
        merged.update(part)
    groups = sorted(merged)
    scores = group_scores(merged, fcfg.metric) if groups else np.zeros(0)
    result = select_groups(scores, fcfg)
    return {groups[i] for i in result.kept}, result.metrics, result.scale


# ----------------------------------------------------------------- validation
def evaluate_policy(
    model: Any,
    tokenizer: Any,
    cfg: StarPOConfig,
    *,
    split: str | None = None,
    episodes: int | None = None,
    temperature: float | None = None,
    device: str | None = None,
) -> dict[str, float]:
    """Success and return on the fixed validation seeds, as ``StarPOTrainer.evaluate`` (one process).

    Sampling uses torch seed 12345 inside a forked RNG, so equal weights give equal
    ``val/*`` under every back-end.  The model's train/eval mode is restored.
    """
    import torch

    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.rollout import RolloutEngine

    from ..metrics import episode_metrics

    t = cfg.trainer.val_temperature if temperature is None else temperature
    rcfg = rollout_config(cfg.env.id, cfg.rollout, temperature=max(t, 0.0))
    was_training = bool(getattr(model, "training", False))
    dev = device or str(next(model.parameters()).device)
    policy = HFPolicy(model, tokenizer, device=dev, max_batch_size=cfg.rollout.batch_size)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12345)
            records = RolloutEngine(policy, rcfg).run(val_specs(cfg, split, episodes))
    finally:
        model.train(was_training)
    return episode_metrics(records, "val")
