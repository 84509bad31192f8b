"""A suite: one policy on several environments in one command (``ragen-bench run --suite``).

``ragen-bench run --env A --env B …`` or ``--suite NAME`` writes one parent folder::

    runs/<suite-id>/suite.json              which runs make up the suite (schemas/suite.schema.json)
    runs/<suite-id>/<suite-id>-<Env-vN>/    one ordinary run directory per env

Every member's ``run.json`` is written before the first episode is played, with the
policy built once for the whole suite; the members are then played one after another.
``ragen-bench run --resume runs/<suite-id>`` resumes each member where it stopped
(:func:`ragen_bench.runner.resume_run`: a finished member is left alone), so a suite
interrupted in its third env loses no finished episode of any env.

Named suites (:data:`SUITES`) are the leaderboards' env families, each env with its
board's protocol (episodes and group size), so ``--suite boards`` reproduces the
boards' rows; ``--episodes`` / ``--group-size`` on the command line override it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .interrupt import RunInterrupted, signal_of
from .results import RunDir, git_commit, now_iso, run_failure

SUITE_FILE = "suite.json"


@dataclass(frozen=True)
class SuiteEnv:
    """One env of a named suite, with its board's protocol.

    Attributes:
        env_id: the registered env id.
        episodes: episodes per run (a multiple of ``group_size``).
        group_size: episodes per env seed.
        board: the leaderboard file stem the row belongs to (``leaderboards/<board>.json``).
    """

    env_id: str
    episodes: int
    group_size: int
    board: str


@dataclass(frozen=True)
class Suite:
    """A named list of envs (:data:`SUITES`)."""

    name: str
    description: str
    envs: tuple[SuiteEnv, ...]


def _family(board: str, episodes: int, group_size: int, *envs: str) -> tuple[SuiteEnv, ...]:
    return tuple(SuiteEnv(e, episodes, group_size, board) for e in envs)


_PROCEDURAL = _family(
    "procedural",
    256,
    4,
    "ragen/Sokoban-v0",
    "ragen/FrozenLake-v0",
    "ragen/Bandit-v0",
    "ragen/Countdown-v0",
    "ragen/Sudoku-v0",
)
_GAMES = _family("games", 256, 4, "ragen/2048-v0", "ragen/RubiksCube-v0")
_DATA = _family(
    "data",
    128,
    1,
    "ragen/MetaMathQA-v0",
    "ragen/DeepCoder-v0",
    "ragen/SearchQA-v0",
    "ragen/WebShop-v0",
)

#: The named suites: the leaderboards' families (each env at its board's protocol) and
#: all of them together.  Lean is on the data board only with a real verifier, so no
#: named suite holds it (``--env ragen/Lean-v0 --env-config verifier=…``).
SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("procedural", "leaderboards/procedural.json: 64 seeds x 4", _PROCEDURAL),
        Suite("games", "leaderboards/games.json: 64 seeds x 4", _GAMES),
        Suite("data", "leaderboards/data.json: 128 instances", _DATA),
        Suite("boards", "every env of the three boards", _PROCEDURAL + _GAMES + _DATA),
    )
}


class UnknownSuiteError(ValueError):
    """``--suite NAME`` names no suite of :data:`SUITES` (the message lists them)."""


def suites_help() -> str:
    """One line per named suite (``name: env names (description)``), for ``--help``."""
    return "; ".join(
        f"{s.name}: {', '.join(e.env_id.split('/')[-1] for e in s.envs)}" for s in SUITES.values()
    )


def get_suite(name: str) -> Suite:
    """The suite called ``name``.

    Raises:
        UnknownSuiteError: no such suite; the message names close matches and every suite.
    """
    if name in SUITES:
        return SUITES[name]
    close = difflib.get_close_matches(name, list(SUITES), n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UnknownSuiteError(
        f"--suite {name!r} is not a named suite; {hint}the suites are: {', '.join(SUITES)}"
    )


def member_run_id(suite_id: str, env_id: str) -> str:
    """The run id of ``env_id``'s run in suite ``suite_id``: ``<suite_id>-<Env-vN>``
    (unique across suites, so a site finds each report by its run id)."""
    return f"{suite_id}-{env_id.split('/')[-1]}"


def is_suite_dir(path: str | Path) -> bool:
    """Whether ``path`` is a suite's parent folder (it holds ``suite.json``)."""
    return (Path(path) / SUITE_FILE).is_file()


def read_suite(path: str | Path) -> dict[str, Any]:
    """Read ``suite.json`` of a suite folder (checked against ``schemas/suite.schema.json``).

    Raises:
        FileNotFoundError: ``path`` holds no ``suite.json``.
        ValueError: a damaged ``suite.json`` (one line naming the file), or a member run id
            that is not a plain directory name.
    """
    from .validate import read_suite_file

    p = Path(path) / SUITE_FILE
    if not p.is_file():
        raise FileNotFoundError(f"{path} is not a suite folder (no {SUITE_FILE})")
    return read_suite_file(p)


#: ``callbacks(index, count, run_json) -> (runner callbacks, stop)``: what the command line
#: shows while member ``index`` (0-based) of ``count`` is played.
Callbacks = Callable[[int, int, dict[str, Any]], tuple[dict[str, Any], Callable[[], None]]]


def _no_callbacks(index: int, count: int, meta: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    return {}, lambda: None


def _members(path: Path, meta: dict[str, Any]) -> Iterator[tuple[int, Path]]:
    for i, run in enumerate(meta["runs"]):
        yield i, path / run["run_id"]


def start_suite(
    plans: list[Any],
    out: str | Path,
    suite_id: str,
    *,
    suite: str | None = None,
    explicit_id: bool = False,
    fresh_id: Callable[[], str] | None = None,
    callbacks: Callbacks = _no_callbacks,
) -> Path:
    """Create a suite folder under ``out`` and play every member.  Returns the folder.

    ``plans`` are :class:`ragen_bench.runner.RunPlan` s of one back-end and model (one per
    env, each env once).  Everything is checked before anything is created: the plans,
    the env packages of every env and the endpoint (once); then the policy is built once,
    the folder, ``suite.json`` and every member's ``run.json`` are written, and the
    members are played in order.

    Raises:
        ValueError: no plans, an env given twice, plans of different policies.
        ImportError, PreflightError: see :func:`ragen_bench.preflight.preflight`.
        FileExistsError: ``out/suite_id`` exists (with ``explicit_id``; use ``--resume``).
        RunInterrupted: a signal stopped the suite; ``path`` is the suite folder.
    """
    from .policies import make_policy
    from .preflight import preflight
    from .runner import close_policy, create_run_dir, play_run, write_new_run

    if not plans:
        raise ValueError("a suite needs at least one --env")
    first = plans[0].request
    seen: set[str] = set()
    for plan in plans:
        req = plan.request
        if req.env_id in seen:
            raise ValueError(f"--env {req.env_id} is given twice; each env runs once in a suite")
        seen.add(req.env_id)
        if (req.backend, req.model, req.policy_options) != (
            first.backend,
            first.model,
            first.policy_options,
        ):
            raise ValueError("every run of a suite must use the same --policy, --model and options")
    for i, plan in enumerate(plans):
        req = plan.request
        if req.preflight:  # the endpoint once, every env's packages
            preflight(
                req.env_id,
                plan.env_config,
                req.seed,
                req.backend if i == 0 else None,
                req.policy_options,
            )
    out = Path(out)
    if explicit_id and (out / suite_id).exists():
        from .runner import exists_message

        raise FileExistsError(exists_message(out / suite_id))
    policy = make_policy(first.backend, first.model, **(first.policy_options or {}))
    try:
        parent = create_run_dir(out, suite_id, fresh_id=None if explicit_id else fresh_id)
        suite_id = parent.path.name
        with parent.writer_lock():
            meta = {
                "schema_version": 1,
                "suite_id": suite_id,
                "suite": suite,
                "created": now_iso(),
                "runs": [
                    {
                        "env_id": p.request.env_id,
                        "run_id": member_run_id(suite_id, p.request.env_id),
                    }
                    for p in plans
                ],
                "harness_version": __version__,
                "git_commit": git_commit(),
            }
            try:
                _write_suite(parent.path, meta)  # first: the folder is a suite from now on
                for (_, path), plan in zip(_members(parent.path, meta), plans, strict=True):
                    path.mkdir()
                    member = RunDir(path)
                    with member.writer_lock():
                        write_new_run(member, plan, policy)
                for i, path in _members(parent.path, meta):
                    cbs, stop = callbacks(i, len(plans), member_meta(path))
                    try:
                        play_run(path, policy, **cbs)
                    finally:
                        stop()
            except KeyboardInterrupt as exc:
                raise RunInterrupted(parent.path, signal_of(exc)) from None
        return parent.path
    finally:
        close_policy(policy)


def _write_suite(path: Path, meta: dict[str, Any]) -> None:
    from .fileio import atomic_write_json

    atomic_write_json(path / SUITE_FILE, meta)


def member_meta(path: Path) -> dict[str, Any]:
    """A member's ``run.json``."""
    return RunDir(path).read_run()


def resume_suite(
    path: str | Path,
    *,
    check: bool = True,
    callbacks: Callbacks = _no_callbacks,
    confirm: Callable[[Path, dict[str, Any]], None] | None = None,
) -> Path:
    """Resume every member of a suite where it stopped (:func:`ragen_bench.runner.resume_run`;
    a finished member plays nothing).  Returns the suite folder.

    ``confirm(run_dir, run_json)`` is called for every member before any member is played
    (the command line's checks of what a run folder directs: it raises to refuse), so a
    suite resumes under the same rules as each of its runs.

    Raises:
        FileNotFoundError: not a suite folder, or a member's run directory is missing.
        ValueError: a damaged ``suite.json`` or ``run.json``.
        RunLockedError: another process is writing the suite or one of its runs.
        RunInterrupted: a signal stopped it; ``path`` is the suite folder.
    """
    from .runner import resume_run

    path = Path(path)
    meta = read_suite(path)
    with RunDir(path).writer_lock():
        members = list(_members(path, meta))
        for _, member in members:
            if not (member / "run.json").is_file():
                raise FileNotFoundError(
                    f"suite {path}: its run {member.name} is missing (no {member / 'run.json'})"
                )
            if confirm is not None:
                confirm(member, member_meta(member))
        try:
            for i, member in members:
                cbs, stop = callbacks(i, len(members), member_meta(member))
                try:
                    resume_run(member, check=check, **cbs)
                finally:
                    stop()
        except KeyboardInterrupt as exc:
            raise RunInterrupted(path, signal_of(exc)) from None
    return path


def suite_results(path: str | Path) -> list[dict[str, Any]]:
    """Each member of a suite as ``{"env_id", "run_id", "path", "summary", "failure"}``:
    its ``summary.json`` (``None`` while unfinished) and :func:`ragen_bench.results.run_failure`.

    Raises:
        FileNotFoundError, ValueError: see :func:`read_suite`.
    """
    path = Path(path)
    meta = read_suite(path)
    rows = []
    for run in meta["runs"]:
        member = path / run["run_id"]
        done = (member / "summary.json").is_file()
        rows.append(
            {
                "env_id": run["env_id"],
                "run_id": run["run_id"],
                "path": str(member),
                "summary": RunDir(member).read_summary() if done else None,
                "failure": run_failure(member) if done else None,
            }
        )
    return rows


def saved_line(path: str | Path) -> str:
    """``k of M runs complete, E of T episodes saved in PATH``: what an interrupted suite kept."""
    path = Path(path)
    meta = read_suite(path)
    complete = saved = total = 0
    for _, member in _members(path, meta):
        run = RunDir(member)
        if not (member / "run.json").is_file():
            continue
        episodes = run.read_run()["episodes"]
        n = len(run.read_episodes())
        total += episodes
        saved += n
        complete += int(n >= episodes and (member / "summary.json").is_file())
    return (
        f"{complete} of {len(meta['runs'])} runs complete, {saved} of {total} episodes "
        f"are saved in {path}"
    )


def suite_table(rows: list[dict[str, Any]], title: str) -> Any:
    """The rich table of a suite: one row per env (success, format-valid rate, return,
    episodes scored / requested, wall time, run id); unfinished runs show ``–``."""
    from rich.markup import escape
    from rich.table import Table

    from .summary_table import format_estimate

    def short(est: dict[str, Any], pct: bool = False) -> str:  # mean ± stderr, no interval
        return escape(format_estimate(est, pct).split("  [")[0])

    table = Table(
        title=escape(title), caption="mean ± stderr over groups (`ragen-bench show RUN`: CIs)"
    )
    for col, justify in (
        ("env", "left"),
        ("success", "right"),
        ("format valid", "right"),
        ("return", "right"),
        ("episodes", "right"),
        ("wall", "right"),
        ("run", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        s = row["summary"]
        if s is None:
            table.add_row(escape(row["env_id"]), "–", "–", "–", "unfinished", "–", row["run_id"])
            continue
        m, eps = s["metrics"], s["episodes"]
        table.add_row(
            escape(row["env_id"]),
            short(m.get("success", {}), pct=True),
            short(m.get("format_valid_rate", {}), pct=True),
            short(m.get("return", {})),
            f"{eps['scored']}/{eps['requested']}",
            f"{s['wall_time_s']:.1f} s",
            escape(row["run_id"]),
        )
    return table


__all__ = [
    "SUITES",
    "SUITE_FILE",
    "Suite",
    "SuiteEnv",
    "UnknownSuiteError",
    "get_suite",
    "is_suite_dir",
    "member_run_id",
    "read_suite",
    "resume_suite",
    "saved_line",
    "start_suite",
    "suite_results",
    "suite_table",
    "suites_help",
]
