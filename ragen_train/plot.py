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
    ("gradient norm", ("actor/grad_norm", "critic/grad_norm")),
    ("policy loss", ("actor/pg_loss",)),
    ("KL to the reference", ("actor/kl_loss",)),
    ("KL to the rollout policy", ("actor/approx_kl",)),
    ("learning rate", ("actor/lr",)),
    ("critic", ("critic/vf_loss", "critic/value_mean")),
)

#: The y-axis label of every panel (the x axis is the training step).
Y_LABELS = {
    "success": "success rate (share of episodes)",
    "return": "episode return",
    "format-valid rate": "share of valid answers",
    "policy entropy": "nats per token",
    "kept groups (filter)": "share of groups kept",
    "gradient norm": "L2 norm (before clipping)",
    "policy loss": "clipped PPO loss",
    "KL to the reference": "KL loss to the reference model (nats per token)",
    "KL to the rollout policy": "approx. KL, E[log π_old − log π] (nats per token)",
    "learning rate": "learning rate",
    "critic": "value loss / mean value",
}


def plot_metrics(
    metrics_path: str | Path, out_png: str | Path, *, title: str = "StarPO training"
) -> Path:
    """Plot :data:`PANELS` from a ``metrics.jsonl``: success, return, format-valid rate, entropy,
    kept groups, gradient norms, policy loss, KL to the reference (``actor/kl_loss``), KL to the
    rollout policy (``actor/approx_kl``), learning rate and critic (value loss, mean value),
    each with labelled axes (:data:`Y_LABELS`; x: training step).  A panel whose metrics were not
    logged (e.g. the critic of a GRPO run, KL without a reference model) says so.

    Raises:
        ImportError: matplotlib is missing (``pip install 'ragen[train]'``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("plotting needs matplotlib: pip install 'ragen[train]'") from exc
    fig = training_figure(read_metrics(metrics_path), title=title)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def training_figure(rows: list[dict[str, Any]], *, title: str = "StarPO training") -> Any:
    """The matplotlib figure of :func:`plot_metrics` for metrics rows (one axes per panel, in
    :data:`PANELS` order)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 4
    fig, axes = plt.subplots(-(-len(PANELS) // cols), cols, figsize=(17, 10))
    for ax in axes.flat[len(PANELS) :]:
        ax.remove()  # the grid's unused cells
    for ax, (name, keys) in zip(axes.flat, PANELS):
        for key in keys:
            phase = "val" if key.startswith("val/") else "train"
            pts: list[tuple[int, Any]] = [
                (r["step"], r[key])
                for r in rows
                if r.get("phase") == phase and r.get(key) is not None
            ]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o" if phase == "val" else None, markersize=3, label=key)
        ax.set_title(name)
        ax.set_xlabel("training step")
        ax.set_ylabel(Y_LABELS.get(name, name), fontsize=8)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(
                0.5,
                0.5,
                "not logged in this run",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=8,
                color="gray",
            )
        if name == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
