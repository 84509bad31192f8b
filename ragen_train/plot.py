"""Training curves as a PNG (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .logger import read_metrics

PANELS = (
    ("success", ("train/success", "val/success")),
    ("return", ("train/return", "val/return")),
    ("format-valid rate", ("train/format_valid_rate", "val/format_valid_rate")),
    ("policy entropy", ("actor/entropy",)),
    ("kept groups (filter)", ("filter/kept_ratio",)),
    ("gradient norm", ("actor/grad_norm",)),
)


def plot_metrics(metrics_path: str | Path, out_png: str | Path, *, title: str = "StarPO training") -> Path:
    """Plot the standard panels from a ``metrics.jsonl``.

    Raises:
        ImportError: matplotlib is missing (``pip install 'ragen[train]'``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("plotting needs matplotlib: pip install 'ragen[train]'") from exc
    rows = read_metrics(metrics_path)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (name, keys) in zip(axes.flat, PANELS):
        for key in keys:
            phase = "val" if key.startswith("val/") else "train"
            pts: list[tuple[int, Any]] = [(r["step"], r[key]) for r in rows
                                          if r.get("phase") == phase and r.get(key) is not None]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o" if phase == "val" else None, markersize=3, label=key)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
