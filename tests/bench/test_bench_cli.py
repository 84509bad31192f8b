"""``ragen-bench`` end to end: real runs, schema-valid files, crash and resume, leaderboards."""

from __future__ import annotations

import json
import os
import shutil
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
        raise AssertionError(
            f"ragen-bench {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_hf_tiny_sokoban_end_to_end(tmp_path: Path) -> None:
    bench(
        "run",
        "--policy",
        "hf",
        "--model",
        "tiny",
        "--env",
        "ragen/Sokoban-v0",
        "--episodes",
        "8",
        "--max-new-tokens",
        "48",
        "--run-id",
        "e2e",
        "--no-progress",
        cwd=tmp_path,
    )
    run = tmp_path / "runs" / "e2e"
    for name, kind in (
        ("episodes.jsonl", "episode"),
        ("summary.json", "summary"),
        ("run.json", "run"),
    ):
        assert validate_file(run / name)[0] == kind
    eps = lines(run / "episodes.jsonl")
    assert sorted(e["episode_index"] for e in eps) == list(range(8))
    turn = eps[0]["turns"][0]
    assert turn["completion_token_ids"] and len(turn["completion_logprobs"]) == len(
        turn["completion_token_ids"]
    )
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
    args = [
        "run",
        "--policy",
        "hf",
        "--model",
        "tiny",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "24",
        "--batch-size",
        "2",
        "--max-new-tokens",
        "64",
        "--run-id",
        "crash",
        "--no-progress",
    ]
    bench("ls", cwd=tmp_path)  # make sure the tiny model exists before timing-sensitive work
    proc = subprocess.Popen(
        [*BENCH, *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
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
        bench(
            "run",
            "--policy",
            backend,
            "--env",
            "ragen/Bandit-v0",
            "--episodes",
            "16",
            "--group-size",
            "4",
            "--run-id",
            backend,
            "--no-progress",
            cwd=tmp_path,
        )
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
    bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "4",
        "--max-turns",
        "3",
        "--run-id",
        "other",
        "--no-progress",
        cwd=tmp_path,
    )
    refused = bench(
        "leaderboard", "add", "runs/other", "--board", str(board), cwd=tmp_path, check=False
    )
    assert refused.returncode == 1 and "max_turns board=1 run=3" in refused.stderr
    # Another split is refused too.
    bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "16",
        "--group-size",
        "4",
        "--split",
        "validation",
        "--run-id",
        "val",
        "--no-progress",
        cwd=tmp_path,
    )
    refused = bench(
        "leaderboard", "add", "runs/val", "--board", str(board), cwd=tmp_path, check=False
    )
    assert refused.returncode == 1 and "split mismatch" in refused.stderr
    assert json.loads(board.read_text()) == data


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    p = bench("run", "--policy", "oracle", "--env", "ragen/Sokobon-v0", cwd=tmp_path, check=False)
    assert p.returncode == 2 and "did you mean ragen/Sokoban-v0" in p.stderr
    p = bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--env-config",
        "risky_prob=3",
        cwd=tmp_path,
        check=False,
    )
    assert p.returncode == 2 and "risky_prob" in p.stderr
    p = bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "5",
        "--group-size",
        "2",
        cwd=tmp_path,
        check=False,
    )
    assert p.returncode == 2 and "multiple of group_size" in p.stderr
    p = bench("ls", "--json", cwd=tmp_path)
    ids = {e["id"] for e in json.loads(p.stdout)}
    assert "ragen/Bandit-v0" in ids


def test_validate_reports_invalid_files(tmp_path: Path) -> None:
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps({"schema_version": 1}))
    p = bench("validate", str(bad), cwd=tmp_path, check=False)
    assert p.returncode == 1 and "invalid" in p.stdout


# ------------------------------------------------------------ new-user findings
# In-process runs of the CLI whose consoles write to wide in-memory buffers (no
# wrapping), so messages can be asserted verbatim.
@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    import ragen_bench.cli as cli_mod
    from tests.helpers.cli import in_process_cli

    return in_process_cli(monkeypatch, cli_mod)


def test_default_run_ids_are_unique_and_concurrent_runs_get_their_own_directories(
    tmp_path: Path,
) -> None:
    from ragen_bench.runner import default_run_id

    ids = {default_run_id("ragen/Bandit-v0", "some/model", "hf") for _ in range(50)}
    assert len(ids) == 50, "ids drawn within one second must differ"
    assert all(i.endswith("_Bandit-v0_model") for i in ids)
    # Two runs started together (same second) with the default id: each has its own
    # directory holding each episode index exactly once (they used to share one file).
    args = [
        *BENCH,
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "4",
        "--no-progress",
    ]
    procs = [
        subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    dirs = sorted((tmp_path / "runs").iterdir())
    assert len(dirs) == 2
    for d in dirs:
        assert sorted(e["episode_index"] for e in lines(d / "episodes.jsonl")) == [0, 1, 2, 3]
        assert json.loads((d / "run.json").read_text())["run_id"] == d.name


def test_existing_run_directory_is_refused_never_appended(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragen_bench.runner as runner
    from ragen_bench.policies import OraclePolicy
    from ragen_bench.runner import RunRequest, start_run

    args = [
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "4",
        "--run-id",
        "x",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    assert cli(*args)[0] == 0
    before = (tmp_path / "x" / "episodes.jsonl").read_bytes()
    code, _, err = cli(*args)
    assert code == 2 and "already exists" in err and f"--resume {tmp_path / 'x'}" in err
    assert (tmp_path / "x" / "episodes.jsonl").read_bytes() == before

    # The race: another run creates the directory after our check, before our mkdir.
    # Exclusive creation refuses it, and nothing is written into the other run's folder.
    def racing_policy(*_a, **_k):
        (tmp_path / "raced").mkdir()
        return OraclePolicy()

    monkeypatch.setattr(runner, "make_policy", racing_policy)
    with pytest.raises(FileExistsError, match="already exists"):
        start_run(
            RunRequest(
                env_id="ragen/Bandit-v0",
                backend="oracle",
                episodes=2,
                out=str(tmp_path),
                run_id="raced",
            )
        )
    assert list((tmp_path / "raced").iterdir()) == []

    # A default id that happens to be taken is replaced by a fresh one.
    taken = tmp_path / "taken"
    taken.mkdir()
    fresh = iter(["taken", "free"])
    monkeypatch.setattr(runner, "default_run_id", lambda *_a: next(fresh))
    path = start_run(
        RunRequest(env_id="ragen/Bandit-v0", backend="oracle", episodes=2, out=str(tmp_path)),
        policy=OraclePolicy(),
    )
    assert path == tmp_path / "free" and list(taken.iterdir()) == []
    assert json.loads((path / "run.json").read_text())["run_id"] == "free"


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--episodes", "-4"], "episodes (-4) must be a positive multiple of group_size (1)"),
        (
            ["--episodes", "6", "--group-size", "4"],
            "episodes (6) must be a positive multiple of group_size (4)",
        ),
        (["--max-parallel", "0"], "max_parallel must be >= 1"),
        (["--run-id", "a/b"], "--run-id must be a plain directory name"),
        (["--temperature", "-1"], "temperature must be >= 0"),
        (["--policy-option", "foo=1"], "does not take that option"),
        (["--split", "bogus"], "invalid field 'split'"),
    ],
)
def test_invalid_run_creates_nothing_and_draws_no_bar(
    tmp_path: Path, cli, bad: list[str], message: str
) -> None:
    backend = "hf" if "--policy-option" in bad else "oracle"
    model = ["--model", "tiny"] if backend == "hf" else []
    code, out, err = cli(
        "run",
        "--policy",
        backend,
        *model,
        "--env",
        "ragen/Bandit-v0",
        "--out",
        str(tmp_path / "runs"),
        *bad,
    )  # progress bar on (the default)
    assert code == 2 and message in err
    assert "━" not in err and "episodes " not in err.split("error:")[0], (
        "no progress bar before the error"
    )
    assert not (tmp_path / "runs").exists(), "nothing created"


def test_hf_model_that_cannot_be_loaded_is_one_clear_line(tmp_path: Path, cli) -> None:
    base = [
        "run",
        "--policy",
        "hf",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--out",
        str(tmp_path / "runs"),
    ]
    code, _, err = cli(*base, "--model", "/nonexistent")
    assert (
        code == 2
        and err.strip()
        == "error: model path '/nonexistent' does not exist"  # a local path: no hub id hint
    )
    (tmp_path / "empty").mkdir()
    code, _, err = cli(*base, "--model", str(tmp_path / "empty"))
    assert code == 2 and "is not a model directory (no config.json" in err
    # A hub id that is neither cached nor reachable (offline): transformers' OSError
    # becomes one line, no traceback.
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [*BENCH, *base, "--model", "no-such-org/no-such-model-zz9"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "OSError" not in proc.stderr
    assert (
        proc.stderr.startswith(
            "error: cannot load model 'no-such-org/no-such-model-zz9': it is not a local directory"
        )
        and proc.stderr.count("\n") == 1
    )
    assert not (tmp_path / "runs").exists()


def test_markup_in_user_and_data_text_is_printed_literally(tmp_path: Path, cli) -> None:
    code, out, _ = cli("ls", "SearchQA")
    assert code == 0 and "search[query] / finish[answer]" in out  # was shown as "search / finish"
    code, _, err = cli("run", "--policy", "oracle", "--env", "ragen/[b]x")
    assert code == 2 and "unknown environment id 'ragen/[b]x'" in err
    code, _, err = cli("run", "--policy", "oracle", "--env", "ragen/[/red]x")  # was a MarkupError
    assert code == 2 and "unknown environment id 'ragen/[/red]x'" in err
    code, out, _ = cli(
        "run",
        "--policy",
        "random",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--run-id",
        "[red]r",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    run = tmp_path / "[red]r"
    assert code == 0 and f"results: {run}" in out
    summary = json.loads((run / "summary.json").read_text())  # a served model name with brackets
    summary["policy"]["model"] = "[b]odd[/b]"
    (run / "summary.json").write_text(json.dumps(summary))
    code, out, _ = cli("show", str(run))
    assert code == 0 and "ragen/Bandit-v0 · [b]odd[/b]" in out


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed on exit: connections are refused


def test_unreachable_endpoint_fails_loudly_and_keeps_files_for_resume(tmp_path: Path, cli) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = cli(
        "run",
        "--policy",
        "openai",
        "--base-url",
        url,
        "--model",
        "m",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--max-retries",
        "0",
        "--connect-timeout",
        "5",
        "--run-id",
        "down",
        "--out",
        str(tmp_path),
        "--no-progress",
        "--no-preflight",
    )  # preflight: tests/bench/test_preflight.py
    run = tmp_path / "down"
    assert code == 1
    assert (
        "error: no episode was scored: every recorded episode ended in an error (2 endpoint_error); "
        "first error: connection: connection failed"
    ) in err
    assert f"ragen-bench run --resume {run}" in err
    eps = lines(run / "episodes.jsonl")
    assert sorted(e["episode_index"] for e in eps) == [0, 1] and {e["status"] for e in eps} == {
        "endpoint_error"
    }
    assert json.loads((run / "summary.json").read_text())["episodes"]["scored"] == 0
    code, _, err = cli(  # the user confirms the folder's endpoint (docs/security.md)
        "run", "--resume", str(run), "--base-url", url, "--no-progress", "--no-preflight"
    )  # still down: still an error
    assert code == 1 and "first error: connection" in err
    assert len(lines(run / "episodes.jsonl")) == 4


def test_run_failure_needs_every_episode_to_have_errored(tmp_path: Path) -> None:
    from ragen_bench.results import run_failure

    def ep(i: int, status: str, error: str | None = None) -> dict:
        return {"episode_index": i, "status": status, "error": error}

    rd = RunDir(tmp_path)
    assert run_failure(tmp_path) == "no episode was recorded"
    for e in (ep(0, "endpoint_error", "http_500: boom"), ep(1, "success")):
        rd.append(e)
    rd.close()
    assert run_failure(tmp_path) is None, "one scored episode is a result"
    (tmp_path / "episodes.jsonl").unlink()
    for e in (
        ep(0, "env_error", "ValueError: bad\nstate"),
        ep(1, "endpoint_error", "timeout: slow"),
    ):
        rd.append(e)
    rd.close()
    assert run_failure(tmp_path) == (
        "every episode ended in an error (1 endpoint_error, 1 env_error); "
        "first error: ValueError: bad state"
    )


def test_ls_unknown_name_fails_with_close_matches(cli) -> None:
    code, out, err = cli("ls", "Nonexistent")
    assert code == 1 and out == "" and "error: no environment matches 'Nonexistent'" in err
    code, _, err = cli("ls", "Sokobn")
    assert code == 1 and "did you mean Sokoban" in err
    code, out, _ = cli("ls", "ragen/Sokoban-Easy-v0")  # an id works as well as a name
    assert code == 0 and "ragen/Sokoban-Easy-v0" in out and "ragen/Sokoban-v0 " not in out


def _oracle_run(cli, out: Path, run_id: str, episodes: int = 4) -> Path:
    code, _, err = cli(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        str(episodes),
        "--run-id",
        run_id,
        "--out",
        str(out),
        "--no-progress",
    )
    assert code == 0, err
    return out / run_id


def test_a_run_being_written_is_refused_to_a_second_writer(tmp_path: Path, cli) -> None:
    run = _oracle_run(cli, tmp_path, "r")
    eps = run / "episodes.jsonl"
    full = eps.read_bytes()
    interrupted = b"".join(full.splitlines(keepends=True)[:2])  # as if killed after 2 of 4 episodes
    eps.write_bytes(interrupted)
    # Another process holds the writer lock (a resume in progress): ours is refused at
    # once with its pid, and nothing is appended.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from ragen_bench.results import RunDir\n"
            "with RunDir(sys.argv[1]).writer_lock():\n"
            "    print('locked', flush=True); time.sleep(120)\n",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, out, err = cli("run", "--resume", str(run), "--no-progress")
        assert code == 2 and out == ""
        assert err.strip().startswith(
            f"error: run {run} is being written by another process (pid {holder.pid})"
        )
        assert err.count("\n") == 1
        assert eps.read_bytes() == interrupted
    finally:
        holder.kill()  # SIGKILL: the OS releases a dead process's lock, no cleanup needed
        holder.wait()
    # The same within one process (a second open of the lock is a second writer).
    from ragen_bench.results import RunDir, RunLockedError

    with RunDir(run).writer_lock():
        assert (run / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(RunLockedError, match=rf"\(pid {os.getpid()}\)"):
            with RunDir(run).writer_lock():
                pass
        assert cli("run", "--resume", str(run), "--no-progress")[0] == 2
        assert eps.read_bytes() == interrupted
    # Released: the resume plays exactly the 2 missing episodes.
    code, _, err = cli("run", "--resume", str(run), "--no-progress")
    assert code == 0, err
    assert eps.read_bytes().startswith(interrupted)
    assert sorted(e["episode_index"] for e in lines(eps)) == [0, 1, 2, 3]
    # The lock file left behind is harmless to everything that reads the directory.
    assert (run / ".lock").exists() and (run / ".lock").read_text() == ""
    code, out, _ = cli("validate", str(run))
    assert code == 0 and out.count("ok ") == 3
    assert cli("show", str(run))[0] == 0
    code, _, err = cli("leaderboard", "add", str(run), "--board", str(tmp_path / "board.json"))
    assert code == 0, err


def test_a_new_run_holds_the_lock_while_it_plays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragen_bench.runner as runner
    from ragen_bench.results import RunDir, RunLockedError
    from ragen_bench.runner import RunRequest, start_run

    seen: list[str] = []
    real_play = runner._play

    def play(run_dir, *a, **k):
        with pytest.raises(RunLockedError):  # a second writer (e.g. --resume) is refused mid-run
            with RunDir(run_dir.path).writer_lock():
                pass
        seen.append((run_dir.path / ".lock").read_text().strip())
        return real_play(run_dir, *a, **k)

    monkeypatch.setattr(runner, "_play", play)
    path = start_run(
        RunRequest(
            env_id="ragen/Bandit-v0", backend="oracle", episodes=2, out=str(tmp_path), run_id="n"
        )
    )
    assert seen == [str(os.getpid())]
    with RunDir(path).writer_lock():  # released at the end
        pass


def test_validate_accepts_a_run_directory(tmp_path: Path, cli) -> None:
    run = _oracle_run(cli, tmp_path, "v")
    code, out, err = cli("validate", str(run))  # used to raise IsADirectoryError
    assert code == 0, out + err
    assert out.splitlines() == [
        f"ok {run / 'run.json'} (run, 1 object)",
        f"ok {run / 'episodes.jsonl'} (episode, 4 objects)",
        f"ok {run / 'summary.json'} (summary, 1 object)",
    ]
    # Each file is checked: a broken summary is named, the others still pass.
    summary = json.loads((run / "summary.json").read_text())
    del summary["metrics"]
    (run / "summary.json").write_text(json.dumps(summary))
    code, out, _ = cli("validate", str(run))
    assert code == 1 and out.count("ok ") == 2
    assert (
        f"invalid {run / 'summary.json'}: {run / 'summary.json'}: at '': 'metrics' is a required property"
        in out
    )
    (run / "summary.json").unlink()
    code, out, _ = cli("validate", str(run))
    assert code == 1 and f"invalid {run / 'summary.json'}: missing (an unfinished run?" in out
    # A directory that is not a run, and a path that does not exist.
    (tmp_path / "plain").mkdir()
    code, out, _ = cli("validate", str(tmp_path / "plain"))
    assert (
        code == 1
        and out.strip()
        == f"invalid {tmp_path / 'plain'}: {tmp_path / 'plain'} is a directory "
        "but not a run directory (no run.json)"
    )
    code, out, err = cli("validate", str(run / "run.json"), str(tmp_path / "nope"))
    assert code == 2 and out == "" and err.strip() == f"error: {tmp_path / 'nope'} does not exist"


def test_validate_checks_each_board_of_a_leaderboards_folder(tmp_path: Path, cli) -> None:
    boards = sorted((Path(__file__).resolve().parents[2] / "leaderboards").glob("*.json"))
    assert boards, "the published baseline boards are missing"
    for b in boards:
        shutil.copy(b, tmp_path / b.name)
    (tmp_path / "notes.json").write_text('{"not": "a board"}')  # left out: not a board
    code, out, err = cli("validate", str(tmp_path))
    assert code == 0, out + err
    assert out.splitlines() == [f"ok {tmp_path / b.name} (leaderboard, 1 object)" for b in boards]
    board = json.loads((tmp_path / boards[0].name).read_text())
    del board["name"]
    (tmp_path / boards[0].name).write_text(json.dumps(board))
    code, out, _ = cli("validate", str(tmp_path))
    assert code == 1 and out.count("ok ") == len(boards) - 1
    assert f"invalid {tmp_path / boards[0].name}:" in out and "'name'" in out


def test_json_flag_makes_stdout_one_json_document(tmp_path: Path) -> None:
    # A real process (progress bar on, the default): everything but the JSON goes to stderr.
    proc = bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "4",
        "--run-id",
        "j",
        "--json",
        cwd=tmp_path,
    )
    summary = json.loads(proc.stdout)
    run = tmp_path / "runs" / "j"
    assert summary == json.loads((run / "summary.json").read_text())
    assert summary["episodes"]["scored"] == 4 and summary["metrics"]["success"]["mean"] == 1.0
    assert (
        "results: " in proc.stderr and "success" in proc.stderr
    )  # the table is still shown, on stderr
    shown = bench("show", str(run), "--json", cwd=tmp_path)
    assert json.loads(shown.stdout) == summary


# ------------------------------------------------ NaN and out-of-range numbers
def _one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--temperature", "NaN"], "temperature must be a finite number, got nan"),
        (["--temperature", "inf"], "temperature must be a finite number, got inf"),
        (["--top-p", "nan"], "top_p must be a finite number, got nan"),
        (["--format-penalty", "NaN"], "format_penalty must be a finite number, got nan"),
        (["--max-turns", "0"], "max_turns must be >= 1, got 0"),
        (
            ["--env-config", "risky_prob=NaN"],
            "--env-config risky_prob: must be a finite number, got 'NaN'",
        ),
        (
            ["--env-config", "risky_reward=-Infinity"],
            "--env-config risky_reward: must be a finite number",
        ),
        (
            ["--policy-option", 'extra_body={"min_p": NaN}'],
            "--policy-option extra_body.min_p: must be a finite number",
        ),
    ],
)
def test_nan_options_are_one_line_errors_and_create_nothing(
    tmp_path: Path, cli, bad: list[str], message: str
) -> None:
    code, out, err = cli(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Bandit-v0",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
        *bad,
    )
    assert code == 2 and message in _one_error_line(err)
    assert not (tmp_path / "runs").exists(), (
        "nothing created (risky_prob=NaN used to score success 1.0)"
    )


def test_no_json_file_gets_nan_and_validate_refuses_it(tmp_path: Path, cli) -> None:
    from ragen_envs.jsonutil import NonFiniteNumberError

    rd = RunDir(tmp_path / "w")
    with pytest.raises(NonFiniteNumberError, match=r"at \$\.metrics\.success\.mean"):
        rd.write_summary({"metrics": {"success": {"mean": float("nan")}}})
    with pytest.raises(NonFiniteNumberError, match=r"at \$\.turns\[0\]\.reward"):
        rd.append({"episode_index": 0, "turns": [{"reward": float("inf")}]})
    rd.close()
    assert (
        not (tmp_path / "w" / "summary.json").exists()
        and (tmp_path / "w" / "episodes.jsonl").read_text() == ""
    )
    # A file someone else wrote with Python's default json (bare NaN / an overflowing number):
    # the schema cannot see it after parsing, so validate refuses it while reading.
    run = _oracle_run(cli, tmp_path, "nan")
    meta = json.loads((run / "run.json").read_text())
    meta["env_config"]["risky_prob"] = float("nan")
    (run / "run.json").write_text(json.dumps(meta))
    assert "NaN" in (run / "run.json").read_text()
    code, out, _ = cli("validate", str(run / "run.json"))
    assert (
        code == 1
        and f"invalid {run / 'run.json'}: {run / 'run.json'}: non-finite number NaN" in out
    )
    (run / "run.json").write_text(json.dumps(meta).replace("NaN", "1e999"))
    code, out, _ = cli("validate", str(run / "run.json"))
    assert code == 1 and "number 1e999 is out of the range of a double" in out
    line = json.loads((run / "episodes.jsonl").read_text().splitlines()[1])
    line["return"] = float("-inf")
    (run / "episodes.jsonl").write_text(
        (run / "episodes.jsonl").read_text() + json.dumps(line) + "\n"
    )
    code, out, _ = cli("validate", str(run / "episodes.jsonl"))
    assert code == 1 and f"{run / 'episodes.jsonl'}:5: non-finite number -Infinity" in out


# ------------------------------------------------ damaged files
@pytest.mark.parametrize(
    "garbage, reason",
    [
        (b"\xff\xfe\x00garbage", "episodes.jsonl:2: not UTF-8 text"),
        (b"{}", "episodes.jsonl:2: at '': 'episode_index' is a required property"),
        (b"123", "episodes.jsonl:2: at '': 123 is not of type 'object'"),
        (b"null", "episodes.jsonl:2: at '': None is not of type 'object'"),
        (
            b'{"episode_index": "two"}',
            "episodes.jsonl:2: at 'episode_index': 'two' is not of type 'integer'",
        ),
        (b"{not json", "episodes.jsonl:2: invalid JSON at column 2"),
    ],
)
def test_garbage_line_in_episodes_is_one_line_naming_file_and_line(
    tmp_path: Path, cli, garbage: bytes, reason: str
) -> None:
    run = _oracle_run(cli, tmp_path, "g")
    eps = run / "episodes.jsonl"
    lines = eps.read_bytes().splitlines(keepends=True)
    eps.write_bytes(lines[0] + garbage + b"\n" + b"".join(lines[1:]))
    before = eps.read_bytes()
    code, _, err = cli("run", "--resume", str(run), "--no-progress")
    assert code == 2 and _one_error_line(err).startswith(f"error: {run}/{reason}"), err
    assert eps.read_bytes() == before, "a damaged middle line is reported, never cut"
    code, out, _ = cli("validate", str(eps))
    assert code == 1 and reason.split(": ", 1)[0] in out


def test_torn_last_line_is_still_repaired_on_resume(tmp_path: Path, cli) -> None:
    run = _oracle_run(cli, tmp_path, "t")
    eps = run / "episodes.jsonl"
    lines = eps.read_bytes().splitlines(keepends=True)
    eps.write_bytes(b"".join(lines[:3]) + lines[3][:40])  # killed while writing the last episode
    code, _, err = cli("run", "--resume", str(run), "--no-progress")
    assert code == 0, err
    assert sorted(json.loads(x)["episode_index"] for x in eps.read_text().splitlines()) == [
        0,
        1,
        2,
        3,
    ]


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda s: s.update(metrics="nope"), "at 'metrics': 'nope' is not of type 'object'"),
        (
            lambda s: s["episodes"].update(missing="0"),
            "at 'episodes/missing': '0' is not of type 'integer'",
        ),
        (lambda s: s["metrics"]["success"].update(mean="high"), "at 'metrics/success/mean'"),
        (lambda s: s.update(schema_version=2), "schema_version 2 is not supported"),
    ],
)
def test_wrong_typed_summary_is_one_line_for_show_and_leaderboard(
    tmp_path: Path, cli, edit, where: str
) -> None:
    run = _oracle_run(cli, tmp_path, "s")
    summary = json.loads((run / "summary.json").read_text())
    edit(summary)
    (run / "summary.json").write_text(json.dumps(summary))
    expected = f"error: {run / 'summary.json'}: {where}"
    for args in (
        ["show", str(run)],
        ["show", str(run), "--json"],
        ["leaderboard", "add", str(run), "--board", str(tmp_path / "b.json")],
    ):
        code, out, err = cli(*args)
        assert code == 2 and out == "", (
            args,
            out,
        )  # show --json used to print the invalid file, exit 0
        assert _one_error_line(err).startswith(expected), (args, err)
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda b: b.update(schema_version=99), "schema_version 99 is not supported"),
        (lambda b: b.update(entries="nope"), "at 'entries': 'nope' is not of type 'array'"),
        (
            lambda b: b["entries"][0].update(metrics=[]),
            "at 'entries/0/metrics': [] is not of type 'object'",
        ),
        (
            lambda b: b["envs"]["ragen/Bandit-v0"].update(protocol=None),
            "at 'envs/ragen/Bandit-v0/protocol'",
        ),
    ],
)
def test_damaged_leaderboard_is_refused_by_add_and_render(
    tmp_path: Path, cli, edit, where: str
) -> None:
    run = _oracle_run(cli, tmp_path, "b")
    board = tmp_path / "board.json"
    assert cli("leaderboard", "add", str(run), "--board", str(board))[0] == 0
    data = json.loads(board.read_text())
    edit(data)
    board.write_text(json.dumps(data))
    before = board.read_bytes()
    for args in (
        ["leaderboard", "render", "--board", str(board)],
        ["leaderboard", "add", str(run), "--board", str(board)],
    ):
        code, out, err = cli(*args)
        assert code == 2 and _one_error_line(err).startswith(f"error: {board}: {where}"), (
            args,
            err,
        )
    assert board.read_bytes() == before
    board.write_bytes(b'{"schema_version": 1, "name": "x",\n "split": NaN}')
    code, _, err = cli("leaderboard", "render", "--board", str(board))
    assert (
        code == 2
        and _one_error_line(err)
        == f"error: {board}: non-finite number NaN (JSON has no NaN or Infinity)"
    )
    board.write_bytes(b'{"schema_version": 1,\n "name": ')
    code, _, err = cli("leaderboard", "render", "--board", str(board))
    assert code == 2 and _one_error_line(err).startswith(
        f"error: {board}:2: invalid JSON at column"
    )


def test_any_damaged_middle_line_is_a_value_error_naming_file_and_line(
    tmp_path: Path,
) -> None:
    """Fuzzed: whatever bytes replace a middle line, reading the episodes either succeeds (the
    bytes happen to be a record) or raises a ``ValueError`` that names ``file:2`` — never a
    KeyError, TypeError or an unnamed UnicodeDecodeError."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    good = b'{"episode_index": 0, "status": "success"}\n'
    last = b'{"episode_index": 1, "status": "success"}\n'
    lines = st.one_of(
        st.binary(max_size=60),
        st.sampled_from(
            [
                b"{}",
                b"[]",
                b"null",
                b"123",
                b'"x"',
                b"NaN",
                b'{"episode_index": -1}',
                b'{"episode_index": 1.5}',
                b'{"episode_index": 2, "status": 7}',
            ]
        ),
        st.text(max_size=40).map(str.encode),
    )
    path = tmp_path / "episodes.jsonl"

    @settings(max_examples=300, deadline=None)
    @given(lines.filter(lambda b: b"\n" not in b and b"\r" not in b))
    def check(middle: bytes) -> None:
        path.write_bytes(good + middle + b"\n" + last)
        try:
            eps = RunDir(tmp_path).read_episodes()
        except ValueError as exc:
            assert str(exc).startswith(f"{path}:2: ") and "\n" not in str(exc)
        else:
            assert set(eps) >= {0, 1}

    check()
