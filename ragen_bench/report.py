"""One self-contained HTML report per run directory (``ragen-bench report RUN``).

The page shows the run's summary, the episodes per environment and status, a histogram of
episode returns, the reasoning-collapse diagnostics block when ``summary.json`` has one,
and every episode as a conversation: the system prompt, each turn's observation, the
model's think and answer (and the raw response), the parse flags, the executed actions with
their step rewards, the turn reward, and the final status.  Episodes can be filtered by
status (and environment) and searched as text.  Everything from the model or the data set
is escaped (:mod:`ragen_bench.site.page`); the file needs no server and no network.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .results import RETRY_STATUSES, RunDir, summarize
from .site.charts import histogram
from .site.page import PERCENT_METRICS, render_page, status_key, write_page

#: The default report file inside a run directory.
REPORT_FILE = "report.html"

#: Parser fields shown as flags when set (``ragen_envs.parsing``).
_PARSE_FLAGS = (
    ("unknown_actions", "unknown actions"),
    ("stray_chars", "stray characters outside the blocks"),
    ("n_dropped", "actions over the per-turn budget dropped"),
)


def _turn_view(turn: dict[str, Any]) -> dict[str, Any]:
    parsed = turn.get("parsed") or {}
    flags = []
    for key, label in _PARSE_FLAGS:
        value = parsed.get(key)
        if value:
            flags.append(
                f"{label}: {', '.join(map(str, value)) if isinstance(value, list) else value}"
            )
    if (turn.get("context") or {}).get("dropped_turns"):
        flags.append(f"context: {turn['context']['dropped_turns']} earlier turn(s) dropped")
    infos = turn.get("infos") or []
    rewards = turn.get("step_rewards") or []
    actions = []
    for i, action in enumerate(turn.get("actions") or []):
        info = infos[i] if i < len(infos) else {}
        actions.append(
            {
                "action": action,
                "reward": rewards[i] if i < len(rewards) else None,
                "valid": "yes" if info.get("action_is_valid") else "no",
                "effective": "yes" if info.get("action_is_effective") else "no",
            }
        )
    return {
        "turn": turn.get("turn"),
        "user_message": turn.get("user_message") or turn.get("observation", ""),
        "response": turn.get("response", ""),
        "finish_reason": turn.get("finish_reason"),
        "think": parsed.get("think"),
        "answer": parsed.get("answer"),
        "error": parsed.get("error"),
        "reasoning": turn.get("reasoning"),
        "flags": flags,
        "actions": actions,
        "reward": turn.get("reward"),
        "env_reward": turn.get("env_reward"),
        "format_penalty": turn.get("format_penalty"),
        "terminated": turn.get("terminated", False),
        "truncated": turn.get("truncated", False),
        "completion_tokens": (turn.get("usage") or {}).get("completion_tokens"),
    }


def episode_view(ep: dict[str, Any]) -> dict[str, Any]:
    """What the report shows of one ``episodes.jsonl`` object (``schemas/episode.schema.json``)."""
    system = next(
        (m.get("content", "") for m in ep.get("messages") or [] if m.get("role") == "system"), None
    )
    return {
        "index": ep["episode_index"],
        "env_id": ep.get("env_id", "?"),
        "seed": ep.get("seed"),
        "group": ep.get("group"),
        "member": ep.get("member"),
        "status": ep.get("status", "?"),
        "success": bool(ep.get("success")),
        "ret": ep.get("return"),
        "env_ret": ep.get("env_return"),
        "error": ep.get("error"),
        "system": system,
        "turns": [_turn_view(t) for t in ep.get("turns") or []],
    }


def render_run_report(run_path: str | Path, *, nav: list[tuple[str, str]] | None = None) -> str:
    """The report page of a run directory, as an HTML string.

    ``summary.json`` is used when present; for an unfinished run (no summary yet) the
    summary is computed from the episodes recorded so far.

    Args:
        run_path: a run directory (``run.json``, ``episodes.jsonl``, ``summary.json``).
        nav: header links, e.g. back to a leaderboard site.

    Raises:
        FileNotFoundError: not a run directory (no ``run.json``).
        ValueError: ``episodes.jsonl`` has a corrupt line other than a torn last one.
    """
    rd = RunDir(run_path)
    run = rd.read_run()
    episodes = sorted(rd.read_episodes().values(), key=lambda e: e["episode_index"])
    summary = (
        rd.read_summary() if (rd.path / "summary.json").is_file() else summarize(episodes, run)
    )
    env_ids = sorted({e.get("env_id", "?") for e in episodes}) or [run.get("env_id", "?")]
    counts: dict[str, Counter] = {env_id: Counter() for env_id in env_ids}
    for e in episodes:
        counts[e.get("env_id", "?")][e.get("status", "?")] += 1
    totals = Counter(e.get("status", "?") for e in episodes)
    statuses = sorted(totals, key=status_key)
    policy = run.get("policy") or {}
    policy_label = (
        f"{policy.get('model') or run.get('model') or run.get('backend')} ({run.get('backend')})"
    )
    eps_info = summary.get("episodes", {})
    overview = [
        ("policy", policy_label),
        (
            "environment",
            ", ".join(
                f"{i} v{v}" for i, v in sorted(summary.get("env", {}).get("versions", {}).items())
            )
            or run.get("env_id", "?"),
        ),
        ("split", run.get("split")),
        (
            "episodes",
            f"{eps_info.get('scored', '?')} scored / {eps_info.get('requested', '?')} requested "
            f"({eps_info.get('missing', '?')} missing)",
        ),
        ("group size", run.get("group_size")),
        ("seeds", f"base {run.get('seed')}; group g uses env seed base + g"),
        ("protocol", protocol_text(summary.get("protocol") or {})),
        (
            "sampling",
            ", ".join(f"{k}={v}" for k, v in sorted((summary.get("sampling") or {}).items())),
        ),
        ("created", run.get("created")),
        (
            "harness",
            f"{summary.get('harness_version', '?')} (git {summary.get('git_commit') or 'unknown'})",
        ),
        ("wall time", f"{summary.get('wall_time_s', 0):.1f} s"),
    ]
    returns = [
        float(e["return"])
        for e in episodes
        if e.get("status") not in RETRY_STATUSES and e.get("return") is not None
    ]
    return render_page(
        "run.html",
        title=f"run {run.get('run_id', rd.path.name)}",
        nav=nav,
        run=run,
        env_ids=env_ids,
        policy_label=policy_label,
        n_episodes=len(episodes),
        overview=overview,
        counts=counts,
        statuses=statuses,
        status_totals=totals,
        metrics=summary.get("metrics") or {},
        percent=PERCENT_METRICS,
        diagnostics=summary.get("diagnostics"),
        histogram=histogram(
            returns, title=f"Episode returns ({len(returns)} scored episodes)", xlabel="return"
        ),
        episodes=[episode_view(e) for e in episodes],
    )


def write_run_report(
    run_path: str | Path, out: str | Path | None = None, *, nav: list[tuple[str, str]] | None = None
) -> Path:
    """Write :func:`render_run_report` to ``out`` (default ``<run>/report.html``); return the path."""
    target = Path(out) if out is not None else Path(run_path) / REPORT_FILE
    return write_page(target, render_run_report(run_path, nav=nav))


def _n(count: Any, word: str) -> str:
    """``1 turn``, ``5 turns``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def protocol_text(p: dict[str, Any], *, short: bool = False) -> str:
    """One line for an agent-loop protocol (``results.protocol_of``), e.g.
    ``5 turns × 2 actions · think · context full · 256 new tokens · format penalty -0.1 · group 4``;
    ``short=True``: ``5×2 · think · full · 256 tok · g4``."""
    if not p:
        return "–"
    ctx = p.get("context_mode")
    if ctx == "last_k":
        ctx = f"last {p.get('context_window')}"
    if short:
        return " · ".join(
            [
                f"{p.get('max_turns')}×{p.get('max_actions_per_turn')}",
                "think" if p.get("enable_think") else "no think",
                str(ctx),
                f"{p.get('max_new_tokens')} tok",
                f"g{p.get('group_size')}",
            ]
        )
    parts = [
        f"{_n(p.get('max_turns'), 'turn')} × {_n(p.get('max_actions_per_turn'), 'action')}",
        "think" if p.get("enable_think") else "no think",
        f"context {ctx}",
        f"{p.get('max_new_tokens')} new tokens",
        f"format penalty {p.get('format_penalty')}",
        f"group {p.get('group_size')}",
    ]
    if p.get("system_prompt") not in (None, "full"):
        parts.append(f"system prompt {p['system_prompt']}")
    return " · ".join(parts)
