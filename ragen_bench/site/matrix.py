"""The model × environment matrix of the leaderboard site, and the boards as CSV.

``matrix.html`` has one row per policy (model and back-end) and one column per env family
(``Sokoban``, ``FrozenLake``…, :attr:`ragen_envs.EnvEntry.name`), over every board given:
each column is one env id (:func:`column_env_ids`: the family's id that the most policies
were evaluated on; ties: the shortest, i.e. the family's base id), so a column compares
like with like; a cell is the success rate of that policy on that env id with its 95%
interval, from the board entry with the most episodes (ties: the latest); the ``average``
column is the mean of a row's cells and says over how many families (``n``).  Rows are ranked in two tiers:
first the policies evaluated on at least half as many families as the widest row, then the
others (an env's own oracle, a model trained on one env), each tier by its average — so an
average over one easy family never outranks one over most of them; the page's sort by the
average column keeps that order (``rank``).  Rows of one env id on one board are
comparable (same protocol, version and split); across families the average is a summary,
not a controlled comparison, and the page says so.

Each board is also published as ``data/<board>.json`` (the file itself) and
``data/<board>.csv`` (:func:`board_csv`), and all boards together as ``data/all.csv``;
every site page links them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .page import provenance_flags

#: Columns of the CSV files, in order (``success_lo`` / ``success_hi``: the 95% interval).
CSV_COLUMNS = (
    "board",
    "model",
    "backend",
    "env_id",
    "env_family",
    "env_version",
    "split",
    "episodes",
    "success",
    "success_lo",
    "success_hi",
    "return",
    "return_lo",
    "return_hi",
    "format_valid_rate",
    "seeds",
    "date",
    "git_commit",
    "run_id",
)


def family_of(env_id: str) -> str:
    """The env family (registry name) of an id: ``ragen/Sokoban-Large-v0`` → ``Sokoban``;
    an id the registry does not know: the part before the first ``-`` after ``ragen/``."""
    import ragen_envs

    try:
        return ragen_envs.get_entry(env_id).name
    except ragen_envs.UnknownEnvError:
        return env_id.split("/")[-1].split("-")[0]


def _estimate(entry: dict[str, Any], key: str) -> tuple[Any, Any, Any]:
    est = (entry.get("metrics") or {}).get(key) or {}
    lo, hi = est.get("ci95") or (None, None)
    return est.get("mean"), lo, hi


def _seeds(entry: dict[str, Any]) -> str:
    s = entry.get("seeds") or {}
    if "base" in s and "groups" in s:
        return f"{s['base']}..{s['base'] + s['groups'] - 1}"
    return ""


def board_rows(name: str, board: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row (:data:`CSV_COLUMNS`) per entry of ``board``."""
    rows = []
    for e in board["entries"]:
        s, slo, shi = _estimate(e, "success")
        r, rlo, rhi = _estimate(e, "return")
        rows.append(
            {
                "board": name,
                "model": e["model"],
                "backend": e["backend"],
                "env_id": e["env_id"],
                "env_family": family_of(e["env_id"]),
                "env_version": e["env_version"],
                "split": e["split"],
                "episodes": e["episodes"],
                "success": s,
                "success_lo": slo,
                "success_hi": shi,
                "return": r,
                "return_lo": rlo,
                "return_hi": rhi,
                "format_valid_rate": _estimate(e, "format_valid_rate")[0],
                "seeds": _seeds(e),
                "date": e.get("date", ""),
                "git_commit": e.get("git_commit") or "",
                "run_id": e.get("run_id", ""),
            }
        )
    return rows


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV text (RFC 4180, ``\\n`` line ends) of rows with :data:`CSV_COLUMNS`; a cell that
    a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@`` before a letter) is
    prefixed with ``'``."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: _safe_cell(v) for k, v in row.items()})
    return buf.getvalue()


def _safe_cell(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") and not _number(v):
        return "'" + v
    return "" if v is None else v


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def board_csv(name: str, board: dict[str, Any]) -> str:
    """The CSV of one board (:func:`board_rows`, :func:`to_csv`)."""
    return to_csv(board_rows(name, board))


def _better(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether entry ``a`` should stand for its cell rather than ``b``: more episodes, then later."""
    return (a["episodes"], a.get("date", "")) > (b["episodes"], b.get("date", ""))


def matrix(boards: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The matrix of :mod:`this module <ragen_bench.site.matrix>` over ``(board name, board)``.

    Returns:
        ``{"families": [name, ...], "columns": {family: env_id}, "rows": [{"model",
        "backend", "cells": {family: cell}, "average", "n", "broad", "rank", "meta"}]}``; a cell is ``{"mean", "lo", "hi", "env_id",
        "board", "episodes", "run_id"}``.  Rows are sorted by tier, the ``broad`` one first
        (evaluated on ``n`` families with ``2 n ≥`` the largest ``n``), then by average
        success, best first; ``rank = broad + average / 2`` is the number the page sorts
        the average column by (same order: ``average`` ≤ 1).
    """
    scored = [
        (name, e)
        for name, board in boards
        for e in board["entries"]
        if _estimate(e, "success")[0] is not None
    ]
    columns = column_env_ids([e for _, e in scored])
    best: dict[tuple[str, str], dict[str, tuple[str, dict[str, Any]]]] = {}
    for name, e in scored:
        fam = family_of(e["env_id"])
        if e["env_id"] != columns[fam]:  # another variant of the family: on its board only
            continue
        cells = best.setdefault((e["model"], e["backend"]), {})
        if fam not in cells or _better(e, cells[fam][1]):
            cells[fam] = (name, e)
    families = sorted({f for cells in best.values() for f in cells})
    rows = []
    for (model, backend), cells in best.items():
        shown = {}
        for fam, (name, e) in cells.items():
            mean, lo, hi = _estimate(e, "success")
            shown[fam] = {
                "mean": mean,
                "lo": lo,
                "hi": hi,
                "env_id": e["env_id"],
                "board": name,
                "episodes": e["episodes"],
                "run_id": e.get("run_id", ""),
                "flags": provenance_flags(e),
            }
        means = [c["mean"] for c in shown.values()]
        average = sum(means) / len(means)
        rows.append(
            {
                "model": model,
                "backend": backend,
                "cells": shown,
                "average": average,
                "n": len(means),
                "meta": _model_meta([e for _, e in cells.values()]),
            }
        )
    widest = max((r["n"] for r in rows), default=0)
    for r in rows:
        r["broad"] = 2 * r["n"] >= widest
        r["rank"] = int(r["broad"]) + r["average"] / 2
    rows.sort(key=lambda r: (-r["rank"], r["model"], r["backend"]))
    return {"families": families, "columns": {f: columns[f] for f in families}, "rows": rows}


def column_env_ids(entries: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Per env family, the one env id its matrix column shows: the id evaluated by the most
    policies (``(model, backend)`` pairs); ties go to the shortest id, then the first in
    alphabetical order (``ragen/2048-v0`` before ``ragen/2048-Target256-v0``)."""
    policies: dict[str, set[tuple[str, str]]] = {}
    for e in entries:
        policies.setdefault(e["env_id"], set()).add((e["model"], e["backend"]))
    out: dict[str, str] = {}
    for env_id in sorted(policies, key=lambda i: (-len(policies[i]), len(i), i)):
        out.setdefault(family_of(env_id), env_id)
    return out


def _model_meta(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What the entries of one policy record about it: back-end settings (``policy``: dtype,
    device, base model), harness versions, commits, episodes and dates."""
    policy: dict[str, Any] = {}
    for e in entries:
        for k, v in (e.get("policy") or {}).items():
            if k not in ("backend", "model", "requests") and isinstance(v, (str, int, float)):
                policy.setdefault(k, v)
    commits = sorted({e.get("git_commit") or "unknown" for e in entries})
    return {
        "settings": ", ".join(f"{k} {v}" for k, v in sorted(policy.items())) or "–",
        "harness": ", ".join(sorted({str(e.get("harness_version") or "?") for e in entries})),
        "commits": ", ".join(c[:12] + ("-dirty" if c.endswith("-dirty") else "") for c in commits),
        "episodes": sum(int(e["episodes"]) for e in entries),
        "dates": f"{min(e.get('date', '')[:10] for e in entries)} – "
        f"{max(e.get('date', '')[:10] for e in entries)}",
    }


def write_data(out: Path, boards: Sequence[tuple[str, Path, dict[str, Any]]]) -> list[Path]:
    """Write ``data/<stem>.json`` (a copy of the board file), ``data/<stem>.csv`` and
    ``data/all.csv`` under ``out``; return the files."""
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    written, everything = [], []
    for stem, path, board in boards:
        (data / f"{stem}.json").write_bytes(Path(path).read_bytes())
        rows = board_rows(board["name"], board)
        everything += rows
        (data / f"{stem}.csv").write_text(to_csv(rows), encoding="utf-8")
        written += [data / f"{stem}.json", data / f"{stem}.csv"]
    (data / "all.csv").write_text(to_csv(everything), encoding="utf-8")
    return [*written, data / "all.csv"]


__all__ = [
    "CSV_COLUMNS",
    "board_csv",
    "board_rows",
    "column_env_ids",
    "family_of",
    "matrix",
    "to_csv",
    "write_data",
]
