"""The ``ragen-train`` command line (typer).

    ragen-train quickstart                       # tiny model: SFT -> StarPO -> before/after -> plot
    ragen-train starpo --config sokoban model.path=Qwen/Qwen2.5-0.5B-Instruct optim.lr=1e-6
    ragen-train starpo --config quickstart --resume latest
    ragen-train sft --config quickstart sft.episodes=512
    ragen-train eval outputs/quickstart/final_model --episodes 64   # the training protocol and env
    ragen-train presets                          # list presets
    ragen-train show-config --config sokoban     # the resolved config as JSON
    ragen-train show-config --explain optim.lr   # a field's help, type, default, range
    ragen-train report outputs/quickstart        # outputs/quickstart/report.html

Under ``torchrun --nproc_per_node N ragen-train starpo ...`` the same command trains with
torch.distributed (gloo on CPU, NCCL on GPU).

Output: listings, configs, progress and results go to standard output; warnings, errors and
status lines (which memory allocator trains) to standard error.  A mistake in a config or an
option is one ``error: ...`` line naming the field or option, with exit status 2; a config
field written as an option (``--trainer.total_steps 3``) gets the override to write instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from ragen_bench.cli_app import make_app
from ragen_bench.console import make_console, print_error
from ragen_bench.interrupt import sigterm_as_interrupt

from .backends.registry import TRAINER_BACKENDS


def dotted_option_hint(args: list[str]) -> str | None:
    """The message for a config field written as an option, or ``None`` when there is none.

    ``--trainer.total_steps 3`` and ``--trainer.total_steps=3`` name no option (config fields
    are ``key=value`` overrides), and click's own answer suggested ``--trainer``.  No option
    of ``ragen-train`` has a dot in its name, so ``--a.b`` before a ``--`` is such a field:
    the message gives the override to write (``trainer.total_steps=3``; ``VALUE`` when no
    value follows).
    """
    for i, arg in enumerate(args):
        if arg == "--":
            return None
        name, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if "." not in name:
            continue
        if not eq:
            after = args[i + 1] if i + 1 < len(args) else ""
            value = after if after and not after.startswith("--") else "VALUE"
        return (
            f"--{name} is not an option: config fields are set as overrides without the dashes, "
            f"e.g. {name}={value} (`ragen-train show-config --explain {name}` documents the field)"
        )
    return None


class _TrainGroup(TyperGroup):
    """The ``ragen-train`` group: a config field written as an option (``--a.b value``) is one
    ``error:`` line giving the override, before click parses anything."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        hint = dotted_option_hint(args)
        if hint is not None:
            raise _error(hint)
        return super().parse_args(ctx, args)


app = make_app(
    "Train LLM agents with multi-turn RL (StarPO: PPO / GRPO and variants) on ragen environments.",
    cls=_TrainGroup,
)
console = make_console(stderr=True)  # warnings, errors and status lines
out = make_console()  # listings, progress, results


def _error(message: str, label: str = "error") -> typer.Exit:
    """Print ``label: message`` as one line on standard error; return the exit (status 2) to raise."""
    from .distributed import rank_prefix

    print_error(console, message, f"{escape(rank_prefix())}{label}:")
    return typer.Exit(2)


def _warn(message: str) -> None:
    from .distributed import rank_prefix

    console.print(
        f"{escape(rank_prefix())}[yellow]warning:[/yellow] {escape(str(message))}",
        soft_wrap=True,
    )


def _info(message: str) -> None:
    out.print(message, soft_wrap=True, markup=False, highlight=False)


def _status(message: str) -> None:
    """A status line on standard error (how the run is set up), not a result on stdout."""
    console.print(message, soft_wrap=True, markup=False, highlight=False)


def _show_version(value: bool) -> None:
    if value:
        from ragen_envs import __version__

        _info(f"ragen-train {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Print the installed ragen version and exit.",
        ),
    ] = False,
) -> None:
    """Train LLM agents with multi-turn RL (StarPO: PPO / GRPO and variants) on ragen environments."""


ConfigOpt = Annotated[
    str,
    typer.Option(
        "--config", "-c", help="A preset name (see `ragen-train presets`) or a JSON/YAML file."
    ),
]
Overrides = Annotated[
    list[str] | None,
    typer.Argument(
        help="Overrides like optim.lr=1e-5 algorithm.adv_estimator=gae "
        "(`ragen-train show-config --explain FIELD` documents every field)."
    ),
]


def _load(config: str, overrides: list[str] | None):
    from .config import TrainConfigError, load_config

    try:
        with warnings.catch_warnings(record=True) as caught:  # a renamed field: one line
            cfg = load_config(config, overrides or [])
    except TrainConfigError as exc:
        raise _error(exc, "config error") from None
    _replay(caught)
    return cfg


@app.command()
def starpo(
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            "-c",
            help=(
                "A preset name (see `ragen-train presets`) or a JSON/YAML file (default: quickstart; with --resume "
                "DIR: the run's own config.json)."
            ),
        ),
    ] = None,
    overrides: Overrides = None,
    resume: Annotated[
        str | None,
        typer.Option(
            help=(
                "A run directory (its config.json is the config), a checkpoint directory (<out_dir>/checkpoints/step_N), "
                "or 'latest': the newest intact checkpoint in trainer.out_dir (damaged newer ones are reported and "
                "skipped; docs/training.md, 'Checkpoints')."
            )
        ),
    ] = None,
    trainer_name: Annotated[
        str,
        typer.Option(
            "--trainer",
            help=f"Trainer back-end: {' | '.join(TRAINER_BACKENDS)} (docs/backends.md).",
        ),
    ] = "native",
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            hidden=True,
            help="Deprecated spelling of --trainer (removed in the next release).",
        ),
    ] = None,
    trust_folder: Annotated[bool, typer.Option("--trust-folder", help=TRUST_HELP)] = False,
) -> None:
    """Train with StarPO (rollout -> filter -> advantages -> PPO/GRPO update), with validation and checkpoints."""
    loaded: list[Any] = []  # the config, once read: what an interrupt while loading reports
    try:
        with sigterm_as_interrupt():
            cfg, resume, backend, trainer = _start_starpo(
                config, overrides, resume, trainer_name, backend, loaded, trust_folder
            )
    except KeyboardInterrupt as exc:  # Ctrl-C while torch, the model or the sampler load
        raise _interrupted_while_loading(loaded[0] if loaded else None, resume, exc) from None
    if trainer is None:
        _external_backend(backend, cfg, resume)
        return
    try:
        with _clean_warnings(), sigterm_as_interrupt():
            last = trainer.fit()
    except KeyboardInterrupt as exc:
        raise _interrupted(cfg, "starpo", exc) from None
    except RuntimeError as exc:  # a collective timed out: one line naming this rank
        from .distributed import failure_message

        msg = failure_message(exc, cfg.trainer.dist_timeout_s)
        if msg is None:
            raise
        print_error(console, msg, "error:")
        os._exit(3)  # the process group cannot be torn down with a peer gone; no atexit hang
    trainer.close()  # every rank: leave the process group before the interpreter ends
    if trainer.dist.is_main:
        from .plot import plot_metrics

        png = plot_metrics(
            Path(cfg.trainer.out_dir) / "metrics.jsonl",
            Path(cfg.trainer.out_dir) / "training_curves.png",
            title=f"{cfg.name}: {cfg.env.id}",
        )
        _info(
            f"done: {cfg.trainer.out_dir} (model: {Path(cfg.trainer.out_dir) / 'final_model'}; curves: {png}); "
            "last validation: " + _val_text(last or _logged_val(Path(cfg.trainer.out_dir)))
        )


def _start_starpo(
    config: str | None,
    overrides: list[str] | None,
    resume: str | None,
    trainer_name: str,
    backend: str | None,
    loaded: list[Any],
    trust_folder: bool = False,
) -> tuple[Any, str | None, str, Any]:
    """Everything of ``starpo`` before training: the config (appended to ``loaded`` once
    read), the allocator, the env checks, then the native trainer with its model and sampler
    (seconds to minutes).  Returns ``(cfg, resume, trainer back-end, trainer)``; the trainer
    is ``None`` for an external back-end, which loads its own model."""
    from .config import TrainConfigError

    _restart_for_allocator(lambda: _load_for_resume(config, overrides, resume)[0])
    backend = _trainer_option(trainer_name, backend)
    cfg, resume_arg = _load_for_resume(config, overrides, resume)
    loaded.append(cfg)
    _check_config_values(cfg, config, resume, overrides, trust_folder)  # before any env starts
    resume = resume_arg
    _use_allocator(cfg)
    _warn_gpu_preset_on_cpu(config, cfg)
    _preflight_envs(cfg)
    if backend != "native":
        return cfg, resume, backend, None
    from .trainer import StarPOTrainer  # torch and transformers: seconds

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            trainer = StarPOTrainer(cfg, resume=resume)
        _replay(caught)
        if trainer.resumed_from is not None and trainer.dist.is_main:
            _info(f"resuming from {trainer.resumed_from.path} (step {trainer.resumed_from.step})")
    except (FileNotFoundError, FileExistsError) as exc:
        raise _error(exc) from None
    except TrainConfigError as exc:
        raise _error(exc, "config error") from None
    return cfg, resume, backend, trainer


def _interrupted_while_loading(cfg, resume: str | None, exc: BaseException) -> typer.Exit:
    """Ctrl-C or SIGTERM before the first step (torch, the model and the sampler loading): the
    same one ``interrupted:`` line as during training, saying that nothing was trained and
    what to run; the exit to raise (130 / 143)."""
    from ragen_bench.interrupt import exit_status, signal_label, signal_of

    signum = signal_of(exc)
    reason = signal_label(signum)
    if cfg is None:
        line = f"{reason}: nothing was trained or saved (stopped while starting); run it again"
    elif resume:  # the checkpoint it resumes from is untouched
        line = _interrupt_line(cfg, "starpo", signum)
    else:
        line = (
            f"{reason}: nothing to resume in {cfg.trainer.out_dir} — stopped while loading the "
            "model and sampler, before step 1; run the same command again"
        )
    console.print(escape(line), soft_wrap=True)
    return typer.Exit(exit_status(signum))


TRUST_HELP = (
    "Accept the commands (Lean env.config.verifier=repl:...), endpoints and key variables "
    "(api_key_env) of the config this command reads from a run or model folder, or a command "
    "in a -c FILE, without giving them again as overrides (docs/security.md)."
)


def _check_config_values(cfg, config, resume, overrides, trust: bool) -> None:
    """:func:`ragen_train.resume.check_config_values`: print what will run or be called;
    an unconfirmed value is one ``error:`` line (exit 2)."""
    from ragen_bench.trust import UntrustedValueError

    from .resume import check_config_values

    try:
        lines = check_config_values(
            cfg, config=config, resume=resume, overrides=overrides, trust=trust
        )
    except UntrustedValueError as exc:
        raise _error(exc) from None
    for line in lines:
        _info(line)


def _trainer_option(trainer_name: str, backend: str | None) -> str:
    """The trainer back-end chosen with ``--trainer``, or with the deprecated ``--backend``
    (in ``ragen-bench`` ``--backend`` names a policy; here it named the trainer)."""
    if backend is None:
        return trainer_name
    if trainer_name != "native" and trainer_name != backend:
        raise _error(f"--trainer {trainer_name} and --backend {backend} disagree; use --trainer")
    _warn(
        f"--backend is deprecated in ragen-train (removed in the next release); use --trainer {backend}"
    )
    return backend


def _warn_gpu_preset_on_cpu(config: str | None, cfg) -> None:
    """One warning when a GPU-scale preset (``model.device=cuda``) is run on the CPU: it plays
    the same episodes (:func:`workload`), which takes hours to days there."""
    from .presets import PRESETS

    if config not in PRESETS or cfg.model.device != "cpu":
        return
    if not PRESETS[config]().model.device.startswith("cuda"):
        return
    train, val = workload(cfg)
    _warn(
        f"{config} is a GPU-scale preset run on the CPU: {_count(train)} training and "
        f"{_count(val)} validation episodes (lower trainer.total_steps, rollout.env_groups, "
        "trainer.val_episodes for a try; progress lines come every 15 s)"
    )


def _load_for_resume(config: str | None, overrides: list[str] | None, resume: str | None):
    """The config and the trainer's ``resume`` argument for ``starpo`` (:mod:`ragen_train.resume`):
    ``--resume DIR`` without ``--config`` reads the run's own config, overrides on top."""
    from .config import StarPOConfig, TrainConfigError, apply_overrides, from_dict
    from .resume import resume_target

    target = resume_target(resume) if resume and config is None else None
    if target is None or (target.config_path is None and target.state_config is None):
        return _load(config or "quickstart", overrides), resume
    extra = list(overrides or [])
    if target.run_dir is not None:
        extra.insert(
            0, f"trainer.out_dir={target.run_dir}"
        )  # where the run is now (it may have moved)
    try:
        if target.config_path is not None:
            cfg = _load(str(target.config_path), extra)
        else:
            cfg = apply_overrides(from_dict(StarPOConfig, target.state_config), extra)
    except TrainConfigError as exc:
        raise _error(exc, "config error") from None
    _info(
        f"config: {target.config_path or Path(target.resume) / 'state.json'} (the resumed run's own; "
        "overrides on the command line apply on top)"
    )
    return cfg, target.resume


def _preflight_envs(cfg) -> None:
    """Check every training and validation env of ``cfg`` before a model is loaded, as
    ``ragen-bench run`` does (:func:`ragen_bench.preflight.check_env`: one ``reset`` of seed
    ``trainer.seed``, then the env's ``check_ready()``, which for Lean asks its verifier);
    without it an unreachable Lean verifier was found only after every episode of the first
    step had failed (minutes).  Raises the exit (status 2) after one ``error:`` line."""
    from ragen_bench.preflight import PreflightError, check_env
    from ragen_envs import ConfigError, UnknownEnvError

    from .multienv import train_envs, val_envs

    checked: set[tuple[str, str]] = set()
    for split, slots in (
        (cfg.env.train_split, train_envs(cfg)),
        (cfg.env.val_split, val_envs(cfg)),
    ):
        for slot in slots:
            key = (slot.id, json.dumps(slot.config, sort_keys=True, default=str))
            if key in checked:
                continue
            checked.add(key)
            try:
                check_env(slot.id, {**slot.config, "split": split}, cfg.trainer.seed)
            except (PreflightError, ImportError, ConfigError, UnknownEnvError, ValueError) as exc:
                raise _error(" ".join(str(exc).split())) from None


def _external_backend(name: str, cfg, resume: str | None) -> None:
    """Train ``cfg`` with the ``trl`` or ``verl`` back-end (ragen_train.backends)."""
    from .backends import get_backend
    from .config import TrainConfigError

    try:
        chosen = get_backend(name)
    except KeyError as exc:
        raise _error(exc.args[0]) from None
    if resume and not TRAINER_BACKENDS.meta(name, "resume", False):
        raise _error(
            f"--resume is supported by the {' and '.join(TRAINER_BACKENDS.names(resume=True))} "
            f"back-ends, not {name!r}"
        )
    try:
        with _clean_warnings():
            result = chosen.train(cfg, resume=resume) if resume else chosen.train(cfg)
    except FileNotFoundError as exc:
        raise _error(exc) from None
    except (ImportError, TrainConfigError) as exc:
        raise _error(exc, f"{name} back-end") from None
    if int(os.environ.get("RANK", "0")) != 0:  # one summary line per run, not per process
        return
    _info(
        f"done ({name}): metrics {result.metrics_path}; model {result.checkpoint_dir}; last validation: "
        + _val_text(result.last_val)
    )


def _interrupted(cfg, command: str, exc: BaseException | None = None) -> typer.Exit:
    """Ctrl-C or SIGTERM (:mod:`ragen_bench.interrupt`): one line on standard error saying what
    was saved and how to ``--resume``; the exit to raise (status 130 for SIGINT, 143 for
    SIGTERM, as a shell reports them)."""
    from ragen_bench.interrupt import exit_status, signal_of

    signum = signal_of(exc) if exc is not None else 2
    console.print(escape(_interrupt_line(cfg, command, signum)), soft_wrap=True)
    return typer.Exit(exit_status(signum))


def _interrupt_line(cfg, command: str, signum: int) -> str:
    """:func:`ragen_train.resume.interrupted_message` of ``cfg``'s run for signal ``signum``."""
    from ragen_bench.interrupt import signal_label

    from .resume import interrupted_message

    return interrupted_message(
        cfg.trainer.out_dir, cfg.trainer.save_every, command=command, reason=signal_label(signum)
    )


def _logged_val(out_dir: Path) -> dict[str, float]:
    """The last validation row of ``out_dir/metrics.jsonl`` (a resumed run that was already
    finished validates nothing new), or ``{}``."""
    from .logger import read_metrics

    try:
        rows = read_metrics(out_dir / "metrics.jsonl")
    except (OSError, ValueError):
        return {}
    return next((r for r in reversed(rows) if r.get("phase") == "val"), {})


def _val_text(last: dict[str, float]) -> str:
    parts = [f"{k}={v:.3f}" for k, v in last.items() if k in ("val/success", "val/return")]
    return ", ".join(parts) if parts else "none (trainer.val_every=0)"


#: Warnings shown as one ``warning:`` line: ours (RuntimeWarning) and renamed fields
#: (FutureWarning, :data:`ragen_train.config.RENAMED_FIELDS`).
_OUR_WARNINGS = (RuntimeWarning, FutureWarning)


@contextlib.contextmanager
def _clean_warnings() -> Iterator[None]:
    """While training, show our warnings (RuntimeWarning: "no learning signal", "stopping: ...")
    as one ``warning:`` line each on standard error when they happen, not in Python's
    default format (``file:line: RuntimeWarning: ...`` plus the source line that called
    ``warnings.warn``); other categories keep Python's format.  Python's filters still
    decide what is shown (once per call site by default)."""
    with warnings.catch_warnings():  # restores warnings.showwarning on exit
        python_format = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - warnings' signature
            if issubclass(category, _OUR_WARNINGS):
                _warn(str(message))
            else:
                python_format(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _replay(caught: list[warnings.WarningMessage]) -> None:
    """Show warnings recorded while setting up: ours (RuntimeWarning) as one ``warning:``
    line each, others in Python's usual format."""
    for w in caught:
        if issubclass(w.category, _OUR_WARNINGS):
            _warn(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


@app.command()
def sft(
    config: ConfigOpt = "quickstart",
    overrides: Overrides = None,
    out: Annotated[
        Path | None, typer.Option(help="Where to save the model (default: <out_dir>/sft_model).")
    ] = None,
) -> None:
    """Supervised warm start on oracle (or mixed, or JSONL) demonstrations, with StarPO's masks."""
    from ragen_bench.rollout import rollout_config

    from .checkpoint import save_model
    from .config import TrainConfigError
    from .logger import MetricLogger
    from .modeling import check_device, load_policy, load_tokenizer
    from .sft import sft_samples, sft_train

    _restart_for_allocator(lambda: _load(config, overrides))
    cfg = _load(config, overrides)
    _use_allocator(cfg)
    dest = out or Path(cfg.trainer.out_dir) / "sft_model"
    log_dir = Path(cfg.trainer.out_dir) / "sft"
    for taken in (dest, log_dir / "metrics.jsonl"):
        if taken.exists() and not cfg.trainer.overwrite:
            raise _error(
                FileExistsError(
                    f"{taken} already exists (an earlier SFT run); choose another "
                    "trainer.out_dir, or set trainer.overwrite=true to replace it"
                )
            )
    try:
        check_device(cfg.model.device)
        tok = load_tokenizer(cfg.model.path)
        model = load_policy(cfg.model)
    except TrainConfigError as exc:
        raise _error(exc, "config error") from None
    samples = sft_samples(cfg, tok, rollout_config(cfg.env.id, cfg.rollout, temperature=1.0))
    _info(f"{len(samples)} demonstration samples")
    if (log_dir / "metrics.jsonl").exists():
        (log_dir / "metrics.jsonl").unlink()  # only reached with trainer.overwrite=true
    log = MetricLogger(log_dir, ["jsonl", "console"])
    hist = sft_train(
        model,
        tok,
        samples,
        cfg,
        device=cfg.model.device,
        log=lambda s, row: log.log(s, row, phase="sft") if s % 10 == 0 else None,
    )
    log.close()
    save_model(model, tok, dest, config=cfg.to_dict())  # atomic: complete or absent after a crash
    # `ragen-train eval <dest>` reads the protocol from the config next to the model folder.
    cfg_file = dest.parent / "config.json"
    if not cfg_file.exists() or cfg.trainer.overwrite:
        from ragen_bench.fileio import atomic_write_json

        atomic_write_json(cfg_file, cfg.to_dict())
    _info(f"SFT: {len(hist)} steps, final loss {hist[-1]['sft/loss']:.4f}; model saved to {dest}")


@app.command("eval")
def evaluate(
    checkpoint: Annotated[
        Path,
        typer.Argument(
            help="A model folder: <out_dir>/final_model, <out_dir>/sft_model or "
            "<out_dir>/checkpoints/step_N/model."
        ),
    ],
    env: Annotated[
        str | None, typer.Option(help="Environment id (default: the trained env).")
    ] = None,
    episodes: Annotated[int, typer.Option(help="Episodes.")] = 64,
    split: Annotated[
        str | None,
        typer.Option(
            help="train | validation | test (default: the training "
            "config's env.test_split, else test)."
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            help="Sampling temperature (default: the training "
            "config's trainer.val_temperature, else 0.5)."
        ),
    ] = None,
    max_new_tokens: Annotated[
        int | None,
        typer.Option(
            help="Tokens per response (default: the training "
            "config's rollout.max_new_tokens, else 64)."
        ),
    ] = None,
    context_mode: Annotated[
        str | None,
        typer.Option(
            help="full | last_k | single_turn (default: the training config's, else the env's)."
        ),
    ] = None,
    think: Annotated[
        bool | None,
        typer.Option(
            "--think/--no-think",
            help="Think mode (default: the training config's rollout.enable_think).",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            help="cpu | cuda | cuda:N (default: the training config's "
            "model.device when available here, else cpu)."
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Parent folder of the run directory.")
    ] = Path("runs"),
    base: Annotated[
        str | None,
        typer.Option(
            help="Base model of a LoRA adapter folder (default: its adapter_config.json's, "
            "else the training config's model.path)."
        ),
    ] = None,
    trust_folder: Annotated[bool, typer.Option("--trust-folder", help=TRUST_HELP)] = False,
) -> None:
    """Evaluate a model folder with the agent-loop protocol, env and env config it was trained with
    (from the run's config.json; options override single settings). Writes a normal ragen-bench run."""
    from ragen_bench.model_dirs import folder_hint, is_model_folder
    from ragen_bench.runner import RunRequest, start_run
    from ragen_bench.summary_table import print_summary
    from ragen_envs import UnknownEnvError
    from ragen_envs.config import ConfigError as EnvConfigError

    from .evaluation import EvalSetupError, plan_eval

    if checkpoint.is_dir() and not is_model_folder(checkpoint) and folder_hint(checkpoint):
        raise _error(f"CHECKPOINT: {folder_hint(checkpoint)}")
    try:
        plan = plan_eval(
            checkpoint,
            env=env,
            split=split,
            episodes=episodes,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            context_mode=context_mode,
            think=think,
            device=device,
            trust=trust_folder,
        )
    except EvalSetupError as exc:
        raise _error(exc) from None
    for note in plan.notes:
        _warn(note)
    _info(plan.describe())
    req = RunRequest(
        env_id=plan.env_id,
        backend="hf",
        model=str(checkpoint),
        episodes=plan.episodes,
        split=plan.split,
        env_config=plan.env_config or None,
        rollout=plan.rollout,
        policy_options={
            "device": plan.device,
            "dtype": plan.dtype,
            **({"base": base} if base else {}),
        },
        out=str(out_dir),
    )
    from ragen_bench.progress import RunProgress

    bar = RunProgress(console, plan.episodes, plan.resolved.max_turns)
    live = (
        {"progress": bar.on_episode, "on_start": bar.on_start, "on_turn": bar.on_turn}
        if console.is_terminal  # a progress bar on a terminal; logs and pipes stay clean
        else {}
    )
    try:
        with sigterm_as_interrupt():
            path = start_run(req, **live)
    except EnvConfigError as exc:
        where = f"env.config in {plan.source}" if plan.source and plan.env_config else "--env"
        raise _error(f"{where}: {exc}") from None
    except (UnknownEnvError, FileExistsError, ValueError) as exc:  # as ragen-bench run
        raise _error(exc) from None
    except KeyboardInterrupt as exc:  # one line: what is saved, how to finish (as ragen-bench run)
        from ragen_bench.cli import _interrupted as run_interrupted

        bar.stop()
        raise run_interrupted(exc) from None
    finally:
        bar.stop()
    print_summary(json.loads((path / "summary.json").read_text()), path, to=out, warn_to=console)


@app.command()
def quickstart(overrides: Overrides = None, config: ConfigOpt = "quickstart") -> None:
    """Tiny model, SFT warm start, StarPO, evaluation before and after on held-out seeds, training curves.

    A recipe: it replaces an earlier run in the same trainer.out_dir (trainer.overwrite=true).
    """
    from .config import TrainConfigError
    from .pipeline import run_sft_then_starpo

    cfg = _load(config, ["trainer.overwrite=true", *(overrides or [])])
    _preflight_envs(cfg)
    try:
        with _clean_warnings(), sigterm_as_interrupt():
            res = run_sft_then_starpo(cfg, log=_info)
    except TrainConfigError as exc:
        raise _error(exc, "config error") from None
    except KeyboardInterrupt as exc:
        raise _interrupted(cfg, "quickstart", exc) from None
    b, a = res.before.get("test/success", 0.0), res.after.get("test/success", 0.0)
    out.print(
        f"\n[bold]held-out success ({escape(cfg.env.id)}, {cfg.env.test_split} split):[/bold] "
        f"after SFT {b:.3f} -> after StarPO {a:.3f}",
        soft_wrap=True,
    )
    _info(
        f"curves: {res.plot}; summary: {res.out_dir / 'summary.json'}; wall time {res.wall_s:.0f} s"
    )


@app.command()
def presets() -> None:
    """List the named presets, then the names algorithm.adv_estimator, loss_agg_mode and kl_estimator take."""
    from .advantages import ADVANTAGE_ESTIMATORS
    from .losses import AGG_MODES, KL_ESTIMATORS
    from .presets import PRESETS

    rows = []
    for name in sorted(PRESETS):
        cfg = PRESETS[name]()
        train, val = workload(cfg)
        rows.append(
            (
                name,
                "GPU" if cfg.model.device.startswith("cuda") else "CPU",
                f"env={cfg.env.id}",
                f"model={cfg.model.path}",
                f"estimator={cfg.algorithm.adv_estimator}",
                f"episodes={_count(train)} train + {_count(val)} val",
            )
        )
    for line in aligned_rows(rows):
        _info(line)
    _info(
        "\nGPU: a GPU-scale preset (model.device=cuda; RAGEN's recipes, vLLM rollouts); on a CPU "
        "(model.device=cpu) it plays the same episodes at CPU speed, hours to days. "
        "episodes: what a full run plays (trainer.total_steps x rollout.env_groups x "
        "rollout.group_size, and the validations)."
    )
    critic = set(ADVANTAGE_ESTIMATORS.names(needs_critic=True))
    _info(
        "\nalgorithm.adv_estimator: "
        + ", ".join(f"{n} (critic)" if n in critic else n for n in ADVANTAGE_ESTIMATORS)
    )
    _info("algorithm.loss_agg_mode: " + ", ".join(AGG_MODES))
    _info("algorithm.kl_estimator:  " + ", ".join(KL_ESTIMATORS))


def workload(cfg) -> tuple[int, int]:
    """``(training episodes, validation episodes)`` a full run of ``cfg`` plays: every step
    plays ``env_groups x group_size`` episodes; a validation (before step 1 when
    ``val_before_train``, every ``val_every`` steps and at the last) plays ``val_episodes``
    per validation env (:meth:`ragen_train.trainer.StarPOTrainer.fit`)."""
    from .config import validation_episodes

    t, r = cfg.trainer, cfg.rollout
    train = t.total_steps * r.env_groups * r.group_size
    if t.val_every <= 0:
        return train, 0
    checks = t.total_steps // t.val_every + (1 if t.total_steps % t.val_every else 0)
    checks += 1 if t.val_before_train else 0
    return train, checks * (validation_episodes(cfg.to_dict()) or t.val_episodes)


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def aligned_rows(rows: list[tuple[str, ...]], gap: int = 2) -> list[str]:
    """Plain-text rows with every column as wide as its longest cell (``gap`` spaces
    between columns, no trailing spaces): a fixed width broke the columns for names over
    22 characters.  Plain text, not a rich table, so that ``| grep`` sees whole rows."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    sep = " " * gap
    return [sep.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


@app.command("show-config")
def show_config(
    config: ConfigOpt = "quickstart",
    overrides: Overrides = None,
    explain: Annotated[
        str | None,
        typer.Option(
            "--explain",
            metavar="FIELD",
            help="Instead of the JSON, explain a field (optim.lr), every field of a section "
            "(optim, rollout.vllm) or of the whole config (all): help, type, default, allowed "
            "values and the value in this config.",
        ),
    ] = None,
) -> None:
    """Print the resolved config as JSON, or explain its fields (--explain)."""
    cfg = _load(config, overrides)
    if explain is None:
        typer.echo(json.dumps(cfg.to_dict(), indent=2))
        return
    from .config import TrainConfigError, explain_fields

    try:
        text = explain_fields(explain, cfg)
    except TrainConfigError as exc:
        raise _error(exc) from None
    _info(text)


@app.command("report")
def report(
    out_dir: Annotated[
        Path,
        typer.Argument(help="A training output directory (trainer.out_dir, with metrics.jsonl)."),
    ],
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="The HTML file to write (default: OUT_DIR/report.html)."),
    ] = None,
    eval_run: Annotated[
        list[Path] | None,
        typer.Option("--eval", help="An evaluation run directory to link (repeatable)."),
    ] = None,
    runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--runs",
            help="Folder searched for evaluation runs of a model inside OUT_DIR "
            "(ROOT/* and ROOT/*/*); repeatable. Default: runs.",
        ),
    ] = None,
    smooth: Annotated[
        float,
        typer.Option(
            help="EMA weight of the curves in [0, 1) (0: raw only); raw points stay, faint."
        ),
    ] = 0.6,
    compare: Annotated[
        list[Path] | None,
        typer.Option(
            "--compare",
            help="Another training output directory whose curves are overlaid, dashed (repeatable).",
        ),
    ] = None,
) -> None:
    """Write an HTML report of a training run: config, before/after evaluation, interactive training curves, links to evaluation reports.

    The curves are those of training_curves.png (hover for values, tick series on and off), plus every other logged metric. The evaluation runs get their own reports beside this one (eval_reports/). No network needed.
    """
    from .report import write_train_report

    for root in runs or []:
        if not root.is_dir():  # said, not silent: the report still builds
            _warn(f"--runs {root}: no such folder, so no evaluation run is found there")
    try:
        files = write_train_report(
            out_dir,
            out_file,
            eval_runs=eval_run or [],
            runs_roots=runs or [Path("runs")],
            smooth=smooth,
            compare=compare or [],
        )
    except (OSError, ValueError, ImportError) as exc:
        raise _error(exc) from None
    _info(f"wrote {files[0]} ({len(files) - 1} evaluation report{'s' if len(files) != 2 else ''})")


#: Set by :func:`main`: only a real process entry restarts itself with another memory
#: allocator (:mod:`ragen_train.allocator`); an in-process caller (tests, notebooks) never does.
_MAY_RESTART = False


def _restart_for_allocator(load: Callable[[], Any]) -> None:
    """Before the command prints anything: load the config quietly and restart with
    tcmalloc/jemalloc preloaded when ``trainer.allocator`` asks for it (process entry only),
    so warnings and messages come once, from the restarted process. Any problem here is left
    to the command's own, loud, load."""
    if not _MAY_RESTART:
        return
    from .allocator import AllocatorError, plan, restart

    sink = io.StringIO()
    try:
        with (
            warnings.catch_warnings(record=True),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            cfg = load()
    except (Exception, typer.Exit):  # reported by the command's own load
        return
    with contextlib.suppress(AllocatorError):  # reported by _use_allocator
        p = plan(cfg.trainer.allocator, cfg.model.device)
        if p.reexec:
            restart(p)


def _use_allocator(cfg) -> None:
    """Apply ``trainer.allocator`` (tcmalloc/jemalloc preloaded by a restart, or glibc's mmap
    threshold; process entry only) and say which allocator trains (CPU runs, first rank)."""
    from .allocator import AllocatorError, maybe_reexec, plan

    try:
        p = (maybe_reexec if _MAY_RESTART else plan)(cfg.trainer.allocator, cfg.model.device)
    except AllocatorError as exc:
        raise _error(exc, "config error") from None
    if (
        _MAY_RESTART
        and str(cfg.model.device).startswith("cpu")
        and os.environ.get("RANK", "0") == "0"
    ):
        _status(f"memory allocator: {p.reason}")


def main() -> None:
    """Console-script entry point."""
    global _MAY_RESTART
    _MAY_RESTART = True
    app()


if __name__ == "__main__":
    main()
