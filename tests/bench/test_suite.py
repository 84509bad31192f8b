"""``ragen-bench run --suite`` / ``--env A --env B``: one run folder per env under one
parent folder, interrupted (a real SIGINT to a real subprocess) and resumed to one table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_bench.cli import app
from ragen_bench.results import RunDir
from ragen_bench.suite import SUITES, UnknownSuiteError, get_suite, member_run_id, read_suite

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _bench(*args: str) -> list[str]:
    return [sys.executable, "-m", "ragen_bench.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def test_a_suite_interrupted_by_sigint_resumes_each_env_where_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = out / "s" / member_run_id("s", "ragen/Sokoban-v0") / "episodes.jsonl"
    proc = subprocess.Popen(
        _bench(
            "run",
            "--policy",
            "random",
            "--suite",
            "procedural",
            "--episodes",
            "200",
            "--out",
            str(out),
            "--run-id",
            "s",
            "--no-progress",
        ),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while _lines(first) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # during the first env: later envs not started
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    saved = _lines(first)
    assert 0 < saved < 200
    assert f"0 of 5 runs complete, {saved} of 1000 episodes are saved in {out / 's'}" in err
    assert f"finish the suite with `ragen-bench run --resume {out / 's'}`" in err
    meta = read_suite(out / "s")
    assert [r["env_id"] for r in meta["runs"]] == [e.env_id for e in SUITES["procedural"].envs]

    res = subprocess.run(
        _bench("run", "--resume", str(out / "s"), "--no-progress", "--json"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)  # --json: stdout holds the JSON document alone
    assert doc["suite"] == "procedural" and len(doc["runs"]) == 5
    for row in doc["runs"]:
        assert row["summary"]["episodes"] == {
            "requested": 200,
            "recorded": 200,
            "scored": 200,
            "missing": 0,
        }
        assert row["summary"]["env"]["ids"] == [row["env_id"]]
        assert row["failure"] is None
        episodes = Path(row["path"]) / "episodes.jsonl"
        assert _lines(episodes) == 200  # nothing played twice
    sessions = RunDir(first.parent).read_run()["sessions"]
    assert [s["episodes_before"] for s in sessions] == [0, saved]  # continued where it stopped
    table = res.stderr  # the table goes to stderr with --json
    assert "suite procedural" in table and table.count("200/200") == 5


def test_several_envs_run_as_one_suite_with_one_table(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "run",
            "--policy",
            "random",
            "--env",
            "ragen/Bandit-v0",
            "--env",
            "ragen/FrozenLake-v0",
            "--episodes",
            "4",
            "--out",
            str(tmp_path),
            "--run-id",
            "pair",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    meta = read_suite(tmp_path / "pair")
    assert meta["suite"] is None
    assert [r["run_id"] for r in meta["runs"]] == ["pair-Bandit-v0", "pair-FrozenLake-v0"]
    assert res.output.count("4/4") == 2 and "results:" in res.output
    assert RunDir(tmp_path / "pair" / "pair-Bandit-v0").read_summary()["episodes"]["scored"] == 4
    check = runner.invoke(app, ["validate", str(tmp_path / "pair")])
    assert check.exit_code == 0 and check.output.count("ok ") == 7, check.output


def test_a_named_suite_uses_its_boards_protocol_unless_the_flags_say_otherwise(
    tmp_path: Path,
) -> None:
    res = runner.invoke(
        app,
        [
            "run",
            "--policy",
            "random",
            "--suite",
            "boards",
            "--env",
            "ragen/Bandit-v0",
            "--group-size",
            "2",
            "--episodes",
            "4",
            "--out",
            str(tmp_path),
            "--run-id",
            "b",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    run = RunDir(tmp_path / "b" / "b-Bandit-v0").read_run()
    assert (run["episodes"], run["group_size"]) == (4, 2)
    assert [r["env_id"] for r in read_suite(tmp_path / "b")["runs"]] == ["ragen/Bandit-v0"]
    bandit = next(e for e in get_suite("boards").envs if e.env_id == "ragen/Bandit-v0")
    assert (bandit.episodes, bandit.group_size, bandit.board) == (256, 4, "procedural")


def test_an_unknown_suite_names_the_close_one_and_lists_all() -> None:
    with pytest.raises(UnknownSuiteError) as err:
        get_suite("procedurl")
    assert "did you mean procedural?" in str(err.value)
    assert "procedural, games, data, boards" in str(err.value)
    res = runner.invoke(app, ["run", "--policy", "random", "--suite", "gmaes"])
    assert res.exit_code == 2 and "did you mean games?" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_an_env_outside_the_suite_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["run", "--policy", "random", "--suite", "games", "--env", "ragen/Bandit-v0"]
        + ["--out", str(tmp_path)],
    )
    assert res.exit_code == 2
    assert "--env ragen/Bandit-v0 is not in suite 'games'" in res.output
    assert list(tmp_path.iterdir()) == []


def test_an_env_given_twice_is_refused(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--env", "ragen/Bandit-v0"]
        + ["--out", str(tmp_path)],
    )
    assert res.exit_code == 2 and "given twice" in res.output
    assert list(tmp_path.iterdir()) == []


def test_the_suites_are_listed_in_run_help() -> None:
    res = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "300"})
    for name in SUITES:
        assert f"{name}:" in res.output


def test_every_run_of_a_suite_is_confirmed_before_any_is_resumed(tmp_path: Path) -> None:
    """The command line's checks of what a run folder directs run for every run first: a
    refused second run stops the resume before the first plays anything."""
    from ragen_bench.suite import resume_suite

    res = runner.invoke(
        app,
        ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--env", "ragen/FrozenLake-v0"]
        + ["--episodes", "4", "--out", str(tmp_path), "--run-id", "s", "--no-progress"],
    )
    assert res.exit_code == 0, res.output
    for member in ("s-Bandit-v0", "s-FrozenLake-v0"):  # unfinished again: nothing recorded
        (tmp_path / "s" / member / "episodes.jsonl").write_text("")
        (tmp_path / "s" / member / "summary.json").unlink()
    seen = []

    def confirm(run_dir: Path, meta: dict) -> None:
        seen.append(meta["env_id"])
        if meta["env_id"] == "ragen/FrozenLake-v0":
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        resume_suite(tmp_path / "s", confirm=confirm)
    assert seen == ["ragen/Bandit-v0", "ragen/FrozenLake-v0"]
    assert _lines(tmp_path / "s" / "s-Bandit-v0" / "episodes.jsonl") == 0  # nothing played
