"""An agent loop for verl's multi-turn agent-loop rollout that plays ragen environments by our rules.

verl (``verl/experimental/agent_loop/agent_loop.py``, verl-project/verl) runs one
``AgentLoopBase.run(sampling_params, **dataset_fields) -> AgentLoopOutput`` coroutine per
trajectory.  The loop talks to the inference servers through ``self.server_manager``,
whose token-in / token-out call is

    await server_manager.generate(request_id, prompt_ids=[...], sampling_params={...})
        -> TokenOutput(token_ids, log_probs, stop_reason, ...)

(the same ``request_id`` on every turn keeps an episode on one server, for prefix
caching), and returns ``AgentLoopOutput(prompt_ids, response_ids, response_mask,
response_logprobs, reward_score, num_turns, metrics, extra_fields)`` where
``response_mask`` is 1 on LLM-generated tokens and 0 on tool / environment tokens, and a
``reward_score`` set by the loop is used as is (verl puts it on the last response
token).

:class:`RagenAgentLoop` does not re-implement an episode: :func:`run_ragen_episode` wraps
the server in :class:`VerlServerPolicy` and plays the episode with our
:class:`~ragen_bench.rollout.RolloutEngine` — the same prompts, parser, format penalty,
budgets and seeds as every other back-end — then cuts the native training sample into
``prompt_ids`` / ``response_ids`` / ``response_mask`` with
:func:`~ragen_train.backends.common.episode_rows`, and returns the episode return as
``reward_score``.  Everything except the verl base class is importable and tested
without verl; the class itself exists only when verl is installed (otherwise touching
``RagenAgentLoop`` raises an ``ImportError`` that names verl).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragen_bench.chat import ChatTokens
from ragen_bench.policies.base import Policy
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine, rollout_config
from ragen_bench.types import Generation, PolicyRequest, SamplingParams
from ragen_envs import jsonutil

from .common import episode_rows, layout_of

AGENT_NAME = "ragen_agent"


# ----------------------------------------------------------------- the policy
class VerlServerPolicy(Policy):
    """verl's token-in / token-out server as a :class:`~ragen_bench.policies.base.Policy`.

    Args:
        server: an object with ``async generate(request_id, *, prompt_ids, sampling_params)``
            returning something with ``token_ids`` (and optionally ``log_probs``,
            ``stop_reason``) — verl's ``LLMServerClient`` / ``AsyncLLMServerManager``.
        tokenizer: the policy's tokenizer (decodes the completion text).
        sampling_params: verl's per-trajectory sampling parameters (temperature, top_p,
            top_k, logprobs ...); ``max_tokens`` is set from our per-turn budget.
        request_id: one id for the whole episode (sticky routing).
        eos_token_ids: ids that end a turn (default: the tokenizer's EOS).

    The completion is cut after the first EOS (finish ``stop``); without one it is
    ``length`` when it filled the budget; an aborted request is an ``error``.
    """

    name = "verl"
    max_batch_size = 1
    max_concurrency = 1 << 16

    def __init__(
        self,
        server: Any,
        tokenizer: Any,
        sampling_params: dict[str, Any] | None = None,
        *,
        request_id: str | None = None,
        eos_token_ids: list[int] | None = None,
    ):
        self.server = server
        self._tok = tokenizer
        self.sampling = dict(sampling_params or {})
        self.request_id = request_id or uuid.uuid4().hex
        eos = list(eos_token_ids or [])
        if not eos and tokenizer.eos_token_id is not None:
            eos = [tokenizer.eos_token_id]
        self.eos = set(eos)
        self.chat = ChatTokens(tokenizer)

    @property
    def tokenizer(self) -> Any:
        return self._tok

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        out = []
        for r in requests:
            prompt = (
                list(r.prompt_token_ids)
                if r.prompt_token_ids is not None
                else self.chat.prompt_ids(r.messages)
            )
            sp = dict(self.sampling)
            sp.setdefault("temperature", params.temperature)
            sp.setdefault("top_p", params.top_p)
            sp["max_tokens"] = params.max_new_tokens
            res = await self.server.generate(
                request_id=self.request_id, prompt_ids=prompt, sampling_params=sp
            )
            if getattr(res, "stop_reason", None) == "aborted":
                out.append(
                    Generation(
                        text="", finish_reason="error", extra={"error": "verl request aborted"}
                    )
                )
                continue
            ids = list(res.token_ids)
            lps = list(res.log_probs) if getattr(res, "log_probs", None) else None
            n = next((j + 1 for j, t in enumerate(ids) if t in self.eos), None)
            finish = (
                "stop"
                if n is not None
                else ("length" if len(ids) >= params.max_new_tokens else "stop")
            )
            ids = ids[:n] if n is not None else ids
            out.append(
                Generation(
                    text=self._tok.decode(ids, skip_special_tokens=True),
                    finish_reason=finish,
                    prompt_tokens=len(prompt),
                    completion_tokens=len(ids),
                    prompt_token_ids=prompt,
                    completion_token_ids=ids,
                    completion_logprobs=[float(x) for x in lps[: len(ids)]] if lps else None,
                )
            )
        return out


# --------------------------------------------------------------- the settings
@dataclass
class RagenLoopSettings:
    """What the agent loop needs from a :class:`~ragen_train.config.StarPOConfig` (JSON-serialisable).

    Attributes:
        env_id / env_config: the environment and its config overrides (the split comes
            from each dataset row).
        rollout: :meth:`RolloutConfig.as_dict` of the run's agent-loop settings.
        reward_placement: ``last_token`` (verl puts ``reward_score`` on the last token).
        episode_log: directory for per-episode JSON lines (``None``: no log).
    """

    env_id: str
    env_config: dict[str, Any] = field(default_factory=dict)
    rollout: dict[str, Any] = field(default_factory=dict)
    reward_placement: str = "last_token"
    episode_log: str | None = None

    @classmethod
    def from_config(cls, cfg: Any, episode_log: str | None = None) -> RagenLoopSettings:
        return cls(
            env_id=cfg.env.id,
            env_config=dict(cfg.env.config),
            rollout=rollout_config(cfg.env.id, cfg.rollout).as_dict(),
            reward_placement=cfg.rollout.reward_placement,
            episode_log=episode_log,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> RagenLoopSettings:
        return cls(**(json.loads(text) if isinstance(text, str) else dict(text)))

    def rollout_config(self) -> RolloutConfig:
        """The saved :attr:`rollout` as a :class:`RolloutConfig` (:meth:`RolloutConfig.from_dict`)."""
        return RolloutConfig.from_dict(self.rollout)


@dataclass
class EpisodeOutput:
    """One episode in verl's ``AgentLoopOutput`` terms.

    Attributes:
        prompt_ids / response_ids / response_mask / response_logprobs: as verl's fields
            (``response_mask`` 1 on generated tokens, 0 on environment tokens).
        reward_score: the episode return (0.0 with an all-zero mask for an episode the
            native builder drops).
        num_turns: chat messages after the system prompt (user + assistant).
        summary: the JSON line written to the episode log.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward_score: float
    num_turns: int
    summary: dict[str, Any]


def row_fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ragen fields of a verl dataset row (``extra_info["ragen_*"]`` or top-level ``ragen_*``).

    Raises:
        KeyError: the row has no ``ragen_seed``.
    """
    info = dict(kwargs.get("extra_info") or {})
    info.update({k: v for k, v in kwargs.items() if k.startswith("ragen_")})
    if "ragen_seed" not in info:
        raise KeyError(
            "the verl dataset row has no ragen_seed (write the data with ragen_train.backends.verl_backend)"
        )
    return info


async def run_ragen_episode(
    server: Any,
    tokenizer: Any,
    settings: RagenLoopSettings,
    *,
    seed: int,
    split: str,
    sampling_params: dict[str, Any] | None = None,
    request_id: str | None = None,
    group: int = 0,
    member: int = 0,
    episode_index: int = 0,
    step: int | None = None,
    phase: str = "train",
) -> EpisodeOutput:
    """Play one episode through ``server`` with our rollout engine (module docstring)."""
    rcfg = settings.rollout_config()
    policy = VerlServerPolicy(server, tokenizer, sampling_params, request_id=request_id)
    spec = EpisodeSpec(
        index=episode_index,
        env_id=settings.env_id,
        seed=int(seed),
        group=int(group),
        member=int(member),
        env_config={**settings.env_config, "split": split},
    )
    t0 = time.perf_counter()
    (record,) = await RolloutEngine(policy, rcfg, max_parallel=1).arun([spec])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    (row,), _stats = episode_rows(
        [record], layout=layout_of(rcfg), reward_placement=settings.reward_placement, pad_id=pad
    )
    dropped = row.dropped is not None
    summary = {
        "phase": phase,
        "step": step,
        "seed": record.seed,
        "group": record.group,
        "member": record.member,
        "status": record.status,
        "success": record.success,
        "return": record.episode_return,
        "metrics": record.metrics(),
        "dropped": dropped,
        "wall_s": time.perf_counter() - t0,
    }
    _append_log(settings.episode_log, summary)
    return EpisodeOutput(
        prompt_ids=row.prompt_ids,
        response_ids=row.completion_ids,
        response_mask=row.completion_mask,
        response_logprobs=row.completion_logprobs if not dropped else None,
        reward_score=0.0 if dropped else float(row.reward),
        num_turns=2 * len(record.turns),
        summary=summary,
    )


def _append_log(directory: str | None, summary: dict[str, Any]) -> None:
    if not directory:
        return
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with open(
        d / f"episodes_{socket.gethostname()}_{os.getpid()}.jsonl", "a", encoding="utf-8"
    ) as fh:
        fh.write(jsonutil.dumps(summary) + "\n")


# ------------------------------------------------------------ the verl class
def _build_verl_class() -> type:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

    @register(AGENT_NAME)
    class RagenAgentLoop(AgentLoopBase):  # type: ignore[misc, valid-type]
        """verl agent loop playing ragen environments (module docstring).

        Registered as ``ragen_agent``; the agent-loop YAML written by
        :func:`ragen_train.backends.verl_backend.write_verl_inputs` passes
        ``ragen_settings`` (a :class:`RagenLoopSettings` JSON string).
        """

        def __init__(
            self, *args: Any, ragen_settings: str | dict[str, Any] | None = None, **kwargs: Any
        ):
            super().__init__(*args, **kwargs)
            self.ragen = RagenLoopSettings.from_json(ragen_settings) if ragen_settings else None
            self.prompt_length = int(self.rollout_config.prompt_length)
            self.response_length = int(self.rollout_config.response_length)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            info = row_fields(kwargs)
            settings = self.ragen or RagenLoopSettings.from_json(info["ragen_settings"])
            t0 = time.perf_counter()
            ep = await run_ragen_episode(
                self.server_manager,
                self.tokenizer,
                settings,
                seed=int(info["ragen_seed"]),
                split=str(info.get("ragen_split", "train")),
                sampling_params=sampling_params,
                request_id=uuid.uuid4().hex,
                group=int(info.get("ragen_group", 0)),
                member=0,
                episode_index=int(info.get("index", 0)),
                step=info.get("ragen_step"),
                phase=str(info.get("ragen_phase", "train")),
            )
            if len(ep.prompt_ids) > self.prompt_length:
                raise ValueError(
                    f"ragen prompt of {len(ep.prompt_ids)} tokens exceeds rollout.prompt_length="
                    f"{self.prompt_length}; raise data.max_prompt_length"
                )
            extra = {
                "ragen_success": float(ep.summary["success"]),
                "ragen_return": ep.summary["return"],
                "ragen_status": ep.summary["status"],
                "ragen_truncated": len(ep.response_ids) > self.response_length,
            }
            n = self.response_length
            return AgentLoopOutput(
                prompt_ids=ep.prompt_ids,
                response_ids=ep.response_ids[:n],
                response_mask=ep.response_mask[:n],
                response_logprobs=ep.response_logprobs[:n] if ep.response_logprobs else None,
                reward_score=ep.reward_score,
                num_turns=ep.num_turns,
                metrics={"generate_sequences": time.perf_counter() - t0},
                extra_fields=extra,
            )

    return RagenAgentLoop


try:
    RagenAgentLoop = _build_verl_class()
    VERL_IMPORT_ERROR: ImportError | None = None
except ImportError as _exc:  # verl (or one of its GPU-stack imports) is not installed
    VERL_IMPORT_ERROR = _exc


def __getattr__(name: str) -> Any:
    if name == "RagenAgentLoop":
        raise ImportError(
            "RagenAgentLoop needs verl (verl-project/verl, `pip install verl` on a GPU machine with "
            f"ray and vLLM/SGLang); importing verl's agent loop failed: {VERL_IMPORT_ERROR}"
        )
    raise AttributeError(name)
