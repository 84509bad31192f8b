"""The run-summary table both command lines print (``ragen-bench run/show``, ``ragen-train eval``).

One row per metric of ``summary.json`` as ``mean ± stderr  [95% CI]`` (rates in percent),
then the episode counts, statuses, endpoint request counters and wall time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: Metrics shown as percentages (besides every ``pass@k``).
PERCENT_METRICS = ("success", "valid_action_rate", "format_valid_rate")


def format_estimate(est: dict[str, Any], pct: bool = False) -> str:
    """``mean ± stderr  [lo, hi]`` of an estimate; unknown parts (``null``) are shown as ``–``."""
    if est.get("mean") is None:
        return "–"
    scale, digits, unit = (100.0, 1, "%") if pct else (1.0, 3, "")

    def num(v: Any) -> str:
        return "–" if v is None else f"{scale * v:.{digits}f}"

    lo, hi = est.get("ci95") or (None, None)
    return f"{num(est['mean'])}{unit} ± {num(est.get('stderr'))}  [{num(lo)}, {num(hi)}]"


def summary_table(summary: dict[str, Any]) -> Table:
    """The rich table of a ``summary.json`` document (every data string escaped)."""
    title = f"{', '.join(summary['env']['ids'])} · {summary['policy'].get('model') or summary['policy']['backend']}"
    table = Table(title=escape(title), caption="mean ± stderr  \\[95% bootstrap CI over groups]")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, est in summary["metrics"].items():
        pct = key in PERCENT_METRICS or key.startswith("pass@")
        table.add_row(escape(key), escape(format_estimate(est, pct)))
    eps = summary["episodes"]
    table.add_row(
        "episodes",
        f"{eps['scored']} scored / {eps['requested']} requested ({eps['missing']} missing)",
    )
    table.add_row(
        "statuses", escape(", ".join(f"{k} {v}" for k, v in sorted(summary["counts"].items())))
    )
    if summary["policy"].get("requests"):
        r = summary["policy"]["requests"]
        failed = ", ".join(f"{k} {v}" for k, v in r.get("failed", {}).items()) or "none"
        table.add_row(
            "endpoint",
            escape(
                f"{r.get('requests', 0)} requests, {r.get('retries', 0)} retries, failed: {failed}"
            ),
        )
    table.add_row("wall time", f"{summary['wall_time_s']:.1f} s")
    return table


def env_error_warning(summary: dict[str, Any]) -> str | None:
    """One loud line when any episode ended in ``env_error`` (the environment, not the
    policy, failed: a missing package, a data file, a verifier); ``None`` otherwise.

    Such episodes count as failures in the success rate, so the run measures the
    environment as much as the model; ``ragen-bench leaderboard add`` refuses it.
    """
    n = summary.get("counts", {}).get("env_error", 0)
    if not n:
        return None
    total = sum(summary.get("counts", {}).values())
    return (
        f"{n} of {total} episode{'s' if total != 1 else ''} ended in env_error: the environment "
        "failed, not the policy, and the metrics count them as failures; see each episode's "
        "`error` (`ragen-bench report`), fix the env and run again. `leaderboard add` refuses "
        "this run."
    )


def print_summary(
    summary: dict[str, Any],
    path: Path | None = None,
    *,
    to: Console,
    warn_to: Console | None = None,
) -> None:
    """Print ``summary`` as a table on ``to``, then the run directory ``path`` if given, then
    the :func:`env_error_warning` if any on ``warn_to`` (default ``to``)."""
    to.print(summary_table(summary))
    if path is not None:
        to.print(f"results: {escape(str(path))}")
    warning = env_error_warning(summary)
    if warning:
        (warn_to or to).print(f"[bold red]WARNING:[/bold red] {escape(warning)}", soft_wrap=True)


__all__ = [
    "PERCENT_METRICS",
    "env_error_warning",
    "format_estimate",
    "print_summary",
    "summary_table",
]
