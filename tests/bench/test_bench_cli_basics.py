"""``--version``, help that fits 80 columns, a quiet console."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import bench  # noqa: F401  (a fixture)
from tests.helpers.cli import one_line as _one_line
from tests.helpers.cli import stop_when as _stop_when
from tests.helpers.cli import subprocess_env as _env

ROOT = Path(__file__).resolve().parents[2]


def _bench(
    *args: str, columns: int = 80, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_version() -> None:
    from ragen_bench import __version__

    proc = _bench("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"ragen-bench {__version__}"


def test_no_option_name_is_cut_at_80_columns() -> None:
    import typer.main

    from ragen_bench.cli import app

    group = typer.main.get_command(app)
    for path in (["run"], ["validate"], ["leaderboard", "add"], ["diagnose"]):
        command = group
        for name in path:
            command = command.commands[name]
        proc = _bench(*path, "--help")
        assert proc.returncode == 0, proc.stderr
        assert not re.search(r"-[\w-]*…", proc.stdout), (
            f"{' '.join(path)} --help cuts an option name at 80 columns"
        )
        assert max(len(line) for line in proc.stdout.splitlines()) <= 80
        for param in command.params:
            if getattr(
                param, "hidden", False
            ):  # deprecated aliases (--backend) are hidden on purpose
                continue
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--"):
                    assert opt in proc.stdout, (
                        f"{opt} missing from `{' '.join(path)} --help` at 80 columns"
                    )


def test_hf_run_console_has_no_library_noise(tmp_path: Path) -> None:
    proc = _bench(
        "run",
        "--backend",
        "hf",
        "--model",
        "tiny",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--max-new-tokens",
        "8",
        "--out",
        "runs",
        columns=200,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for noise in (
        "Loading weights",
        "it/s]",
        "Warning:",
        "UserWarning",
        "FutureWarning",
        "generation flags",
    ):
        assert noise not in proc.stderr, f"{noise!r} on the console:\n{proc.stderr}"


SWEEP_REPLAY = ROOT / "tests" / "data" / "lean" / "sweep.replay.jsonl"


# 3. `ragen-bench run --policy oracle` on Lean was not refused (a row labelled "oracle").
def test_oracle_backend_on_lean_is_refused_in_one_line(tmp_path: Path, bench) -> None:
    code, out, err = bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/Lean-v0",
        "--episodes",
        "2",
        "--env-config",
        f"verifier=replay:{SWEEP_REPLAY}",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
    )
    line = _one_line(err)
    assert code == 2 and out == "", (out, err)
    assert line.startswith(
        "error: --policy oracle cannot run ragen/Lean-v0: theorem proving has no oracle"
    ), line
    assert "--policy random" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    # the random baseline (and every env with an oracle) is still planned
    from ragen_bench.runner import RunRequest, plan_run

    plan_run(
        RunRequest(
            env_id="ragen/Lean-v0",
            backend="random",
            episodes=2,
            env_config={"verifier": f"replay:{SWEEP_REPLAY}"},
        )
    )
    plan_run(RunRequest(env_id="ragen/FrozenLake-v0", backend="oracle", episodes=2))


# 4. `ragen-bench run --model DIR` on a multi-env model evaluated one env (not even a trained one).
def _multi_env_model(tmp_path: Path) -> Path:
    from ragen_bench.protocol import write_protocol
    from ragen_train.config import load_config
    from ragen_train.evaluation import saved_protocol

    cfg = load_config(
        "quickstart",
        [
            "env.config={}",
            'env.train=[{"id": "ragen/Sokoban-Easy-v0", "tag": "sok"}, '
            '{"id": "ragen/FrozenLake-v0", "config": {"size": 5}}]',
        ],
    )
    model = tmp_path / "final_model"
    model.mkdir()
    write_protocol(model, saved_protocol(cfg.to_dict()))
    return model


def test_multi_env_model_needs_an_env_and_then_uses_its_training_config(
    tmp_path: Path, bench
) -> None:
    from ragen_bench.protocol import apply_protocol, read_protocol
    from ragen_bench.runner import RunRequest
    from ragen_bench.validate import validate_file

    model = _multi_env_model(tmp_path)
    assert validate_file(model / "ragen_protocol.json") == ("agent_protocol", 1)
    protocol = read_protocol(model)
    assert (
        protocol.env_id == "ragen/Sokoban-Easy-v0"
    )  # not quickstart's env.id, which it never trained on
    assert protocol.trained_ids() == ["ragen/Sokoban-Easy-v0", "ragen/FrozenLake-v0"]
    code, out, err = bench(
        "run", "--model", str(model), "--episodes", "2", "--out", str(tmp_path / "runs")
    )
    line = _one_line(err)
    assert code == 2 and out == "", (out, err)
    assert f"{model} was trained on 2 envs (ragen/Sokoban-Easy-v0, ragen/FrozenLake-v0;" in line, (
        line
    )
    assert "choose it with --env ID" in line
    applied = apply_protocol(
        RunRequest(env_id="ragen/FrozenLake-v0", backend="hf", model=str(model)), {"env"}
    )
    assert applied.request.env_config == {"size": 5}  # that env's training config
    assert applied.notes == [
        "evaluating ragen/FrozenLake-v0, one of the 2 envs the model was trained on "
        "(the others: ragen/Sokoban-Easy-v0; --env ID plays another)"
    ]
    other = apply_protocol(
        RunRequest(env_id="ragen/Bandit-v0", backend="hf", model=str(model)), {"env"}
    )
    assert other.notes[0].startswith(
        "--env ragen/Bandit-v0 is not the env the model was trained on "
        "(ragen/Sokoban-Easy-v0, ragen/FrozenLake-v0)"
    )


def test_sigterm_during_bench_run_says_what_is_saved_and_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragen_bench",
            "run",
            "--model",
            "tiny",
            "--env",
            "ragen/Sokoban-v0",
            "--episodes",
            "512",
            "--max-parallel",
            "4",
            "--run-id",
            "r",
            "--out",
            str(out),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    err = _stop_when(proc, lambda: (out / "r" / "run.json").is_file(), "run.json")
    assert proc.returncode == 143, err[-2000:]
    line = _one_line(err)
    assert re.fullmatch(
        rf"stopped by SIGTERM: \d+ of 512 episodes are saved in {re.escape(str(out / 'r'))}; "
        rf"finish the run with `ragen-bench run --resume {re.escape(str(out / 'r'))}`",
        line,
    ), line
    meta = json.loads((out / "r" / "run.json").read_text())
    assert len(meta["sessions"]) == 1 and "ended" in meta["sessions"][0]  # the finally blocks ran


# 9. `ragen-bench show` exited 0 on a damaged run.json.
@pytest.mark.parametrize(
    "damage, message",
    [
        ('{"schema_version": 1, "run_id": ', "run.json:2: invalid JSON"),
        ('{"a": 1}', "run.json: at '': 'schema_version' is a required property"),
        (None, "is not a run directory (no run.json)"),
    ],
)
def test_show_refuses_a_damaged_run_json(
    tmp_path: Path, bench, damage: str | None, message: str
) -> None:
    code, _, err = bench(
        "run",
        "--policy",
        "oracle",
        "--env",
        "ragen/FrozenLake-v0",
        "--episodes",
        "2",
        "--run-id",
        "r",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert code == 0, err
    run = tmp_path / "r"
    if damage is None:
        (run / "run.json").unlink()
    else:
        (run / "run.json").write_text(damage + "\n")
    for args in (["show", str(run)], ["show", str(run), "--json"]):
        code, out, err = bench(*args)
        line = _one_line(err)
        assert code == 2 and out == "", (args, out, err)
        assert line.startswith(f"error: {run}") and message in line, line
