"""No stray files are tracked: no logs, pid files, or builders' absolute paths
(scripts/check_hygiene.py), and published paths are made portable (ragen_bench.portable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragen_bench.portable import portable_json, portable_path

ROOT = Path(__file__).resolve().parent.parent
#: Built from parts, so that this file itself holds no such path.
HOME = "/" + "root"
ALICE = "/" + "home/alice"
SCRIPT = ROOT / "scripts" / "check_hygiene.py"


def _check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True
    )


def test_the_repository_tracks_no_stray_file() -> None:
    proc = _check(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_planted_stray_files_are_each_named(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "srv.log").write_text("started\n")
    (tmp_path / "pids").write_text("123\n")
    (tmp_path / "result.json").write_text('{"model": "' + HOME + '/.cache/ragen-models/qwen"}\n')
    (tmp_path / "notes.md").write_text(f"out_dir was {ALICE}/runs/x\n")
    (tmp_path / "ok.md").write_text("see ../shared/tools and http://host/v1 and /tmp/x\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    proc = _check(tmp_path)
    assert proc.returncode == 1
    flagged = sorted(line.split(":")[0] for line in proc.stdout.splitlines())
    assert flagged == ["notes.md", "pids", "result.json", "srv.log"]
    assert "result.json:1: holds a build machine's absolute path" in proc.stdout


def test_portable_path_keeps_names_and_makes_repository_paths_relative(tmp_path: Path) -> None:
    model = HOME + "/.cache/ragen-models/qwen2.5-coder-0.5b-instruct"
    assert portable_path(model, tmp_path) == "qwen2.5-coder-0.5b-instruct"
    assert portable_path(str(tmp_path / "runs" / "a"), tmp_path) == "runs/a"
    for kept in ("Qwen/Qwen2.5-0.5B-Instruct", "outputs/run", "/v1", "tiny", "a b/c"):
        assert portable_path(kept, tmp_path) == kept
    doc = {"model": {"path": model, "n": 3}, "seeds": [1, model], "url": "http://h:8/v1"}
    assert portable_json(doc, tmp_path) == {
        "model": {"path": "qwen2.5-coder-0.5b-instruct", "n": 3},
        "seeds": [1, "qwen2.5-coder-0.5b-instruct"],
        "url": "http://h:8/v1",
    }
