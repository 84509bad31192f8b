"""``ragen_train.plot``: the training figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragen_train.plot import PANELS, Y_LABELS, plot_metrics, training_figure


def test_plot_has_loss_kl_lr_and_critic_panels_with_labelled_axes(tmp_path: Path) -> None:
    rows = [
        {
            "step": s,
            "phase": "train",
            "train/success": 0.1 * s,
            "actor/pg_loss": -0.01 * s,
            "actor/kl_loss": 0.001 * s,
            "actor/lr": 1e-6 * s,
            "critic/vf_loss": 1.0 / s,
            "critic/value_mean": 0.2,
            "actor/grad_norm": 1.0,
        }
        for s in range(1, 4)
    ]
    rows.append({"step": 3, "phase": "val", "val/success": 0.5})
    fig = training_figure(rows)
    axes = {ax.get_title(): ax for ax in fig.axes}
    assert list(axes) == [title for title, _ in PANELS]
    for title in ("policy loss", "KL to the reference", "learning rate", "critic"):
        assert title in axes
    for title, ax in axes.items():
        assert ax.get_xlabel() == "training step" and ax.get_ylabel() == Y_LABELS[title]
    labels = lambda t: [ln.get_label() for ln in axes[t].get_lines()]  # noqa: E731
    assert labels("learning rate") == ["actor/lr"] and labels("critic") == [
        "critic/vf_loss",
        "critic/value_mean",
    ]
    assert labels("KL to the reference") == ["actor/kl_loss"] and labels("policy loss") == [
        "actor/pg_loss"
    ]
    assert list(axes["learning rate"].get_lines()[0].get_ydata()) == pytest.approx(
        [1e-6, 2e-6, 3e-6]
    )
    assert [t.get_text() for t in axes["policy entropy"].texts] == ["not logged in this run"]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    png = plot_metrics(path, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
