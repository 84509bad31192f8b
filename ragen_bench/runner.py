"""``ragen-bench run``: from arguments to a finished run directory.

:func:`start_run` creates ``runs/<run-id>/run.json`` and plays every episode;
:func:`resume_run` re-reads ``run.json`` and plays exactly the episodes that are missing
(or were recorded as ``endpoint_error``), then rewrites ``summary.json``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import ragen_envs
from ragen_envs import EnvEntry

from . import __version__
from .controls import is_control
from .model_dirs import model_fingerprint
from .options import CliOption
from .policies import POLICIES, declared_options, make_policy, policy_options
from .policies.base import Policy
from .preflight import preflight
from .protocol import LOCAL_BACKENDS
from .records import EpisodeRecord
from .redaction import redact_options
from .results import RETRY_STATUSES, RunDir, git_commit, now_iso, summarize
from .rollout import EpisodeSpec, RolloutConfig, RolloutEngine, make_specs, rollout_config
from .types import SamplingParams


@dataclass
class RunRequest:
    """Everything ``ragen-bench run`` needs (``run.json`` stores it)."""

    env_id: str
    backend: str
    model: str | None = None
    episodes: int = 32
    group_size: int = 1
    split: str = "test"
    seed: int = 0
    env_config: dict[str, Any] | None = None
    rollout: dict[str, Any] | None = None
    policy_options: dict[str, Any] | None = None
    out: str = "runs"
    run_id: str | None = None
    max_parallel: int | None = None
    preflight: bool = True  # check env packages and the endpoint before anything is created


def default_run_id(env_id: str, model: str | None, backend: str) -> str:
    """``<UTC timestamp>-<6 random hex digits>_<EnvName>_<model>``, filesystem-safe.

    The timestamp has one-second resolution, so the random suffix (24 bits from
    :mod:`secrets`) keeps two runs started in the same second apart; :func:`start_run`
    still creates the directory exclusively and draws a new id in the unlikely event
    of a collision.
    """
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    env = env_id.split("/")[-1]
    who = Path(model).name if model else backend
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{stamp}-{secrets.token_hex(3)}_{env}_{who}")


def check_run_id(run_id: str) -> None:
    """Refuse a run id that is not one plain directory name.

    Raises:
        ValueError: empty, ``.``/``..``, containing a path separator, or containing a
            control character (a newline in a run id splits log lines and tables).
    """
    bad = next((c for c in run_id if is_control(c)), None)  # C0, DEL, C1, U+2028, U+2029
    if bad is not None:
        raise ValueError(f"--run-id must not contain control characters, got {run_id!r}")
    if (
        not run_id
        or run_id in (".", "..")
        or "/" in run_id
        or (os.sep in run_id)
        or (os.altsep is not None and os.altsep in run_id)
    ):
        raise ValueError(
            f"--run-id must be a plain directory name (no path separators), got {run_id!r}"
        )


@dataclass(frozen=True)
class RunPlan:
    """A checked :class:`RunRequest`: the env id resolved once to its registry entry, the
    full env config, the rollout config and the episode specs.

    Attributes:
        request: the request.
        entry: the env's registry entry (``ragen_envs.get_entry(request.env_id)``).
        env_config: ``{"split": ..., **request.env_config}`` (validated by building the env once).
        rollout: the env's agent defaults overlaid with ``request.rollout``.
        specs: every episode of the run.
    """

    request: RunRequest
    entry: EnvEntry
    env_config: dict[str, Any]
    rollout: RolloutConfig
    specs: list[EpisodeSpec]


def plan_run(req: RunRequest) -> RunPlan:
    """Validate a request without creating anything (the env id is looked up once).

    Everything that can be checked without building the policy is checked here, so a
    bad request leaves no run directory behind.

    Raises:
        UnknownEnvError, ConfigError: bad env id or env config (the field is named).
        ValueError: episodes not a positive multiple of the group size, bad rollout or
            sampling settings, ``max_parallel < 1``, a run id that is not a plain name,
            ``backend`` ``oracle`` on an env without an oracle (its ``no_oracle_reason``).
    """
    entry = ragen_envs.get_entry(req.env_id)
    env_config = {"split": req.split, **(req.env_config or {})}
    probe = ragen_envs.make(entry.id, **env_config)  # validate the config now, naming the field
    try:
        no_oracle = getattr(probe.unwrapped, "no_oracle_reason", None)
    finally:
        probe.close()
    if req.backend == "oracle" and no_oracle:
        raise ValueError(f"--policy oracle cannot run {entry.id}: {no_oracle}")
    specs = make_specs(
        entry.id,
        episodes=req.episodes,
        group_size=req.group_size,
        seed=req.seed,
        env_config=env_config,
    )
    rollout = rollout_config(entry, req.rollout)
    if req.max_parallel is not None and req.max_parallel < 1:
        raise ValueError(f"max_parallel must be >= 1, got {req.max_parallel}")
    if req.run_id is not None:
        check_run_id(req.run_id)
    return RunPlan(req, entry, env_config, rollout, specs)


# ------------------------------------------------------- ``ragen-bench run`` options
_RUN = "Run"
_PROTOCOL = "Agent-loop protocol (default: the env's agent defaults)"

#: The options of ``ragen-bench run`` that make up a :class:`RunRequest` (``key``: its field).
REQUEST_OPTIONS: tuple[CliOption, ...] = (
    CliOption(
        "env",
        Optional[str],
        None,
        "Environment id, e.g. ragen/Sokoban-v0 (see `ragen-bench ls`).",
        key="env_id",
        flags=("--env", "-e"),
    ),
    CliOption(
        "model",
        Optional[str],
        None,
        "Model: a directory, a hub id, 'tiny' (built offline), or the served "
        "model name for endpoints.",
        flags=("--model", "-m"),
    ),
    CliOption(
        "backend", str, "hf", f"Policy back-end: {' | '.join(POLICIES)}.", flags=("--policy",)
    ),
    CliOption("episodes", int, 32, "Episodes to play (a multiple of --group-size)."),
    CliOption("group_size", int, 1, "Episodes per env seed (for pass@k)."),
    CliOption("split", str, "test", "Instance split: train | validation | test."),
    CliOption("seed", int, 0, "Base env seed; group g uses seed + g."),
    CliOption(
        "env_config",
        Optional[list[str]],
        None,
        "Env config override key=value (repeatable).",
        flags=("--env-config",),
    ),
    CliOption(
        "out_dir",
        Path,
        Path("runs"),
        "Parent folder of run directories.",
        key="out",
        flags=("--out",),
    ),
    CliOption(
        "run_id",
        Optional[str],
        None,
        "Run directory name (default: <UTC time>-<random>_<env>_<model>). "
        "An existing one is refused: use --resume.",
    ),
    CliOption(
        "max_parallel", Optional[int], None, "Episodes alive at once (default: from the back-end)."
    ),
    CliOption(
        "preflight",
        bool,
        True,
        "Before the first episode, check the env's optional packages and that the "
        "endpoint answers (exit 2, nothing written).",
        flags=("--preflight/--no-preflight",),
    ),
    CliOption(
        "endpoints",
        Optional[Path],
        None,
        "TOML file of endpoint aliases; --model ALIAS resolves through it (docs/endpoints.md).",
        flags=("--endpoints",),
    ),
    CliOption(
        "policy_option",
        Optional[list[str]],
        None,
        "Extra back-end option key=value (repeatable), e.g. max_model_len=2048.",
        flags=("--policy-option",),
    ),
)

#: The agent-loop options of ``ragen-bench run`` (``key``: the ``RunRequest.rollout`` entry,
#: ``sampling.*`` for sampling parameters).  ``None`` = the env's agent default.
ROLLOUT_OPTIONS: tuple[CliOption, ...] = (
    CliOption(
        "max_turns", Optional[int], None, "Turns per episode (default: the env's agent default)."
    ),
    CliOption(
        "max_actions_per_turn", Optional[int], None, "Actions executed per turn (default: env's)."
    ),
    CliOption(
        "temperature", float, 0.5, "Sampling temperature (0 = greedy).", key="sampling.temperature"
    ),
    CliOption("top_p", float, SamplingParams.top_p, "Nucleus sampling mass.", key="sampling.top_p"),
    CliOption(
        "max_new_tokens",
        int,
        SamplingParams.max_new_tokens,
        "Token limit per response; longer ones are truncated (invalid).",
        key="sampling.max_new_tokens",
    ),
    CliOption("context_mode", Optional[str], None, "full | last_k | single_turn."),
    CliOption("context_window", Optional[int], None, "Earlier turns kept in last_k mode."),
    CliOption(
        "max_context_tokens",
        Optional[int],
        None,
        "Prompt token budget; oldest turns dropped first.",
    ),
    CliOption(
        "think",
        bool,
        RolloutConfig.enable_think,
        "Ask for <think>…</think> before <answer>.",
        key="enable_think",
        flags=("--think/--no-think",),
    ),
    CliOption(
        "format_penalty",
        float,
        RolloutConfig.format_penalty,
        "Reward added to a turn with an invalid answer.",
    ),
    CliOption(
        "max_invalid_answers",
        Optional[int],
        None,
        "Consecutive invalid answers that end an episode.",
    ),
    CliOption(
        "answer_from_reasoning",
        bool,
        RolloutConfig.answer_from_reasoning,
        "Parse the answer from the reasoning field when the content is empty (counted in metric "
        "answer_from_reasoning_turns).",
        flags=("--answer-from-reasoning",),
    ),
)


def run_option_groups() -> list[tuple[str | None, tuple[CliOption, ...] | list[CliOption]]]:
    """``(help panel, options)`` of everything :func:`request_from_options` reads."""
    return [
        (_RUN, REQUEST_OPTIONS),
        (_PROTOCOL, ROLLOUT_OPTIONS),
        ("Back-end options", policy_options()),
    ]


def request_from_options(
    values: dict[str, Any],
    *,
    given: Callable[[str], bool],
    parse_kv: Callable[[list[str] | None, str], dict[str, Any]],
) -> RunRequest:
    """Build the :class:`RunRequest` of ``ragen-bench run`` from its option values.

    The back-end's declared options become its keyword arguments; an endpoint back-end
    (or ``--endpoints``) resolves through :func:`~ragen_bench.endpoints.resolve_endpoint`,
    whose alias sampling defaults apply where the sampling flag was not given.

    Args:
        values: option values by parameter name (every name of :func:`run_option_groups`).
        given: whether an option was given on the command line (not a default).
        parse_kv: reads ``key=value`` lists (``--env-config``, ``--policy-option``).

    Raises:
        typer.BadParameter: ``--env`` missing.  EndpointsError, ValueError: bad values.
    """
    from .endpoints import resolve_endpoint
    from .protocol import protocol_env

    backend, model = values["backend"], values["model"]
    if (
        model
        and values.get("endpoints") is None
        and backend in POLICIES
        and POLICIES.meta(backend, "check_model")
        and not Path(model).expanduser().exists()
    ):  # a missing local path: one line now, before --env is asked for or the hub is tried
        from .model_dirs import check_model_ref

        check_model_ref(model, need_config=POLICIES.meta(backend, "check_model") == "config")
    values = {**values, "env": values.get("env") or protocol_env(backend, model)}
    if not values["env"]:  # a saved model's ragen_protocol.json names the env it was trained on
        import typer

        raise typer.BadParameter("--env is required (see `ragen-bench ls`)", param_hint="--env")
    options: dict[str, Any] = {}
    sampling_defaults: dict[str, Any] = {}
    if (backend in POLICIES and POLICIES.meta(backend, "endpoint")) or values.get(
        "endpoints"
    ) is not None:
        endpoint = {opt.keyword: values.get(opt.name) for opt in policy_options(endpoint=True)}
        res = resolve_endpoint(
            backend,
            model,
            endpoints_file=values.get("endpoints"),
            backend_explicit=given("backend"),
            base_urls=endpoint.pop("base_url", None),
            api_key_env=endpoint.pop("api_key_env", None),
            cli_options=endpoint,
        )
        backend, model, sampling_defaults = res.backend, res.model, res.sampling_defaults
        if backend in POLICIES and POLICIES.meta(backend, "endpoint"):
            options.update(res.options)
    if backend in POLICIES:
        options = {**declared_options(backend, values), **options}
    options.update(parse_kv(values.get("policy_option"), "--policy-option"))
    rollout: dict[str, Any] = {"sampling": {}}
    for opt in ROLLOUT_OPTIONS:
        section, _, key = opt.keyword.rpartition(".")
        (rollout["sampling"] if section == "sampling" else rollout)[key] = values[opt.name]
    for key, value in sampling_defaults.items():  # an endpoint alias's defaults; flags win
        if key == "stop" or not given(key):
            rollout["sampling"][key] = value
    request_fields = {f.name for f in dataclasses.fields(RunRequest)}
    direct = {
        opt.keyword: values[opt.name] for opt in REQUEST_OPTIONS if opt.keyword in request_fields
    }
    direct.update(
        backend=backend,
        model=model,
        env_config=parse_kv(values.get("env_config"), "--env-config"),
        rollout=rollout,
        policy_options=options,
        out=str(values["out_dir"]),
    )
    return RunRequest(**direct)


def _exists_message(path: Path) -> str:
    if (path / "run.json").is_file():
        return (
            f"run directory {path} already exists; finish it with `ragen-bench run --resume {path}` "
            "or choose another --run-id"
        )
    return f"{path} already exists and is not a run directory; choose another --run-id or remove it"


def _create_run_dir(out: Path, run_id: str, *, fresh_id: Callable[[], str] | None) -> RunDir:
    """Create ``out/run_id`` exclusively (``mkdir(exist_ok=False)``: of two racing runs one wins).

    With ``fresh_id`` (a default id) a taken name is replaced by a new id, a few times;
    an explicit id that is taken raises.

    Raises:
        FileExistsError: the directory exists (message suggests ``--resume``).
        ValueError: ``out`` cannot hold run directories (e.g. it is a file).
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ValueError(f"--out {out} is not a directory ({exc.strerror})") from None
    for _ in range(5):
        path = out / run_id
        try:
            path.mkdir(exist_ok=False)
            return RunDir(path)
        except FileExistsError:
            if fresh_id is None:
                raise FileExistsError(_exists_message(path)) from None
            run_id = fresh_id()
    raise FileExistsError(f"could not find a free run id under {out}; pass --run-id")


def start_run(
    req: RunRequest | RunPlan,
    *,
    policy: Policy | None = None,
    progress: Callable[[EpisodeRecord, int, int], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_turn: Callable[[int, Any], None] | None = None,
) -> Path:
    """Validate, create a run directory and play all episodes.  Returns the run directory.

    ``req`` is a request or its :func:`plan_run` (then it is not checked again).
    Nothing is created until the request is valid and the policy is built; the run
    directory is then created exclusively, so a new run never appends to another
    run's ``episodes.jsonl``.  ``on_start(finished, total)`` is called once, just
    before the first episode is played (the CLI starts its progress bar there);
    ``on_turn(episode_index, turn_record)`` after every turn (:class:`RolloutEngine`).

    Raises:
        UnknownEnvError, ConfigError, ValueError: see :func:`plan_run` (before
            anything is created).
        ImportError, PreflightError: a missing optional package or an unreachable
            endpoint (:func:`ragen_bench.preflight.preflight`; before anything is created).
        FileExistsError: the run directory already exists (use ``--resume``).

    The new directory's writer lock (:meth:`RunDir.writer_lock`) is held from its
    creation until the summary is written.
    """
    plan = req if isinstance(req, RunPlan) else plan_run(req)
    req = plan.request
    # before anything is created; a policy passed in is already built (no endpoint check)
    if req.preflight:
        preflight(
            req.env_id,
            plan.env_config,
            req.seed,
            req.backend if policy is None else None,
            req.policy_options,
        )
    out = Path(req.out)
    explicit = req.run_id is not None
    run_id = req.run_id or default_run_id(req.env_id, req.model, req.backend)
    if (
        explicit and (out / run_id).exists()
    ):  # fail before loading a model; mkdir below closes the race
        raise FileExistsError(_exists_message(out / run_id))
    owned = policy is None
    policy = policy or make_policy(req.backend, req.model, **(req.policy_options or {}))
    try:
        meta = _run_meta(plan, run_id, policy)
        fresh = None if explicit else (lambda: default_run_id(req.env_id, req.model, req.backend))
        run_dir = _create_run_dir(out, run_id, fresh_id=fresh)
        with run_dir.writer_lock():  # taken before run.json exists, so no --resume can slip in
            meta["run_id"] = run_dir.path.name
            run_dir.write_run(meta)
            return _play_or_interrupted(run_dir, meta, policy, progress, on_start, on_turn)
    finally:
        if owned:
            close_policy(policy)


def _play_or_interrupted(run_dir: RunDir, *args: Any) -> Path:
    """:func:`_play`; a signal (``KeyboardInterrupt``, SIGTERM under
    :func:`ragen_bench.interrupt.sigterm_as_interrupt`) becomes
    :class:`~ragen_bench.interrupt.RunInterrupted` naming the run directory, so the CLI can
    say what was saved and how to resume."""
    from .interrupt import RunInterrupted, signal_of

    try:
        return _play(run_dir, *args)
    except RunInterrupted:
        raise
    except KeyboardInterrupt as exc:
        raise RunInterrupted(run_dir.path, signal_of(exc)) from None


def _run_meta(plan: RunPlan, run_id: str, policy: Policy) -> dict[str, Any]:
    req, env_config = plan.request, plan.env_config
    return {
        "schema_version": 1,
        "run_id": run_id,
        "created": now_iso(),
        "env_id": req.env_id,
        "env_version": plan.entry.version,
        "env_config": env_config,
        "split": env_config.get("split"),
        "episodes": req.episodes,
        "group_size": req.group_size,
        "seed": req.seed,
        "backend": req.backend,
        "model": req.model,
        "model_fingerprint": model_fingerprint(req.model)
        if req.backend in LOCAL_BACKENDS
        else None,
        "policy": policy.describe(),
        "policy_options": redact_options(req.policy_options or {}),
        "rollout": plan.rollout.as_dict(),
        "max_parallel": req.max_parallel,
        "harness_version": __version__,
        "git_commit": git_commit(),
        "sessions": [],
    }


def check_extension(meta: dict[str, Any], episodes: int | None) -> int | None:
    """The new episode count when ``--resume`` is given ``--episodes``, or ``None`` (keep the run's).

    A run is extended by playing more groups with the same base seed: group ``g`` keeps
    env seed ``seed + g``, so the recorded episodes stay part of the larger run.

    Raises:
        ValueError: fewer episodes than the run already asks for, or not a multiple of its
            group size.
    """
    if episodes is None or episodes == meta["episodes"]:
        return None
    if episodes < meta["episodes"]:
        raise ValueError(
            f"--episodes {episodes} with --resume: the run already asks for {meta['episodes']} "
            "episodes and a run cannot be shortened; start a new run instead"
        )
    if episodes % meta["group_size"]:
        raise ValueError(
            f"--episodes {episodes} with --resume must be a multiple of the run's group size "
            f"({meta['group_size']})"
        )
    return episodes


def resume_run(
    path: str | Path,
    *,
    policy: Policy | None = None,
    progress: Callable[[EpisodeRecord, int, int], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    episodes: int | None = None,
    check: bool = True,
    on_turn: Callable[[int, Any], None] | None = None,
) -> Path:
    """Finish a run: play the missing (or ``endpoint_error``) episodes, rewrite the summary.

    ``on_start`` and ``on_turn`` as in :func:`start_run`.  The run's writer lock is held from before the
    policy is built until the summary is written, so two resumes of one run cannot both
    play (and append) the same missing episodes.  ``episodes`` larger than the run's
    extends it (:func:`check_extension`; ``run.json`` records the new count and the
    session the old one).  A resume with nothing to play builds no policy and appends no
    session to ``run.json``.  ``check``: run :func:`ragen_bench.preflight.preflight` before
    building the policy.

    Raises:
        FileNotFoundError: ``path`` is not a run directory (no ``run.json``).
        RunLockedError: another process is writing this run.
        ValueError: ``episodes`` cannot extend the run (:func:`check_extension`).
    """
    run_dir = RunDir(path)
    check_extension(
        run_dir.read_run(), episodes
    )  # not a run directory / a bad count: before any lock file
    with run_dir.writer_lock():
        meta = (
            run_dir.read_run()
        )  # re-read under the lock: the previous writer may just have finished
        extended = check_extension(meta, episodes)
        if extended is not None:
            meta = {**meta, "episodes": extended, "extended_from": meta["episodes"]}
        elif (
            not run_dir.repair()
            and not missing_episodes(run_dir, meta)
            and (run_dir.path / "summary.json").is_file()
        ):
            if on_start is not None:
                on_start(meta["episodes"], meta["episodes"])
            return run_dir.path  # finished: nothing to play, nothing to record
        owned = policy is None
        if owned and check:
            preflight(
                meta["env_id"],
                meta["env_config"],
                meta["seed"],
                meta["backend"],
                meta.get("policy_options"),
            )
        policy = policy or make_policy(
            meta["backend"], meta.get("model"), **meta.get("policy_options", {})
        )
        try:
            return _play_or_interrupted(run_dir, meta, policy, progress, on_start, on_turn)
        finally:
            if owned:
                close_policy(policy)


#: Command-line options of ``ragen-bench run`` that confirm a run folder's directing values on
#: ``--resume`` (:func:`check_resume_values`), by the :class:`~ragen_bench.trust.DirectingField`
#: name they confirm.
RESUME_CONFIRMING = {
    "policy_options.base_url": "--base-url URL",
    "policy_options.base_urls": "--base-url URL",
    "policy_options.api_key_env": "--api-key-env NAME",
    "policy_options.python": "--vllm-python PATH",
    "policy_options.server_args": "--policy-option server_args=...",
    "policy_options.server_env": "--policy-option server_env=...",
    "policy_options.trust_remote_code": "--policy-option trust_remote_code=true",
    "env_config.verifier": "--env-config verifier=...",
    "env_config.api_key_env": "--env-config api_key_env=NAME",
    "env_config.retriever_url": "--env-config retriever_url=URL",
}


def check_resume_values(
    meta: dict[str, Any],
    *,
    source: str | Path,
    confirmed: dict[str, Any],
    trust: bool,
) -> list[str]:
    """Check the commands, endpoints and key variables a run folder's ``run.json`` asks a
    resume to use (:mod:`ragen_bench.trust`); returns the lines to print before anything is
    called: the origin (``scheme://host:port``) of every endpoint, and each command that will run.

    Args:
        meta: ``run.json``.  source: its path.  confirmed: the values the user gave on the
            command line, by field name (``policy_options.base_url``, ``env_config.verifier``).
        trust: ``--trust-folder`` was given.

    Raises:
        UntrustedValueError: a value the user did not confirm (one line naming the file, the
            field and how to confirm it).
    """
    from .trust import check_folder_values, directing_fields, origins

    fields = directing_fields(meta.get("env_config"), meta.get("policy_options"))
    check_folder_values(
        fields, source=str(source), confirmed=confirmed, trust=trust, how=RESUME_CONFIRMING
    )
    lines = [f"resume will call {o} (from {source})" for o in origins(fields)]
    lines += [
        f"resume will run {f.name} = {f.value!r} (from {source})"
        for f in fields
        if f.kind in ("command", "executable", "remote code")
    ]
    return lines


def resume_note(before: dict[str, Any], path: str | Path) -> str | None:
    """What a resume did, when it is not the usual "played the missing episodes": a run that
    was already complete (nothing played) or one extended to more episodes.  ``before`` is
    ``run.json`` as read before the resume."""
    after = RunDir(path).read_run()
    if len(after.get("sessions", [])) == len(before.get("sessions", [])):
        return (
            f"run {after['run_id']} is complete: all {after['episodes']} episodes are recorded, nothing was "
            "played; pass --episodes N (a larger multiple of the group size) to extend it"
        )
    if after["episodes"] != before["episodes"]:
        return f"run {after['run_id']} extended from {before['episodes']} to {after['episodes']} episodes"
    return None


def close_policy(policy: Policy) -> None:
    """Release a policy this module built: ``close()`` (stops a managed server) if it has one."""
    close = getattr(policy, "close", None)
    if callable(close):
        close()


async def _arun_and_release(
    engine: RolloutEngine, specs: list[EpisodeSpec], policy: Policy
) -> None:
    """Play ``specs``, then release the policy's per-event-loop resources (HTTP connections)."""
    try:
        await engine.arun(specs)
    finally:
        await policy.aclose()


def _endpoint_session_stats(policy: Policy, before: dict[str, Any] | None) -> dict[str, Any] | None:
    """Request counters of an endpoint policy during one session (``None`` for others)."""
    stats = getattr(policy, "stats", None)
    if not callable(stats) or before is None:
        return None
    after = stats()
    out: dict[str, Any] = {}
    for k, v in after.items():
        if isinstance(v, dict):
            delta = {kk: vv - before.get(k, {}).get(kk, 0) for kk, vv in v.items()}
            out[k] = {kk: vv for kk, vv in delta.items() if vv}
        else:
            out[k] = v - before.get(k, 0)
    return out


def _endpoint_summary(
    summary: dict[str, Any], meta: dict[str, Any], episodes: dict[int, dict[str, Any]]
) -> None:
    """Add endpoint request counters (all sessions) and the answer-from-reasoning metric."""
    from .stats import mean_with_uncertainty

    totals: dict[str, Any] = {}
    for session in meta.get("sessions", []):
        for k, v in (session.get("endpoint") or {}).items():
            if isinstance(v, dict):
                bucket = totals.setdefault(k, {})
                for kk, vv in v.items():
                    bucket[kk] = bucket.get(kk, 0) + vv
            else:
                totals[k] = totals.get(k, 0) + v
    if totals:
        summary["policy"] = {**summary.get("policy", {}), "requests": totals}
    if meta.get("rollout", {}).get("answer_from_reasoning"):
        scored = [
            e
            for e in sorted(episodes.values(), key=lambda e: e["episode_index"])
            if e["status"] not in RETRY_STATUSES
        ]
        counts = [
            sum(1 for t in e["turns"] if (t.get("extra") or {}).get("answer_from_reasoning"))
            for e in scored
        ]
        summary["metrics"]["answer_from_reasoning_turns"] = mean_with_uncertainty(
            counts, [e["group"] for e in scored]
        )


def missing_episodes(run_dir: RunDir, meta: dict[str, Any]) -> list[EpisodeSpec]:
    """The episodes of ``meta`` that ``episodes.jsonl`` lacks or holds as ``endpoint_error`` (to play)."""
    specs = make_specs(
        meta["env_id"],
        episodes=meta["episodes"],
        group_size=meta["group_size"],
        seed=meta["seed"],
        env_config=meta["env_config"],
    )
    done = {i for i, e in run_dir.read_episodes().items() if e["status"] not in RETRY_STATUSES}
    return [s for s in specs if s.index not in done]


def _play(
    run_dir: RunDir,
    meta: dict[str, Any],
    policy: Policy,
    progress: Callable[[EpisodeRecord, int, int], None] | None,
    on_start: Callable[[int, int], None] | None = None,
    on_turn: Callable[[int, Any], None] | None = None,
) -> Path:
    rollout = RolloutConfig.from_dict(meta["rollout"])
    run_dir.repair()
    todo = missing_episodes(run_dir, meta)
    total = meta["episodes"]
    done = total - len(todo)
    finished = [done]

    def on_episode(record: EpisodeRecord) -> None:
        run_dir.append(record)
        finished[0] += 1
        if progress is not None:
            progress(record, finished[0], total)

    session = {"started": now_iso(), "episodes_before": done, "to_play": len(todo)}
    if "extended_from" in meta:
        session["extended_from"] = meta.pop("extended_from")
    t0 = time.perf_counter()
    run_dir.open_for_append()
    stats = getattr(policy, "stats", None)
    stats_before = stats() if callable(stats) else None
    if on_start is not None:
        on_start(done, total)
    try:
        if todo:
            engine = RolloutEngine(
                policy,
                rollout,
                max_parallel=meta.get("max_parallel"),
                on_episode=on_episode,
                on_turn=on_turn,
            )
            asyncio.run(_arun_and_release(engine, todo, policy))
    finally:
        run_dir.close()
        session.update({"ended": now_iso(), "wall_s": round(time.perf_counter() - t0, 3)})
        endpoint = _endpoint_session_stats(policy, stats_before)
        if endpoint is not None:
            session["endpoint"] = endpoint
        meta.setdefault("sessions", []).append(session)
        run_dir.write_run(meta)
    episodes = run_dir.read_episodes()
    summary = summarize(episodes.values(), meta)
    _endpoint_summary(summary, meta, episodes)
    run_dir.write_summary(summary)
    return run_dir.path
