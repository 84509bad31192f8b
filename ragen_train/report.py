"""An HTML report of a training run (``ragen-train report OUT_DIR``).

The page shows the run's configuration, the held-out evaluation before and after RL when
the run was a recipe (``summary.json`` of :mod:`ragen_train.pipeline`), the training curves
of ``training_curves.png`` (:data:`ragen_train.plot.PANELS`) as interactive SVG charts
(hover for values, tick series on and off), every other logged metric, the SFT loss when
an SFT phase logged one, and links to the run reports of its evaluation runs
(``ragen-train eval`` / ``ragen-bench run`` on a model folder inside ``OUT_DIR``), which
it writes next to itself.  The page machinery is :mod:`ragen_bench.site.page`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragen_bench.report import write_run_report
from ragen_bench.site.charts import line_chart
from ragen_bench.site.page import render_page, slug, write_page

from .logger import read_metrics
from .plot import PANELS

#: The default report file inside a training output directory.
REPORT_FILE = "report.html"
#: Folder (beside the report) that holds the reports of the evaluation runs.
EVAL_DIR = "eval_reports"


def _series(rows: list[dict[str, Any]], key: str, phase: str) -> list[tuple[float, float]]:
    return [
        (r["step"], r[key])
        for r in rows
        if r.get("phase") == phase and isinstance(r.get(key), (int, float))
    ]


def _phase_of(key: str) -> str:
    return "val" if key.startswith("val/") else "train"


def find_eval_runs(out_dir: str | Path, roots: Iterable[str | Path]) -> list[Path]:
    """Run directories under ``roots`` (``root/*`` and ``root/*/*``) whose model is a folder
    inside ``out_dir`` (``run.json`` ``model``), sorted by path."""
    base = Path(out_dir).resolve()
    found = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for meta in [*root.glob("*/run.json"), *root.glob("*/*/run.json")]:
            try:
                model = json.loads(meta.read_text(encoding="utf-8")).get("model")
            except (OSError, ValueError):
                continue
            if model and Path(model).resolve().is_relative_to(base):
                found.add(meta.parent)
    return sorted(found)


def _eval_row(run: Path, href: str, out_dir: Path) -> dict[str, Any]:
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    summary_path = run / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
    model = meta.get("model") or meta.get("backend")
    try:
        model = str(Path(model).resolve().relative_to(out_dir.resolve()))
    except (TypeError, ValueError):
        pass
    return {
        "run_id": meta.get("run_id", run.name),
        "href": href,
        "model": model,
        "env": meta.get("env_id"),
        "split": meta.get("split"),
        "episodes": (summary.get("episodes") or {}).get("scored", "?"),
        "metrics": summary.get("metrics") or {},
    }


def write_train_report(
    out_dir: str | Path,
    out: str | Path | None = None,
    *,
    eval_runs: Sequence[str | Path] = (),
    runs_roots: Sequence[str | Path] = ("runs",),
) -> list[Path]:
    """Write the report of training output directory ``out_dir``; return the files written
    (the report first, then one run report per evaluation run).

    Args:
        out_dir: a ``trainer.out_dir`` (``metrics.jsonl``; ``config.json``, ``summary.json``
            and ``sft/metrics.jsonl`` when present).
        out: the HTML file (default ``<out_dir>/report.html``).
        eval_runs: evaluation run directories to link (besides those found in ``runs_roots``).
        runs_roots: folders searched by :func:`find_eval_runs`.

    Raises:
        FileNotFoundError: ``out_dir`` has no ``metrics.jsonl``, or an ``eval_runs`` entry
            is not a run directory.
        ValueError: a corrupt ``metrics.jsonl`` line.
    """
    base = Path(out_dir)
    metrics_path = base / "metrics.jsonl"
    if not metrics_path.is_file():
        raise FileNotFoundError(f"{base} is not a training output directory (no metrics.jsonl)")
    try:
        rows = read_metrics(metrics_path)
    except ValueError as exc:
        raise ValueError(f"{metrics_path}: a line is not valid JSON ({exc})") from None
    target = Path(out) if out is not None else base / REPORT_FILE
    cfg = _read_json(base / "config.json")
    charts = []
    shown: set[str] = set()
    for i, (title, keys) in enumerate(PANELS):
        charts.append(
            line_chart(
                [(k, _series(rows, k, _phase_of(k))) for k in keys],
                title=title,
                chart_id=f"panel{i}",
            )
        )
        shown.update(keys)
    sft_path = base / "sft" / "metrics.jsonl"
    if sft_path.is_file():
        sft_rows = read_metrics(sft_path)
        charts.append(
            line_chart(
                [("sft/loss", _series(sft_rows, "sft/loss", "sft"))],
                title="SFT loss",
                chart_id="sft",
            )
        )
    other = sorted(
        {
            k
            for r in rows
            for k, v in r.items()
            if k not in shown and k not in ("step", "time", "phase") and isinstance(v, (int, float))
        }
    )
    more = [
        line_chart(
            [(k, _series(rows, k, _phase_of(k)))], title=k, chart_id=f"m{i}", width=330, height=200
        )
        for i, k in enumerate(other)
    ]

    written = [target]
    evals = []
    runs = sorted({Path(r) for r in eval_runs} | set(find_eval_runs(base, runs_roots)))
    for run in runs:
        if not (run / "run.json").is_file():
            raise FileNotFoundError(f"{run} is not a run directory (no run.json)")
        page = target.parent / EVAL_DIR / f"{slug(run.name)}.html"
        nav = [("training report", os.path.relpath(target, page.parent))]
        written.append(write_run_report(run, page, nav=nav))
        evals.append(_eval_row(run, os.path.relpath(page, target.parent), base))
    write_page(
        target,
        render_page(
            "train.html",
            title=f"training report · {cfg.get('name', base.name)}",
            name=cfg.get("name", base.name),
            out_dir=str(base),
            n_rows=len(rows),
            last_step=max((r["step"] for r in rows), default=0),
            overview=_overview(cfg),
            pipeline=_pipeline(_read_json(base / "summary.json")),
            charts=charts,
            more_charts=more,
            evals=evals,
        ),
    )
    return written


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _overview(cfg: dict[str, Any]) -> list[tuple[str, Any]]:
    if not cfg:
        return [("config", "no config.json")]
    sec = lambda name: cfg.get(name) or {}  # noqa: E731
    alg, roll = sec("algorithm"), sec("rollout")
    filt = alg.get("filter") or {}
    return [
        ("preset / name", cfg.get("name")),
        ("environment", sec("env").get("id")),
        ("model", sec("model").get("path")),
        ("advantage estimator", alg.get("adv_estimator")),
        (
            "rollout filter",
            ", ".join(f"{k}={v}" for k, v in sorted(filt.items()))
            if isinstance(filt, dict)
            else filt,
        ),
        ("groups × group size", f"{roll.get('env_groups', '?')} × {roll.get('group_size', '?')}"),
        ("learning rate", sec("optim").get("lr")),
        ("steps", sec("trainer").get("total_steps")),
    ]


def _pipeline(summary: dict[str, Any]) -> dict[str, Any] | None:
    columns = [
        (label, summary[key])
        for key, label in (
            ("untrained", "untrained"),
            ("before_rl", "after SFT"),
            ("after_rl", "after RL"),
        )
        if isinstance(summary.get(key), dict)
    ]
    if not columns:
        return None
    keys = sorted({k for _, values in columns for k in values})
    return {
        "columns": columns,
        "metric_keys": keys,
        "split": summary.get("eval_split", "?"),
        "episodes": summary.get("eval_episodes", "?"),
    }
