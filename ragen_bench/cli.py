"""The ``ragen-bench`` command line (typer).

ragen-bench run --policy hf --model tiny --env ragen/Sokoban-v0 --episodes 8
ragen-bench run --resume runs/<run-id>
ragen-bench run --policy random --suite procedural --episodes 16   # one run folder per env
ragen-bench run --resume runs/<suite-id>                            # each env where it stopped
ragen-bench ls
ragen-bench show runs/<run-id>
ragen-bench validate runs/<run-id>          # or single files: runs/<run-id>/episodes.jsonl
ragen-bench leaderboard add runs/<run-id> --board leaderboards/procedural.json
ragen-bench leaderboard render --board leaderboards/procedural.json
ragen-bench site leaderboards/*.json --out site/   # static leaderboard site
ragen-bench report runs/<run-id>                   # runs/<run-id>/report.html
ragen-bench compare runs/<run-a> runs/<run-b>      # paired: McNemar, bootstrap CI of the difference
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ragen_envs import jsonutil

from .cli_app import make_app
from .console import make_console, print_error
from .diagnostics.commands import RUN_OPTIONS as DIAGNOSTICS_RUN_OPTIONS
from .options import CliOption, with_options
from .runner import run_option_groups
from .suite import suites_help
from .summary_table import print_summary

# One look for both CLIs (ragen_bench.cli_app): click's plain help.
app = make_app("Evaluate any policy on any ragen environment; publish leaderboards.")
board_app = make_app("Add runs to leaderboards and render them.")
app.add_typer(board_app, name="leaderboard")
console = make_console(stderr=True)
out = make_console()
# Everything user-controlled or read from data (env ids, descriptions, paths, error
# messages) is passed through rich.markup.escape before printing: "search[query]" is
# text, not a markup tag, and "[/red]" in an argument must not raise MarkupError.


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        out.print(f"ragen-bench {__version__}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Evaluate any policy on any ragen environment; publish leaderboards."""


def _error(message: str, *, label: str = "error:") -> None:
    """Print ``label message`` on stderr; ``message`` is shown literally (escaped)."""
    print_error(console, message, label)


def _or_exit_2(fn: Any, *args: Any) -> Any:
    """``fn(*args)``; an ``OSError`` or ``ValueError`` (a missing or damaged file, a refused
    input) becomes its one ``error:`` line and exit status 2."""
    try:
        return fn(*args)
    except (OSError, ValueError) as exc:
        _error(str(exc))
        raise typer.Exit(2) from None


def _parse_kv(items: list[str] | None, what: str) -> dict[str, Any]:
    """``key=value`` strings to a dict; values are parsed as JSON when they can be.

    Raises:
        typer.BadParameter: an item without ``=``.
        ValueError: a value nested deeper than :data:`ragen_envs.jsonutil.MAX_DEPTH`.
        ValueError: a value holding ``NaN`` or an infinity (Python's JSON reader accepts
            them; no setting takes them and no JSON file may hold them).
    """
    result: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise typer.BadParameter(f"{what} must look like key=value, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            jsonutil.check_depth(raw)  # json.loads of 30,000 brackets: RecursionError
        except jsonutil.NestingTooDeep as exc:
            raise ValueError(f"{what} {key.strip()}: {exc}") from None
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        bad = jsonutil.find_nonfinite(value, key.strip())
        if bad is not None:
            raise ValueError(f"{what} {bad}: must be a finite number, got {raw!r}")
        result[key.strip()] = value
    return result


def _progress_runner(total_hint: int, enabled: bool, max_turns: int) -> Any:
    """A :class:`ragen_bench.progress.RunProgress` on stderr (or ``None`` with ``--no-progress``).

    It is drawn only once the runner calls ``on_start`` (after validation, right before the
    first episode), so a request that fails validation prints its error without a bar."""
    from .progress import RunProgress

    return RunProgress(console, total_hint, max_turns) if enabled else None


def _callbacks(bar: Any) -> dict[str, Any]:
    """The runner's progress callbacks of ``bar`` (none without one)."""
    return (
        {}
        if bar is None
        else {"progress": bar.on_episode, "on_start": bar.on_start, "on_turn": bar.on_turn}
    )


#: Flags whose parameter is named otherwise (``--policy`` fills ``backend``, the name
#: ``run.json`` and :class:`~ragen_bench.runner.RunRequest` keep).
_FLAGS = {"backend": "--policy", "backend_alias": "--backend"}


def _flag(name: str) -> str:
    """The command-line flag of parameter ``name`` of ``ragen-bench run``."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def _policy_alias(ctx: typer.Context, opts: dict[str, Any]) -> Any:
    """Fold the deprecated ``--backend`` into ``--policy`` (one ``warning:`` line) and return
    ``given(name)``: whether option ``name`` was given on the command line.

    Raises:
        typer.BadParameter: ``--policy`` and ``--backend`` both given, with different values.
    """
    from .endpoints import option_given

    old = opts.pop("backend_alias", None)
    if old is not None:
        if option_given(ctx, "backend") and opts["backend"] != old:
            raise typer.BadParameter(
                f"--policy {opts['backend']} and --backend {old} disagree; use --policy",
                param_hint="--backend",
            )
        console.print(
            escape(
                "warning: --backend is deprecated in ragen-bench run (removed in the next "
                f"release); use --policy {old}"
            ),
            soft_wrap=True,
        )
        opts["backend"] = old
    return lambda name: option_given(ctx, name) or (name == "backend" and old is not None)


def _stop(progress: Any) -> None:
    """Stop a progress display if it was started (a never-started one prints nothing)."""
    if progress is not None:
        progress.stop()


#: Options of ``ragen-bench run`` that only the command line itself reads.
_CLI_OPTIONS = (
    CliOption(
        "backend_alias",
        Optional[str],
        None,
        "Deprecated spelling of --policy (removed in the next release).",
        flags=("--backend",),
        hidden=True,
    ),
    CliOption(
        "resume",
        Optional[Path],
        None,
        "Finish an interrupted run directory; with --episodes N (larger), extend it. "
        "Other options are ignored (the run's run.json is used), except those that confirm "
        "its commands, endpoints and key variables (--base-url, --api-key-env, --vllm-python, "
        "--env-config, --policy-option; see --trust-folder).",
    ),
    CliOption(
        "trust_folder",
        bool,
        False,
        "Accept the commands (Lean verifier=repl:...), endpoints (base_url, verifier/retriever "
        "URLs), key variables (api_key_env), --vllm-python and trust_remote_code that the "
        "folder read sets: run.json on --resume, a --model folder's ragen_protocol.json. "
        "Without it each must be given again on the command line (docs/security.md).",
        flags=("--trust-folder",),
    ),
    CliOption(
        "suite",
        Optional[str],
        None,
        "Run a named suite: every env of it, each at its board's episodes and group size "
        "(--episodes / --group-size override), one run folder per env under one parent "
        f"folder (--out/--run-id), one table at the end; --resume on the parent continues "
        f"each env. With --env: only those envs of the suite. Suites: {suites_help()}.",
    ),
    CliOption(
        "saved_protocol",
        bool,
        True,
        "A trained model folder's agent protocol (ragen_protocol.json: think mode, tokens, "
        "prompt, turn limits) applies unless an option here sets it; --no-saved-protocol "
        "ignores that file and uses the env's agent defaults, as leaderboard rows that must "
        "share one protocol need.",
        flags=("--saved-protocol/--no-saved-protocol",),
    ),
    CliOption("progress", bool, True, "Show a progress bar.", flags=("--progress/--no-progress",)),
    CliOption(
        "print_json",
        bool,
        False,
        "Print summary.json to stdout at the end; stdout then holds only that JSON "
        "document (table, progress and messages go to stderr).",
        flags=("--json",),
    ),
)


@app.command()
@with_options(*run_option_groups(), (None, _CLI_OPTIONS), ("Diagnostics", DIAGNOSTICS_RUN_OPTIONS))
def run(ctx: typer.Context, **opts: Any) -> None:
    """Evaluate a policy on an environment; write runs/<run-id>/{episodes.jsonl,summary.json}.

    Several envs (--env A --env B, or --suite NAME) make a suite: runs/<run-id>/suite.json
    and one run directory per env, one table at the end; --resume on it continues each env.
    """
    from ragen_envs import ConfigError, UnknownEnvError

    from .diagnostics.commands import needs_scorer
    from .endpoints import option_given
    from .runner import plan_run, request_from_options, resume_run, start_run

    resume, progress, print_json = opts["resume"], opts["progress"], opts["print_json"]
    given_option = _policy_alias(ctx, opts)
    diagnostics, scorer = opts["diagnostics"], opts["scorer"]
    diag_policy: Any = None  # --diagnostics on hf: the run's own model scores it
    applied: Any = None  # the protocol saved with the model, if any (ragen_bench.protocol)
    bar: Any = None
    suite_done = False
    from .interrupt import sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():  # SIGTERM stops the run as Ctrl-C does (ragen_bench.interrupt)
            if resume is not None and _is_suite(resume):
                path = _resume_suite(ctx, opts, resume)
                suite_done = True
            elif resume is None and (opts["suite"] or len(opts["env"] or []) > 1):
                path = _start_suite(ctx, opts, given_option)
                suite_done = True
            elif resume is not None:
                from .results import RunDir

                if not (resume / "run.json").exists():
                    raise typer.BadParameter(
                        f"{resume} is not a run directory (no run.json) nor a suite folder "
                        "(no suite.json)",
                        param_hint="--resume",
                    )
                from .runner import resume_note

                meta = RunDir(resume).read_run()  # a damaged run.json: one line naming the file
                for line in _check_resume_values(meta, resume, opts):  # before anything is called
                    console.print(escape(line), soft_wrap=True)
                _warn_ignored(ctx)
                extend = opts["episodes"] if option_given(ctx, "episodes") else None
                bar = _progress_runner(
                    extend or meta["episodes"], progress, meta["rollout"]["max_turns"]
                )
                path = resume_run(
                    resume, episodes=extend, check=opts["preflight"], **_callbacks(bar)
                )
                _stop(bar)
                note = resume_note(meta, path)
                if note:
                    console.print(escape(note), soft_wrap=True)
            else:
                from .protocol import apply_protocol

                req = request_from_options(opts, given=given_option, parse_kv=_parse_kv)
                if opts["saved_protocol"]:
                    applied = apply_protocol(
                        req,
                        {n for n in ctx.params if option_given(ctx, n)},
                        trust=opts["trust_folder"],
                    )  # ragen_protocol.json
                    req = applied.request
                for line in [*applied.notes, applied.describe()] if applied else []:
                    if line:
                        console.print(escape(line), soft_wrap=True)
                needs_scorer(req.backend, diagnostics, scorer)
                plan = plan_run(req)  # before loading a model or drawing anything
                if diagnostics and req.backend == "hf" and scorer is None:
                    from .policies import make_policy

                    diag_policy = make_policy(req.backend, req.model, **(req.policy_options or {}))
                bar = _progress_runner(req.episodes, progress, plan.rollout.max_turns)
                path = start_run(plan, policy=diag_policy, **_callbacks(bar))
    except (UnknownEnvError, ConfigError, OSError, ValueError, ImportError) as exc:
        _stop(bar)
        _error(str(exc))
        raise typer.Exit(2) from None
    except KeyboardInterrupt as exc:
        _stop(bar)
        raise _interrupted(exc) from None
    finally:
        _stop(bar)
    if suite_done:
        _print_suite(path, print_json)
        return
    summary = json.loads((path / "summary.json").read_text())
    print_summary(
        summary, path, to=console if print_json else out, warn_to=console
    )  # --json: stdout is the JSON alone
    _exit_if_failed(path, summary, print_json)
    _warn_format(summary, applied)
    if diagnostics:
        import contextlib

        from .diagnostics.commands import after_run
        from .results import RunDir, RunLockedError

        try:
            with (
                RunDir(path).writer_lock(),
                contextlib.redirect_stdout(sys.stderr) if print_json else contextlib.nullcontext(),
            ):
                after_run(
                    path,
                    scorer=scorer,
                    policy=diag_policy,
                    num_samples=opts["diagnostics_samples"],
                    samplers=opts["diagnostics_sampler"],
                    device=opts["device"],
                    dtype=opts["dtype"],
                )
        except RunLockedError as exc:
            _error(str(exc))
            raise typer.Exit(2) from None
        summary = json.loads((path / "summary.json").read_text())
    if print_json:
        out.print_json(data=summary)


#: Options that, with --resume, confirm the run folder's directing values instead of being ignored.
_RESUME_CONFIRMING_OPTIONS = (
    "trust_folder",
    "base_url",
    "api_key_env",
    "vllm_python",
    "env_config",
    "policy_option",
)


def _check_resume_values(meta: dict[str, Any], resume: Path, opts: dict[str, Any]) -> list[str]:
    """:func:`ragen_bench.runner.check_resume_values` with this command line's confirmations."""
    from .runner import check_resume_values

    policy = {
        "base_url": opts.get("base_url") or None,
        "api_key_env": opts.get("api_key_env"),
        "python": opts.get("vllm_python"),
        **_parse_kv(opts.get("policy_option"), "--policy-option"),
    }
    confirmed = {
        **{f"policy_options.{k}": v for k, v in policy.items() if v is not None},
        **{
            f"env_config.{k}": v
            for k, v in _parse_kv(opts.get("env_config"), "--env-config").items()
        },
    }
    if "policy_options.base_url" in confirmed:
        confirmed["policy_options.base_urls"] = confirmed["policy_options.base_url"]
    return check_resume_values(
        meta, source=resume / "run.json", confirmed=confirmed, trust=opts["trust_folder"]
    )


#: Options that mean nothing for ``--resume`` (the run's own settings are used).
_RESUME_KEEPS = {
    "resume",
    "episodes",
    "progress",
    "print_json",
    "preflight",
    *_RESUME_CONFIRMING_OPTIONS,
}


def _warn_ignored(ctx: typer.Context) -> None:
    """One ``warning:`` line naming the options ``--resume`` ignores, if any were given."""
    from .endpoints import option_given

    given = {n for n in ctx.params if option_given(ctx, n)} - _RESUME_KEEPS
    if given:
        console.print(
            escape(
                f"warning: ignored with --resume (the run's run.json settings are used): "
                f"{', '.join(sorted(_flag(n) for n in given))}"
            ),
            soft_wrap=True,
        )


def _is_suite(path: Path) -> bool:
    from .suite import is_suite_dir

    return is_suite_dir(path)


def _suite_callbacks(progress: bool) -> Any:
    """The suite runner's per-run display: a ``suite i/n:`` line on stderr and a progress bar."""

    def callbacks(index: int, count: int, meta: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        console.print(
            escape(f"suite {index + 1}/{count}: {meta['env_id']} ({meta['run_id']})"),
            soft_wrap=True,
            highlight=False,
        )
        bar = _progress_runner(meta["episodes"], progress, meta["rollout"]["max_turns"])
        return _callbacks(bar), lambda: _stop(bar)

    return callbacks


def _start_suite(ctx: typer.Context, opts: dict[str, Any], given_option: Any) -> Path:
    """``ragen-bench run --suite NAME`` / ``--env A --env B …``: plan every env, then
    :func:`ragen_bench.suite.start_suite`.  Returns the suite folder.

    Raises:
        ValueError: an unknown suite (did-you-mean), an ``--env`` not in the suite,
            ``--diagnostics`` (one env at a time), a bad request of any env.
    """
    from .protocol import apply_protocol
    from .runner import check_run_id, default_run_id, plan_run, request_from_options
    from .suite import get_suite, start_suite

    name, envs = opts["suite"], list(opts["env"] or [])
    if opts["diagnostics"]:
        raise ValueError(
            "--diagnostics runs on one env; run the suite, then `ragen-bench diagnose` on a run folder"
        )
    if name is not None:
        suite = get_suite(name)
        known = {e.env_id: e for e in suite.envs}
        unknown = [e for e in envs if e not in known]
        if unknown:
            raise ValueError(f"--env {unknown[0]} is not in suite {name!r} ({', '.join(known)})")
        members = [
            (e.env_id, e.episodes, e.group_size) for e in suite.envs if not envs or e.env_id in envs
        ]
    else:
        members = [(e, None, None) for e in envs]
    if opts["run_id"] is not None:
        check_run_id(opts["run_id"])
    plans = []
    for env_id, episodes, group_size in members:
        values = {**opts, "env": env_id, "run_id": None}
        if episodes is not None and not given_option("episodes"):
            values["episodes"] = episodes
        if group_size is not None and not given_option("group_size"):
            values["group_size"] = group_size
        req = request_from_options(values, given=given_option, parse_kv=_parse_kv)
        if opts["saved_protocol"]:
            from .endpoints import option_given

            applied = apply_protocol(req, {n for n in ctx.params if option_given(ctx, n)})
            req = applied.request
            for line in [*applied.notes, applied.describe()]:
                if line:
                    console.print(escape(f"{env_id}: {line}"), soft_wrap=True)
        plans.append(plan_run(req))
    first = plans[0].request if plans else None
    label = name or "suite"
    fresh = lambda: default_run_id(label, first.model, first.backend)  # noqa: E731
    return start_suite(
        plans,
        opts["out_dir"],
        opts["run_id"] or (fresh() if first else label),
        suite=name,
        explicit_id=opts["run_id"] is not None,
        fresh_id=fresh,
        callbacks=_suite_callbacks(opts["progress"]),
    )


def _resume_suite(ctx: typer.Context, opts: dict[str, Any], path: Path) -> Path:
    """``ragen-bench run --resume <suite folder>``: each run continues where it stopped."""
    from .endpoints import option_given
    from .suite import resume_suite

    if option_given(ctx, "episodes"):
        raise ValueError(
            "--episodes cannot extend a whole suite; extend one run with "
            f"`ragen-bench run --resume {path}/<run> --episodes N`"
        )
    _warn_ignored(ctx)
    return resume_suite(
        path,
        check=opts["preflight"],
        callbacks=_suite_callbacks(opts["progress"]),
        confirm=lambda run_dir, meta: [
            console.print(escape(line), soft_wrap=True)
            for line in _check_resume_values(meta, run_dir, opts)
        ],
    )


def _print_suite(path: Path, print_json: bool) -> None:
    """The suite's table (stderr with ``--json``, whose stdout holds only the JSON document
    ``{"suite_id", "suite", "path", "runs": [{env_id, run_id, path, summary, failure}]}``);
    exit 1 when a run measured nothing."""
    from .suite import read_suite, suite_results, suite_table
    from .summary_table import env_error_warning

    meta, rows = read_suite(path), suite_results(path)
    to = console if print_json else out
    to.print(suite_table(rows, f"suite {meta['suite'] or meta['suite_id']}"))
    to.print(f"results: {escape(str(path))}")
    for row in rows:
        warning = env_error_warning(row["summary"]) if row["summary"] else None
        if warning:
            console.print(
                f"[bold red]WARNING:[/bold red] {escape(row['env_id'])}: {escape(warning)}",
                soft_wrap=True,
            )
    if print_json:
        out.print_json(
            data={
                "suite_id": meta["suite_id"],
                "suite": meta["suite"],
                "path": str(path),
                "runs": rows,
            }
        )
    failed = [r for r in rows if r["failure"]]
    for row in failed:
        _error(f"{row['env_id']}: {row['failure']}; files kept in {row['path']}")
    if failed:
        raise typer.Exit(1)


def _interrupted(exc: KeyboardInterrupt) -> typer.Exit:
    """Ctrl-C or SIGTERM: one line on stderr (what is saved, the resume command); the exit
    to raise, status 128 + the signal (130, 143)."""
    from .interrupt import RunInterrupted, exit_status, signal_label, signal_of
    from .results import RunDir

    signum = signal_of(exc)
    if isinstance(exc, RunInterrupted) and _is_suite(exc.path):
        from .suite import saved_line

        try:
            what = saved_line(exc.path)
        except (OSError, ValueError, KeyError):
            what = f"the recorded episodes are in {exc.path}"
        message = (
            f"{signal_label(signum)}: {what}; finish the suite with "
            f"`ragen-bench run --resume {exc.path}`"
        )
    elif isinstance(exc, RunInterrupted):
        path = exc.path
        try:
            meta = RunDir(path).read_run()
            saved, total = len(RunDir(path).read_episodes()), meta["episodes"]
            what = f"{saved} of {total} episodes are saved in {path}"
        except (OSError, ValueError, KeyError):
            what = f"the recorded episodes are in {path}"
        message = (
            f"{signal_label(signum)}: {what}; finish the run with `ragen-bench run --resume {path}`"
        )
    else:
        message = f"{signal_label(signum)} before the first episode: no run directory was written"
    console.print(escape(message), soft_wrap=True, highlight=False)
    return typer.Exit(exit_status(signum))


def _exit_if_failed(path: Path, summary: dict[str, Any], print_json: bool) -> None:
    """Exit 1 with one clear line when the run measured nothing (all episodes errored).

    The recorded files stay, so ``--resume`` can finish the run once the endpoint works.
    A run with only some ``endpoint_error`` episodes gets a warning and exits 0.
    """
    from .results import run_failure

    failure = run_failure(path)
    counts = summary.get("counts", {})
    if failure is None:
        n_err = counts.get("endpoint_error", 0)
        if n_err:
            console.print(
                f"[yellow]warning:[/yellow] {n_err} episode{'s' if n_err != 1 else ''} ended in "
                f"endpoint_error (not scored); finish them with `ragen-bench run --resume "
                f"{escape(str(path))}`"
            )
        return
    if print_json:
        out.print_json(data=summary)
    hint = f"; files kept in {path}"
    if counts.get("endpoint_error"):
        hint += f", finish with `ragen-bench run --resume {path}` once the policy/endpoint works"
    _error(failure + hint)
    raise typer.Exit(1)


def _warn_format(summary: dict[str, Any], applied: Any) -> None:
    """A loud warning when no response was format-valid (:func:`ragen_bench.protocol.format_valid_warning`)."""
    from .protocol import format_valid_warning

    warning = format_valid_warning(summary, applied)
    if warning:
        console.print(
            f"[bold red]WARNING:[/bold red] {escape(warning)}", soft_wrap=True, highlight=False
        )


@app.command()
def show(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print summary.json as the only thing on stdout.")
    ] = False,
) -> None:
    """Print a run's summary as a table (``--json``: as JSON).

    Exit 2 with one line naming the file when summary.json or run.json is missing or
    damaged (not strict JSON, not following its schema).
    """
    from .results import RunDir

    p = run_dir / "summary.json"
    if not p.exists():
        _error(f"{run_dir} has no summary.json")
        raise typer.Exit(2)
    try:
        summary = RunDir(
            run_dir
        ).read_summary()  # checked: a damaged file is one error line, exit 2
        RunDir(run_dir).read_run()  # the run's settings: a damaged run.json is a damaged run
    except (ValueError, OSError) as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    if as_json:
        out.print_json(data=summary)
        return
    print_summary(summary, run_dir, to=out)


@app.command("ls")
def list_envs(
    name: Annotated[
        str | None, typer.Argument(help="Only this environment (e.g. Sokoban).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List environment ids, presets, versions and the pip extra each needs (NAME: one
    environment, by name or id; `pip install 'ragen[EXTRA]'`).

    Exits 1 with a message (and close matches) when NAME matches nothing.
    """
    import difflib

    import ragen_envs

    everything = ragen_envs.list_envs()
    entries = everything
    if name is not None:
        key = name.lower()
        entries = [e for e in everything if key in (e.name.lower(), e.id.lower())]
        if not entries:
            names = sorted({e.name for e in everything} | {e.id for e in everything})
            by_lower = {n.lower(): n for n in names}
            close = [
                by_lower[c] for c in difflib.get_close_matches(key, list(by_lower), n=3, cutoff=0.5)
            ]
            hint = (
                f"; did you mean {', '.join(close)}?"
                if close
                else "; `ragen-bench ls` lists them all"
            )
            _error(f"no environment matches {name!r}{hint}")
            raise typer.Exit(1)
    from .preflight import env_extra

    if as_json:
        out.print_json(data=[{**e.as_dict(), "extra": env_extra(e.env_key)} for e in entries])
        return
    table = Table(title="ragen environments")
    for col in ("id", "version", "preset", "extra", "description"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            escape(e.id),
            str(e.version),
            escape(e.preset or "–"),
            escape(env_extra(e.env_key) or "–"),
            escape(e.description),
        )
    out.print(table)


@app.command()
def validate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Files or directories to check: run directories, ragen-train output directories, model folders, folders of leaderboards (each board), or single files (episodes.jsonl, summary.json, config.json, boards...)."
        ),
    ],
    schema: Annotated[
        str | None,
        typer.Option(
            help="Force a schema for the files named (not for a directory's files): episode | summary | run | leaderboard | metrics | train_config | train_summary | agent_protocol | suite."
        ),
    ] = None,
) -> None:
    """Check files against their JSON Schemas, one line each; exit 1 if any is invalid.

    A run directory stands for its run.json, episodes.jsonl and summary.json (each
    checked, a missing one reported invalid).  A path that does not exist: one error
    line, exit 2, nothing checked.
    """
    import jsonschema

    from .validate import dir_files, validate_file

    missing = [f for f in files if not f.exists()]
    for f in missing:
        _error(f"{f} does not exist")
    if missing:
        raise typer.Exit(2)
    bad = 0
    for given in files:
        try:
            targets = dir_files(given) if given.is_dir() else [(given, schema)]
        except ValueError as exc:
            bad += 1
            out.print(f"[red]invalid[/red] {escape(str(given))}: {escape(str(exc))}")
            continue
        for f, kind in targets:
            if not f.exists():
                bad += 1
                out.print(
                    f"[red]invalid[/red] {escape(str(f))}: missing (an unfinished run? "
                    f"finish it with `ragen-bench run --resume {escape(str(given))}`)"
                )
                continue
            try:
                kind, n = validate_file(f, kind)
                out.print(
                    f"[green]ok[/green] {escape(str(f))} ({escape(kind)}, {n} object{'s' if n != 1 else ''})"
                )
            except (jsonschema.ValidationError, ValueError, OSError) as exc:
                bad += 1
                out.print(
                    f"[red]invalid[/red] {escape(str(f))}: {escape(str(getattr(exc, 'message', exc)))}"
                )
    raise typer.Exit(1 if bad else 0)


@board_app.command("add")
def board_add(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    board: Annotated[Path, typer.Option(help="Leaderboard JSON file (created if missing).")],
    label: Annotated[
        str | None, typer.Option(help="Model name on the board (default: the run's model).")
    ] = None,
    description: Annotated[str, typer.Option(help="Description for a new board.")] = "",
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace the entry of the same label, back-end and env even when this run has fewer episodes or other seeds.",
        ),
    ] = False,
) -> None:
    """Add or update a run's entry; refuses a different env version, split or protocol, and a
    replacement with fewer episodes or other seeds (unless --replace)."""
    from .leaderboard import LeaderboardError, add_run

    try:
        entry = add_run(board, run_dir, label=label, description=description, replace=replace)
    except (LeaderboardError, FileNotFoundError) as exc:
        _error(str(exc), label="refused:")
        raise typer.Exit(1) from None
    except (ValueError, OSError) as exc:  # a damaged run.json, summary.json or board
        _error(str(exc))
        raise typer.Exit(2) from None
    out.print(
        escape(
            f"{board}: {entry['model']} on {entry['env_id']} — "
            f"success {100 * entry['metrics']['success']['mean']:.1f}%"
        )
    )


@board_app.command("render")
def board_render(board: Annotated[Path, typer.Option(help="Leaderboard JSON file.")]) -> None:
    """Print a leaderboard as markdown."""
    from .leaderboard import load_board, render_markdown

    try:
        data = load_board(board)
    except (ValueError, OSError) as exc:  # a damaged board: one line naming the file
        _error(str(exc))
        raise typer.Exit(2) from None
    if data is None:
        _error(f"no board at {board}")
        raise typer.Exit(2)
    sys.stdout.write(render_markdown(data))


@app.command("site")
def site(
    boards: Annotated[
        list[Path], typer.Argument(help="Leaderboard JSON files, e.g. leaderboards/*.json.")
    ],
    out_dir: Annotated[
        Path,
        typer.Option("--out", help="Folder of the static site (created); open DIR/index.html."),
    ] = Path("site"),
    runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--runs",
            help="Folder holding the entries' run directories "
            "(ROOT/<run_id> or ROOT/*/<run_id>); repeatable. Default: runs.",
        ),
    ] = None,
    reports: Annotated[
        bool,
        typer.Option(
            "--reports/--no-reports",
            help="Write and link a report for every entry whose run directory is found.",
        ),
    ] = True,
) -> None:
    """Publish leaderboards as a static site: an index, one sortable page per board, run reports.

    Plain HTML, CSS and a little JavaScript, no network: it opens from file:// or any static host. The same input gives byte-identical files.

    Example: ragen-bench site leaderboards/*.json --out site/ --runs runs/baselines
    """
    from .site import SiteError, build_site

    for root in runs or []:
        if not root.is_dir():  # said, not silent: the pages still build, without run links
            _error(
                f"--runs {root}: no such folder, so no entry links a run report from it",
                label="warning:",
            )
    try:
        files = build_site(boards, out_dir, runs_roots=runs or [Path("runs")], reports=reports)
    except (SiteError, OSError, ValueError, ImportError) as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    n_runs = sum(1 for f in files if f.parent.name == "runs")
    plural = lambda n, word: f"{n} {word}{'s' if n != 1 else ''}"  # noqa: E731
    out.print(
        escape(
            f"wrote {len(files)} pages to {out_dir} ({plural(len(boards), 'board')}, "
            f"{plural(n_runs, 'run report')}); open {out_dir / 'index.html'}"
        ),
        soft_wrap=True,
    )


@app.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(help="Run directory A (the baseline).")],
    run_b: Annotated[Path, typer.Argument(help="Run directory B, on the same env and seeds.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as the only thing on stdout.")
    ] = False,
) -> None:
    """Compare two runs on the same seeds, paired: success of A and B over the episodes both
    played, the difference B - A with a 95% paired-bootstrap interval and the exact McNemar
    test; again over the episodes well-formed in both runs (every answer parsed).

    Exit 2 with one line when a path is not a run directory, the runs are of different
    envs, or they share no episode.
    """
    from .compare import compare_runs, comparison_table

    result = _or_exit_2(compare_runs, run_a, run_b)
    if as_json:
        return out.print_json(data=result)
    out.print(comparison_table(result))
    if result["only_a"] or result["only_b"]:
        out.print(
            escape(
                f"{result['only_a']} episodes only in A and {result['only_b']} only in B are "
                "left out (other seeds or unfinished)"
            ),
            soft_wrap=True,
        )


@app.command("report")
def report(
    run_dir: Annotated[
        Path, typer.Argument(help="A run directory (run.json, episodes.jsonl, summary.json).")
    ],
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="The HTML file to write (default: RUN/report.html)."),
    ] = None,
) -> None:
    """Write one self-contained HTML report of a run: summary, statuses, returns, diagnostics, every episode.

    Episodes are shown as conversations (observation, think, answer, parse flags, actions with step rewards, status) and can be filtered by status and searched. No network needed.
    """
    from .report import write_run_report

    try:
        path = write_run_report(run_dir, out_file)
    except (OSError, ValueError, ImportError) as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    out.print(escape(f"wrote {path}"), soft_wrap=True)


from .diagnostics.commands import register as _register_diagnostics  # noqa: E402

_register_diagnostics(app)  # ragen-bench diagnose

from .check_command import register as _register_check_env  # noqa: E402

_register_check_env(app)  # ragen-bench check-env


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
