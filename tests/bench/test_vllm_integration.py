"""Opt-in: ``ragen-bench run --backend openai`` against a real vLLM (or other OpenAI-compatible) server.

Set ``RAGEN_VLLM_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) to run it; the served model
name is taken from ``RAGEN_VLLM_MODEL`` or, if unset, the first id of ``GET /v1/models``.
``RAGEN_VLLM_MAX_NEW_TOKENS`` (default 64) keeps it affordable on CPU servers.  Start a
server on this machine with ``tools/vllm-server`` (see ``../shared/tools/README.md``)::

    MODEL=$(tools/small-model)
    URL=$(VLLM_CPU_NUM_OF_RESERVED_CPU=1 tools/vllm-server start "$MODEL")
    RAGEN_VLLM_BASE_URL=$URL pytest -q tests/bench/test_vllm_integration.py -rs
    tools/vllm-server stop
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ragen_bench.validate import validate_file

REPO = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("RAGEN_VLLM_BASE_URL")

pytestmark = pytest.mark.integration


def _served_model(base_url: str) -> str:
    name = os.environ.get("RAGEN_VLLM_MODEL")
    if name:
        return name
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=30) as resp:  # noqa: S310 - user's server
        return json.loads(resp.read())["data"][0]["id"]


@pytest.fixture(scope="module")
def base_url() -> str:
    if not BASE_URL:
        reason = (
            "RAGEN_VLLM_BASE_URL is not set: start a vLLM OpenAI-compatible server (`vllm serve MODEL`, or "
            "the workspace's ../shared/tools/vllm-server start MODEL) and set "
            "RAGEN_VLLM_BASE_URL=http://127.0.0.1:8000/v1 to run this test"
        )
        print(f"skipping: {reason}")
        pytest.skip(reason)
    return BASE_URL


def test_sokoban_run_against_a_real_server(base_url: str, tmp_path: Path) -> None:
    model = _served_model(base_url)
    max_new = os.environ.get("RAGEN_VLLM_MAX_NEW_TOKENS", "64")
    args = [
        sys.executable,
        "-m",
        "ragen_bench",
        "run",
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--model",
        model,
        "--env",
        "ragen/Sokoban-v0",
        "--episodes",
        "4",
        "--max-new-tokens",
        max_new,
        "--temperature",
        "0",
        "--logprobs",
        "--concurrency",
        "4",
        "--read-timeout",
        "600",
        "--no-progress",
        "--out",
        str(tmp_path),
        "--run-id",
        "real",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=3600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = tmp_path / "real"
    for name, kind in (
        ("episodes.jsonl", "episode"),
        ("summary.json", "summary"),
        ("run.json", "run"),
    ):
        assert validate_file(run / name)[0] == kind
    eps = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines() if x.strip()]
    assert sorted(e["episode_index"] for e in eps) == [0, 1, 2, 3]
    assert all(e["status"] != "endpoint_error" for e in eps), [e["error"] for e in eps]
    turns = [t for e in eps for t in e["turns"]]
    assert turns, "every episode played at least one turn"
    for t in turns:
        assert t["finish_reason"] in ("stop", "length")
        assert t["usage"]["prompt_tokens"] > 0 and t["usage"]["completion_tokens"] > 0
        assert (
            t["completion_logprobs"]
            and len(t["completion_logprobs"]) == t["usage"]["completion_tokens"]
        )
        assert all(lp <= 0 for lp in t["completion_logprobs"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == {"requested": 4, "recorded": 4, "scored": 4, "missing": 0}
    assert summary["policy"]["backend"] == "openai" and summary["policy"]["model"] == model
    assert summary["policy"]["requests"]["requests"] == len(turns)
