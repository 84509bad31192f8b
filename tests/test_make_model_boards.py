"""scripts/make_model_boards.sh: refuses a dirty tree, records the model,
back-end, dtype, seeds and commit of every row (its SMOKE mode, with the tiny model)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "make_model_boards.sh"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_dirty_tree_is_refused_before_anything_runs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts" / SCRIPT.name)
    (repo / "tracked.txt").write_text("a\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    (repo / "tracked.txt").write_text("b\n")  # an uncommitted change
    model = tmp_path / "model"
    model.mkdir()
    res = subprocess.run(
        ["bash", str(repo / "scripts" / SCRIPT.name)],
        env={**os.environ, "MODEL": str(model)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "uncommitted changes" in res.stderr and "-dirty" in res.stderr
    assert not (repo / "runs").exists()


def test_a_missing_model_folder_is_one_line(tmp_path: Path) -> None:
    res = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "MODEL": str(tmp_path / "nope")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.strip().startswith("make_model_boards: MODEL=")


@pytest.mark.slow
def test_smoke_run_records_model_backend_dtype_seeds_and_commit() -> None:
    from ragen_bench.tiny import tiny_model_path

    env = {**os.environ, "MODEL": str(tiny_model_path()), "LABEL": "tiny", "SMOKE": "1"}
    env["ALLOW_DIRTY"] = "1"  # a developer's tree: the row then says -dirty (checked below)
    res = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr[-2000:]
    row = json.loads(res.stdout.strip().splitlines()[-1])
    assert row["model"] == "tiny" and row["backend"] == "hf" and row["episodes"] == 2
    assert row["policy"] == {"backend": "hf", "device": "cpu", "dtype": "float32"}
    assert row["seeds"] == {"base": 0, "groups": 2, "group_size": 1}
    dirty = bool(_git(ROOT, "status", "--porcelain", "--untracked-files=no"))
    assert row["git_commit"] == _git(ROOT, "rev-parse", "HEAD") + ("-dirty" if dirty else "")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"EPISODES": "32"}, "EPISODES must be a multiple of 4 and at least 64"),
        ({"EPISODES": "66"}, "EPISODES must be a multiple of 4 and at least 64"),
        ({"ENVS": "ragen/Sokoban-v0 ragen/Nope-v0"}, "ENVS: ragen/Nope-v0 is not one of"),
    ],
)
def test_bad_envs_or_episodes_are_one_line(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    res = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "MODEL": str(tmp_path), **settings},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.strip().startswith(f"make_model_boards: {message}")
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_scripts_env_list_is_the_boards_suite_and_lean() -> None:
    """The script checks ENVS before anything runs (no Python needed); its list is the
    "boards" suite of ragen_bench.suite plus Lean."""
    import re

    from ragen_bench.suite import SUITES

    listed = re.search(r'^ALL_ENVS=" (.*) "$', SCRIPT.read_text(), re.M)
    assert listed is not None
    assert listed.group(1).split() == [e.env_id for e in SUITES["boards"].envs] + ["ragen/Lean-v0"]
