"""Multi-environment training and validation (RAGEN's environment-state manager, done reproducibly).

RAGEN's ``es_manager`` lets one run train on several env *tags* at once:
``es_manager.train.env_configs`` lists ``tags`` and ``n_groups`` (one count per tag, summing
to ``env_groups``), each group has ``group_size`` instances of its tag's env, and metrics are
logged per tag (``{tag}/success``, ``{tag}/pass@k`` …); validation has its own list
(``es_manager.val``; e.g. the Bandit task validates on Bandit and BanditTest) — reference
section 2.1 and 3.7.  This module is that mechanism for :class:`~ragen_train.trainer.StarPOTrainer`:

* **config** — ``env.train`` (a list of :class:`TrainEnv`: ``id``, ``tag``, ``config``,
  ``weight``) and ``env.val`` (a list of :class:`ValEnv`: ``id``, ``tag``, ``config``,
  ``episodes``), as JSON or in the short form ``env.train=ragen/Sokoban-v0:1,ragen/FrozenLake-v0:1``
  (``<id>:<weight>``; ``env.val`` takes ``<id>:<episodes>``).  Empty lists mean the single env ``env.id`` / ``env.config``, exactly as
  before (the single-env form stays valid, and then no per-env metric keys are written).
  An empty ``env.val`` validates on every training env.
* **group allocation** (:class:`GroupAllocator`) — weights instead of RAGEN's integer
  counts: the groups of all steps are handed out seat by seat with the Sainte-Laguë divisor
  method (seat ``s`` goes to the env maximising ``weight / (2 · seats_so_far + 1)``, ties to the
  earlier env; Balinski & Young, *Fair Representation*, 1982).  Divisor methods are
  house-monotone, so the cumulative count of every env stays within one group of its exact
  share ``weight · groups / Σ weight`` at every step, a small weight still gets groups now and
  then, and equal weights with ``env_groups`` divisible by the number of envs give exactly
  equal counts every step (RAGEN's ``n_groups: [4, 4]``).  The allocation is a pure function
  of the step, so a resumed run plays what the uninterrupted one would.
* **seeds** — the ``j``-th group ever given to an env plays that env's seed ``j``, so each env
  walks its own seed stream ``0, 1, 2, …`` without repeats; with one env this is the
  single-env rule ``step · env_groups + g``.  Validation plays seeds ``0..episodes-1`` of
  ``env.val_split`` of every validation env.
* **metrics** — every episode metric (success, return, format-valid rate, status shares,
  pass@k, in-group reward std, …) per env as ``train/<tag>/<metric>`` and
  ``val/<tag>/<metric>``, the filter's kept share per env as ``filter/<tag>/kept_ratio``; the
  plain ``train/*`` and ``val/*`` keys stay the means over all episodes.
* **filter scope** (``algorithm.filter.scope``) — ``global`` ranks every group of the step
  together (RAGEN's behaviour); ``per_env`` applies the filter to each env's groups
  separately, so an env whose rewards are on a larger scale (Sokoban's ±10 against
  FrozenLake's 0/1) cannot crowd the other out of a ``reward_std`` top-p selection.

Tags default to the env id without its namespace (``ragen/Sokoban-v0`` → ``Sokoban-v0``)
and must be unique within a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from ragen_envs.ranges import Range

from .errors import TrainConfigError
from .fields import setting


@dataclass
class TrainEnv:
    """One training env of a mixture (``env.train``).

    Attributes:
        id: registered env id.
        tag: metric-key name (default: the id without its namespace).
        config: env config overrides (``env.config`` of this env).
        weight: relative share of the groups of a step (> 0).
    """

    id: str = setting("", "Registered env id of this entry (required).")
    tag: str = setting("", "Metric-key name of this env (train/<tag>/...); empty = the id's name.")
    config: dict[str, Any] = setting(factory=dict, help="Env config overrides of this env.")
    weight: float = setting(
        1.0, "Relative share of each step's groups this env plays.", range=Range(gt=0)
    )

    @classmethod
    def from_text(cls, text: str) -> TrainEnv:
        """``<id>`` or ``<id>:<weight>`` (the short form ``env.train=ragen/Sokoban-v0:3,ragen/FrozenLake-v0:1``).

        Raises:
            ValueError: a weight that is not a number.
        """
        env_id, number = _split_short(text, "weight")
        return cls(id=env_id) if number is None else cls(id=env_id, weight=number)


@dataclass
class ValEnv:
    """One validation env (``env.val``).

    Attributes:
        id / tag / config: as :class:`TrainEnv`.
        episodes: validation episodes on this env (default ``trainer.val_episodes``).
    """

    id: str = setting("", "Registered env id of this entry (required).")
    tag: str = setting("", "Metric-key name of this env (val/<tag>/...); empty = the id's name.")
    config: dict[str, Any] = setting(factory=dict, help="Env config overrides of this env.")
    episodes: int | None = setting(
        None, "Validation episodes on this env; null = trainer.val_episodes.", range=Range(ge=1)
    )

    @classmethod
    def from_text(cls, text: str) -> ValEnv:
        """``<id>`` or ``<id>:<episodes>`` (``env.val=ragen/Sokoban-v0:128,ragen/FrozenLake-v0``).

        Raises:
            ValueError: episodes that are not a whole number.
        """
        env_id, number = _split_short(text, "episodes")
        if number is not None and not float(number).is_integer():
            raise ValueError(f"episodes must be a whole number, got {text!r}")
        return cls(id=env_id) if number is None else cls(id=env_id, episodes=int(number))


def _split_short(text: str, what: str) -> tuple[str, float | None]:
    """``"<id>:<number>"`` → ``(id, number)``; ``"<id>"`` → ``(id, None)``."""
    env_id, sep, rest = text.strip().partition(":")
    if not sep:
        return env_id, None
    try:
        return env_id, float(rest)
    except ValueError:
        raise ValueError(f"expected <env id>:<{what}>, got {text!r}") from None


@dataclass(frozen=True)
class EnvSlot:
    """A resolved env of a run: ``tag``, ``id``, ``config``, and its ``weight`` (training) or
    ``episodes`` (validation)."""

    tag: str
    id: str
    config: dict[str, Any]
    weight: float = 1.0
    episodes: int | None = None


def default_tag(env_id: str) -> str:
    """``ragen/Sokoban-v0`` → ``Sokoban-v0`` (the part after the last ``/``)."""
    return env_id.rsplit("/", 1)[-1]


def is_multi_env(cfg: Any) -> bool:
    """True when the run names its envs in ``env.train`` or ``env.val`` (per-env metric keys)."""
    return bool(cfg.env.train or cfg.env.val)


def train_envs(cfg: Any) -> list[EnvSlot]:
    """The training envs of ``cfg`` (``env.train``, else the single ``env.id``)."""
    if not cfg.env.train:
        return [
            EnvSlot(default_tag(cfg.env.id), cfg.env.id, cfg.env.config)
        ]  # not a copy: it is cfg's env.config
    return [
        EnvSlot(e.tag or default_tag(e.id), e.id, dict(e.config), weight=e.weight)
        for e in cfg.env.train
    ]


def val_envs(cfg: Any) -> list[EnvSlot]:
    """The validation envs of ``cfg`` (``env.val``, else every training env)."""
    if not cfg.env.val:
        return [EnvSlot(s.tag, s.id, s.config) for s in train_envs(cfg)]
    return [
        EnvSlot(e.tag or default_tag(e.id), e.id, dict(e.config), episodes=e.episodes)
        for e in cfg.env.val
    ]


def check_env_lists(cfg: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """Check ``env.train`` / ``env.val``; return ``(field, env_id, config)`` for every listed
    env, for the env-config check of :func:`ragen_train.config.validate`.

    Raises:
        ragen_train.config.TrainConfigError: naming the entry's field — an entry without an id, a
            tag with a ``/``, a repeated tag, a weight that is not positive, episodes below 1.
    """
    out = []
    for name, entries in (("env.train", cfg.env.train), ("env.val", cfg.env.val)):
        seen: dict[str, int] = {}
        for i, e in enumerate(entries):
            where = f"{name}[{i}]"
            if not e.id:
                raise TrainConfigError(
                    f"{where}.id", "every listed env needs an id (e.g. ragen/Sokoban-v0)"
                )
            tag = e.tag or default_tag(e.id)
            if "/" in tag or not tag.strip():
                raise TrainConfigError(
                    f"{where}.tag", f"a tag is one metric-key segment without '/', got {tag!r}"
                )
            if tag in seen:
                raise TrainConfigError(
                    f"{where}.tag",
                    f"tag {tag!r} is already used by {name}[{seen[tag]}]; give each "
                    "entry its own tag",
                )
            seen[tag] = i
            for f in fields(e):  # the ranges declared on TrainEnv / ValEnv
                bounds = f.metadata.get("range")
                value = getattr(e, f.name)
                problem = None if bounds is None or value is None else bounds.problem(value)
                if problem is not None:
                    raise TrainConfigError(f"{where}.{f.name}", problem)
            out.append((f"{where}.config", e.id, dict(e.config)))
    return out


class GroupAllocator:
    """Which env plays each group of a step (module docstring: Sainte-Laguë, seat by seat).

    Args:
        weights: one positive weight per env.
        env_groups: groups per step (``rollout.env_groups``).
    """

    def __init__(self, weights: Sequence[float], env_groups: int):
        if not weights or any(not (w > 0) for w in weights):
            raise ValueError(f"weights must be positive, got {list(weights)}")
        self.weights = [float(w) for w in weights]
        self.env_groups = int(env_groups)
        self._seats: list[int] = []  # env of every seat handed out so far
        self._counts = [0] * len(self.weights)

    def _extend(self, n: int) -> None:
        while len(self._seats) < n:
            e = max(
                range(len(self.weights)),
                key=lambda i: (self.weights[i] / (2 * self._counts[i] + 1), -i),
            )
            self._seats.append(e)
            self._counts[e] += 1

    def groups_at(self, step: int) -> list[tuple[int, int]]:
        """``(env_index, env_seed)`` of groups ``0..env_groups-1`` of ``step`` (0-based), sorted
        by env then seed, so each env's groups are contiguous (as RAGEN's group ids)."""
        g = self.env_groups
        self._extend((step + 1) * g)
        before = [0] * len(self.weights)
        for e in self._seats[: step * g]:
            before[e] += 1
        now = sorted(self._seats[step * g : (step + 1) * g])
        out, offset = [], {e: 0 for e in set(now)}
        for e in now:
            out.append((e, before[e] + offset[e]))
            offset[e] += 1
        return out


def run_by_env(
    policy: Any,
    specs_by_env: Sequence[Sequence[Any]],
    configs: Sequence[Any],
    *,
    progress: Any = None,
) -> list[list[Any]]:
    """Play each env's episode specs with its own agent-loop config, all envs at once.

    One :class:`~ragen_bench.rollout.RolloutEngine` per env (the envs' turn and action limits
    differ, and an engine has one :class:`~ragen_bench.rollout.RolloutConfig`), run
    concurrently in one event loop, so an asynchronous policy (an endpoint, vLLM) overlaps
    them; requests are batched within an env, not across envs.

    Args:
        policy: the policy playing every episode, or a sequence of one policy per env.
        specs_by_env: ``[env][i]`` :class:`~ragen_bench.rollout.EpisodeSpec`.
        configs: one ``RolloutConfig`` per env.
        progress: an object with ``on_episode(record)`` and ``on_turn(index, turn)``
            (:class:`ragen_train.progress.PhaseProgress`), or ``None``.

    Returns:
        ``[env][i]`` :class:`~ragen_bench.records.EpisodeRecord`, in spec order.
    """
    import asyncio

    from ragen_bench.rollout import RolloutEngine

    policies = list(policy) if isinstance(policy, (list, tuple)) else [policy] * len(configs)

    async def play() -> list[list[Any]]:
        jobs = [
            RolloutEngine(
                pol,
                c,
                on_episode=progress.on_episode if progress else None,
                on_turn=progress.on_turn if progress else None,
            ).arun(list(specs))
            for specs, c, pol in zip(specs_by_env, configs, policies)
            if specs
        ]
        done = iter(await asyncio.gather(*jobs))
        return [next(done) if specs else [] for specs in specs_by_env]

    return asyncio.run(play())


def select_groups_per_env(
    values: dict[int, Sequence[float]], env_of_group: dict[int, int], cfg: Any
) -> tuple[set[int], dict[str, float], float]:
    """The filter (``algorithm.filter.scope=per_env``) applied to each env's groups apart.

    Args:
        values: per-episode values of every group (``group id -> values``, as
            :func:`ragen_train.filtering.group_values` returns).
        env_of_group: env index of every group id.
        cfg: :class:`~ragen_train.filtering.FilterConfig`.

    Returns:
        the kept group ids (the union over envs), ``filter/*`` metrics over all groups (as
        :func:`~ragen_train.filtering.select_groups` writes them, ``ρ`` = kept / all groups),
        and the loss scale for that ``ρ``.
    """
    from .filtering import filter_result, group_scores, select_groups

    kept: set[int] = set()
    order: list[int] = []
    scores: list[float] = []
    for e in sorted({env_of_group[g] for g in values}):
        groups = sorted(g for g in values if env_of_group[g] == e)
        env_scores = group_scores({g: values[g] for g in groups}, cfg.metric)
        kept |= {groups[i] for i in select_groups(env_scores, cfg).kept}
        order += groups
        scores += env_scores.tolist()
    result = filter_result(scores, [i for i, g in enumerate(order) if g in kept], cfg)
    return kept, result.metrics, result.scale


def per_env_kept(
    kept_groups: set[int], env_of_group: dict[int, int], slots: Sequence[EnvSlot]
) -> dict[str, float]:
    """``filter/<tag>/kept_ratio`` and ``filter/<tag>/groups`` for every env with groups this step."""
    out: dict[str, float] = {}
    for e, slot in enumerate(slots):
        groups = [g for g, ge in env_of_group.items() if ge == e]
        if groups:
            out[f"filter/{slot.tag}/groups"] = float(len(groups))
            out[f"filter/{slot.tag}/kept_ratio"] = sum(g in kept_groups for g in groups) / len(
                groups
            )
    return out


__all__ = [
    "EnvSlot",
    "GroupAllocator",
    "TrainEnv",
    "ValEnv",
    "check_env_lists",
    "default_tag",
    "is_multi_env",
    "per_env_kept",
    "run_by_env",
    "select_groups_per_env",
    "train_envs",
    "val_envs",
]
