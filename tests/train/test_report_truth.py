"""Reports tell the truth: tick labels equal tick values, evaluation runs
are matched by the model's manifest, the KL panels say what they plot, curves can be
smoothed and overlaid, and the before/after table has intervals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_bench import cli as bench_cli
from ragen_bench.model_dirs import model_fingerprint
from ragen_bench.site.charts import _tick_labels, _ticks, ema, line_chart
from ragen_train import cli as train_cli
from ragen_train.config import validation_episodes
from ragen_train.plot import PANELS, Y_LABELS
from ragen_train.report import scan_eval_runs, write_train_report
from tests.helpers.cli import in_process_cli

ROOT_BOARD = Path(__file__).resolve().parents[2] / "leaderboards" / "procedural.json"


@pytest.mark.parametrize(
    ("ticks", "labels"),
    [
        ([0.14, 0.16], ["0.14", "0.16"]),  # was "0.1", "0.2"
        ([0.0, 0.05, 0.1], ["0.00", "0.05", "0.10"]),  # was "0.0", "0.1", "0.1"
        ([-0.5, 0.0, 0.5], ["-0.5", "0.0", "0.5"]),
        ([1e-6, 2e-6], ["0.000001", "0.000002"]),
        ([0, 5, 10], ["0", "5", "10"]),
    ],
)
def test_tick_labels_equal_tick_values(ticks: list[float], labels: list[str]) -> None:
    assert _tick_labels(ticks) == labels


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e4, 1e4, allow_nan=False),
    st.floats(1e-6, 1e4, allow_nan=False),
)
def test_every_tick_label_reads_back_as_its_tick(lo: float, span: float) -> None:
    ticks = _ticks(lo, lo + span, 4)
    labels = _tick_labels(ticks)
    assert len(set(labels)) == len(labels)
    gap = min((b - a for a, b in zip(ticks, ticks[1:])), default=1.0)
    for label, tick in zip(labels, ticks):
        assert abs(float(label) - tick) <= max(gap * 1e-6, 1e-12)  # exact at the tick spacing


def test_kl_panels_say_what_they_plot() -> None:
    panels = dict(PANELS)
    assert panels["KL to the reference"] == ("actor/kl_loss",)
    assert panels["KL to the rollout policy"] == ("actor/approx_kl",)  # E[log π_old − log π]
    assert "rollout" not in Y_LABELS["KL to the reference"]
    assert "π_old" in Y_LABELS["KL to the rollout policy"]


def test_ema_is_debiased_tensorboard_smoothing() -> None:
    assert ema([1.0, 0.0, 0.0], 0.5) == pytest.approx([1.0, 1 / 3, 1 / 7])
    assert ema([2.0, 4.0], 0.0) == [2.0, 4.0]
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ema([1.0], 1.0)


def test_smoothing_draws_the_ema_over_the_faint_raw_line() -> None:
    pts = [(s, float(s % 2)) for s in range(1, 9)]
    svg = str(line_chart([("a", pts), ("b", pts[:3])], title="t", chart_id="c", smooth=0.5))
    assert svg.count('class="smoothed"') == 1  # "b" has fewer than 5 points: raw only
    assert svg.count('class="raw"') == 1
    assert svg.count("<title>a at step") == 8  # hover keeps the raw values
    assert "<title>a at step 2: 0</title>" in svg


def _fake_out(root: Path, name: str, values: list[float]) -> Path:
    out = root / name
    (out / "final_model").mkdir(parents=True)
    rows = [
        {"step": s, "phase": "train", "train/success": v, "actor/approx_kl": 0.01 * s}
        for s, v in enumerate(values, start=1)
    ]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "config.json").write_text(
        json.dumps({"name": name, "env": {}, "rollout": {}, "trainer": {}})
    )
    return out


def _manifest(model: Path, weights: str) -> None:
    files = {"model.safetensors": {"size": 1, "sha256": weights}}
    (model / "manifest.json").write_text(json.dumps({"format": "ragen-model", "files": files}))


def _eval_run(runs: Path, run_id: str, model: Path, fingerprint: str | None) -> Path:
    d = runs / run_id
    d.mkdir(parents=True)
    meta = {"run_id": run_id, "model": str(model), "env_id": "ragen/Bandit-v0"}
    if fingerprint is not None:
        meta["model_fingerprint"] = fingerprint
    (d / "run.json").write_text(json.dumps(meta))
    return d


def test_evaluation_runs_are_matched_by_the_models_manifest(tmp_path: Path) -> None:
    out = _fake_out(tmp_path, "a", [0.1, 0.2])
    model = out / "final_model"
    _manifest(model, "1" * 64)
    old_print = model_fingerprint(model)
    _manifest(model, "2" * 64)  # a later run trained into the same out_dir
    now = model_fingerprint(model)
    assert old_print != now and re.fullmatch(r"[0-9a-f]{64}", now)
    runs = tmp_path / "runs"
    current = _eval_run(runs, "current", model, now)
    earlier = _eval_run(runs, "earlier", model, old_print)
    unknown = _eval_run(runs, "unknown", model, None)  # written before fingerprints
    _eval_run(runs, "elsewhere", tmp_path / "other" / "final_model", None)
    assert scan_eval_runs(out, [runs]) == ([current], [earlier, unknown])


def test_checkpoint_fingerprint_comes_from_the_checkpoint_manifest(tmp_path: Path) -> None:
    step = tmp_path / "checkpoints" / "step_000002"
    (step / "model").mkdir(parents=True)
    files = {
        "model/model.safetensors": {"sha256": "a" * 64},
        "optimizer.pt": {"sha256": "b" * 64},
    }
    (step / "manifest.json").write_text(json.dumps({"files": files}))
    final = tmp_path / "final_model"
    final.mkdir()
    (final / "manifest.json").write_text(
        json.dumps({"files": {"model.safetensors": {"sha256": "a" * 64}}})
    )
    # the same weights: the same fingerprint, whichever manifest lists them
    assert model_fingerprint(step / "model") == model_fingerprint(final)
    assert model_fingerprint("tiny") is None and model_fingerprint(tmp_path / "nope") is None


def test_several_runs_overlay_and_smooth(tmp_path: Path) -> None:
    a = _fake_out(tmp_path, "run-a", [0.1, 0.3, 0.2, 0.5, 0.4, 0.6])
    b = _fake_out(tmp_path, "run-b", [0.0, 0.1, 0.1, 0.2, 0.2, 0.3])
    page = write_train_report(a, tmp_path / "r.html", runs_roots=[], compare=[b])[0]
    html = page.read_text()
    assert 'data-series="run-a: train/success"' in html
    assert 'data-series="run-b: train/success"' in html
    assert html.count('stroke-dasharray="5 3"') >= 1  # run-b, overlaid, is dashed
    assert "Runs overlaid: run-a, run-b" in html
    assert 'class="smoothed"' in html
    raw = write_train_report(a, tmp_path / "raw.html", runs_roots=[], smooth=0.0)[0].read_text()
    assert 'class="smoothed"' not in raw and 'data-series="train/success"' in raw
    with pytest.raises(ValueError, match="--smooth"):
        write_train_report(a, tmp_path / "x.html", runs_roots=[], smooth=1.5)


def test_runs_folder_that_does_not_exist_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _fake_out(tmp_path, "a", [0.1])
    missing = tmp_path / "runs" / "baselines"
    code, _, err = in_process_cli(monkeypatch, train_cli)(
        "report", str(out), "--runs", str(missing)
    )
    assert code == 0
    assert f"warning: --runs {missing}: no such folder, so no evaluation run is found there" in err
    code, _, err = in_process_cli(monkeypatch, bench_cli)(
        "site", str(ROOT_BOARD), "--runs", str(missing), "--out", str(tmp_path / "site")
    )
    assert code == 0
    assert err.strip() == (
        f"warning: --runs {missing}: no such folder, so no entry links a run report from it"
    )


def test_long_tick_labels_fit_in_the_left_margin() -> None:
    """Learning rates such as 0.00022 were cut to ".00022" by a fixed 48 px margin."""
    pts = [(s, 0.00018 + 0.00004 * s / 30) for s in range(1, 31)]
    svg = str(line_chart([("actor/lr", pts)], title="learning rate", chart_id="lr"))
    labels = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end">([^<]+)</text>', svg)
    assert [text for _, text in labels] == ["0.00019", "0.00020", "0.00021", "0.00022"]
    for x, text in labels:  # right-aligned at x: each character about 6.1 px at 11 px
        assert float(x) - 6.5 * len(text) >= 0, (x, text)
    plot_left = float(
        re.search(
            r'<line class="axis" x1="[\d.]+" x2="[\d.]+" y1="[\d.]+" y2="[\d.]+"/><line class="axis" x1="([\d.]+)"',
            svg,
        ).group(1)
    )
    assert plot_left == float(labels[0][0]) + 6  # the labels' 6 px gap to the axis
    short = str(line_chart([("s", [(1, 0.2), (2, 0.6)])], title="t", chart_id="s"))
    assert '<line class="axis" x1="48"' in short  # short labels keep the 48 px margin


def test_held_out_success_is_charted_by_step_and_wall_time_with_wilson_intervals(
    tmp_path: Path,
) -> None:
    from ragen_bench.stats import wilson_interval
    from ragen_train.report import heldout_points

    out = tmp_path / "run"
    out.mkdir()
    rows = [
        {"step": 0, "time": 1000.0, "phase": "val", "val/success": 0.25},
        {"step": 1, "time": 1060.0, "phase": "train", "train/success": 0.3, "time/step_s": 60.0},
        {"step": 2, "time": 1180.0, "phase": "train", "train/success": 0.4, "time/step_s": 90.0},
        {"step": 2, "time": 1300.0, "phase": "val", "val/success": 0.5},
    ]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {"name": "r", "env": {"val": []}, "rollout": {}, "trainer": {"val_episodes": 64}}
    (out / "config.json").write_text(json.dumps(cfg))
    points = heldout_points(rows, 64)
    assert [(p["step"], p["wall_s"], p["success"]) for p in points] == [
        (0, 0.0, 0.25),
        (2, 300.0, 0.5),
    ]
    # Wilson (1927) by hand for 32/64: centre 0.5, half-width 1.96·sqrt(1/256 + 1.96²/16384)/(1 + 1.96²/64)
    half = 1.96 * (0.25 / 64 + 1.96**2 / (4 * 64**2)) ** 0.5 / (1 + 1.96**2 / 64)
    assert points[1]["low"] == pytest.approx(0.5 - half) and points[1]["high"] == pytest.approx(
        0.5 + half
    )
    assert (points[0]["low"], points[0]["high"]) == wilson_interval(0.25, 64)
    html = write_train_report(out, tmp_path / "r.html", runs_roots=[])[0].read_text()
    for title, xlabel, x in (
        ("held-out success by step", "training step", "2"),
        ("held-out success by wall time", "wall time (minutes)", "5"),
    ):
        assert f">{title}</text>" in html
        assert f"<title>val/success at {xlabel} {x}: 0.5</title>" in html
        assert f"<title>Wilson 95% low (n=64) at {xlabel} {x}: {0.5 - half:.4g}</title>" in html
    # several validation envs: their episodes add up
    multi = {"trainer": {"val_episodes": 64}, "env": {"val": [{"episodes": 128}, {}]}}
    assert validation_episodes(multi) == 192 and validation_episodes({}) is None
    # no validation logged: no held-out chart
    assert heldout_points(rows[1:3], 64) == []
