"""The documentation site (mkdocs.yml) builds with strict checking; a broken link fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mkdocs(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    try:
        import material  # noqa: F401  (the theme)
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as exc:
        pytest.skip(
            f"the docs tools are not installed ({exc.name}); pip install -e '.[docs]' (part of dev)"
        )
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(site_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=config.parent,
        env=env,
    )


@pytest.mark.slow
def test_docs_site_builds_with_strict_checking(tmp_path):
    res = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert res.returncode == 0, res.stderr[-3000:]
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "ragen/Sokoban-Easy-v0" in home  # the README's generated env table
    assert 'href="envs/sokoban/"' in home  # README links to docs/ pages point into the site
    assert 'src="img/site_board.png"' in home  # the screenshots
    api = (tmp_path / "site" / "api" / "bench" / "index.html").read_text(encoding="utf-8")
    assert "render_run_report" in api and "Raises" in api  # mkdocstrings read the docstrings
    for page in (
        "envs/sokoban",
        "training",
        "backends",
        "endpoints",
        "diagnostics",
        "results",
        "envs/data",
    ):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


@pytest.mark.slow
def test_docs_site_strict_build_fails_on_a_broken_link(tmp_path):
    import yaml

    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    with open(docs / "training.md", "a", encoding="utf-8") as fh:
        fh.write("\nSee [the missing page](no-such-page.md).\n")
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    cfg["hooks"] = [str(ROOT / "scripts" / "mkdocs_hooks.py")]
    cfg["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    res = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert res.returncode != 0
    output = res.stdout + res.stderr
    assert "no-such-page.md" in output and "strict mode" in output


def test_readme_links_rewritten_for_the_site():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from mkdocs_hooks import readme_for_site
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = (
        "[a](docs/envs/bandit.md) [b](leaderboards/) [c](examples/README.md) [d](https://x.org/y) "
        "[e](#env) ![f](docs/img/site_board.png)"
    )
    assert readme_for_site(text, "https://github.com/o/r") == (
        "[a](envs/bandit.md) [b](https://github.com/o/r/tree/main/leaderboards/) "
        "[c](https://github.com/o/r/blob/main/examples/README.md) [d](https://x.org/y) [e](#env) "
        "![f](img/site_board.png)"
    )
