"""What the docs state is checkable and true.

Before: docs/diagnostics.md and the env pages cited "reference §n" sections of a file that is
not in the repository; examples/README.md published numbers that its committed results file
and a fresh run did not give; the README understated the test and demo times.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "examples").glob("*.md")),
]


def _tree_files() -> list[Path]:
    """Every text file of the checkout that can cite something: tracked and untracked, not
    ignored (what a fresh clone has), else a walk of the tree without a git checkout."""
    exts = {".py", ".md", ".yml", ".yaml", ".toml", ".sh", ".txt", ".cfg", ".ini"}
    try:
        names = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        files = [ROOT / n for n in names if n]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "outputs", "runs", "site", "node_modules"}
        files = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in files if p.is_file() and (p.suffix in exts or ".ci" in p.parts))


TREE = _tree_files()
#: This file names the patterns it looks for.
SELF = Path(__file__).resolve()


def _lines():
    for p in TREE:
        if p.resolve() == SELF:
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            yield p, n, line


def test_the_tree_cites_public_sources_not_a_private_reference_file() -> None:
    """No file — code, tests, docs, benchmarks — cites the reference-facts
    file that is not in the repository (it cites the paper or a RAGEN repository path)."""
    assert len(TREE) > 200 and ROOT / "ragen_train" / "trainer.py" in TREE
    private = re.compile(
        r"reference (facts? )?§|reference (facts? )?section \d|reference fact \d|"
        r"shared/reference|ragen-reference\.md",
        re.I,
    )
    bad = [f"{p.relative_to(ROOT)}:{n}" for p, n, line in _lines() if private.search(line)]
    assert not bad, f"citations of a file that is not in the repository: {bad}"


#: Named sources a "§" may follow (a book, an RFC, a paper).
NAMED_SOURCE = re.compile(r"Sutton|Barto|Katoen|Norvig|AIMA|RFC \d|paper|arXiv|ed\.")


def test_every_section_sign_names_its_source_or_a_section_of_its_page() -> None:
    """A bare "§1.3" cited the private reference file; a "§" must follow a named source
    (Sutton & Barto §4.4, RFC 9110 §10.2.3) or, in a markdown page, be one of that page's
    numbered headings ("see §2" on a page with "## 2. ...")."""
    headings: dict[Path, set[str]] = {}
    bad = []
    previous = ""
    for p, n, line in _lines():
        for m in re.finditer(r"§\s?(\d+(?:\.\d+)*)", line):
            before = (previous if n > 1 else "") + " " + line[: m.start()]
            if NAMED_SOURCE.search(before[-50:]):  # the source may end the line before
                continue
            if p.suffix == ".md":
                if p not in headings:
                    headings[p] = set(
                        re.findall(r"^#+\s+(\d+(?:\.\d+)*)\.?\s", p.read_text(), re.M)
                    )
                if m.group(1) in headings[p]:
                    continue
            bad.append(f"{p.relative_to(ROOT)}:{n}: {m.group(0)}")
        previous = line
    assert not bad, f"section citations without a source: {bad}"


#: Cited paths that do not exist on purpose: what a command or a tutorial creates.
CREATED = {
    "benchmarks/gpu/wheels": "written by benchmarks/gpu/make_wheels.sh",
    "ragen_envs/schemas": "schemas/ copied into the ragen-envs wheel at build time",
    "docs/envs/guess.md": "written by the adding-an-env tutorial",
    "ragen_envs/envs/guess": "written by the adding-an-env tutorial",
    "tests/envs/test_guess.py": "written by the adding-an-env tutorial",
    "docs/img/train_report.png": "written by scripts/site_screenshots.py --train",
    "docs/X": "a placeholder in scripts/mkdocs_hooks.py",
}
TOP_DIRS = "ragen_envs|ragen_bench|ragen_train|tests|docs|scripts|schemas|benchmarks|examples|leaderboards|packaging|\\.ci"
CITED_PATH = re.compile(rf"(?<![\w./-])((?:{TOP_DIRS})/[\w./-]*[\w/])")
#: A path after one of these names is another repository's.
OTHER_REPO = re.compile(r"(RAGEN-AI/RAGEN|RAGEN's|verl-project/verl|huggingface/\w+)[^/]{0,20}$")


def test_every_cited_repository_path_exists() -> None:
    """Docs/training.md cited tests/test_batch.py (never existed), the README
    and a golden test cited tests at their pre-move paths.  Every repository-relative path
    written anywhere in the tree exists (placeholders like <env> and the paths commands
    create, :data:`CREATED`, aside)."""
    bad, checked = [], 0
    for p, n, line in _lines():
        for m in CITED_PATH.finditer(line):
            path = m.group(1).rstrip("/")
            nxt = line[m.end() : m.end() + 1]
            if nxt and nxt in "<{*$" or any(c in path for c in "<>{}*$"):
                continue  # a pattern, not a path
            if OTHER_REPO.search(line[: m.start()]) or any(path.startswith(c) for c in CREATED):
                continue
            checked += 1
            if not (ROOT / path).exists():
                bad.append(f"{p.relative_to(ROOT)}:{n}: {path}")
    assert checked > 300, checked
    assert not bad, f"cited paths that do not exist: {bad}"


def test_metric_keys_named_in_docstrings_are_logged() -> None:
    """rollout_engine.py named ``rollout/logprob_abs_diff_mean``, which the trainer never
    logged; every ``section/key`` metric a ragen_train or ragen_bench docstring names appears
    as a string in their code."""
    files = sorted((ROOT / "ragen_train").rglob("*.py")) + sorted(
        (ROOT / "ragen_bench").rglob("*.py")
    )
    code = "\n".join(p.read_text(encoding="utf-8") for p in files)
    key = re.compile(r"``((?:rollout|actor|critic|batch|filter|adv|time|train|val|sft)/[\w@]+)``")
    named = {k for p in files for k in key.findall(p.read_text(encoding="utf-8"))}
    assert len(named) >= 10
    missing = sorted(k for k in named if f'"{k}"' not in code and f'"{k}/' not in code)
    assert not missing, f"metrics named in docstrings but never logged: {missing}"


def test_learning_demo_table_is_its_committed_results() -> None:
    results = json.loads((ROOT / "examples" / "learning_demo_results.json").read_text())["runs"]
    text = (ROOT / "examples" / "README.md").read_text()
    readme = " ".join((ROOT / "README.md").read_text().split())
    for run in results:
        before, after = f"{run['before']:.3f}", f"{run['after']:.3f}"
        row = next(
            line
            for line in text.splitlines()
            if line.startswith("|")
            and run["algorithm"].upper() in line.replace("PPO (GAE)", "PPO")
            and ("Bandit" in line) == (run["env"] == "bandit")
        )
        assert before in row and f"**{after}**" in row, (row, before, after)
        assert after in readme, (
            f"README does not state {run['env']}/{run['algorithm']} after = {after}"
        )


def test_readme_and_examples_state_measured_times() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    examples = (ROOT / "examples" / "README.md").read_text()
    assert "under a minute" not in examples and "under a minute" not in readme
    # `.ci/run`'s measured time on a fresh clone, 2 cores (commit 6b440fe, 2026-12-08: stage 1
    # 3,827 passed, 40 skipped, the suite 22 min 48 s; stage 2 8 passed, 4 min 38 s; 30 min 6 s).
    assert "the last measured `.ci/run` on a fresh clone took 30 min 6 s" in readme
    assert "the suite 22 min 48 s; stage 2: 8 passed in 4 min 38 s" in readme
