"""Leaderboards: published, comparable results (``schemas/leaderboard.schema.json``).

A board fixes the split and, per environment id, the env version and the agent-loop
protocol (turns, actions per turn, think mode, context mode, format penalty, max new
tokens, group size).  :func:`add_run` adds or updates the entry for (model label,
back-end, env id) from a finished run, and refuses a run whose env version, split or
protocol differs from the board's — such numbers are not comparable.  A run never
silently replaces a published entry with a weaker measurement: replacing one with fewer
episodes or with env seeds that do not cover the entry's needs ``replace=True``
(``ragen-bench leaderboard add --replace``; :func:`replacement_problem`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from .fileio import atomic_write_json
from .portable import portable_json
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
    return {
        "schema_version": 1,
        "name": name,
        "description": description,
        "split": split,
        "envs": {},
        "entries": [],
    }


def seeds_of(run: dict[str, Any]) -> dict[str, int]:
    """The env seeds of a run: ``{"base": b, "groups": G, "group_size": k}`` (group g plays seed b + g)."""
    k = int(run.get("group_size") or 1)
    return {
        "base": int(run.get("seed") or 0),
        "groups": int(run.get("episodes") or 0) // k,
        "group_size": k,
    }


def replacement_problem(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why entry ``new`` must not silently replace entry ``old`` (same model, back-end, env), or ``None``.

    A replacement is refused when it has fewer scored episodes, or when its seeds do not
    cover the old entry's (another base seed, fewer groups, or unknown seeds on the old
    entry — boards written before entries recorded ``seeds``; an identical ``config_hash``
    still passes).  The same run re-added is always allowed.
    """
    if old.get("run_id") == new["run_id"] and old.get("config_hash") == new["config_hash"]:
        return None
    if new["episodes"] < old["episodes"]:
        return f"it has {new['episodes']} episodes, the published entry {old['episodes']}"
    if old.get("config_hash") == new["config_hash"]:
        return None
    a, b = old.get("seeds"), new["seeds"]
    if a is None:
        return "the published entry does not record its seeds (so they cannot be compared)"
    if a["base"] != b["base"] or b["groups"] < a["groups"]:
        return (
            f"it plays seeds {b['base']}..{b['base'] + b['groups'] - 1}, the published entry "
            f"{a['base']}..{a['base'] + a['groups'] - 1}"
        )
    return None


def add_run(
    board_path: str | Path,
    run_path: str | Path,
    *,
    label: str | None = None,
    description: str = "",
    replace: bool = False,
) -> dict[str, Any]:
    """Add or update a run's entry on a board (created if missing) and save it.

    Args:
        board_path: the board JSON file.
        run_path: a finished run directory (with ``summary.json``).
        label: the model's name on the board (default: the run's model or back-end).
        replace: replace an entry for the same (label, back-end, env id) even when the run
            has fewer episodes or other seeds (:func:`replacement_problem`).

    Returns:
        The entry written.

    Raises:
        LeaderboardError: env version, split or protocol differ from the board's, the
            run has missing or ``env_error`` episodes, or it would replace an entry with fewer episodes or
            other seeds without ``replace``.
        FileNotFoundError: not a run directory, or no ``summary.json``.
        ValueError: a damaged ``run.json``, ``summary.json`` or board (one line naming the file).
    """
    run_dir = RunDir(run_path)
    run = run_dir.read_run()
    summary = run_dir.read_summary()
    if summary["episodes"]["missing"]:
        raise LeaderboardError(
            f"run {run['run_id']} has {summary['episodes']['missing']} missing episodes; "
            "finish it with `ragen-bench run --resume` first"
        )
    env_errors = summary.get("counts", {}).get("env_error", 0)
    if env_errors:
        raise LeaderboardError(
            f"run {run['run_id']} has {env_errors} env_error episode"
            f"{'s' if env_errors != 1 else ''} (the environment failed, not the policy): its "
            "scores are not results; fix the env (see the episodes' `error`) and run again"
        )
    board = load_board(board_path) or new_board(Path(board_path).stem, run["split"], description)
    if board["split"] != run["split"]:
        raise LeaderboardError(
            f"split mismatch: board is {board['split']!r}, run is {run['split']!r}"
        )
    env_id, version = run["env_id"], run["env_version"]
    protocol = protocol_of(run)
    known = board["envs"].get(env_id)
    if known is None:
        board["envs"][env_id] = {
            "version": version,
            "protocol": protocol,
            "env_config": run["env_config"],
        }
    else:
        if known["version"] != version:
            raise LeaderboardError(
                f"{env_id}: board has env version {known['version']}, run has {version}"
            )
        diff = {
            k: (known["protocol"].get(k), protocol.get(k))
            for k in set(known["protocol"]) | set(protocol)
            if known["protocol"].get(k) != protocol.get(k)
        }
        if diff:
            raise LeaderboardError(
                f"{env_id}: protocol differs from the board's: "
                + ", ".join(f"{k} board={a!r} run={b!r}" for k, (a, b) in sorted(diff.items()))
            )
        if known.get("env_config") != run["env_config"]:
            raise LeaderboardError(
                f"{env_id}: env config differs from the board's: "
                f"{known.get('env_config')} vs {run['env_config']}"
            )
    model = label or run.get("model") or run["backend"]
    entry = {
        "model": model,
        "backend": run["backend"],
        "env_id": env_id,
        "env_version": version,
        "split": run["split"],
        "episodes": summary["episodes"]["scored"],
        "group_size": run["group_size"],
        "seeds": seeds_of(run),
        "metrics": {
            k: v for k, v in summary["metrics"].items() if k in HEADLINE or k.startswith("pass@")
        },
        "sampling": summary.get("sampling", {}),
        "date": now_iso(),
        "harness_version": summary.get("harness_version"),
        "git_commit": summary.get("git_commit"),
        "config_hash": config_hash(run),
        "run_id": run["run_id"],
        # how the model was run (back-end settings: dtype, device, LoRA base...): model metadata
        # (a LoRA base recorded as its folder's name, never the builder's absolute path)
        "policy": portable_json(
            {
                k: v
                for k, v in (run.get("policy") or {}).items()
                if isinstance(v, (str, int, float, bool)) and k != "model"
            }
        ),
    }
    if "diagnostics" in summary:
        entry["diagnostics"] = summary["diagnostics"]

    def same(e: dict) -> bool:
        return e["model"] == model and e["backend"] == entry["backend"] and e["env_id"] == env_id

    for old in filter(same, board["entries"]):
        problem = replacement_problem(old, entry)
        if problem and not replace:
            raise LeaderboardError(
                f"{board_path}: run {run['run_id']} would replace the entry of {model} "
                f"({entry['backend']}) on {env_id} from run {old.get('run_id')}, but {problem}; "
                "pass --replace to replace it anyway, or --label to add it as another row"
            )
    entries = [e for e in board["entries"] if not same(e)]
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


_MD_SPECIAL = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\", "`": "\\`"}
)


def md_text(value: Any, *, one_line: bool = True) -> str:
    """``value`` as literal Markdown text: no raw HTML, no table break.

    ``&``, ``<``, ``>`` become HTML entities (a board field cannot inject ``<script>`` or
    an ``<img>`` into a rendered README); ``|``, ``\\`` and backticks are backslash-escaped
    (a ``|`` would split a table cell); control characters, and with ``one_line`` line
    breaks, become spaces.  Links keep only http, https and relative targets (a
    ``[x](javascript:…)`` is shown as text), and a line starting with ``#`` stays text
    (a description's ``\n\n# H1`` is not a heading).
    """
    text = str(value).translate(_MD_SPECIAL)
    keep = "" if one_line else "\n"
    text = "".join(" " if (ord(c) < 0x20 and c not in keep) or c == "\x7f" else c for c in text)
    text = _LINK.sub(_safe_link, text)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


#: A Markdown link ``[text](target`` or a reference definition ``[label]: target``.
_LINK = re.compile(r"\[([^\[\]\n]*)\](\(\s*|:\s*)([^\s)]*)")
#: A URL scheme at the start of a link target (``javascript:``, ``data:``, ``https:``...).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: A line that Markdown would start a heading or a block quote with (``# H1``, ``> quote``
#: is already ``&gt;``): the marker is backslash-escaped so it stays text.
_BLOCK_START = re.compile(r"(?m)^([ \t]{0,3})(#)")


def _safe_link(m: re.Match[str]) -> str:
    """A link whose target is http(s) or relative stays a link; any other scheme
    (``javascript:``, ``data:``, ``vbscript:``, ``file:``) has its brackets escaped, so it is
    shown as text and never becomes a link."""
    scheme = _SCHEME.match(m.group(3))
    if scheme is None or scheme.group(0).lower() in ("http:", "https:"):
        return m.group(0)
    return f"\\[{m.group(1)}\\]{m.group(2)}{m.group(3)}"


def render_markdown(board: dict[str, Any]) -> str:
    """A markdown table per env id: success % and return with 95% intervals.

    Every text taken from the board (names, description, env ids, models, back-ends,
    dates) goes through :func:`md_text`.
    """
    lines = [f"# {md_text(board['name'])}", ""]
    if board.get("description"):
        lines += [md_text(board["description"], one_line=False), ""]
    lines.append(
        f"Split: `{md_text(board['split'])}`.  Intervals are 95% bootstrap intervals over groups."
    )
    from .report import protocol_text

    for env_id in sorted(board["envs"]):
        info = board["envs"][env_id]
        p = info["protocol"]
        lines += [
            "",
            f"## {md_text(env_id)} (v{md_text(info['version'])})",
            "",
            md_text(f"Protocol: {protocol_text(p)}."),  # "1 turn × 1 action", as the site
            "",
            "| Model | Back-end | Success % [95% CI] | Return [95% CI] | Valid actions | Episodes | Date |",
            "|---|---|---|---|---|---|---|",
        ]
        for e in [e for e in board["entries"] if e["env_id"] == env_id]:
            va = e["metrics"].get("valid_action_rate", {}).get("mean")
            lines.append(
                f"| {md_text(e['model'])} | {md_text(e['backend'])} | "
                f"{_fmt(e['metrics'].get('success'), pct=True)} | "
                f"{_fmt(e['metrics'].get('return'))} | {'–' if va is None else f'{100 * va:.1f}%'} | "
                f"{md_text(e['episodes'])} | {md_text(str(e['date'])[:10])} |"
            )
    return "\n".join(lines) + "\n"
