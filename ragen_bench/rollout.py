"""The rollout engine: many multi-turn episodes at once, one policy, full records.

Each episode runs as an asyncio task: reset the env, then per turn build the prompt
(:mod:`ragen_bench.prompts`), ask the policy, parse the response with
:func:`ragen_envs.parse_response`, step the env once per action up to the per-turn
budget, and record everything (:class:`~ragen_bench.records.TurnRecord`).  Requests from
concurrent episodes meet in a :class:`_Batcher`, which hands the policy batches of up to
``policy.max_batch_size`` requests with at most ``policy.max_concurrency`` calls in
flight: one code path gives batched generation for local models and bounded
concurrency for endpoints.  Episodes start as others finish (at most ``max_parallel``
alive), and each finished episode is handed to ``on_episode`` at once, so a results
writer can flush it before anything else happens.

An episode ends when the env terminates or truncates, after ``max_turns`` turns
(``turn_limit``), after ``max_invalid_answers`` consecutive invalid answers
(``invalid_format_limit``), when the prompt no longer fits ``max_context_tokens``
(``context_limit``), when the env raises (``env_error``) or the policy fails
(``endpoint_error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import ragen_envs
from ragen_envs import EpisodeStatus, parse_response
from ragen_envs.ranges import FINITE, Range

from .chat import ChatTokens
from .policies.base import Policy
from .prompts import (
    Conversation,
    TurnText,
    feedback_text,
    format_reminder,
    system_message,
    turn_text,
)
from .records import EpisodeRecord, TurnRecord
from .types import Generation, PolicyRequest, SamplingParams

CONTEXT_MODES = ("full", "last_k", "single_turn")
#: ``system_prompt`` values (:func:`~ragen_bench.prompts.system_message`).
SYSTEM_PROMPTS = ("full", "minimal")

#: Allowed values of the numeric rollout settings (``None`` = no limit is not checked).
ROLLOUT_RANGES = {
    "max_turns": Range(ge=1),
    "max_actions_per_turn": Range(ge=1),
    "context_window": Range(ge=0),
    "max_context_tokens": Range(ge=1),
    "format_penalty": FINITE,
    "max_invalid_answers": Range(ge=1),
}


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are played.

    Attributes:
        max_turns: turns per episode (each turn is one policy call).
        max_actions_per_turn: actions executed per turn; extra ones are dropped.
        enable_think: think mode (``<think>`` + ``<answer>``) or answer-only mode.
        context_mode: ``full`` | ``last_k`` | ``single_turn`` (see :mod:`.prompts`).
        context_window: earlier turns shown in ``last_k`` mode.
        max_context_tokens: prompt token budget (oldest turns dropped first); ``None``
            for no budget.  Needs a back-end with a tokenizer, else characters / 4 is
            used as the token count.
        format_penalty: reward added to a turn whose answer is invalid (RAGEN's
            ``format_penalty`` default is -0.1).
        max_invalid_answers: consecutive invalid answers that end the episode
            (``invalid_format_limit``); ``None`` never ends it for that reason.
        sampling: sampling parameters for every turn.
        action_sep: separator between actions in an answer.
        answer_from_reasoning: when a response has no text but a separate reasoning
            channel, parse the answer from the reasoning text (counted per turn).
        system_prompt: ``full`` (the env's instruction and the protocol) or ``minimal``
            (the answer format only; see :func:`~ragen_bench.prompts.system_message`).
        format_reminder: restate the answer format as the last line of every user message
            (:func:`~ragen_bench.prompts.format_reminder`; small instruct models need it).
    """

    max_turns: int = 5
    max_actions_per_turn: int = 2
    enable_think: bool = True
    context_mode: str = "full"
    context_window: int = 2
    max_context_tokens: int | None = None
    format_penalty: float = -0.1
    max_invalid_answers: int | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    action_sep: str = "||"
    answer_from_reasoning: bool = False
    system_prompt: str = "full"
    format_reminder: bool = False

    def __post_init__(self) -> None:
        if self.context_mode not in CONTEXT_MODES:
            raise ValueError(
                f"context_mode must be one of {CONTEXT_MODES}, got {self.context_mode!r}"
            )
        for name, allowed in ROLLOUT_RANGES.items():
            value = getattr(self, name)
            if value is not None:
                allowed.check(name, value)
        if self.system_prompt not in SYSTEM_PROMPTS:
            raise ValueError(
                f"system_prompt must be 'full' or 'minimal', got {self.system_prompt!r}"
            )

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_turns": self.max_turns,
            "max_actions_per_turn": self.max_actions_per_turn,
            "enable_think": self.enable_think,
            "context_mode": self.context_mode,
            "context_window": self.context_window,
            "max_context_tokens": self.max_context_tokens,
            "format_penalty": self.format_penalty,
            "max_invalid_answers": self.max_invalid_answers,
            "action_sep": self.action_sep,
            "answer_from_reasoning": self.answer_from_reasoning,
            "system_prompt": self.system_prompt,
            "sampling": self.sampling.as_dict(),
            **({"format_reminder": True} if self.format_reminder else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutConfig:
        """The inverse of :meth:`as_dict`: a saved config (``run.json``'s ``rollout``, the
        verl agent loop's settings) played exactly as saved, without the env's defaults.

        Raises:
            TypeError: an unknown field.  ValueError: a bad rollout or sampling setting.
        """
        values = dict(data)
        return cls(sampling=_sampling_params(values.pop("sampling", None) or {}), **values)


#: The agent-loop protocol fields of :class:`RolloutConfig` that a run's settings override
#: (``RunRequest.rollout``, a training config's ``rollout`` section, ``ragen_protocol.json``).
PROTOCOL_FIELDS = (
    "max_turns",
    "max_actions_per_turn",
    "enable_think",
    "system_prompt",
    "context_mode",
    "context_window",
    "max_context_tokens",
    "format_penalty",
    "max_invalid_answers",
    "format_reminder",
)
#: The fields of :class:`~ragen_bench.types.SamplingParams` a run's settings override.
SAMPLING_FIELDS = ("temperature", "top_p", "max_new_tokens")


def protocol_overrides(settings: Any, temperature: float | None = None) -> dict[str, Any]:
    """The agent-loop settings of ``settings`` as :func:`rollout_config` overrides.

    Args:
        settings: an object with the :data:`PROTOCOL_FIELDS` and :data:`SAMPLING_FIELDS`
            as attributes (a training config's ``rollout`` section); ``None`` values mean
            the env's ``agent_defaults``.
        temperature: sampling temperature (default ``settings.temperature``).

    Returns:
        ``{<protocol field>: value, ..., "sampling": {temperature, top_p, max_new_tokens}}``,
        the form of ``RunRequest.rollout`` and of the saved ``ragen_protocol.json``.
    """
    sampling = {name: getattr(settings, name) for name in SAMPLING_FIELDS}
    if temperature is not None:
        sampling["temperature"] = temperature
    return {**{name: getattr(settings, name) for name in PROTOCOL_FIELDS}, "sampling": sampling}


def rollout_config(
    env: str | ragen_envs.EnvEntry,
    settings: Any = None,
    *,
    temperature: float | None = None,
) -> RolloutConfig:
    """The one way a run's agent-loop settings become a :class:`RolloutConfig`: the env's
    ``agent_defaults`` overlaid with ``settings`` (``None`` values ignored).

    The benchmark (``RunRequest.rollout``), a saved agent protocol, training, validation and
    ``ragen-train eval`` all call this, so a model is evaluated the way it was trained.

    Args:
        env: an env id or its resolved registry entry.
        settings: overrides — a mapping of :class:`RolloutConfig` fields (``sampling`` as a
            mapping or :class:`~ragen_bench.types.SamplingParams`), or an object with the
            :data:`PROTOCOL_FIELDS` / :data:`SAMPLING_FIELDS` attributes (a training
            config's ``rollout`` section, read with :func:`protocol_overrides`); ``None``:
            the env's defaults.
        temperature: overrides the sampling temperature (validation samples cooler).

    Raises:
        UnknownEnvError: unknown id.  ValueError: a bad rollout or sampling setting.
    """
    entry = env if isinstance(env, ragen_envs.EnvEntry) else ragen_envs.get_entry(env)
    if settings is not None and not isinstance(settings, dict):
        settings = protocol_overrides(settings)
    values: dict[str, Any] = {**entry.agent_defaults}
    for k, v in (settings or {}).items():
        if v is not None:
            values[k] = v
    sampling = _sampling_params(values.pop("sampling", None) or {})
    if temperature is not None:
        sampling = replace(sampling, temperature=temperature)
    return RolloutConfig(sampling=sampling, **values)


def _sampling_params(value: SamplingParams | dict[str, Any]) -> SamplingParams:
    """``value`` itself, or the :class:`SamplingParams` of its mapping (``stop`` as a tuple)."""
    if isinstance(value, SamplingParams):
        return value
    fields: dict[str, Any] = {k: (tuple(v) if k == "stop" else v) for k, v in value.items()}
    return SamplingParams(**fields)


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play.

    Attributes:
        index: unique episode index within a run (results are keyed by it).
        env_id: registered env id.
        seed: env reset seed (all members of a group share it).
        group: group index; member: index within the group.
        env_config: config overrides for ``ragen_envs.make``.
    """

    index: int
    env_id: str
    seed: int
    group: int = 0
    member: int = 0
    env_config: dict[str, Any] = field(default_factory=dict)


def make_specs(
    env_id: str,
    *,
    episodes: int,
    group_size: int = 1,
    seed: int = 0,
    env_config: dict[str, Any] | None = None,
    start_index: int = 0,
    first_group: int = 0,
) -> list[EpisodeSpec]:
    """Specs for ``episodes`` episodes in groups of ``group_size`` sharing a seed.

    The ``k``-th group of the specs is group ``first_group + k`` with env seed ``seed + k``;
    episode ``i`` (index ``start_index + i``) is member ``i % group_size`` of the
    ``i // group_size``-th group.  ``start_index`` and ``first_group`` place the specs
    inside a larger run (the trainer builds each group of a step on the rank that plays it).

    Raises:
        ValueError: ``episodes`` is not a positive multiple of ``group_size``, ``group_size``
            is below 1, or ``seed``, ``start_index`` or ``first_group`` is negative.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0 (env seeds are non-negative), got {seed}")
    if start_index < 0 or first_group < 0:
        raise ValueError(
            f"start_index and first_group must be >= 0, got {start_index} and {first_group}"
        )
    if episodes < 1 or episodes % group_size:
        raise ValueError(
            f"episodes ({episodes}) must be a positive multiple of group_size ({group_size})"
        )
    cfg = dict(env_config or {})
    return [
        EpisodeSpec(
            start_index + i,
            env_id,
            seed + i // group_size,
            first_group + i // group_size,
            i % group_size,
            cfg,
        )
        for i in range(episodes)
    ]


def _mark_retrieved(task: asyncio.Task[Any]) -> None:
    """Read a finished task's exception so asyncio never logs "Task exception was never
    retrieved".  A Ctrl-C / SIGTERM handler that raises while a task runs leaves the
    ``KeyboardInterrupt`` on that task *and* re-raises it from the event loop, which stops
    the run; the task's copy was then logged as an extra stderr line after the one-line
    message.  Errors of episodes are still raised where their result is read."""
    if not task.cancelled():
        task.exception()


class _Batcher:
    """Groups concurrent policy requests into batches.

    A batch is sent when ``max_batch`` requests are pending, or when every live episode
    is waiting for the policy (so no further request can join), or after
    ``max_wait_s`` as a safety net.
    """

    def __init__(self, policy: Policy, params: SamplingParams, *, max_wait_s: float = 0.05):
        self.policy = policy
        self.params = params
        self.max_batch = max(1, int(policy.max_batch_size))
        self.sem = asyncio.Semaphore(max(1, int(policy.max_concurrency)))
        self.pending: list[tuple[PolicyRequest, asyncio.Future[Generation]]] = []
        self.live = 0
        self.in_flight = 0
        self.max_wait_s = max_wait_s
        self._timer: asyncio.TimerHandle | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def submit(self, request: PolicyRequest) -> Generation:
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self.pending.append((request, fut))
        self.maybe_flush()
        if self.pending and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_wait_s, self._on_timer)
        return await fut

    def _on_timer(self) -> None:
        self._timer = None
        self.maybe_flush(force=True)

    def maybe_flush(self, force: bool = False) -> None:
        while self.pending and (
            force
            or len(self.pending) >= self.max_batch
            or len(self.pending) + self.in_flight >= self.live
        ):
            batch, self.pending = self.pending[: self.max_batch], self.pending[self.max_batch :]
            self.in_flight += len(batch)
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(_mark_retrieved)
            force = False

    async def _run(self, batch: list[tuple[PolicyRequest, asyncio.Future[Generation]]]) -> None:
        async with self.sem:
            try:
                gens = await self.policy.generate([r for r, _ in batch], self.params)
                if len(gens) != len(batch):
                    raise RuntimeError(
                        f"policy returned {len(gens)} generations for {len(batch)} requests"
                    )
            except Exception as exc:  # one failed call must not kill the run
                msg = f"{type(exc).__name__}: {exc}"
                gens = [
                    Generation(text="", finish_reason="error", extra={"error": msg}) for _ in batch
                ]
        self.in_flight -= len(batch)
        for (_, fut), gen in zip(batch, gens):
            if not fut.done():
                fut.set_result(gen)

    def episode_started(self) -> None:
        self.live += 1

    def episode_finished(self) -> None:
        self.live -= 1
        self.maybe_flush()


class RolloutEngine:
    """Plays episodes with a policy.

    Args:
        policy: any :class:`~ragen_bench.policies.base.Policy`.
        config: :class:`RolloutConfig`.
        max_parallel: episodes alive at once (default: ``max_batch_size ×
            max_concurrency`` of the policy, at most 1024).
        on_episode: called with each finished :class:`EpisodeRecord`, in finishing
            order, before the next episode starts.
        on_turn: called with ``(episode_index, TurnRecord)`` after each turn is played
            (progress displays; it must not raise).
    """

    def __init__(
        self,
        policy: Policy,
        config: RolloutConfig | None = None,
        *,
        max_parallel: int | None = None,
        on_episode: Callable[[EpisodeRecord], None] | None = None,
        on_turn: Callable[[int, Any], None] | None = None,
    ):
        self.policy = policy
        self.config = config or RolloutConfig()
        default_parallel = min(1024, max(1, policy.max_batch_size) * max(1, policy.max_concurrency))
        self.max_parallel = max(1, int(max_parallel or default_parallel))
        self.on_episode = on_episode
        self.on_turn = on_turn
        tok = policy.tokenizer
        self.chat = (
            ChatTokens(tok) if tok is not None and getattr(tok, "chat_template", None) else None
        )
        self._envs: dict[tuple[str, str], list[Any]] = {}
        self._entries: dict[str, ragen_envs.EnvEntry] = {}  # each env id looked up once

    # ------------------------------------------------------------------ API
    def run(self, specs: Iterable[EpisodeSpec]) -> list[EpisodeRecord]:
        """Blocking :meth:`arun`."""
        return asyncio.run(self.arun(specs))

    async def arun(self, specs: Iterable[EpisodeSpec]) -> list[EpisodeRecord]:
        """Play every spec; return the records in spec order."""
        specs = list(specs)
        batcher = _Batcher(self.policy, self.config.sampling)
        results: dict[int, EpisodeRecord] = {}
        queue = list(reversed(specs))
        running: set[asyncio.Task[EpisodeRecord]] = set()

        def start_next() -> None:
            while queue and len(running) < self.max_parallel:
                spec = queue.pop()
                batcher.episode_started()
                task = asyncio.get_running_loop().create_task(self._episode(spec, batcher))
                task.add_done_callback(_mark_retrieved)
                running.add(task)

        start_next()
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                running.discard(task)
                record = task.result()
                results[record.episode_index] = record
                if self.on_episode is not None:
                    self.on_episode(record)
            start_next()
        return [results[s.index] for s in specs]

    # ------------------------------------------------------------- internals
    def _acquire_env(self, spec: EpisodeSpec) -> Any:
        key = (spec.env_id, repr(sorted(spec.env_config.items())))
        pool = self._envs.setdefault(key, [])
        return pool.pop() if pool else ragen_envs.make(spec.env_id, **spec.env_config)

    def _release_env(self, spec: EpisodeSpec, env: Any) -> None:
        self._envs[(spec.env_id, repr(sorted(spec.env_config.items())))].append(env)

    def _count_tokens(self, messages: list[dict[str, str]]) -> int:
        if self.chat is not None:
            return len(self.chat.prompt_ids(messages))
        return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)

    async def _episode(self, spec: EpisodeSpec, batcher: _Batcher) -> EpisodeRecord:
        cfg = self.config
        entry = self._entries.get(spec.env_id)
        if entry is None:
            entry = self._entries[spec.env_id] = ragen_envs.get_entry(spec.env_id)
        rec = EpisodeRecord(
            spec.index,
            spec.env_id,
            entry.version,
            {**entry.kwargs, **spec.env_config},
            spec.seed,
            spec.group,
            spec.member,
            started_at=time.time(),
        )
        t_start = time.perf_counter()
        env = None
        try:
            try:
                env = self._acquire_env(spec)
                base = env.unwrapped
                # Members of a group share the instance; an env with random outcomes
                # draws them per member (its config's `outcomes`, docs/envs/README.md).
                member = (
                    {"member": spec.member} if getattr(base, "stochastic_outcomes", False) else None
                )
                obs, _info = env.reset(seed=spec.seed, options=member)
                rec.env_config = dict(base.config)
                instruction = base.instruction
            except Exception as exc:
                rec.status, rec.error = EpisodeStatus.ENV_ERROR.value, _describe(exc)
                return rec
            conv = Conversation(
                system_message(
                    instruction,
                    enable_think=cfg.enable_think,
                    max_actions_per_turn=cfg.max_actions_per_turn,
                    max_new_tokens=cfg.sampling.max_new_tokens,
                    action_sep=cfg.action_sep,
                    style=cfg.system_prompt,
                    max_turns=cfg.max_turns,
                ),
                mode=cfg.context_mode,
                window=cfg.context_window,
            )
            feedback = ""
            invalid_streak = 0
            prev: TurnRecord | None = None
            for turn in range(1, cfg.max_turns + 1):
                user = turn_text(
                    turn,
                    cfg.max_turns,
                    obs,
                    cfg.max_actions_per_turn,
                    feedback,
                    format_reminder(cfg.enable_think) if cfg.format_reminder else "",
                )
                conv.turns.append(TurnText(user=user))
                messages, dropped, fits = conv.build(
                    self._count_tokens if cfg.max_context_tokens else None, cfg.max_context_tokens
                )
                if not fits:
                    rec.status = EpisodeStatus.CONTEXT_LIMIT.value
                    conv.turns.pop()
                    break
                prompt_ids, incremental = self._prompt_ids(conv, messages, dropped, prev)
                t0 = time.perf_counter()
                gen = await batcher.submit(
                    PolicyRequest(
                        messages=messages,
                        prompt_token_ids=prompt_ids,
                        env=env if self.policy.privileged else None,
                        max_actions=cfg.max_actions_per_turn,
                        enable_think=cfg.enable_think,
                        episode_index=spec.index,
                        turn=turn,
                    )
                )
                gen_s = time.perf_counter() - t0
                if gen.finish_reason == "error":
                    conv.turns.pop()
                    kind = gen.extra.get("error_kind")
                    rec.status = (
                        EpisodeStatus.CONTEXT_LIMIT.value
                        if kind == "context_length"
                        else EpisodeStatus.ENDPOINT_ERROR.value
                    )
                    if kind != "context_length":
                        rec.error = gen.extra.get("error", "policy error")
                    break
                tr, obs, done, invalid = self._apply(
                    env, turn, user, messages, gen, gen_s, dropped, incremental
                )
                conv.turns[-1].assistant = gen.text
                conv.turns[-1].summary = _summary_line(tr)
                rec.turns.append(tr)
                if self.on_turn is not None:
                    self.on_turn(spec.index, tr)
                prev = tr
                invalid_streak = invalid_streak + 1 if invalid else 0
                if tr.extra.get("env_error"):
                    rec.status, rec.error = EpisodeStatus.ENV_ERROR.value, tr.extra["env_error"]
                    break
                if done:
                    rec.status = tr.infos[-1]["status"]
                    if (
                        rec.status == EpisodeStatus.ENV_ERROR.value
                    ):  # an env that ended itself (e.g. Lean's verifier)
                        rec.error = tr.infos[-1].get("verifier_error") or tr.infos[-1].get("error")
                    break
                if (
                    cfg.max_invalid_answers is not None
                    and invalid_streak >= cfg.max_invalid_answers
                ):
                    rec.status = EpisodeStatus.INVALID_FORMAT_LIMIT.value
                    break
                feedback = feedback_text(
                    tr.env_reward,
                    _parsed_obj(tr),
                    cfg.format_penalty,
                    base.action_names,
                    tr.actions,
                    tr.infos,
                )
            else:
                rec.status = EpisodeStatus.TURN_LIMIT.value
            rec.messages = conv.transcript()
            last_infos = [i for t in rec.turns for i in t.infos]
            rec.success = bool(last_infos and last_infos[-1].get("success"))
            return rec
        finally:
            rec.wall_s = time.perf_counter() - t_start
            if env is not None:
                if (
                    rec.status == EpisodeStatus.ENV_ERROR.value
                ):  # a raising env may be left broken: never reuse it
                    with contextlib.suppress(Exception):
                        env.close()
                else:
                    self._release_env(spec, env)
            batcher.episode_finished()

    def _prompt_ids(
        self,
        conv: Conversation,
        messages: list[dict[str, str]],
        dropped: int,
        prev: TurnRecord | None,
    ) -> tuple[list[int] | None, bool]:
        """Exact prompt token ids (incremental in full mode) or ``None`` without a tokenizer."""
        if self.chat is None:
            return None, False
        if (  # the previous turn's prompt and completion ids can be extended
            self.config.context_mode == "full"
            and dropped == 0
            and prev is not None
            and prev.prompt_token_ids is not None
            and prev.completion_token_ids is not None
            and prev.context_dropped_turns == 0
        ):
            history = messages[:-1]
            ended = (
                bool(prev.completion_token_ids)
                and prev.completion_token_ids[-1] == self.chat.eos_token_id
            )
            delta = self.chat.continuation_ids(history, messages[-1:], ended)
            return list(prev.prompt_token_ids) + list(prev.completion_token_ids) + delta, True
        return self.chat.prompt_ids(messages), False

    def _apply(
        self,
        env: Any,
        turn: int,
        user: str,
        messages: list[dict[str, str]],
        gen: Generation,
        gen_s: float,
        dropped: int,
        incremental: bool,
    ) -> tuple[TurnRecord, str, bool, bool]:
        """Parse the response, step the env, build the turn record."""
        cfg = self.config
        base = env.unwrapped
        text = gen.text
        from_reasoning = False
        if cfg.answer_from_reasoning and not text.strip() and gen.reasoning_text:
            text, from_reasoning = gen.reasoning_text, True
        parsed = parse_response(
            text,
            action_names=base.action_names,
            max_actions=cfg.max_actions_per_turn,
            enable_think=cfg.enable_think,
            action_sep=cfg.action_sep,
            finish_reason=gen.finish_reason,
        )
        tr = TurnRecord(
            turn=turn,
            observation=_observation_from_user(user),
            user_message=user,
            prompt_messages=messages,
            response=gen.text,
            finish_reason=gen.finish_reason,
            parsed=_parsed_dict(parsed),
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
            prompt_token_ids=gen.prompt_token_ids,
            completion_token_ids=gen.completion_token_ids,
            completion_logprobs=gen.completion_logprobs,
            reasoning=gen.reasoning_text,
            context_dropped_turns=dropped,
            incremental_tokens=incremental,
            generate_s=gen_s,
        )
        if from_reasoning:
            tr.extra["answer_from_reasoning"] = True
        for key in (
            "retries",
            "faults",
            "endpoint",
            "truncated_chars",
        ):  # endpoint back-ends: what it took
            if gen.extra.get(key):
                tr.extra[key] = gen.extra[key]
        obs = tr.observation
        done = False
        t0 = time.perf_counter()
        if parsed.valid:
            for action in parsed.actions:
                try:
                    obs, reward, terminated, truncated, info = env.step(action)
                except Exception as exc:
                    tr.extra["env_error"] = _describe(exc)
                    done = True
                    break
                tr.actions.append(action)
                tr.step_rewards.append(float(reward))
                tr.infos.append(_jsonable(info))
                if terminated or truncated:
                    tr.terminated, tr.truncated, done = bool(terminated), bool(truncated), True
                    break
        else:
            tr.format_penalty = cfg.format_penalty
        tr.env_s = time.perf_counter() - t0
        tr.env_reward = float(sum(tr.step_rewards))
        tr.reward = tr.env_reward + tr.format_penalty
        return tr, obs, done, not parsed.valid


def _observation_from_user(user: str) -> str:
    head = "\nObservation:\n"
    start = user.index(head) + len(head)
    end = user.rindex("\nYou may take up to ")
    return user[start:end]


def _parsed_dict(p: Any) -> dict[str, Any]:
    return {
        "think": p.think,
        "answer": p.answer,
        "actions": list(p.actions),
        "error": p.error,
        "unknown_actions": list(p.unknown_actions),
        "stray_chars": p.stray_chars,
        "n_dropped": p.n_dropped,
    }


def _parsed_obj(tr: TurnRecord) -> Any:
    from ragen_envs.parsing import ParsedResponse

    d = tr.parsed
    return ParsedResponse(
        think=d["think"],
        answer=d["answer"],
        actions=tuple(d["actions"]),
        format_valid=d["error"] is None,
        error=d["error"],
        unknown_actions=tuple(d["unknown_actions"]),
        stray_chars=d["stray_chars"],
        n_dropped=d["n_dropped"],
    )


def _summary_line(tr: TurnRecord) -> str:
    if tr.parsed["error"] is not None:
        return f"Turn {tr.turn}: invalid answer ({tr.parsed['error']}), reward {tr.reward:g}."
    return f"Turn {tr.turn}: actions {', '.join(tr.actions) or 'none'}, reward {tr.reward:g}."


def _jsonable(value: Any) -> Any:
    """Make an info dict JSON-safe (numpy scalars, tuples, sets)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value


def _describe(exc: BaseException) -> str:
    tb = traceback.format_exception_only(type(exc), exc)
    return "".join(tb).strip()[:2000]


__all__ = ["RolloutConfig", "EpisodeSpec", "RolloutEngine", "make_specs", "CONTEXT_MODES"]
