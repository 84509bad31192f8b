"""An HTML report of a training run (``ragen-train report OUT_DIR``).

The page shows the run's configuration, the held-out evaluation before and after RL when
the run was a recipe (``summary.json`` of :mod:`ragen_train.pipeline`), the training curves
of ``training_curves.png`` (:data:`ragen_train.plot.PANELS`) as interactive SVG charts
(hover for values, tick series on and off), held-out (validation) success against the
training step and against wall time with Wilson 95% intervals (:func:`heldout_points`),
every other logged metric, the SFT loss when
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

from .config import validation_episodes
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


def scan_eval_runs(
    out_dir: str | Path, roots: Iterable[str | Path]
) -> tuple[list[Path], list[Path]]:
    """``(matching, stale)``: run directories under ``roots`` (``root/*`` and ``root/*/*``)
    whose model is a folder inside ``out_dir`` (``run.json`` ``model``), sorted by path.

    A run matches when the ``model_fingerprint`` it recorded equals the fingerprint of the
    model folder now (:func:`ragen_bench.model_dirs.model_fingerprint`, from the folder's
    manifest): a later training run into the same ``out_dir`` replaces the model, and the
    evaluations of the earlier one are ``stale``, as are runs that recorded no fingerprint
    of a folder that has one now (written before fingerprints were recorded).  A folder
    without a manifest can only be matched by path.
    """
    from ragen_bench.model_dirs import model_fingerprint

    base = Path(out_dir).resolve()
    found, stale = set(), set()
    now: dict[Path, str | None] = {}
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for meta in [*root.glob("*/run.json"), *root.glob("*/*/run.json")]:
            try:
                run = json.loads(meta.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            model = run.get("model") if isinstance(run, dict) else None
            if not model or not Path(model).resolve().is_relative_to(base):
                continue
            folder = Path(model).resolve()
            if folder not in now:
                now[folder] = model_fingerprint(folder)
            same = now[folder] is None or run.get("model_fingerprint") == now[folder]
            (found if same else stale).add(meta.parent)
    return sorted(found), sorted(stale)


def find_eval_runs(out_dir: str | Path, roots: Iterable[str | Path]) -> list[Path]:
    """The matching runs of :func:`scan_eval_runs`."""
    return scan_eval_runs(out_dir, roots)[0]


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


#: Default EMA weight of the training curves (TensorBoard's default slider value).
DEFAULT_SMOOTH = 0.6


def _load_rows(out_dir: Path) -> list[dict[str, Any]]:
    metrics_path = out_dir / "metrics.jsonl"
    if not metrics_path.is_file():
        raise FileNotFoundError(f"{out_dir} is not a training output directory (no metrics.jsonl)")
    try:
        return read_metrics(metrics_path)
    except ValueError as exc:
        raise ValueError(f"{metrics_path}: a line is not valid JSON ({exc})") from None


def _run_label(out_dir: Path, cfg: dict[str, Any], taken: set[str]) -> str:
    """A short distinct name for an overlaid run: its config ``name``, else its folder name."""
    label = str(cfg.get("name") or out_dir.name)
    if label in taken:
        label = f"{label} ({out_dir})"
    taken.add(label)
    return label


def write_train_report(
    out_dir: str | Path,
    out: str | Path | None = None,
    *,
    eval_runs: Sequence[str | Path] = (),
    runs_roots: Sequence[str | Path] = ("runs",),
    smooth: float = DEFAULT_SMOOTH,
    compare: Sequence[str | Path] = (),
) -> list[Path]:
    """Write the report of training output directory ``out_dir``; return the files written
    (the report first, then one run report per evaluation run).

    Args:
        out_dir: a ``trainer.out_dir`` (``metrics.jsonl``; ``config.json``, ``summary.json``
            and ``sft/metrics.jsonl`` when present).
        out: the HTML file (default ``<out_dir>/report.html``).
        eval_runs: evaluation run directories to link (besides those found in ``runs_roots``).
        runs_roots: folders searched by :func:`scan_eval_runs`.
        smooth: EMA weight of the curves in ``[0, 1)`` (0: raw curves only;
            :func:`ragen_bench.site.charts.ema`); the raw points stay, faint and hoverable.
        compare: other training output directories whose curves are overlaid (dashed),
            each series labelled ``<run name>: <metric>``.

    Raises:
        FileNotFoundError: ``out_dir`` or a ``compare`` entry has no ``metrics.jsonl``, or
            an ``eval_runs`` entry is not a run directory.
        ValueError: a corrupt ``metrics.jsonl`` line; ``smooth`` outside ``[0, 1)``.
    """
    if not 0.0 <= smooth < 1.0:
        raise ValueError(f"--smooth must be in [0, 1), got {smooth}")
    base = Path(out_dir)
    rows = _load_rows(base)
    target = Path(out) if out is not None else base / REPORT_FILE
    cfg = _read_json(base / "config.json")
    taken: set[str] = set()
    runs_rows = [(_run_label(base, cfg, taken) if compare else "", rows)]
    for other in compare:
        other = Path(other)
        runs_rows.append(
            (_run_label(other, _read_json(other / "config.json"), taken), _load_rows(other))
        )
    overlaid = {label for label, _ in runs_rows[1:]}

    def panel_series(keys: Sequence[str]) -> tuple[list, list[str]]:
        series, dashed = [], []
        for run_label, run_rows in runs_rows:
            for k in keys:
                name = f"{run_label}: {k}" if run_label else k
                series.append((name, _series(run_rows, k, _phase_of(k))))
                if run_label in overlaid:
                    dashed.append(name)
        return series, dashed

    charts = heldout_charts(rows, cfg)
    shown: set[str] = set()
    for i, (title, keys) in enumerate(PANELS):
        series, dashed = panel_series(keys)
        charts.append(
            line_chart(series, title=title, chart_id=f"panel{i}", smooth=smooth, dashed=dashed)
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
                smooth=smooth,
            )
        )
    other = sorted(
        {
            k
            for _, run_rows in runs_rows
            for r in run_rows
            for k, v in r.items()
            if k not in shown and k not in ("step", "time", "phase") and isinstance(v, (int, float))
        }
    )
    more = []
    for i, k in enumerate(other):
        series, dashed = panel_series([k])
        more.append(
            line_chart(
                series,
                title=k,
                chart_id=f"m{i}",
                width=330,
                height=200,
                smooth=smooth,
                dashed=dashed,
            )
        )

    written = [target]
    evals = []
    found, stale = scan_eval_runs(base, runs_roots)
    runs = sorted({Path(r) for r in eval_runs} | set(found))
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
            stale=[str(p) for p in stale if p not in runs],
            smooth=smooth,
            compared=[label for label, _ in runs_rows] if compare else [],
        ),
    )
    return written


def heldout_points(rows: list[dict[str, Any]], episodes: int | None) -> list[dict[str, float]]:
    """Held-out (validation) success of every ``val`` row of ``metrics.jsonl``, with its
    Wilson 95% interval (Wilson 1927, JASA 22:209; :func:`ragen_bench.stats.wilson_interval`).

    Each validation plays ``episodes`` independent episodes (the same seeds every time), so
    ``val/success`` is a share of ``episodes`` yes/no outcomes.  ``wall_s`` is the wall time
    since training started: from the validation before training when there is one, else
    from the start of step 1 (its end minus ``time/step_s``); a pause between a run and its
    ``--resume`` counts too.

    Returns:
        ``{"step", "wall_s", "success", "low", "high"}`` per validation, in logged order
        (``low``/``high`` equal ``success`` when ``episodes`` is unknown).
    """
    from ragen_bench.stats import wilson_interval

    timed = [r for r in rows if isinstance(r.get("time"), (int, float))]
    if not timed:
        return []
    first = timed[0]
    start = first["time"]
    if first.get("phase") == "train" and isinstance(first.get("time/step_s"), (int, float)):
        start -= first["time/step_s"]
    points = []
    for r in timed:
        share = r.get("val/success")
        if r.get("phase") != "val" or not isinstance(share, (int, float)):
            continue
        if not 0.0 <= share <= 1.0:
            continue
        low, high = wilson_interval(float(share), episodes) if episodes else (share, share)
        points.append(
            {
                "step": r["step"],
                "wall_s": max(0.0, r["time"] - start),
                "success": float(share),
                "low": low,
                "high": high,
            }
        )
    return points


def heldout_charts(rows: list[dict[str, Any]], cfg: dict[str, Any]) -> list[Any]:
    """Two charts of :func:`heldout_points`: held-out success against the training step and
    against wall time (minutes), each with its Wilson 95% interval as two dashed lines; none
    when the run logged no validation."""
    n = validation_episodes(cfg)
    points = heldout_points(rows, n)
    if not points:
        return []
    per = f" (n={n})" if n else " (n unknown)"
    bounds = (f"Wilson 95% low{per}", f"Wilson 95% high{per}")
    charts = []
    for x_key, xlabel, scale, title, chart_id in (
        ("step", "training step", 1.0, "held-out success by step", "heldout-step"),
        ("wall_s", "wall time (minutes)", 60.0, "held-out success by wall time", "heldout-wall"),
    ):
        series = [
            (name, [(p[x_key] / scale, p[key]) for p in points])
            for name, key in (("val/success", "success"), (bounds[0], "low"), (bounds[1], "high"))
        ]
        charts.append(
            line_chart(series, title=title, chart_id=chart_id, xlabel=xlabel, dashed=bounds)
        )
    return charts


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


#: Before/after metrics that are one yes/no per episode, so a Wilson interval applies
#: (``test/status_*`` are shares of episodes ending so).
def _binary(key: str) -> bool:
    return key in ("test/success", "val/success") or "/status_" in key


def _cell(value: Any, key: str, n: Any) -> str:
    """A before/after table cell: the value, with its Wilson 95% interval for a
    per-episode yes/no share over ``n`` independent episodes."""
    from ragen_bench.site.page import fmt_num
    from ragen_bench.stats import wilson_interval

    text = fmt_num(value)
    if _binary(key) and isinstance(value, (int, float)) and isinstance(n, int) and n > 0:
        if 0.0 <= value <= 1.0:
            lo, hi = wilson_interval(float(value), n)
            text += f" [{lo:.3f}, {hi:.3f}]"
    return text


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
    n = summary.get("eval_episodes", "?")
    return {
        "columns": [label for label, _ in columns],
        "rows": [(k, [_cell(values.get(k), k, n) for _, values in columns]) for k in keys],
        "split": summary.get("eval_split", "?"),
        "episodes": n,
    }
