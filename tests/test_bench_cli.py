"""``ragen-bench`` end to end: real runs, schema-valid files, crash and resume, leaderboards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragen_bench.results import RunDir
from ragen_bench.validate import validate_file

BENCH = [sys.executable, "-m", "ragen_bench"]


def bench(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"ragen-bench {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_hf_tiny_sokoban_end_to_end(tmp_path: Path) -> None:
    bench("run", "--backend", "hf", "--model", "tiny", "--env", "ragen/Sokoban-v0", "--episodes", "8",
          "--max-new-tokens", "48", "--run-id", "e2e", "--no-progress", cwd=tmp_path)
    run = tmp_path / "runs" / "e2e"
    for name, kind in (("episodes.jsonl", "episode"), ("summary.json", "summary"), ("run.json", "run")):
        assert validate_file(run / name)[0] == kind
    eps = lines(run / "episodes.jsonl")
    assert sorted(e["episode_index"] for e in eps) == list(range(8))
    turn = eps[0]["turns"][0]
    assert turn["completion_token_ids"] and len(turn["completion_logprobs"]) == len(turn["completion_token_ids"])
    assert all(lp <= 0 for lp in turn["completion_logprobs"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == {"requested": 8, "recorded": 8, "scored": 8, "missing": 0}
    assert summary["env"]["versions"] == {"ragen/Sokoban-v0": 0}
    assert summary["policy"]["backend"] == "hf" and summary["policy"]["model"] == "tiny"
    proc = bench("validate", str(run / "episodes.jsonl"), str(run / "summary.json"), cwd=tmp_path)
    assert proc.stdout.count("ok ") == 2
    shown = bench("show", str(run), cwd=tmp_path).stdout
    assert "success" in shown and "8 scored / 8 requested" in shown


@pytest.mark.slow
def test_sigkill_then_resume_completes_exactly_the_missing_episodes(tmp_path: Path) -> None:
    args = ["run", "--backend", "hf", "--model", "tiny", "--env", "ragen/Bandit-v0", "--episodes", "24",
            "--batch-size", "2", "--max-new-tokens", "64", "--run-id", "crash", "--no-progress"]
    bench("ls", cwd=tmp_path)  # make sure the tiny model exists before timing-sensitive work
    proc = subprocess.Popen([*BENCH, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    path = tmp_path / "runs" / "crash" / "episodes.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= 4:
            break
        if proc.poll() is not None:
            pytest.fail(f"run ended before it could be killed: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = path.read_bytes()
    complete = before[: before.rfind(b"\n") + 1]  # a torn last line, if any, is not finished work
    n_done = complete.count(b"\n")
    assert 4 <= n_done < 24, "the kill must land part-way"
    # Simulate the worst case too: a torn partial line at the end.
    with open(path, "ab") as fh:
        fh.write(b'{"episode_index": 99, "tor')
    bench("run", "--resume", str(tmp_path / "runs" / "crash"), "--no-progress", cwd=tmp_path)
    after = path.read_bytes()
    assert after.startswith(complete), "finished episodes must be byte-identical after resume"
    eps = lines(path)
    idx = [e["episode_index"] for e in eps]
    assert sorted(idx) == list(range(24)), "each episode exactly once"
    assert len(eps) - n_done == 24 - n_done
    summary = json.loads((path.parent / "summary.json").read_text())
    assert summary["episodes"]["missing"] == 0
    run = json.loads((path.parent / "run.json").read_text())
    assert len(run["sessions"]) == 1 and run["sessions"][0]["episodes_before"] == n_done


def test_repair_cuts_torn_line(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    good = b'{"episode_index": 0}\n{"episode_index": 1}\n'
    (tmp_path / "episodes.jsonl").write_bytes(good + b'{"episode_ind')
    assert rd.repair() == len(b'{"episode_ind')
    assert (tmp_path / "episodes.jsonl").read_bytes() == good
    (tmp_path / "episodes.jsonl").write_bytes(good + b'{"episode_ind\n')
    assert rd.repair() == len(b'{"episode_ind\n')
    assert sorted(rd.read_episodes()) == [0, 1]


def test_oracle_and_random_runs_and_leaderboard(tmp_path: Path) -> None:
    for backend in ("oracle", "random"):
        bench("run", "--backend", backend, "--env", "ragen/Bandit-v0", "--episodes", "16", "--group-size", "4",
              "--run-id", backend, "--no-progress", cwd=tmp_path)
    board = tmp_path / "board.json"
    bench("leaderboard", "add", "runs/oracle", "--board", str(board), cwd=tmp_path)
    bench("leaderboard", "add", "runs/random", "--board", str(board), cwd=tmp_path)
    assert validate_file(board)[0] == "leaderboard"
    data = json.loads(board.read_text())
    assert [e["model"] for e in data["entries"]] == ["oracle", "random"]  # sorted by success
    assert data["entries"][0]["metrics"]["success"]["mean"] == 1.0
    md = bench("leaderboard", "render", "--board", str(board), cwd=tmp_path).stdout
    assert "| oracle | oracle | 100.0 [100.0, 100.0]" in md
    # A run with another protocol is refused, and the board is unchanged.
    bench("run", "--backend", "oracle", "--env", "ragen/Bandit-v0", "--episodes", "4", "--max-turns", "3",
          "--run-id", "other", "--no-progress", cwd=tmp_path)
    refused = bench("leaderboard", "add", "runs/other", "--board", str(board), cwd=tmp_path, check=False)
    assert refused.returncode == 1 and "max_turns board=1 run=3" in refused.stderr
    # Another split is refused too.
    bench("run", "--backend", "oracle", "--env", "ragen/Bandit-v0", "--episodes", "16", "--group-size", "4",
          "--split", "validation", "--run-id", "val", "--no-progress", cwd=tmp_path)
    refused = bench("leaderboard", "add", "runs/val", "--board", str(board), cwd=tmp_path, check=False)
    assert refused.returncode == 1 and "split mismatch" in refused.stderr
    assert json.loads(board.read_text()) == data


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    p = bench("run", "--backend", "oracle", "--env", "ragen/Sokobon-v0", cwd=tmp_path, check=False)
    assert p.returncode == 2 and "did you mean ragen/Sokoban-v0" in p.stderr
    p = bench("run", "--backend", "oracle", "--env", "ragen/Bandit-v0", "--env-config", "risky_prob=3", cwd=tmp_path,
              check=False)
    assert p.returncode == 2 and "risky_prob" in p.stderr
    p = bench("run", "--backend", "oracle", "--env", "ragen/Bandit-v0", "--episodes", "5", "--group-size", "2",
              cwd=tmp_path, check=False)
    assert p.returncode == 2 and "multiple of group_size" in p.stderr
    p = bench("ls", "--json", cwd=tmp_path)
    ids = {e["id"] for e in json.loads(p.stdout)}
    assert "ragen/Bandit-v0" in ids


def test_validate_reports_invalid_files(tmp_path: Path) -> None:
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps({"schema_version": 1}))
    p = bench("validate", str(bad), cwd=tmp_path, check=False)
    assert p.returncode == 1 and "invalid" in p.stdout
