"""Training reports (``ragen-train report OUT_DIR``) over a real two-step StarPO run of the
tiny model and a real ``ragen-train eval`` of its checkpoint, driven in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ragen_train.cli
from ragen_bench.site.charts import _tick_labels, _ticks, line_chart
from ragen_train.logger import read_metrics
from ragen_train.plot import PANELS
from ragen_train.report import find_eval_runs, write_train_report
from tests.helpers.browser import browser, console_errors, file_url  # noqa: F401  (browser is a fixture)
from tests.helpers.cli import in_process_cli


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """``(out_dir, runs root)``: 2 StarPO steps (quickstart preset, tiny model), a checkpoint
    at step 2 and a 4-episode evaluation of it, both through the real CLI in-process
    (tests/helpers/cli.py)."""
    tmp = tmp_path_factory.mktemp("train")
    out = tmp / "out"
    with pytest.MonkeyPatch.context() as mp:
        invoke = in_process_cli(mp, ragen_train.cli)
        code, _, err = invoke(
            "starpo",
            "--config",
            "quickstart",
            "model.path=tiny",
            "trainer.total_steps=2",
            "trainer.val_every=1",
            "trainer.val_episodes=4",
            "trainer.save_every=2",
            f"trainer.out_dir={out}",
        )
        assert code == 0, err[-2000:]
        model = next((out / "checkpoints").glob("step_*/model"))
        code, _, err = invoke("eval", str(model), "--episodes", "4", "--out", str(tmp / "runs"))
        assert code == 0, err[-2000:]
    return out, tmp / "runs"


@pytest.mark.slow
def test_train_report_has_the_png_panels_with_every_logged_point(trained, tmp_path):
    out, runs = trained
    page = write_train_report(out, tmp_path / "r.html", runs_roots=[runs])[0]
    html = page.read_text()
    rows = read_metrics(out / "metrics.jsonl")
    for title, _keys in PANELS:
        assert f'<text class="title" x="48" y="16">{title}</text>' in html
    n_train = sum(1 for r in rows if r["phase"] == "train" and r.get("train/success") is not None)
    n_val = sum(1 for r in rows if r["phase"] == "val" and r.get("val/success") is not None)
    assert n_train == 2 and n_val >= 2
    assert len(re.findall(r"<title>train/success at step", html)) == n_train
    assert len(re.findall(r"<title>val/success at step", html)) == n_val


@pytest.mark.slow
def test_train_report_links_evaluation_reports_and_curves_are_interactive(
    browser, trained, tmp_path
):
    from selenium.webdriver.common.by import By

    out, runs = trained
    files = write_train_report(out, tmp_path / "r.html", runs_roots=[runs])
    assert (
        find_eval_runs(out, [runs]) and len(files) == 2 and files[1].parent.name == "eval_reports"
    )
    browser.get(file_url(files[0]))
    box = browser.find_element(By.CSS_SELECTOR, "input[data-series-toggle=panel0-s0]")
    series = browser.find_element(By.ID, "panel0-s0")
    assert series.get_attribute("data-series") == "train/success" and series.is_displayed()
    box.click()
    assert not series.is_displayed()
    box.click()
    assert series.is_displayed()
    browser.find_element(By.CSS_SELECTOR, "#evals tbody a").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#episodes details.episode")) == 4
    browser.find_element(By.LINK_TEXT, "training report").click()
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Training run")
    assert console_errors(browser) == []


@pytest.mark.slow
def test_train_report_cli(trained, tmp_path, monkeypatch):
    """`ragen-train report` in-process (tests/helpers/cli.py): its output and one-line error."""
    import ragen_train.cli
    from tests.helpers.cli import in_process_cli

    out, runs = trained
    invoke = in_process_cli(monkeypatch, ragen_train.cli)
    code, stdout, stderr = invoke("report", str(out), "--runs", str(runs))
    assert code == 0, stderr
    assert (out / "report.html").is_file() and "1 evaluation report" in stdout
    code, _, stderr = invoke("report", str(tmp_path))
    assert code == 2
    assert stderr.strip().splitlines() == [
        f"error: {tmp_path} is not a training output directory (no metrics.jsonl)"
    ]


def test_chart_ticks_on_a_range_below_float_resolution_terminate():
    # A flat metric such as a constant entropy of 7.26 once hung the chart (the tick step was
    # below the float spacing at that magnitude, so the tick loop never advanced).
    assert _ticks(7.26, 7.26 + 1e-15) == [7.26, 7.26 + 1e-15]
    assert _ticks(0, 8, 4) == [0, 2, 4, 6, 8]
    assert _tick_labels([-0.11, -0.1, -0.09]) == ["-0.11", "-0.10", "-0.09"]
    svg = line_chart([("flat", [(1, 7.26), (2, 7.26 + 1e-15)])], title="t", chart_id="c")
    assert svg.count("<circle") == 2


def test_line_chart_escapes_labels():
    svg = line_chart([("<b>x</b>", [(0, 1.0)])], title="<i>t</i>", chart_id="c")
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "&lt;i&gt;t&lt;/i&gt;" in svg


@pytest.mark.slow
def test_train_report_shows_before_and_after_evaluation_of_a_recipe(trained, tmp_path):
    import json
    import shutil

    out, _ = trained
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "summary.json").write_text(
        json.dumps(
            {  # the shape ragen_train.pipeline writes
                "untrained": {"val/success": 0.0},
                "before_rl": {"val/success": 0.578, "val/return": 0.1},
                "after_rl": {"val/success": 0.992, "val/return": 0.9},
                "eval_split": "test",
                "eval_episodes": 512,
            }
        )
    )
    html = write_train_report(copy, runs_roots=[])[0].read_text()
    assert "Held-out evaluation (test split, 512 episodes)" in html
    row = re.search(r"<tr><td>val/success</td>(.*?)</tr>", html).group(1)
    # success is one yes/no per episode: Wilson 95% intervals over the 512 episodes
    assert re.findall(r">([^<]+)</td>", row) == [
        "0.000 [0.000, 0.007]",
        "0.578 [0.535, 0.620]",
        "0.992 [0.980, 0.997]",
    ]
    ret = re.search(r"<tr><td>val/return</td>(.*?)</tr>", html).group(1)
    assert re.findall(r">([^<]+)</td>", ret) == ["–", "0.100", "0.900"]  # not a share: no interval
