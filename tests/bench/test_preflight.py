"""Preflight checks before the first episode.

Before: a missing optional package (bm25s for SearchQA / WebShop) or an endpoint that is not
listening was discovered only after every episode had failed, and a run directory was left
behind.  Now: exit 2 with the install hint (or the unreachable URL), nothing written.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_bench.preflight import PreflightError, check_endpoint

ROOT = Path(__file__).resolve().parents[2]
# bm25s is installed in the test environment and cannot be uninstalled here: the child process
# makes `import bm25s` fail the way Python does for a missing package (sys.modules entry None).
HIDE_BM25S = "import sys; sys.modules['bm25s'] = None; from ragen_bench.cli import main; sys.argv[0] = 'ragen-bench'; main()"


def _run(*args: str, cwd: Path, hide_bm25s: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    cmd = (
        [sys.executable, "-c", HIDE_BM25S] if hide_bm25s else [sys.executable, "-m", "ragen_bench"]
    )
    return subprocess.run(
        [*cmd, "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("env_id", ["ragen/SearchQA-v0", "ragen/WebShop-v0"])
def test_missing_bm25s_exits_2_with_the_install_hint_and_no_run_dir(
    env_id: str, tmp_path: Path
) -> None:
    proc = _run(
        "--backend",
        "random",
        "--env",
        env_id,
        "--episodes",
        "2",
        "--out",
        "runs",
        "--no-progress",
        cwd=tmp_path,
        hide_bm25s=True,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert "needs the optional package 'bm25s'" in err and "pip install" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_unreachable_endpoint_exits_2_and_leaves_no_run_dir(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    proc = _run(
        "--backend",
        "openai",
        "--base-url",
        url,
        "--model",
        "m",
        "--env",
        "ragen/Bandit-v0",
        "--episodes",
        "2",
        "--out",
        "runs",
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"endpoint {url} is unreachable" in " ".join(proc.stderr.split())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    # --no-preflight plays (and fails) the episodes; a --resume while it is still down is refused up front
    down = _run(
        "--backend",
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
        "--out",
        "runs",
        "--run-id",
        "down",
        "--no-progress",
        "--no-preflight",
        cwd=tmp_path,
    )
    assert down.returncode == 1
    before = (tmp_path / "runs" / "down" / "episodes.jsonl").read_bytes()
    # the user confirms the folder's endpoint by giving it again (docs/security.md)
    resumed = _run("--resume", "runs/down", "--base-url", url, "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 2 and f"endpoint {url} is unreachable" in " ".join(
        resumed.stderr.split()
    )
    assert (tmp_path / "runs" / "down" / "episodes.jsonl").read_bytes() == before


def test_an_answering_server_is_reachable_whatever_its_status(tmp_path: Path) -> None:
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        check_endpoint(f"http://127.0.0.1:{server.server_port}/v1")  # 404 on /models: it answered
        with pytest.raises(PreflightError, match="unreachable"):
            check_endpoint(
                [f"http://127.0.0.1:{server.server_port}/v1", f"http://127.0.0.1:{_free_port()}/v1"]
            )
    finally:
        server.shutdown()
        server.server_close()


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
