"""Env errors never pass as results.

Without math-verify, MetaMathQA's answer checker raised at the first answer: half the
episodes became ``env_error``, the run exited 0 without a word, success averaged over
them, and ``leaderboard add`` accepted it.  Now preflight imports the checker, a run with
``env_error`` episodes prints a loud line, and the board refuses it.  The package is made
missing by ``sys.modules[name] = None`` (Python's own way to make an import fail).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ragen_bench import cli as bench_cli
from ragen_bench.preflight import ENV_PACKAGES, env_extra
from tests.helpers.cli import in_process_cli

ENV = "ragen/MetaMathQA-v0"


@pytest.fixture
def no_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)


def _run(cli, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli(
        "run", "--env", ENV, "--policy", "oracle", "--episodes", "4", "--out", str(out),
        "--no-progress", *extra,
    )  # fmt: skip


def test_preflight_refuses_a_missing_answer_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_math_verify: None
) -> None:
    cli = in_process_cli(monkeypatch, bench_cli)
    code, _, err = _run(cli, tmp_path / "runs")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "math-verify" in lines[0] and "ragen-envs[math]" in lines[0]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    # a checker that needs no optional package plays
    code, _, err = _run(cli, tmp_path / "runs", "--env-config", "equivalence=numeric")
    assert code == 0, err


def test_env_error_run_is_loud_and_refused_by_the_board(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_math_verify: None
) -> None:
    from ragen_bench.runner import RunRequest, start_run
    from tests.helpers.scripted import ScriptedPolicy

    # a symbolic answer needs the checker (exact and numeric matches do not): every check raises
    policy = ScriptedPolicy(lambda i, t: "<answer>\\frac{x}{2}</answer>")
    req = RunRequest(
        env_id=ENV,
        backend="scripted",
        episodes=4,
        out=str(tmp_path / "runs"),
        run_id="r",
        preflight=False,
        rollout={"enable_think": False},
    )
    path = start_run(req, policy=policy)
    summary = json.loads((path / "summary.json").read_text())
    assert summary["counts"] == {"env_error": 4}
    cli = in_process_cli(monkeypatch, bench_cli)
    code, out, _ = cli("show", str(path))
    assert code == 0
    assert (
        "WARNING: 4 of 4 episodes ended in env_error: the environment failed, not the policy" in out
    )
    code, _, err = cli("leaderboard", "add", str(path), "--board", str(tmp_path / "b.json"))
    assert code == 1
    assert err.startswith("refused: run r has 4 env_error episodes")
    assert not (tmp_path / "b.json").exists()


def test_env_without_errors_has_no_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = in_process_cli(monkeypatch, bench_cli)
    code, out, err = _run(cli, tmp_path / "runs", "--run-id", "ok")
    assert code == 0, err
    assert "env_error" not in err
    code, _, err = cli(
        "leaderboard", "add", str(tmp_path / "runs" / "ok"), "--board", str(tmp_path / "b.json")
    )
    assert code == 0, err


def test_every_env_package_is_a_declared_extra() -> None:
    """The preflight table names extras that pyproject.toml declares with that package."""
    import tomllib

    extras = tomllib.loads(Path("pyproject.toml").read_text())["project"]["optional-dependencies"]
    for key, packages in ENV_PACKAGES.items():
        for _, dist, extra, _ in packages:
            assert any(req.startswith(dist) for req in extras[extra]), (key, dist, extra)
    assert env_extra("metamathqa") == "math"
    assert env_extra("sokoban") is None


def test_ls_names_the_extra_an_env_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    cli = in_process_cli(monkeypatch, bench_cli)
    code, out, _ = cli("ls", "--json")
    assert code == 0
    extra = {e["id"]: e["extra"] for e in json.loads(out)}
    assert extra["ragen/MetaMathQA-v0"] == "math"
    assert extra["ragen/SearchQA-v0"] == "search"
    assert extra["ragen/Sokoban-v0"] is None
    code, out, _ = cli("ls", "MetaMathQA")
    assert "extra" in out and "│ math " in out
