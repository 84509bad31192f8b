#!/usr/bin/env python3
"""Fail if a tracked file is a stray: a log, a pid file, compiled Python, or a file that
holds an absolute path of the machine that wrote it (a home folder, a scratch disk).

    python scripts/check_hygiene.py [--root DIR]

Published results name a model by its folder name and fingerprint and a run folder by its
path relative to the repository (``ragen_bench.portable``).  Exit 0 when clean, 1 with one
line per problem otherwise.  Runs on the files ``git ls-files`` lists under ``--root``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: File names that are never source: logs, pid files, interpreter and editor droppings.
STRAY_NAME = re.compile(r"(\.log|\.pid|\.pyc|\.swp|~)$|^(pids|nohup\.out|\.DS_Store)$")
#: An absolute path into a home or work folder of a build machine.  `/work/` and `/root/`
#: are this workspace's, `/home/<user>/` and `/Users/<user>/` any developer's.
BUILD_PATH = re.compile(r"(?<![\w.~-])/(?:root|work|home/\w+|Users/\w+)/[\w.-]")


def problems(root: Path) -> list[str]:
    """One line per stray tracked file under ``root`` (a git work tree)."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = []
    for raw in filter(None, names):
        rel = raw.decode()
        path = root / rel
        if STRAY_NAME.search(path.name):
            found.append(f"{rel}: a {path.suffix or path.name} file is not source; remove it")
            continue
        if not path.is_file() or path.stat().st_size > 8_000_000:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = BUILD_PATH.search(line)
            if match:
                found.append(
                    f"{rel}:{number}: holds a build machine's absolute path "
                    f"({line[match.start() : match.start() + 40]!r}); record it relative to the "
                    "repository or as the model's name (ragen_bench.portable)"
                )
                break
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    found = problems(args.root.resolve())
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
