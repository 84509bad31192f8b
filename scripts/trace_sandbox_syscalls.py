"""List the system calls that sandboxed programs make under the seccomp filter.

How the allow-list of ``ragen_envs/sandbox/seccomp.py`` was found (``docs/envs/sandbox.md``,
"System calls"): run a workload of sandboxed programs under ``strace -f`` and keep only
the calls made by processes that run under the filter (the sandbox's program process
from the moment it installed the filter, and every process or thread it started),
not the host's, the launcher's or the set-up's.  Prints one line per call, most
frequent first, and, with ``--json``, writes the table.

    python scripts/trace_sandbox_syscalls.py -- python -c "from ragen_envs.sandbox import run_python; run_python('print(1)')"
    python scripts/trace_sandbox_syscalls.py --json calls.json -- python -m pytest -q tests/envs/test_deepcoder.py

A call the filter denies still appears (strace sees the attempt): compare the list with
``seccomp.ALLOWED`` to find a call a workload needs that the filter refuses.  Needs
``strace`` (6.x, for ``--decode-pids=pidns``) and ptrace rights over the workload.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_CALL = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_RET = re.compile(r"= (\d+)(?: /\* (\d+) in strace's PID NS \*/)?\s*$")
_SPAWN = {"clone", "clone3", "fork", "vfork"}
_EXIT = re.compile(r"^(\d+) +\+\+\+ (?:exited|killed)")


def filtered_calls(lines: list[str]) -> collections.Counter[str]:
    """Count the calls made under the filter in ``strace -f -q --decode-pids=pidns`` output.

    A process is under the filter from the line after its successful
    ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ...)``, and so is every process or thread
    it created after that line (from its first line: filters are inherited).  Pids are
    reused (``pid_max`` may be 32768): a pid's ``+++ exited`` / ``+++ killed`` line ends
    one process, and the next line of that pid is another one.
    """
    generation: collections.Counter[str] = collections.Counter()
    proc_of: list[tuple[str, int] | None] = []  # line -> (pid, generation)
    first: dict[tuple[str, int], int] = {}
    ended: dict[tuple[str, int], int] = {}
    for i, line in enumerate(lines):
        m = _CALL.match(line)
        if m:
            key = (m.group(1), generation[m.group(1)])
            proc_of.append(key)
            first.setdefault(key, i)
            continue
        proc_of.append(None)
        e = _EXIT.match(line)
        if e:
            ended[(e.group(1), generation[e.group(1)])] = i
            generation[e.group(1)] += 1

    def incarnation(pid: str, at: int) -> tuple[str, int]:
        """The process with this pid that a spawn returning at line ``at`` created: one
        alive at that line, else the next one to appear, else one that already ended."""
        gens = [g for g in range(generation[pid] + 1) if (pid, g) in first]
        alive = [g for g in gens if first[(pid, g)] <= at <= ended.get((pid, g), len(lines))]
        later = [g for g in gens if first[(pid, g)] > at]
        if alive:
            return (pid, alive[-1])
        if later:
            return (pid, later[0])
        return (pid, gens[-1] if gens else 0)

    since: dict[tuple[str, int], int] = {}  # process -> first line under the filter
    parent: dict[tuple[str, int], tuple[tuple[str, int], int]] = {}
    for i, line in enumerate(lines):
        key = proc_of[i]
        if key is None:
            continue
        m = _CALL.match(line)
        assert m is not None
        name = m.group(2) or m.group(3)
        if "PR_SET_SECCOMP" in line and line.rstrip().endswith("= 0"):
            since.setdefault(key, i + 1)
        if name in _SPAWN:
            r = _RET.search(line)
            if r:
                parent[incarnation(r.group(2) or r.group(1), i)] = (key, i)

    def start(key: tuple[str, int], depth: int = 0) -> float:
        own = since.get(key, float("inf"))
        if key in parent and depth < 1000:
            up, at = parent[key]
            if start(up, depth + 1) <= at:
                return -1
        return own

    counts: collections.Counter[str] = collections.Counter()
    cache: dict[tuple[str, int], float] = {}
    for i, line in enumerate(lines):
        key = proc_of[i]
        m = _CALL.match(line) if key is not None else None
        if key is None or m is None or m.group(2):  # a resumed call counts on its first line
            continue
        if key not in cache:
            cache[key] = start(key)
        if i >= cache[key]:
            counts[m.group(3)] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    """Trace ``command`` and print the calls made under the filter; returns its exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write {call: count} to this file")
    ap.add_argument("command", nargs="+", help="the workload (after --)")
    args = ap.parse_args(argv)
    if shutil.which("strace") is None:
        ap.error("strace is not installed")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        out = Path(tmp) / "trace.txt"
        proc = subprocess.run(
            ["strace", "-f", "-q", "--decode-pids=pidns", "-o", str(out), *args.command]
        )
        counts = filtered_calls(out.read_text(errors="replace").splitlines())
    for name, n in counts.most_common():
        print(f"{n:10d}  {name}")
    print(f"{len(counts)} distinct calls under the filter", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(dict(counts.most_common()), indent=1) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
