"""Run directories: ``episodes.jsonl`` written one finished episode at a time, resume, summary.

A run directory ``runs/<run-id>/`` holds

* ``run.json`` — what was asked (env, episodes, groups, seeds, back-end, sampling, rollout
  settings) and one entry per session (start, end, episodes written), so ``--resume``
  can rebuild the exact same specs;
* ``episodes.jsonl`` — one line per finished episode (``schemas/episode.schema.json``),
  appended and flushed as each episode finishes; when an episode is re-run (an
  ``endpoint_error`` retried by ``--resume``) the later line supersedes the earlier one;
* ``summary.json`` — aggregate metrics (``schemas/summary.schema.json``);
* ``.lock`` — held (``flock``, exclusive) by the one process writing the run; it holds
  that process's pid while locked.  The operating system drops the lock when the
  process ends, however it ends, so a crashed run can be resumed at once.

Crash safety: a process killed mid-write leaves at most one torn last line; it is
detected (no trailing newline, or invalid JSON) and cut off on resume, and that episode
is re-run.  Finished lines are never rewritten.  Writes are flushed to the operating
system after every episode (enough for a killed process); ``fsync=True`` also survives
power loss.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ragen_envs import jsonutil

from . import __version__
from .fileio import (
    atomic_write_json,
    check_regular,
    open_regular,
    open_regular_file,
    repair_jsonl_tail,
)
from .records import EpisodeRecord
from .redaction import redact
from .stats import mean_with_uncertainty, pass_at_k_over_groups
from .validate import check_object, read_checked

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
LOCK_FILE = ".lock"

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX (Windows): runs are not locked
    fcntl = None  # type: ignore[assignment]

#: Episode statuses that ``--resume`` plays again.
RETRY_STATUSES = frozenset({"endpoint_error"})

#: Episode statuses that mean the episode could not be played (no policy answer, or the
#: environment raised): a run made only of these measured nothing.
ERROR_STATUSES = RETRY_STATUSES | {"env_error"}

SUMMARY_METRICS = (
    "success",
    "return",
    "env_return",
    "turns",
    "actions",
    "valid_action_rate",
    "format_valid_rate",
    "tokens",
)


def git_commit() -> str | None:
    """The git commit of the ragen source tree, when it is a checkout (else ``None``)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def now_iso() -> str:
    """Current UTC time, ISO 8601 with seconds."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


class RunLockedError(OSError):
    """Another process holds a run directory's writer lock (see :meth:`RunDir.writer_lock`)."""


class RunDir:
    """One run directory.

    Args:
        path: the directory (created if missing).
        fsync: also ``fsync`` after each episode.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False):
        self.path = Path(path)
        self.fsync = fsync
        self._fh: Any = None

    @property
    def episodes_path(self) -> Path:
        return self.path / EPISODES_FILE

    # ---------------------------------------------------------------- run.json
    def write_run(self, meta: dict[str, Any]) -> None:
        """Write ``run.json`` atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path / RUN_FILE, meta)

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """Hold the run's exclusive writer lock (``<run>/.lock``) for the ``with`` block.

        Non-blocking ``fcntl.flock``: a second process (or a second open of the lock in
        this one) is refused at once.  The lock file records the holder's pid; it is
        emptied on release but never deleted (deleting a lock file races with a process
        about to open it).  The OS releases the lock when the holder dies.  Without
        ``fcntl`` (not POSIX) this is a no-op.

        Raises:
            RunLockedError: another process is writing this run (message names its pid).
            NotRegularFileError: ``.lock`` is a symbolic link (or FIFO, device): refused,
                the file it points to is left as it is (:func:`ragen_bench.fileio.open_regular`).
        """
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = open_regular(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # BlockingIOError (EWOULDBLOCK) when held elsewhere
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
                raise RunLockedError(
                    f"run {self.path} is being written by another process (pid {holder}); "
                    "wait for it to finish, or stop that process first"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # releases the flock

    def read_run(self) -> dict[str, Any]:
        """Read ``run.json`` (checked against ``schemas/run.schema.json``).

        Raises:
            FileNotFoundError: not a run directory.
            ValueError: a damaged ``run.json`` (:class:`~ragen_envs.jsonutil.JSONFileError`
                or :class:`~ragen_bench.validate.InvalidFileError`; one line naming the file).
        """
        p = self.path / RUN_FILE
        if not check_regular(p, missing_ok=True):
            raise FileNotFoundError(f"{self.path} is not a run directory (no {RUN_FILE})")
        return read_checked(p, "run")

    # ---------------------------------------------------------- episodes.jsonl
    def repair(self) -> int:
        """Cut a torn last line off ``episodes.jsonl``; return the bytes removed
        (:func:`ragen_bench.fileio.repair_jsonl_tail`)."""
        return repair_jsonl_tail(self.episodes_path)

    def read_episodes(self) -> dict[int, dict[str, Any]]:
        """The latest record per episode index (call :meth:`repair` first to drop a torn last line).

        Each line must be strict JSON holding an object with an ``episode_index``; the
        core fields it has (:data:`EPISODE_CORE_FIELDS`) must follow
        ``schemas/episode.schema.json``.  The rest of the record is not checked here (it
        would cost a full schema check per line on every resume; ``ragen-bench validate``
        checks it all).

        Raises:
            ValueError: a damaged line — not UTF-8, not JSON, or not an episode record
                (the file was edited or corrupted; we refuse to guess).  The message is
                one line naming ``file:line``.
        """
        out: dict[int, dict[str, Any]] = {}
        p = self.episodes_path
        if not p.exists():
            return out
        check_regular(p)  # a planted link is refused, not read through
        validator = _episode_core_validator()
        for n, obj in jsonutil.iter_jsonl(p):
            check_object(obj, "episode", f"{p}:{n}", validator)
            out[obj["episode_index"]] = obj
        return out

    def open_for_append(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.repair()
        self._fh = open_regular_file(self.episodes_path, "a", encoding="utf-8")

    def append(self, record: EpisodeRecord | dict[str, Any]) -> None:
        """Append one episode as one line and flush it."""
        if self._fh is None:
            self.open_for_append()
        obj = record.to_json() if isinstance(record, EpisodeRecord) else record
        line = jsonutil.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        self._fh.write(redact(line) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # ---------------------------------------------------------------- summary
    def write_summary(self, summary: dict[str, Any]) -> Path:
        p = self.path / SUMMARY_FILE
        atomic_write_json(p, summary)
        return p

    def read_summary(self) -> dict[str, Any]:
        """Read ``summary.json`` (checked against ``schemas/summary.schema.json``).

        Raises:
            ValueError: missing, damaged or not following the schema (one line naming the file).
        """
        p = self.path / SUMMARY_FILE
        if not check_regular(p, missing_ok=True):
            raise FileNotFoundError(
                f"{self.path} has no {SUMMARY_FILE} (an unfinished run? finish it with "
                f"`ragen-bench run --resume {self.path}`)"
            )
        return read_checked(p, "summary")


#: The fields of an episode record that resuming and summarising read; :meth:`RunDir.read_episodes`
#: checks the ones a line has (and requires ``episode_index``) on every line.
EPISODE_CORE_FIELDS = (
    "schema_version",
    "episode_index",
    "env_id",
    "env_version",
    "group",
    "status",
    "success",
    "metrics",
    "error",
)


@functools.cache
def _episode_core_validator() -> Any:
    """A validator of the :data:`EPISODE_CORE_FIELDS` of ``schemas/episode.schema.json``."""
    from ragen_envs.config import validator_for_schema
    from ragen_envs.resources import load_schema

    full = load_schema("episode")
    return validator_for_schema(
        {
            "$schema": full["$schema"],
            "type": "object",
            "required": ["episode_index"],
            "properties": {k: full["properties"][k] for k in EPISODE_CORE_FIELDS},
            "$defs": full.get("$defs", {}),
        }
    )


def run_failure(path: str | os.PathLike[str]) -> str | None:
    """Why a finished run measured nothing, in one line; ``None`` when it measured something.

    A run failed when it has no scored episode (every recorded one is an
    ``endpoint_error``, or none was recorded) or when every episode ended in an error
    status (:data:`ERROR_STATUSES`).  The line counts the statuses and quotes the first
    recorded error message (by episode index).
    """
    eps = sorted(RunDir(path).read_episodes().values(), key=lambda e: e["episode_index"])
    if not eps:
        return "no episode was recorded"
    scored = [e for e in eps if e["status"] not in RETRY_STATUSES]
    if scored and not all(e["status"] in ERROR_STATUSES for e in eps):
        return None
    counts: dict[str, int] = {}
    for e in eps:
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    what = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    first = next((e["error"] for e in eps if e.get("error")), None)
    line = (
        f"no episode was scored: every recorded episode ended in an error ({what})"
        if not scored
        else f"every episode ended in an error ({what})"
    )
    return line + (f"; first error: {' '.join(first.split())}" if first else "")


def summarize(episodes: Iterable[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """Build ``summary.json`` from episode objects (one per index) and ``run.json``.

    Metrics (each with mean, stderr and bootstrap 95% interval over groups): success
    rate, return, env return, turns, actions, valid-action rate, format-valid rate,
    completion tokens per episode; pass@k for k = 1, 2, 4, ... up to the group size.
    Episodes still recorded as ``endpoint_error`` are excluded from the metrics and
    counted in ``counts.endpoint_error`` (``--resume`` retries them).
    """
    eps = sorted(episodes, key=lambda e: e["episode_index"])
    scored = [e for e in eps if e["status"] not in RETRY_STATUSES]
    groups = [e["group"] for e in scored]
    metrics = {
        m: mean_with_uncertainty([e["metrics"][m] for e in scored], groups) for m in SUMMARY_METRICS
    }
    by_group: dict[int, list[bool]] = {}
    for e in scored:
        by_group.setdefault(e["group"], []).append(bool(e["success"]))
    gsize = int(run.get("group_size", 1))
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= gsize]
    if gsize not in ks:
        ks.append(gsize)
    metrics.update(pass_at_k_over_groups(by_group, ks))
    counts: dict[str, int] = {}
    for e in eps:
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    env_versions = sorted({(e["env_id"], e["env_version"]) for e in eps})
    sessions = run.get("sessions", [])
    wall = sum(float(s.get("wall_s", 0.0)) for s in sessions)
    return {
        "schema_version": 1,
        "run_id": run.get("run_id"),
        "created": run.get("created"),
        "updated": now_iso(),
        "env": {
            "ids": [i for i, _ in env_versions],
            "versions": {i: v for i, v in env_versions},
            "split": run.get("split"),
            "config": run.get("env_config", {}),
        },
        "policy": run.get("policy", {}),
        "sampling": run.get("rollout", {}).get("sampling", {}),
        "rollout": run.get("rollout", {}),
        "protocol": protocol_of(run),
        "seeds": {
            "base": run.get("seed"),
            "groups": run.get("episodes", 0) // max(1, gsize),
            "group_size": gsize,
            "rule": "group g uses env seed base + g",
        },
        "episodes": {
            "requested": run.get("episodes"),
            "recorded": len(eps),
            "scored": len(scored),
            "missing": max(0, int(run.get("episodes") or 0) - len(scored)),
        },
        "counts": counts,
        "metrics": metrics,
        "harness_version": __version__,
        "git_commit": run.get("git_commit"),
        "wall_time_s": round(wall, 3),
    }


def protocol_of(run: dict[str, Any]) -> dict[str, Any]:
    """The settings that must match for two runs to be comparable on a leaderboard."""
    r = run.get("rollout", {})
    return {
        "max_turns": r.get("max_turns"),
        "max_actions_per_turn": r.get("max_actions_per_turn"),
        "enable_think": r.get("enable_think"),
        "context_mode": r.get("context_mode"),
        "context_window": r.get("context_window"),
        "format_penalty": r.get("format_penalty"),
        "system_prompt": r.get("system_prompt", "full"),
        "max_new_tokens": r.get("sampling", {}).get("max_new_tokens"),
        "group_size": run.get("group_size"),
    }
