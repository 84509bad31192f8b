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


#: Where tracker references are refused: the packages, the docs and the tests.
NAMED_PATHS = ("ragen_envs", "ragen_bench", "ragen_train", "docs", "tests")


def _process_words(root: Path) -> list[str]:
    """Lines and tracked file names under :data:`NAMED_PATHS` of the git checkout ``root`` that
    name the tracker instead of the behaviour: an "issue N" reference (any case), a test function
    named ``test_issueN_…`` / ``test_itemN_…``, or a test file whose name holds ``issue``,
    ``fresh_clone`` or ``small_fixes``.  Returns ``path:line: text`` / ``path`` entries."""

    def grep(*args: str) -> list[str]:
        proc = subprocess.run(
            ["git", "grep", "-n", *args, "--", *NAMED_PATHS],
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert proc.returncode in (0, 1), proc.stderr  # 1: no match
        return proc.stdout.splitlines()

    found = grep("-iE", r"\bissue [0-9]+") + grep("-E", r"def test_(issue|item)[0-9]")
    files = subprocess.run(
        ["git", "ls-files", "--", "tests"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    found += [
        f for f in files if any(w in Path(f).name for w in ("issue", "fresh_clone", "small_fixes"))
    ]
    return found


def test_code_docs_and_tests_name_behaviour_not_the_tracker() -> None:
    assert _process_words(ROOT) == []


def test_planted_tracker_references_are_each_found(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "Fixed for Issue " + "12, item 3.\nissues 4 and tissue 5\n"
    )
    (tmp_path / "tests" / "test_x.py").write_text("def test_" + "item4_works():\n    pass\n")
    (tmp_path / "tests" / "test_fresh_clone_x.py").write_text("")
    (tmp_path / "other.md").write_text("issue " + "7 outside the named paths\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    d, t = "docs", "tests"  # the paths as parts: no planted file is cited as the tree's own
    assert _process_words(tmp_path) == [
        f"{d}/a.md:1:Fixed for Issue " + "12, item 3.",
        f"{t}/test_x.py:1:def test_" + "item4_works():",
        f"{t}/test_fresh_clone_x.py",
    ]
