"""The static leaderboard site (``ragen-bench site BOARDS... --out DIR``), driven in a real
headless Chromium over the published baseline boards and over a board built from real runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_bench.leaderboard import add_run
from ragen_bench.site import SiteError, build_site
from tests.helpers.browser import browser, console_errors, file_url  # noqa: F401  (browser is a fixture)

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted((ROOT / "leaderboards").glob("*.json"))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def board_with_runs(tmp_path_factory) -> tuple[Path, Path]:
    """``(board.json, runs root)``: oracle and random on FrozenLake, real runs under ``runs/baselines/``."""
    tmp = tmp_path_factory.mktemp("site")
    runs = tmp / "runs" / "baselines"
    board = tmp / "boards" / "lake.json"
    for backend in ("oracle", "random"):
        res = _cli(
            "run",
            "--backend",
            backend,
            "--env",
            "ragen/FrozenLake-v0",
            "--episodes",
            "8",
            "--group-size",
            "4",
            "--out",
            str(runs),
            "--run-id",
            f"{backend}-lake",
            "--no-progress",
        )
        assert res.returncode == 0, res.stderr
        add_run(board, runs / f"{backend}-lake", label=backend, description="a <b>lake</b> board")
    return board, tmp / "runs"


def _success_values(driver) -> list[float]:
    from selenium.webdriver.common.by import By

    col = [
        th.get_attribute("id") for th in driver.find_elements(By.CSS_SELECTOR, "#board thead th")
    ].index("col-success")
    return [
        float(tr.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-value"))
        for tr in driver.find_elements(By.CSS_SELECTOR, "#board tbody tr")
    ]


def test_board_sorts_by_success_when_header_is_clicked(browser, tmp_path):
    from selenium.webdriver.common.by import By

    build_site(BASELINES, tmp_path / "site", runs_roots=[tmp_path / "no-runs"])
    browser.get(file_url(tmp_path / "site" / "procedural.html"))
    before = _success_values(browser)
    board = json.loads((ROOT / "leaderboards" / "procedural.json").read_text())
    assert before == [
        e["metrics"]["success"]["mean"] for e in board["entries"]
    ]  # the board's order
    assert before != sorted(before, reverse=True)  # so that sorting has work to do
    header = browser.find_element(By.ID, "col-success")
    header.click()
    assert _success_values(browser) == sorted(before, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    assert _success_values(browser) == sorted(before)
    assert header.get_attribute("aria-sort") == "ascending"
    assert console_errors(browser) == []


def test_board_filters_by_environment(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    build_site(BASELINES, tmp_path / "site", runs_roots=[])
    browser.get(file_url(tmp_path / "site" / "data.html"))
    Select(browser.find_element(By.CSS_SELECTOR, "select[data-filter-attr=env]")).select_by_value(
        "ragen/WebShop-v0"
    )
    shown = [
        tr for tr in browser.find_elements(By.CSS_SELECTOR, "#board tbody tr") if tr.is_displayed()
    ]
    board = json.loads((ROOT / "leaderboards" / "data.json").read_text())
    webshop = sorted(e["model"] for e in board["entries"] if e["env_id"] == "ragen/WebShop-v0")
    assert {"oracle", "random"} <= set(webshop) and len(webshop) < len(board["entries"])
    assert sorted(tr.find_elements(By.TAG_NAME, "td")[0].text for tr in shown) == webshop
    assert {tr.get_attribute("data-env") for tr in shown} == {"ragen/WebShop-v0"}


def test_board_rows_link_to_run_reports(browser, board_with_runs, tmp_path):
    from selenium.webdriver.common.by import By

    board, runs = board_with_runs
    files = build_site([board], tmp_path / "site", runs_roots=[runs])
    assert tmp_path / "site" / "runs" / "oracle-lake.html" in files
    browser.get(file_url(tmp_path / "site" / "lake.html"))
    link = browser.find_element(By.LINK_TEXT, "oracle")
    assert link.get_attribute("href").endswith("/runs/oracle-lake.html")
    link.click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Run oracle-lake"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#episodes details.episode")) == 8
    browser.find_element(By.LINK_TEXT, "leaderboards").click()  # back to the index, relative links
    assert (
        browser.find_element(By.LINK_TEXT, "lake").get_attribute("href").endswith("/site/lake.html")
    )


def test_board_row_without_run_directory_has_no_link(board_with_runs, tmp_path):
    board, _ = board_with_runs
    build_site([board], tmp_path / "site", runs_roots=[tmp_path / "elsewhere"])
    html = (tmp_path / "site" / "lake.html").read_text()
    assert 'href="runs/' not in html and 'title="run oracle-lake was not found"' in html
    assert not (tmp_path / "site" / "runs").exists()


def test_board_page_shows_every_column(board_with_runs, tmp_path):
    board, runs = board_with_runs
    build_site([board], tmp_path / "site", runs_roots=[runs])
    html = (tmp_path / "site" / "lake.html").read_text()
    for col in (
        "policy",
        "back-end",
        "success % [95% CI]",
        "return [95% CI]",
        "format-valid",
        "tokens / episode",
        "episodes",
        "date",
        "env version",
        "protocol",
    ):
        assert f">{col}</th>" in html
    entry = next(e for e in json.loads(board.read_text())["entries"] if e["model"] == "oracle")
    s = entry["metrics"]["success"]
    assert (
        f'{100 * s["mean"]:.1f}% <span class="ci">[{100 * s["ci95"][0]:.1f}, {100 * s["ci95"][1]:.1f}]</span>'
        in html
    )
    assert "5×2 · think · full · 256 tok · g4" in html
    assert "a &lt;b&gt;lake&lt;/b&gt; board" in html  # board text is data: escaped


def test_site_is_deterministic(board_with_runs, tmp_path):
    board, runs = board_with_runs
    a = build_site([*BASELINES, board], tmp_path / "a", runs_roots=[runs])
    b = build_site([*BASELINES, board], tmp_path / "b", runs_roots=[runs])
    rel = [p.relative_to(tmp_path / "a") for p in a]
    assert rel == [p.relative_to(tmp_path / "b") for p in b]
    assert all((tmp_path / "a" / r).read_bytes() == (tmp_path / "b" / r).read_bytes() for r in rel)


def test_site_pages_need_no_network(board_with_runs, tmp_path):
    board, runs = board_with_runs
    files = build_site([*BASELINES, board], tmp_path / "site", runs_roots=[runs])
    assert {p.suffix for p in files} == {".html", ".json", ".csv"}  # pages and data/ downloads
    for page in (p for p in files if p.suffix == ".html"):
        html = page.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), page
        assert (
            "default-src &#39;none&#39;" in html and html.count("<script") == 1
        )  # CSP: no fetches, one script


def test_site_publishes_baseline_boards_with_one_command(tmp_path):
    res = _cli(
        "site", *map(str, BASELINES), "--out", str(tmp_path / "site"), cwd=tmp_path
    )  # no runs/ there
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "site").iterdir())
    assert names == sorted(
        ["index.html", "matrix.html", "data", *(f"{p.stem}.html" for p in BASELINES)]
    )
    index = (tmp_path / "site" / "index.html").read_text()
    for p in BASELINES:
        assert f'<a href="{p.stem}.html">{json.loads(p.read_text())["name"]}</a>' in index


def test_site_rejects_invalid_board_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "name": "x", "split": "test", "envs": {}}))
    res = _cli("site", str(bad), "--out", str(tmp_path / "site"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "entries" in lines[0]
    assert not (tmp_path / "site").exists()


def test_site_refuses_a_file_as_its_output_folder(tmp_path):
    (tmp_path / "site").write_text("keep me")
    res = _cli("site", *map(str, BASELINES), "--out", str(tmp_path / "site"))
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"error: --out {tmp_path / 'site'} is a file; the site needs a folder (it is created)"
    )
    assert (tmp_path / "site").read_text() == "keep me"


def test_site_refuses_two_boards_with_one_page_name(tmp_path):
    (tmp_path / "a").mkdir()
    shutil.copy(BASELINES[0], tmp_path / "a" / BASELINES[0].name)
    with pytest.raises(SiteError, match="would both publish as"):
        build_site([BASELINES[0], tmp_path / "a" / BASELINES[0].name], tmp_path / "site")


def test_page_templates_and_assets_are_tracked_not_ignored():
    # A `site/` pattern in .gitignore once hid ragen_bench/site/ from git and from the wheel.
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assets = [
        p
        for p in (ROOT / "ragen_bench" / "site").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert any(p.suffix == ".html" for p in assets) and any(p.suffix == ".js" for p in assets)
    res = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", *map(str, assets)], capture_output=True, text=True
    )
    assert res.stdout.strip() == "", f"ignored by .gitignore: {res.stdout}"


def test_run_ids_of_one_slug_get_one_report_page_each(tmp_path):
    """``col a`` and ``col_a`` slug alike: each board row still links its own run's report."""
    runs = tmp_path / "runs"
    board = tmp_path / "lake.json"
    for backend, run_id in (("oracle", "col a"), ("random", "col_a")):
        res = _cli(
            "run", "--policy", backend, "--env", "ragen/FrozenLake-v0", "--episodes", "4",
            "--out", str(runs), "--run-id", run_id, "--no-progress",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        add_run(board, runs / run_id, label=backend)
    build_site([board], tmp_path / "site", runs_roots=[runs])
    page = (tmp_path / "site" / "lake.html").read_text()
    links = re.findall(r'href="(runs/[^"]+\.html)"', page)
    assert len(set(links)) == 2, links
    by_model = {}
    for href in set(links):
        report = (tmp_path / "site" / href).read_text()
        by_model[href] = "oracle" if "col a" in report and "col_a" not in report else "random"
    assert sorted(by_model.values()) == ["oracle", "random"]


def test_rows_from_dirty_commits_or_without_seeds_are_marked_with_a_legend(tmp_path):
    """The published boards: every row whose commit ends in -dirty or that records no seeds
    carries a visible mark, and the page says what the marks mean."""
    boards = [json.loads(p.read_text()) for p in BASELINES]
    build_site(BASELINES, tmp_path / "site", reports=False)
    total = marked = 0
    for path, board in zip(BASELINES, boards, strict=True):
        page = (tmp_path / "site" / f"{path.stem}.html").read_text()
        rows = re.findall(r'<tr data-env="[^"]*">(.*?)</tr>', page, re.S)
        assert len(rows) == len(board["entries"])
        for entry, row in zip(board["entries"], rows, strict=True):
            dirty = str(entry.get("git_commit") or "").endswith("-dirty")
            assert (">dirty</span>" in row) == dirty, entry["run_id"]
            assert (">no seeds</span>" in row) == (not entry.get("seeds")), entry["run_id"]
            marked += dirty or not entry.get("seeds")
        total += len(rows)
        n = sum(
            1 for e in board["entries"] if e["git_commit"].endswith("-dirty") or not e.get("seeds")
        )
        if n:
            assert f"{n} of {len(rows)} rows are marked" in page
            assert "uncommitted changes" in page and "does not record its seeds" in page
    assert marked > 0 and total == sum(len(b["entries"]) for b in boards)
    assert "cells are marked" in (tmp_path / "site" / "matrix.html").read_text()


def test_a_clean_row_with_seeds_has_no_mark(board_with_runs, tmp_path):
    board, runs = board_with_runs
    data = json.loads(board.read_text())
    for e in data["entries"]:
        e["git_commit"] = "0123456789abcdef0123456789abcdef01234567"
        assert e["seeds"]  # add_run records them
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(data))
    build_site([clean], tmp_path / "site", runs_roots=[runs], reports=False)
    page = (tmp_path / "site" / "clean.html").read_text()
    assert 'class="flag"' not in page and "rows are marked" not in page


def test_board_table_scrolls_instead_of_overflowing(tmp_path: Path) -> None:
    from ragen_bench.site import build_site

    build_site([ROOT / "leaderboards" / "procedural.json"], tmp_path, runs_roots=[], reports=False)
    html = (tmp_path / "procedural.html").read_text()
    assert '<div class="table-scroll">\n<table id="board"' in html
    assert ".table-scroll { max-width: 100%; overflow-x: auto; }" in html  # the inlined CSS
