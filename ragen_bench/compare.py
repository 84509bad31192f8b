"""``ragen-bench compare RUN_A RUN_B``: the paired comparison of two runs on the same seeds.

Two runs of one env with the same base seed play the same instances, so their episodes
pair up by ``(env_id, seed, member)``.  The comparison (:func:`ragen_bench.stats.paired_comparison`,
also used by ``examples/real_model_run.py``) gives, over the shared episodes and over those
well-formed in both runs (every turn's answer parsed): the 2x2 success counts, the exact
McNemar p-value and the mean success difference ``B - A`` with a 95% paired-bootstrap
interval.  Episodes recorded as ``endpoint_error`` (not scored) are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .results import RETRY_STATUSES, RunDir
from .stats import paired_comparison


def run_outcomes(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(run.json, rows)``: one row per scored episode of a run directory, as
    :func:`~ragen_bench.stats.paired_comparison` reads them (``env_id``, ``seed``,
    ``member``, ``success``, ``well_formed``).

    Raises:
        FileNotFoundError: not a run directory.  ValueError: a damaged file.
    """
    run = RunDir(path)
    meta = run.read_run()
    rows = []
    for e in sorted(run.read_episodes().values(), key=lambda e: e["episode_index"]):
        if e["status"] in RETRY_STATUSES:
            continue
        turns = e.get("turns") or []
        rows.append(
            {
                "env_id": e["env_id"],
                "seed": e["seed"],
                "member": e.get("member", 0),
                "success": bool(e["success"]),
                "well_formed": bool(turns)
                and all((t.get("parsed") or {}).get("error") is None for t in turns),
            }
        )
    return meta, rows


def compare_runs(a: str | Path, b: str | Path) -> dict[str, Any]:
    """The paired comparison of run ``b`` against run ``a`` over the episodes both recorded.

    Returns:
        ``{"a": run info, "b": run info, "shared": n, "only_a": n, "only_b": n,
        **paired_comparison(rows_a, rows_b)}`` (``before`` / ``after`` there are ``a`` /
        ``b``); run info is ``run_id``, ``path``, ``model``, ``backend``, ``env_id``,
        ``env_version``, ``episodes``.

    Raises:
        FileNotFoundError: a path is not a run directory.
        ValueError: a damaged file, runs of different envs or env versions, or no shared
            episode (other seeds).
    """
    meta_a, rows_a = run_outcomes(a)
    meta_b, rows_b = run_outcomes(b)
    for field in ("env_id", "env_version"):
        if meta_a[field] != meta_b[field]:
            raise ValueError(
                f"{a} and {b} are runs of different envs ({field} {meta_a[field]!r} vs "
                f"{meta_b[field]!r}); a paired comparison needs the same instances"
            )
    key = lambda r: (r["env_id"], r["seed"], r["member"])  # noqa: E731
    keys_a, keys_b = {key(r) for r in rows_a}, {key(r) for r in rows_b}
    shared = keys_a & keys_b
    if not shared:
        raise ValueError(
            f"{a} and {b} share no scored episode (seeds {meta_a['seed']} and {meta_b['seed']}, "
            f"group sizes {meta_a['group_size']} and {meta_b['group_size']})"
        )

    def info(path: str | Path, meta: dict[str, Any], n: int) -> dict[str, Any]:
        keys = ("run_id", "model", "backend", "env_id", "env_version")
        return {**{k: meta.get(k) for k in keys}, "path": str(path), "episodes": n}

    return {
        "a": info(a, meta_a, len(rows_a)),
        "b": info(b, meta_b, len(rows_b)),
        "shared": len(shared),
        "only_a": len(keys_a - shared),
        "only_b": len(keys_b - shared),
        **paired_comparison(
            [r for r in rows_a if key(r) in shared], [r for r in rows_b if key(r) in shared]
        ),
    }


def comparison_table(result: dict[str, Any]) -> Any:
    """The rich table of :func:`compare_runs`: one row for all shared episodes, one for
    those well-formed in both runs."""
    from rich.markup import escape
    from rich.table import Table

    a, b = result["a"], result["b"]
    table = Table(
        title=escape(f"{a['env_id']}: A {a['run_id']} vs B {b['run_id']}"),
        caption="success difference B - A with a 95% paired-bootstrap interval; "
        "exact McNemar test on the discordant pairs",
    )
    for col in (
        "episodes",
        "pairs",
        "A",
        "B",
        "B - A [95% CI]",
        "both",
        "A only",
        "B only",
        "neither",
        "McNemar p",
    ):
        table.add_column(col, justify="left" if col == "episodes" else "right")
    for label, key in (("all shared", "all"), ("well-formed in both", "well_formed_both")):
        s = result[key]
        if not s["pairs"]:
            table.add_row(label, "0", *["–"] * 8)
            continue
        low, high = s["diff_ci95"]
        table.add_row(
            label,
            str(s["pairs"]),
            f"{100 * s['success_before']:.1f}%",
            f"{100 * s['success_after']:.1f}%",
            f"{100 * s['diff']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]",
            str(s["both"]),
            str(s["before_only"]),
            str(s["after_only"]),
            str(s["neither"]),
            f"{s['mcnemar_p']:.3g}",
        )
    return table


__all__ = ["compare_runs", "comparison_table", "run_outcomes"]
