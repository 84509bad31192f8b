"""Leaderboards: published, comparable results (``schemas/leaderboard.schema.json``).

A board fixes the split and, per environment id, the env version and the agent-loop
protocol (turns, actions per turn, think mode, context mode, format penalty, max new
tokens, group size).  :func:`add_run` adds or updates the entry for (model label,
back-end, env id) from a finished run, and refuses a run whose env version, split or
protocol differs from the board's — such numbers are not comparable.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


from .fileio import atomic_write_json
from .results import RunDir, now_iso, protocol_of
from .validate import read_checked

HEADLINE = ("success", "return", "valid_action_rate", "format_valid_rate", "turns", "tokens")


class LeaderboardError(ValueError):
    """A run cannot join a board (mismatched version, split or protocol; unfinished run)."""


def config_hash(run: dict[str, Any]) -> str:
    """Short SHA-256 of what determines the numbers: env id/version/config, protocol, sampling."""
    blob = {
        "env_id": run.get("env_id"),
        "env_version": run.get("env_version"),
        "env_config": run.get("env_config"),
        "rollout": run.get("rollout"),
        "seed": run.get("seed"),
        "episodes": run.get("episodes"),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def load_board(path: str | Path) -> dict[str, Any] | None:
    """The board in ``path`` (checked against ``schemas/leaderboard.schema.json``), or
    ``None`` when there is no such file.

    Raises:
        ValueError: a damaged board — not strict JSON, not following the schema, or of
            an unknown ``schema_version`` (one line naming the file).
    """
    p = Path(path)
    if not p.exists():
        return None
    return read_checked(p, "leaderboard")


def new_board(name: str, split: str, description: str = "") -> dict[str, Any]:
    return {"schema_version": 1, "name": name, "description": description, "split": split,
            "envs": {}, "entries": []}


def add_run(board_path: str | Path, run_path: str | Path, *, label: str | None = None,
            description: str = "") -> dict[str, Any]:
    """Add or update a run's entry on a board (created if missing) and save it.

    Args:
        board_path: the board JSON file.
        run_path: a finished run directory (with ``summary.json``).
        label: the model's name on the board (default: the run's model or back-end).

    Returns:
        The entry written.

    Raises:
        LeaderboardError: env version, split or protocol differ from the board's, or
            the run has missing episodes.
        FileNotFoundError: not a run directory, or no ``summary.json``.
        ValueError: a damaged ``run.json``, ``summary.json`` or board (one line naming the file).
    """
    run_dir = RunDir(run_path)
    run = run_dir.read_run()
    summary = run_dir.read_summary()
    if summary["episodes"]["missing"]:
        raise LeaderboardError(f"run {run['run_id']} has {summary['episodes']['missing']} missing episodes; "
                               "finish it with `ragen-bench run --resume` first")
    board = load_board(board_path) or new_board(Path(board_path).stem, run["split"], description)
    if board["split"] != run["split"]:
        raise LeaderboardError(f"split mismatch: board is {board['split']!r}, run is {run['split']!r}")
    env_id, version = run["env_id"], run["env_version"]
    protocol = protocol_of(run)
    known = board["envs"].get(env_id)
    if known is None:
        board["envs"][env_id] = {"version": version, "protocol": protocol, "env_config": run["env_config"]}
    else:
        if known["version"] != version:
            raise LeaderboardError(f"{env_id}: board has env version {known['version']}, run has {version}")
        diff = {k: (known["protocol"].get(k), protocol.get(k)) for k in set(known["protocol"]) | set(protocol)
                if known["protocol"].get(k) != protocol.get(k)}
        if diff:
            raise LeaderboardError(f"{env_id}: protocol differs from the board's: "
                                   + ", ".join(f"{k} board={a!r} run={b!r}" for k, (a, b) in sorted(diff.items())))
        if known.get("env_config") != run["env_config"]:
            raise LeaderboardError(f"{env_id}: env config differs from the board's: "
                                   f"{known.get('env_config')} vs {run['env_config']}")
    model = label or run.get("model") or run["backend"]
    entry = {
        "model": model,
        "backend": run["backend"],
        "env_id": env_id,
        "env_version": version,
        "split": run["split"],
        "episodes": summary["episodes"]["scored"],
        "group_size": run["group_size"],
        "metrics": {k: v for k, v in summary["metrics"].items() if k in HEADLINE or k.startswith("pass@")},
        "sampling": summary.get("sampling", {}),
        "date": now_iso(),
        "harness_version": summary.get("harness_version"),
        "git_commit": summary.get("git_commit"),
        "config_hash": config_hash(run),
        "run_id": run["run_id"],
    }
    if "diagnostics" in summary:
        entry["diagnostics"] = summary["diagnostics"]
    entries = [e for e in board["entries"]
               if not (e["model"] == model and e["backend"] == entry["backend"] and e["env_id"] == env_id)]
    entries.append(entry)
    entries.sort(key=lambda e: (e["env_id"], -(e["metrics"]["success"]["mean"] or 0.0), e["model"]))
    board["entries"] = entries
    Path(board_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(board_path, board)
    return entry


def _fmt(metric: dict[str, Any] | None, pct: bool = False) -> str:
    if not metric or metric.get("mean") is None:
        return "–"
    m, (lo, hi) = metric["mean"], metric.get("ci95") or (None, None)
    if lo is None or hi is None:
        return f"{100 * m:.1f}" if pct else f"{m:.3f}"
    if pct:
        return f"{100 * m:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def render_markdown(board: dict[str, Any]) -> str:
    """A markdown table per env id: success % and return with 95% intervals."""
    lines = [f"# {board['name']}", ""]
    if board.get("description"):
        lines += [board["description"], ""]
    lines.append(f"Split: `{board['split']}`.  Intervals are 95% bootstrap intervals over groups.")
    for env_id in sorted(board["envs"]):
        info = board["envs"][env_id]
        p = info["protocol"]
        lines += ["", f"## {env_id} (v{info['version']})", "",
                  f"Protocol: {p.get('max_turns')} turns × {p.get('max_actions_per_turn')} actions, "
                  f"think={p.get('enable_think')}, context={p.get('context_mode')}, "
                  f"max_new_tokens={p.get('max_new_tokens')}, group size {p.get('group_size')}.", "",
                  "| Model | Back-end | Success % [95% CI] | Return [95% CI] | Valid actions | Episodes | Date |",
                  "|---|---|---|---|---|---|---|"]
        for e in [e for e in board["entries"] if e["env_id"] == env_id]:
            va = e["metrics"].get("valid_action_rate", {}).get("mean")
            lines.append(f"| {e['model']} | {e['backend']} | {_fmt(e['metrics'].get('success'), pct=True)} | "
                         f"{_fmt(e['metrics'].get('return'))} | {'–' if va is None else f'{100 * va:.1f}%'} | "
                         f"{e['episodes']} | {e['date'][:10]} |")
    return "\n".join(lines) + "\n"
