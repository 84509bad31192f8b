"""Issue 17 item 9 (bench side): ``--version``, help that fits 80 columns, a quiet console."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
