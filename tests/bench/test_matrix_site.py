"""The site's model × environment matrix, board downloads, and controls that need
JavaScript hidden without it."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from ragen_bench.site import build_site
from ragen_bench.site.matrix import column_env_ids, family_of, matrix, to_csv
from tests.helpers.browser import browser, console_errors, file_url  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
BOARDS = sorted((ROOT / "leaderboards").glob("*.json"))


def _boards() -> list[tuple[str, dict]]:
    return [(json.loads(p.read_text())["name"], json.loads(p.read_text())) for p in BOARDS]


def test_matrix_cells_are_the_board_entries_and_the_average_their_mean() -> None:
    grid = matrix(_boards())
    entries = [e for _, b in _boards() for e in b["entries"]]
    assert grid["families"] == sorted({family_of(e["env_id"]) for e in entries})
    assert {(r["model"], r["backend"]) for r in grid["rows"]} == {
        (e["model"], e["backend"]) for e in entries if e["env_id"] in grid["columns"].values()
    }
    # one env id per column: the families' base ids on the committed boards
    assert grid["columns"]["2048"] == "ragen/2048-v0"
    assert grid["columns"]["RubiksCube"] == "ragen/RubiksCube-v0"
    assert grid["columns"]["Bandit"] == "ragen/Bandit-v0"
    for row in grid["rows"]:
        for fam, cell in row["cells"].items():
            assert cell["env_id"] == grid["columns"][fam]
            same = [
                e
                for e in entries
                if (e["model"], e["backend"]) == (row["model"], row["backend"])
                and e["env_id"] == cell["env_id"]
            ]
            most = max(e["episodes"] for e in same)
            chosen = [e for e in same if e["run_id"] == cell["run_id"]][0]
            assert chosen["episodes"] == most
            assert cell["mean"] == chosen["metrics"]["success"]["mean"]
            assert [cell["lo"], cell["hi"]] == chosen["metrics"]["success"]["ci95"]
        means = [c["mean"] for c in row["cells"].values()]
        assert row["average"] == sum(means) / len(means) and row["n"] == len(means)
    widest = max(r["n"] for r in grid["rows"])
    order = [(2 * r["n"] >= widest, r["average"]) for r in grid["rows"]]
    assert order == sorted(order, reverse=True)
    assert [r["rank"] for r in grid["rows"]] == sorted(
        (r["rank"] for r in grid["rows"]), reverse=True
    )
    # the committed boards: the one-env rows (2048's expectimax, the trained adapters) follow
    # every policy run on most families, the oracle (no 2048 cell) included
    names = [r["model"] for r in grid["rows"]]
    assert names.index("oracle") < names.index("expectimax")
    assert all(not r["broad"] for r in grid["rows"] if "+ StarPO" in r["model"])


def test_a_policy_on_few_families_never_outranks_one_on_most() -> None:
    """Of the widest row's 4 families: a one-env oracle at 100% ranks below a model on two
    at 10% (half: the broad tier) but above a one-env row at 50%; three families at 60%
    beat two at 10%, whatever n."""

    def entry(model: str, env_id: str, mean: float, episodes: int = 64) -> dict:
        return {
            "model": model,
            "backend": "x",
            "env_id": env_id,
            "episodes": episodes,
            "run_id": f"{model}-{env_id}",
            "metrics": {"success": {"mean": mean, "ci95": [mean, mean]}},
        }

    envs = ["ragen/Bandit-v0", "ragen/Sokoban-v0", "ragen/Countdown-v0", "ragen/Sudoku-v0"]
    board = {
        "entries": [
            entry("one-env oracle", "ragen/Bandit-v0", 1.0),
            entry("model", "ragen/Bandit-v0", 0.05),
            entry("model", "ragen/Sokoban-v0", 0.15),
            entry("weak one-env", "ragen/Sokoban-v0", 0.5),
            *(entry("wide", e, 0.0) for e in envs),
            *(entry("three", e, 0.6) for e in envs[:3]),
        ]
    }
    rows = matrix([("b", board)])["rows"]
    assert [(r["model"], r["n"], r["broad"]) for r in rows] == [
        ("three", 3, True),
        ("model", 2, True),
        ("wide", 4, True),
        ("one-env oracle", 1, False),
        ("weak one-env", 1, False),
    ]
    assert rows[1]["average"] == pytest.approx(0.1) and rows[1]["rank"] == pytest.approx(1.05)
    assert rows[3]["rank"] == 0.5 and rows[4]["rank"] == 0.25


def test_a_column_shows_one_env_id_not_the_latest_variant() -> None:
    """random on 2048-v0 (50%) and on the harder Target256 variant (6%, same episodes, later):
    the column is 2048-v0, where the model also played, so random shows 50%, not 6%."""

    def entry(model: str, env_id: str, mean: float, date: str) -> dict:
        return {
            "model": model,
            "backend": model,
            "env_id": env_id,
            "episodes": 256,
            "date": date,
            "run_id": f"{model}-{env_id}",
            "metrics": {"success": {"mean": mean, "ci95": [mean, mean]}},
        }

    entries = [
        entry("random", "ragen/2048-v0", 0.5, "2026-01-01"),
        entry("random", "ragen/2048-Target256-v0", 0.06, "2026-01-02"),
        entry("model", "ragen/2048-v0", 0.0, "2026-01-03"),
        entry("search", "ragen/2048-Target256-v0", 0.9, "2026-01-03"),
    ]
    assert column_env_ids(entries) == {"2048": "ragen/2048-v0"}
    grid = matrix([("b", {"entries": entries})])
    assert grid["columns"] == {"2048": "ragen/2048-v0"}
    cells = {r["model"]: r["cells"]["2048"]["mean"] for r in grid["rows"]}
    assert cells == {"random": 0.5, "model": 0.0}  # "search" played only the other variant
    # a tie in policies goes to the shorter (base) id
    tie = [entry("a", "ragen/2048-Target256-v0", 0.1, "x"), entry("a", "ragen/2048-v0", 0.2, "x")]
    assert column_env_ids(tie) == {"2048": "ragen/2048-v0"}


def test_the_models_table_keeps_the_dirty_mark_of_a_commit(tmp_path: Path) -> None:
    e = {
        "model": "m",
        "backend": "b",
        "env_id": "ragen/Bandit-v0",
        "episodes": 64,
        "run_id": "r",
        "git_commit": "0123456789abcdef0123456789abcdef01234567-dirty",
        "metrics": {"success": {"mean": 0.5, "ci95": [0.4, 0.6]}},
    }
    (row,) = matrix([("b", {"entries": [e]})])["rows"]
    assert row["meta"]["commits"] == "0123456789ab-dirty"


def test_family_of_groups_presets_of_one_env() -> None:
    assert family_of("ragen/Sokoban-Large-v0") == family_of("ragen/Sokoban-v0") == "Sokoban"
    assert family_of("ragen/Unknown-Thing-v3") == "Unknown"


def test_site_has_the_matrix_and_downloads_on_every_page(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(BOARDS, out, runs_roots=[], reports=False)
    html = (out / "matrix.html").read_text()
    grid = matrix(_boards())
    assert html.count('<tr><td class="policy">') == len(grid["rows"])
    oracle = next(r for r in grid["rows"] if r["model"] == "oracle")
    assert f"{100 * oracle['average']:.1f} ({oracle['n']})" in html
    col = grid["columns"]["Sokoban"].split("/")[-1]
    assert f'<th data-sort="num" class="num" title="ragen/{col}">Sokoban<br>' in html
    for page in ["index.html", "matrix.html", *(f"{p.stem}.html" for p in BOARDS)]:
        text = (out / page).read_text()
        assert '<a href="data/all.csv" download>' in text, page
        for p in BOARDS:
            assert f'<a href="data/{p.stem}.json" download>' in text, page
            assert f'<a href="data/{p.stem}.csv" download>' in text, page
        assert '<a href="matrix.html">models × envs</a>' in text
    for p in BOARDS:
        assert (out / "data" / f"{p.stem}.json").read_bytes() == p.read_bytes()
        rows = list(csv.DictReader(io.StringIO((out / "data" / f"{p.stem}.csv").read_text())))
        board = json.loads(p.read_text())
        assert [r["run_id"] for r in rows] == [e["run_id"] for e in board["entries"]]
        assert [float(r["success"]) for r in rows] == [
            e["metrics"]["success"]["mean"] for e in board["entries"]
        ]
    n_all = len(list(csv.DictReader(io.StringIO((out / "data" / "all.csv").read_text()))))
    assert n_all == sum(len(json.loads(p.read_text())["entries"]) for p in BOARDS)


def test_controls_that_need_javascript_are_hidden_without_it(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(BOARDS, out, runs_roots=[], reports=False)
    html = (out / "procedural.html").read_text()
    css = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    assert ".toolbar { display: none; }" in css and "html.js .toolbar { display: flex;" in css
    assert re.search(r"(?m)^html\.js table\.sortable th\[data-sort\]::after", css)
    assert 'document.documentElement.classList.add("js")' in html


def test_csv_cells_are_never_spreadsheet_formulas() -> None:
    text = to_csv([{"model": "=HYPERLINK(1)", "return": -0.5, "board": "@x"}])
    row = next(csv.DictReader(io.StringIO(text)))
    assert row["model"] == "'=HYPERLINK(1)" and row["board"] == "'@x" and row["return"] == "-0.5"


def test_matrix_sorts_in_a_browser_and_shows_controls_with_javascript(browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    out = tmp_path / "site"
    build_site(BOARDS, out, runs_roots=[], reports=False)
    browser.get(file_url(out / "matrix.html"))
    cells = lambda: [  # noqa: E731
        float(td.get_attribute("data-value"))
        for td in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr td:nth-child(3)")
    ]
    before = cells()
    header = browser.find_element(By.ID, "col-average")
    header.click()
    header.click()
    assert cells() == sorted(before)
    browser.get(file_url(out / "procedural.html"))
    assert browser.find_element(By.CSS_SELECTOR, ".toolbar").is_displayed()
    assert console_errors(browser) == []


def test_the_committed_boards_hold_the_model_on_every_family() -> None:
    """The committed boards: Qwen2.5-Coder-0.5B-Instruct on one env id of
    every family but Lean (no real verifier here), >= 64 test episodes each, with its back-end,
    dtype, seeds and a commit that is not -dirty recorded."""
    families = {
        "Sokoban", "FrozenLake", "Bandit", "Countdown", "Sudoku", "2048",
        "RubiksCube", "MetaMathQA", "DeepCoder", "SearchQA", "WebShop",
    }  # fmt: skip
    grid = matrix(_boards())
    (row,) = [r for r in grid["rows"] if r["model"] == "Qwen2.5-Coder-0.5B-Instruct"]
    assert set(row["cells"]) == families and row["broad"]
    entries = {e["run_id"]: e for _, b in _boards() for e in b["entries"]}
    for fam, cell in row["cells"].items():
        e = entries[cell["run_id"]]
        assert e["episodes"] >= 64 and e["split"] == "test", fam
        assert e["policy"]["dtype"] and e["backend"] in ("vllm", "hf"), fam
        seeds = e["seeds"]
        assert seeds["base"] == 0 and seeds["group_size"] == e["group_size"], fam
        assert seeds["groups"] * seeds["group_size"] == e["episodes"], fam
        assert len(e["git_commit"]) == 40 and not e["git_commit"].endswith("-dirty"), fam


def test_boards_and_matrix_show_every_column_in_a_1400_px_window(browser, tmp_path):  # noqa: F811
    """The published boards (long model names, run ids, protocols) and the 11-family matrix
    fit a 1400 px wide window: no column is cut off behind a scroll bar (at 2d4eff1 the
    board tables were 1,774-2,381 px wide and the matrix 1,691 px)."""
    out = tmp_path / "site"
    build_site(BOARDS, out, reports=False)
    browser.set_window_size(1400, 900)
    for page in [*(p.stem for p in BOARDS), "matrix"]:
        browser.get(file_url(out / f"{page}.html"))
        widths = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " [...document.querySelectorAll('.table-scroll')].map(e => [e.scrollWidth, e.clientWidth])];"
        )
        page_width, window_width, boxes = widths
        assert page_width <= window_width, (page, widths)
        assert boxes and all(scroll <= client for scroll, client in boxes), (page, widths)
