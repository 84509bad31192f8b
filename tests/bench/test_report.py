"""Run reports (``ragen-bench report RUN``), driven in a real headless Chromium.

The runs are real ``ragen-bench`` runs (random baseline on Bandit, and a scripted policy
through the real rollout engine for the model text that holds HTML).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ragen_bench.report import protocol_text, render_run_report, write_run_report
from ragen_bench.results import RunDir
from ragen_bench.runner import RunRequest, start_run
from ragen_bench.site.charts import histogram_bins
from tests.helpers.browser import browser, console_errors, file_url  # noqa: F401  (browser is a fixture)
from tests.helpers.scripted import ScriptedPolicy

HOSTILE = "<script>alert(1)</script>"
HOSTILE_IMG = '<img src=x onerror="alert(2)">'


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def random_run(tmp_path_factory) -> Path:
    """A real random-baseline run: 16 Bandit episodes, groups of 4 (mixed success / failure)."""
    out = tmp_path_factory.mktemp("runs")
    res = _cli(
        "run",
        "--backend",
        "random",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "16",
        "--group-size",
        "4",
        "--out",
        str(out),
        "--run-id",
        "rnd",
        "--no-progress",
    )
    assert res.returncode == 0, res.stderr
    return out / "rnd"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> Path:
    """A run whose model text holds HTML that would run script if it were not escaped."""
    out = tmp_path_factory.mktemp("hostile")

    def script(episode: int, turn: int) -> str:
        if episode == 0:
            return f"<think>{HOSTILE} {HOSTILE_IMG}</think><answer>{HOSTILE}</answer>"
        return f"no blocks at all {HOSTILE}"

    req = RunRequest(
        env_id="ragen/Bandit-v0",
        backend="random",
        model=None,
        episodes=2,
        out=str(out),
        run_id="xss",
    )
    return start_run(req, policy=ScriptedPolicy(script))


def _episodes(run: Path) -> list[dict]:
    return sorted(RunDir(run).read_episodes().values(), key=lambda e: e["episode_index"])


def test_report_shows_right_number_of_episodes_and_filters_to_success(
    browser, random_run, tmp_path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    eps = _episodes(random_run)
    n_success = sum(e["status"] == "success" for e in eps)
    assert len(eps) == 16 and 0 < n_success < 16  # a mixed run, so the filter has something to hide
    page = write_run_report(random_run, tmp_path / "report.html")
    browser.get(file_url(page))
    items = browser.find_elements(By.CSS_SELECTOR, "#episodes details.episode")
    assert len(items) == 16
    assert browser.find_element(By.ID, "episode-count").text == "16 of 16"
    Select(browser.find_element(By.ID, "status-filter")).select_by_value("success")
    visible = [d for d in items if d.is_displayed()]
    assert len(visible) == n_success
    assert {d.get_attribute("data-status") for d in visible} == {"success"}
    assert browser.find_element(By.ID, "episode-count").text == f"{n_success} of 16"
    # the per-status table counts the same episodes
    counts = Counter(e["status"] for e in eps)
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#counts thead th")]
    cells = [
        td.text for td in browser.find_elements(By.CSS_SELECTOR, "#counts tbody tr:first-child td")
    ]
    assert dict(zip(header[1:-1], map(int, cells[1:-1]))) == dict(counts)
    assert console_errors(browser) == []


def test_report_search_filters_episodes(browser, random_run, tmp_path):
    from selenium.webdriver.common.by import By

    eps = _episodes(random_run)
    target = eps[5]
    seed_text = f"seed {target['seed']} (group {target['group']}, member {target['member']})"
    page = write_run_report(random_run, tmp_path / "report.html")
    browser.get(file_url(page))
    box = browser.find_element(By.ID, "episode-search")
    box.send_keys(seed_text)
    visible = [
        d
        for d in browser.find_elements(By.CSS_SELECTOR, "#episodes details.episode")
        if d.is_displayed()
    ]
    assert [d.get_attribute("id") for d in visible] == [f"episode-{target['episode_index']}"]


def test_report_shows_model_script_as_text_and_runs_no_script(browser, hostile_run, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    page = write_run_report(hostile_run, tmp_path / "report.html")
    html = page.read_text(encoding="utf-8")
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    browser.get(file_url(page))
    browser.execute_script(
        "document.querySelectorAll('details').forEach(function (d) { d.open = true; });"
    )
    episode = browser.find_element(By.ID, "episode-0")
    assert HOSTILE in episode.find_element(By.CSS_SELECTOR, ".think pre").text
    assert HOSTILE in episode.find_element(By.CSS_SELECTOR, ".answer pre").text
    assert (
        HOSTILE
        in browser.find_element(By.ID, "episode-1")
        .find_element(By.CSS_SELECTOR, "pre.response")
        .text
    )
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 1  # ours only
    assert browser.find_elements(By.CSS_SELECTOR, "#episodes img") == []
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it raises
    assert console_errors(browser) == []


def test_report_shows_parse_flags_actions_and_step_rewards(random_run):
    html = render_run_report(random_run)
    ep = _episodes(random_run)[0]
    turn = ep["turns"][0]
    assert f"turn reward {turn['reward']:.3f}" in html
    assert "format valid" in html
    assert (
        f'<td>{turn["actions"][0]}</td><td class="num">{turn["step_rewards"][0]:.3f}</td>' in html
    )
    system = next(m["content"] for m in ep["messages"] if m["role"] == "system")
    assert system.split("\n")[0] in html


def test_report_invalid_answer_is_flagged(hostile_run):
    html = render_run_report(hostile_run)
    err = _episodes(hostile_run)[1]["turns"][0]["parsed"]["error"]
    assert err and f"invalid format: {err}" in html


def test_report_histogram_of_returns_counts_every_scored_episode(random_run):
    html = render_run_report(random_run)
    eps = _episodes(random_run)
    returns = Counter(float(e["return"]) for e in eps)
    titles = re.findall(r"<title>return (-?[0-9.e+-]+): (\d+) episodes</title>", html)
    assert {float(v): int(n) for v, n in titles} == dict(returns)


def test_histogram_bins_hand_computed():
    assert histogram_bins([1.0, 0.0, 1.0]) == [(0.0, 0.0, 1), (1.0, 1.0, 2)]
    bins = histogram_bins([float(i) for i in range(30)], max_bins=3)
    assert bins == [(0.0, 29 / 3, 10), (29 / 3, 58 / 3, 10), (58 / 3, 29.0, 10)]
    assert histogram_bins([]) == []


def test_report_diagnostics_block_when_present(random_run, tmp_path):
    import shutil

    from ragen_envs.config import schema_validator

    run = tmp_path / "with_diag"
    shutil.copytree(random_run, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["diagnostics"] = {
        "schema_version": 1,
        "created": "2026-12-01T00:00:00+00:00",
        "scorer": {"kind": "hf", "model": "tiny"},
        "settings": {
            "num_samples": 16,
            "samplers": ["first_turn"],
            "seed": 0,
            "use_token_ids": True,
            "thresholds": {
                "mi_fraction": 0.1,
                "entropy_per_token": 0.5,
                "mi_basis": "seq",
                "min_columns": 2,
                "min_rows": 4,
            },
        },
        "metrics": {
            "collapse/first_turn/retrieval_accuracy": 0.8125,
            "collapse/first_turn/regime_code": 1,
        },
        "regimes": {"first_turn": "template_collapse"},
        "timing_s": 1.5,
    }
    schema_validator("summary.schema.json").validate(
        summary
    )  # the shape `ragen-bench diagnose` writes
    (run / "summary.json").write_text(json.dumps(summary))
    html = render_run_report(run)
    assert (
        "Reasoning-collapse diagnostics" in html
        and "template_collapse" in html
        and "0.8125" in html
    )
    assert "Reasoning-collapse diagnostics" not in render_run_report(random_run)


def test_report_of_unfinished_run_uses_recorded_episodes(random_run, tmp_path):
    import shutil

    run = tmp_path / "unfinished"
    shutil.copytree(random_run, run)
    (run / "summary.json").unlink()
    lines = (run / "episodes.jsonl").read_text().splitlines(keepends=True)
    (run / "episodes.jsonl").write_text("".join(lines[:5]))  # an interrupted run: 5 of 16 episodes
    html = render_run_report(run)
    assert html.count('<details class="episode"') == 5
    assert "5 scored / 16 requested (11 missing)" in html


def test_report_is_deterministic(random_run, tmp_path):
    a = write_run_report(random_run, tmp_path / "a.html").read_bytes()
    b = write_run_report(random_run, tmp_path / "b.html").read_bytes()
    assert a == b


def test_report_cli_writes_report_and_refuses_non_run(random_run, tmp_path):
    res = _cli("report", str(random_run))
    assert res.returncode == 0, res.stderr
    assert (random_run / "report.html").is_file() and "report.html" in res.stdout
    res = _cli("report", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: {tmp_path} is not a run directory (no run.json)"
    ]


def test_protocol_text_counts_in_the_singular() -> None:
    p = {"max_turns": 1, "max_actions_per_turn": 1, "enable_think": False, "group_size": 1}
    assert protocol_text(p).startswith("1 turn × 1 action · no think")
    p = {**p, "max_turns": 5, "max_actions_per_turn": 2}
    assert protocol_text(p).startswith("5 turns × 2 actions")
