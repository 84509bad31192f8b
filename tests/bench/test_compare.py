"""``ragen-bench compare RUN_A RUN_B``: the paired comparison of two runs on the same seeds
(real runs played here; the shared statistics checked against the committed real-model
results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_bench.cli import app
from ragen_bench.stats import paired_comparison
from ragen_envs.jsonutil import iter_jsonl

ROOT = Path(__file__).resolve().parents[2]
REAL = sorted((ROOT / "examples" / "real_model").glob("*/result.json"))
runner = CliRunner()


@pytest.fixture(scope="module")
def lake_runs(tmp_path_factory) -> Path:
    """random and oracle, 16 episodes each of FrozenLake on seeds 0..15."""
    out = tmp_path_factory.mktemp("compare")
    for policy in ("random", "oracle"):
        res = runner.invoke(
            app,
            ["run", "--policy", policy, "--env", "ragen/FrozenLake-v0", "--episodes", "16"]
            + ["--out", str(out), "--run-id", policy, "--no-progress"],
        )
        assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("result", REAL, ids=lambda p: p.parent.name)
def test_paired_comparison_reproduces_the_committed_real_model_results(result: Path) -> None:
    """The statistics moved from examples/real_model_run.py into ragen_bench.stats give the
    committed numbers from the committed per-episode outcomes."""
    rows = [row for _, row in iter_jsonl(result.parent / "test_outcomes.jsonl")]
    before = [r for r in rows if r["phase"] == "before"]
    after = [r for r in rows if r["phase"] == "after"]
    assert _flat(paired_comparison(before, after)) == pytest.approx(
        _flat(json.loads(result.read_text())["paired"])
    )


def _flat(obj, prefix: str = "") -> dict:
    """Nested dicts and lists as one flat ``{"a.b.0": value}`` dict (pytest.approx compares flat ones)."""
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in _flat(val, f"{prefix}{key}.").items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in _flat(val, f"{prefix}{i}.").items()}
    return {prefix: obj}


def test_compare_counts_the_pairs_and_tests_them(lake_runs: Path) -> None:
    res = runner.invoke(
        app, ["compare", str(lake_runs / "random"), str(lake_runs / "oracle"), "--json"]
    )
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    random_successes = sum(
        e["success"] for _, e in iter_jsonl(lake_runs / "random" / "episodes.jsonl")
    )
    c = 16 - random_successes  # oracle solves every map: each random failure is discordant
    assert got["shared"] == 16 and got["only_a"] == got["only_b"] == 0
    a = got["all"]
    assert (a["pairs"], a["both"], a["before_only"], a["after_only"], a["neither"]) == (
        16,
        random_successes,
        0,
        c,
        0,
    )
    assert a["mcnemar_p"] == pytest.approx(min(1.0, 2 * 0.5**c))  # P[X <= 0], X ~ Bin(c, 1/2)
    assert a["diff"] == pytest.approx(c / 16)
    assert a["diff_ci95"][0] <= a["diff"] <= a["diff_ci95"][1]
    assert got["well_formed_both"] == a  # random and oracle always answer in format


def test_compare_restricts_to_episodes_well_formed_in_both(lake_runs: Path, tmp_path: Path) -> None:
    import shutil

    b = tmp_path / "oracle"
    shutil.copytree(lake_runs / "oracle", b)
    lines = (b / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["turns"][0]["parsed"]["error"] = "no_answer_block"  # one malformed answer
    (b / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    res = runner.invoke(app, ["compare", str(lake_runs / "random"), str(b), "--json"])
    got = json.loads(res.output)
    assert got["all"]["pairs"] == 16 and got["well_formed_both"]["pairs"] == 15


def test_compare_prints_one_table(lake_runs: Path) -> None:
    res = runner.invoke(
        app,
        ["compare", str(lake_runs / "random"), str(lake_runs / "oracle")],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0
    assert "all shared" in res.output and "well-formed in both" in res.output
    assert "A random vs B oracle" in res.output


def test_compare_refuses_runs_of_different_envs(lake_runs: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--episodes", "4"]
        + ["--out", str(tmp_path), "--run-id", "bandit", "--no-progress"],
    )
    assert res.exit_code == 0
    res = runner.invoke(app, ["compare", str(lake_runs / "random"), str(tmp_path / "bandit")])
    assert res.exit_code == 2 and "are runs of different envs (env_id" in res.output
    res = runner.invoke(app, ["compare", str(lake_runs / "random"), str(tmp_path / "nope")])
    assert res.exit_code == 2 and "is not a run directory" in res.output
