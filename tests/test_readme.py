"""README and .ci/run stay true: the env table matches the registry, the test command is
the one CI runs, every documented link exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_env_table_matches_registry() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "env_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("**Install and run the tests**") :]
    cmd = re.search(r"```bash\n(.+?)\n```", block, re.S).group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # Stage 1 runs the command exactly, as one line of its own (indentation aside).
    assert cmd in [line.strip() for line in ci], "the README test command is not a line of .ci/run"
    # Stage 2 runs only the tests that need vLLM or the real model.
    assert "python -m pytest -q -m vllm" in [line.strip() for line in ci]


def test_relative_links_exist() -> None:
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), (
                f"{doc.relative_to(ROOT)} links to missing {target}"
            )
