"""Screenshots of the result pages for the README (docs/img/*.png), from headless Chromium.

    python scripts/site_screenshots.py [--train OUT_DIR] [--out docs/img]

Builds the baseline leaderboard site (``leaderboards/*.json``), plays a small random-baseline
run on FrozenLake (8 episodes) for a run report, and saves

* ``docs/img/site_matrix.png`` — the model x environment-family matrix (site/matrix.html);
* ``docs/img/site_board.png``  — the procedural board, sorted by success;
* ``docs/img/run_report.png``  — the run report, filtered to one status, one episode open;
* ``docs/img/train_report.png`` — with ``--train OUT_DIR``: that run's training report.

Needs chromium and chromium-driver (apt) and selenium (the dev extra), as the browser tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragen_bench.report import write_run_report  # noqa: E402
from ragen_bench.site import build_site  # noqa: E402
from tests.helpers.browser import file_url, launch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--train", type=Path, help="a training output directory to shoot its report")
    args = ap.parse_args()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ragen_bench.cli",
                "run",
                "--policy",
                "random",
                "--env",
                "ragen/FrozenLake-v0",
                "--episodes",
                "8",
                "--group-size",
                "2",
                "--out",
                str(tmp),
                "--run-id",
                "random-FrozenLake",
                "--no-progress",
            ],
            check=True,
            capture_output=True,
        )
        build_site(
            sorted((ROOT / "leaderboards").glob("*.json")), tmp / "site", runs_roots=[ROOT / "runs"]
        )
        report = write_run_report(tmp / "random-FrozenLake", tmp / "report.html")
        driver = launch(1520, 900)
        try:
            driver.set_window_size(1520, 1500)  # every model row of the matrix
            driver.get(file_url(tmp / "site" / "matrix.html"))
            driver.save_screenshot(str(args.out / "site_matrix.png"))
            driver.set_window_size(1520, 900)
            driver.get(file_url(tmp / "site" / "procedural.html"))
            driver.find_element(By.ID, "col-success").click()
            driver.save_screenshot(str(args.out / "site_board.png"))
            driver.get(file_url(report))
            Select(driver.find_element(By.ID, "status-filter")).select_by_value("turn_limit")
            first = next(
                d
                for d in driver.find_elements(By.CSS_SELECTOR, "#episodes details.episode")
                if d.is_displayed()
            )
            driver.execute_script(
                "arguments[0].open = true; window.scrollTo(0, arguments[0].offsetTop - 70);", first
            )
            driver.save_screenshot(str(args.out / "run_report.png"))
            if args.train:
                from ragen_train.report import write_train_report

                page = write_train_report(
                    args.train, tmp / "train.html", runs_roots=[ROOT / "runs"]
                )[0]
                driver.get(file_url(page))
                driver.execute_script(
                    "window.scrollTo(0, document.getElementById('curves').offsetTop - 60);"
                )
                driver.save_screenshot(str(args.out / "train_report.png"))
        finally:
            driver.quit()
    for name in ("site_matrix.png", "site_board.png", "run_report.png", "train_report.png"):
        if (args.out / name).exists():
            print(args.out / name)


if __name__ == "__main__":
    main()
