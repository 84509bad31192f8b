"""Every README and docs command runs, in order, on a fresh copy of the repository.

Before: the README's Train block failed right after its own quickstart ("out_dir already
holds a run"), and nothing ran the documented commands.

Every ```bash fence of README.md, docs/**/*.md and examples/README.md is preceded by a
marker comment:

* ``<!-- runnable -->``: run by this test;
* ``<!-- runnable: slow -->``: run only with ``RAGEN_DOCS_SLOW=1`` (minutes of CPU each);
* ``<!-- not-runnable: REASON -->``: needs what a test cannot have (a GPU, a hub model, a
  server, an API key); the reason is printed.

The runnable blocks run in that order (README first, then docs/ sorted, then examples/) in
one temporary copy of the checkout's files (what a fresh clone has: tracked and untracked,
not ignored), each line as a bash command that must exit 0, with two documented
adjustments: install steps (``python3 -m venv``, ``. .venv/bin/activate``, ``pip install``
parts of a ``&&`` chain) are skipped, since the test runs in the installed environment; and
``ragen-train quickstart|sft|starpo`` commands get :data:`TINY` appended (the same recipe,
a few steps of a few episodes), unless ``RAGEN_DOCS_SLOW=1``.

A line that is a plain ``ragen-bench ...`` or ``ragen-train ...`` command (no pipe, redirect,
variable or chain; globs are expanded as bash does) runs in-process through the CLI's typer
app (tests/helpers/cli.py), in the copy as working directory: the console scripts are
``main()`` = ``app()``, so this is the same command without an interpreter start-up each.
Every other line runs in bash.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLOW = os.environ.get("RAGEN_DOCS_SLOW") == "1"
#: Sizes appended to training commands in the default (fast) mode.
TINY = (
    "sft.episodes=32 sft.steps=2 trainer.total_steps=2 trainer.val_episodes=4 trainer.val_every=0 "
    "trainer.save_every=1 rollout.env_groups=2 rollout.group_size=2"
)
INSTALL = re.compile(
    r"^(python3? -m venv\b|\. \.venv/bin/activate$|source \.venv/bin/activate$|pip install\b)"
)
TRAINING = re.compile(
    r"^(ragen-train (quickstart|sft|starpo)|torchrun .*ragen_train\.cli starpo)\b"
)
#: Shell syntax that makes a line a bash command rather than one CLI call.
SHELL = re.compile(r"[|&;<>$`(){}]|^\w+=")
MARKER = re.compile(r"<!--\s*(runnable(?::\s*slow)?|not-runnable:[^>]*?)\s*-->\s*$")


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    marker: str | None
    body: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        ROOT / "examples" / "README.md",
    ]


def blocks() -> list[Block]:
    """Every fenced block of the docs with its marker (the comment on the line above, if any)."""
    found = []
    for doc in doc_files():
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^```(\w*)\s*$", lines[i])
            if m and m.group(1):
                j = i + 1
                while not lines[j].startswith("```"):
                    j += 1
                above = lines[i - 1] if i else ""
                marker = MARKER.search(above)
                found.append(
                    Block(
                        doc,
                        i + 1,
                        m.group(1),
                        marker.group(1) if marker else None,
                        "\n".join(lines[i + 1 : j]),
                    )
                )
                i = j
            i += 1
    return found


def commands(block: Block) -> list[str]:
    """The block's shell commands (continuations joined, install steps dropped, TINY added)."""
    if block.lang == "python":
        return [f"python -c {shlex.quote(block.body)}"]
    joined = re.sub(r"\\\n\s*", " ", block.body)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" && ")]
        parts = [p for p in parts if not INSTALL.match(p)]
        if not parts:
            continue
        cmd = " && ".join(parts)
        if not SLOW and TRAINING.match(parts[-1]):
            code, sep, comment = cmd.partition("   #")
            cmd = f"{code.rstrip()} {TINY}" + (f"   #{comment}" if sep else "")
        out.append(cmd)
    return out


def fresh_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked + untracked, not ignored)."""
    listed = (
        subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def cli_call(cmd: str) -> tuple[str, list[str]] | None:
    """``(program, argv)`` when ``cmd`` is one plain ``ragen-bench``/``ragen-train`` call
    (comments dropped, globs expanded in the working directory as bash does), else ``None``."""
    code = cmd.partition("   #")[0]
    if SHELL.search(code):
        return None
    words = shlex.split(code, comments=True)
    if not words or words[0] not in ("ragen-bench", "ragen-train"):
        return None
    args: list[str] = []
    for w in words[1:]:
        matches = sorted(glob.glob(w)) if any(c in w for c in "*?[") else []
        args.extend(matches or [w])
    return words[0], args


def test_every_fence_is_marked() -> None:
    unmarked = [
        b.where for b in blocks() if b.lang in ("bash", "sh", "console") and b.marker is None
    ]
    assert not unmarked, f"bash fences without a runnable / not-runnable marker: {unmarked}"


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_readme_and_docs_commands_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragen_bench.cli
    import ragen_train.cli
    from tests.helpers.cli import in_process_cli

    work = fresh_copy(tmp_path / "clone")
    bin_dir = Path(sys.executable).parent
    cache = os.environ.get("RAGEN_CACHE_DIR", str(Path.home() / ".cache" / "ragen"))
    env = {
        **os.environ,
        "PYTHONPATH": str(work),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "120",
        "RAGEN_CACHE_DIR": cache,
    }
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("RAGEN_CACHE_DIR", cache)
    monkeypatch.chdir(work)
    programs = {"ragen-bench": ragen_bench.cli, "ragen-train": ragen_train.cli}
    # The console script is app() and nothing else; ragen-train's main() also lets the
    # process restart itself with another memory allocator (ragen_train.allocator), which an
    # in-process run cannot do and does not need (the results are the same).
    allowed = {"ragen-bench": ("app",), "ragen-train": ("_MAY_RESTART", "app")}
    for prog, mod in programs.items():
        assert mod.main.__code__.co_names == allowed[prog], (
            f"{mod.__name__}.main does more than app()"
        )
    invoke = {name: in_process_cli(monkeypatch, mod) for name, mod in programs.items()}
    ran, in_process, skipped = 0, 0, []
    for block in blocks():
        if block.marker is None or block.marker.startswith("not-runnable"):
            if block.marker:
                skipped.append(f"{block.where}: {block.marker}")
            continue
        if block.marker.endswith("slow") and not SLOW:
            skipped.append(f"{block.where}: slow (RAGEN_DOCS_SLOW=1 runs it)")
            continue
        for cmd in commands(block):
            t0 = time.perf_counter()
            call = cli_call(cmd)
            if call is not None:
                code, out, err = invoke[call[0]](*call[1])
                in_process += 1
            else:
                proc = subprocess.run(
                    ["bash", "-c", f"set -eo pipefail; {cmd}"],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                code, out, err = proc.returncode, proc.stdout, proc.stderr
            print(f"{block.where}: {time.perf_counter() - t0:6.1f} s  {cmd[:110]}")
            assert code == 0, f"{block.where}: `{cmd}` exited {code}\n{out[-2000:]}\n{err[-3000:]}"
            ran += 1
    print("not run:\n  " + "\n  ".join(skipped))
    assert ran >= 20 and in_process >= 15


def test_cli_call_runs_plain_commands_in_process_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines with shell syntax stay in bash; globs expand like bash's (sorted, or the word
    itself when nothing matches)."""
    monkeypatch.chdir(tmp_path)
    for name in ("b.json", "a.json"):
        (tmp_path / name).write_text("{}")
    assert cli_call("ragen-bench site *.json --out site/   # note") == (
        "ragen-bench",
        ["site", "a.json", "b.json", "--out", "site/"],
    )
    assert cli_call("ragen-bench show 'runs/x y' # c") == ("ragen-bench", ["show", "runs/x y"])
    assert cli_call("ragen-train report none/*.json") == ("ragen-train", ["report", "none/*.json"])
    for shell in (
        "ragen-bench ls | head",
        "ragen-bench ls > out.txt",
        "cd runs && ragen-bench ls",
        "X=1 ragen-bench ls",
        "ragen-bench show $RUN",
        "python -c 'print(1)'",
    ):
        assert cli_call(shell) is None, shell
