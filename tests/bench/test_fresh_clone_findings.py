"""Found by a fresh-clone check (2026-12-02): ``--seed -1`` crashed ``ragen-bench run``
with a traceback, and an env whose ``reset`` raised went back into the engine's pool,
leaving gymnasium's passive checker broken for every later episode on that env."""

from __future__ import annotations

import pytest

from ragen_bench.policies import make_policy
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine, make_specs


def test_negative_seed_is_refused_before_any_episode() -> None:
    with pytest.raises(ValueError, match="seed must be >= 0"):
        make_specs("ragen/FrozenLake-v0", episodes=4, seed=-1)
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        make_specs("ragen/FrozenLake-v0", episodes=4, group_size=0)


def test_env_whose_reset_raised_is_not_reused_for_later_episodes() -> None:
    specs = [
        EpisodeSpec(
            index=i, env_id="ragen/FrozenLake-v0", env_config={}, seed=seed, group=i, member=0
        )
        for i, seed in enumerate((-1, 0, 1, 2))
    ]
    engine = RolloutEngine(
        make_policy("oracle", None),
        RolloutConfig(max_turns=5, max_actions_per_turn=2),
        max_parallel=1,
    )
    records = engine.run(specs)
    assert records[0].status == "env_error" and "Seed" in (records[0].error or "")
    assert [r.status for r in records[1:]] == ["success"] * 3, [
        (r.status, r.error) for r in records[1:]
    ]


def test_unreachable_lean_verifier_is_found_by_preflight_with_the_fix() -> None:
    import socket

    from ragen_bench.preflight import PreflightError, preflight

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PreflightError) as err:
        preflight(
            "ragen/Lean-v0",
            {"verifier": f"http://127.0.0.1:{port}", "max_retries": 0},
            0,
            None,
            None,
        )
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "--env-config verifier=" in message, message


# ---------------------------------------------------------------------------------------------
# The findings the first check left open (issue "fresh-clone check", 2026-12-02), one test each,
# through the real command lines (in-process CliRunner or a subprocess) and real envs.

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tests.helpers.cli import in_process_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SWEEP_REPLAY = ROOT / "tests" / "data" / "lean" / "sweep.replay.jsonl"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    """``ragen-bench`` in-process, its consoles on wide buffers: ``(exit code, stdout, stderr)``."""
    import ragen_bench.cli as cli_mod

    return in_process_cli(monkeypatch, cli_mod)


@pytest.fixture
def train(monkeypatch: pytest.MonkeyPatch):
    """``ragen-train`` in-process, as :func:`bench`."""
    import ragen_train.cli as cli_mod

    return in_process_cli(monkeypatch, cli_mod)


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "300",
        **extra,
    }


# 2. `ragen-train starpo` on Lean without a verifier sat for minutes before failing.
def test_starpo_on_lean_without_a_verifier_exits_2_before_loading_a_model(
    tmp_path: Path, train
) -> None:
    port = _free_port()
    out = tmp_path / "run"
    t0 = time.monotonic()
    code, _, err = train(
        "starpo",
        "--config",
        "quickstart",
        "env.id=ragen/Lean-v0",
        f'env.config={{"verifier": "http://127.0.0.1:{port}", "max_retries": 0}}',
        f"trainer.out_dir={out}",
    )
    line = _one_line(err)
    assert code == 2, err
    assert line.startswith("error: ragen/Lean-v0: ") and f"http://127.0.0.1:{port}" in line, line
    assert "env.config.verifier=" in line and "--env-config verifier=" in line, line
    assert not out.exists()  # nothing written, no model loaded
    assert time.monotonic() - t0 < 60


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


# 5. A misplaced key (`lr=1`) got no suggestion.
@pytest.mark.parametrize(
    "override, suggestion",
    [
        ("lr=1", "did you mean optim.lr, sft.lr?"),
        ("kl_coef=0.1", "did you mean algorithm.kl_coef?"),
        ("optim.kl_coef=0.1", "did you mean algorithm.kl_coef?"),
        ("total_step=3", "did you mean trainer.total_steps?"),
        ("optim.lrr=1", "did you mean optim.lr?"),  # the same-section match still comes first
    ],
)
def test_misplaced_override_suggests_the_nested_field(
    train, override: str, suggestion: str
) -> None:
    code, out, err = train("show-config", override)
    line = _one_line(err)
    assert code == 2 and out == "", err
    assert (
        line
        == f"config error: config field '{override.split('=')[0]}': unknown field; {suggestion}"
    ), line


# 6. `ragen-train presets` broke its columns for names over 22 characters.
def test_presets_columns_fit_the_longest_name(train) -> None:
    code, out, _ = train("presets")
    assert code == 0
    rows = [ln for ln in out.splitlines() if " env=" in ln]
    assert max(len(r.split()[0]) for r in rows) > 22  # the case that broke
    for col in ("env=", "model=", "estimator="):
        assert len({r.index(" " + col) for r in rows}) == 1, (
            col
        )  # every column starts at one offset
    assert all(r == r.rstrip() for r in rows)


# 7. The "no learning signal" warning printed Python's source line.
def test_no_learning_signal_warning_is_one_clean_line(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragen_train",
            "starpo",
            "--config",
            "quickstart",
            f"trainer.out_dir={tmp_path}",
            "trainer.total_steps=1",
            "trainer.val_every=0",
            "trainer.save_every=0",
            "trainer.val_before_train=false",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    warned = [ln for ln in res.stderr.splitlines() if "no learning signal" in ln]
    assert len(warned) == 1 and warned[0].startswith(
        "warning: step 1: no rollout produced a valid answer"
    ), res.stderr[-2000:]
    assert (
        "RuntimeWarning" not in res.stderr
        and "trainer.fit()" not in res.stderr
        and ".py:" not in res.stderr
    )


# 8. SIGTERM during a run printed nothing.
def _stop_when(proc: subprocess.Popen, ready, what: str, limit_s: float = 300) -> str:
    deadline = time.monotonic() + limit_s
    try:
        while not ready() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.5)
        assert ready(), f"{what} never appeared"
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


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


def test_sigterm_during_starpo_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragen_train",
            "starpo",
            "--config",
            "quickstart",
            f"trainer.out_dir={out}",
            "trainer.total_steps=1000",
            "trainer.save_every=1",
            "trainer.val_every=0",
            "rollout.env_groups=1",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    err = _stop_when(
        proc, lambda: bool(list((out / "checkpoints").glob("step_*/manifest.json"))), "a checkpoint"
    )
    assert proc.returncode == 143, err[-2000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert (
        last.startswith("stopped by SIGTERM: continue from checkpoint step ")
        and f"`ragen-train starpo --resume {out}`" in last
    ), err[-2000:]
    assert "Traceback" not in err


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


def test_ragen_train_eval_of_a_multi_env_model_needs_an_env_too(tmp_path: Path, train) -> None:
    from ragen_train.config import load_config
    from ragen_train.evaluation import plan_eval

    cfg = load_config(
        "quickstart",
        [
            "env.config={}",
            'env.train=[{"id": "ragen/Sokoban-Easy-v0"}, '
            '{"id": "ragen/FrozenLake-v0", "config": {"size": 5}}]',
        ],
    )
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    code, out, err = train("eval", str(model), "--episodes", "2")
    line = _one_line(err)
    assert code == 2 and out == "", (out, err)
    assert (
        "was trained on 2 envs (ragen/Sokoban-Easy-v0, ragen/FrozenLake-v0)" in line
        and "--env ID" in line
    ), line
    plan = plan_eval(model, env="ragen/FrozenLake-v0", episodes=2)
    assert (
        plan.env_id == "ragen/FrozenLake-v0" and plan.env_config == {"size": 5} and not plan.notes
    )
