#!/usr/bin/env python
"""A stand-in for ``lake exe repl`` that replays Lean's recorded answers (see ``lean_fakes.py``).

It speaks the REPL's framing exactly (``REPL/Main.lean``): it reads lines until a blank
line, skips a query starting with ``#`` or ``--``, answers each JSON command with JSON
followed by a blank line, and exits at the end of its input.

Fault options, for the tests of a broken REPL:
  --crash-on TACTIC   exit with status 3 (after a message on stderr) when asked TACTIC
  --hang-on TACTIC    never answer TACTIC (as Lean stuck in a long tactic)
  --silent            never answer anything
  --log FILE          append every request (one JSON per line) to FILE
  --pid-file FILE     write the process id to FILE at start
A request without a recording is reported on stderr and ends the process with status 4.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean_fakes import RecordedLean, Unrecorded  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crash-on", action="append", default=[])
    ap.add_argument("--hang-on", action="append", default=[])
    ap.add_argument("--silent", action="store_true")
    ap.add_argument("--log")
    ap.add_argument("--pid-file")
    args = ap.parse_args()
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()), encoding="utf-8")
    lean = RecordedLean()
    while True:
        lines = []
        while True:
            line = sys.stdin.readline()
            if not line:  # end of input
                if not lines:
                    return 0
                break
            if not line.strip():
                if lines:
                    break
                continue
            lines.append(line.rstrip("\n"))
        query = "".join(lines)
        if query.startswith(("#", "--")):
            continue
        request = json.loads(query)
        if args.log:
            with open(args.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(request, ensure_ascii=False) + "\n")
        if args.silent or request.get("tactic") in args.hang_on:
            time.sleep(3600)
        if request.get("tactic") in args.crash_on:
            print("INTERNAL PANIC: out of memory", file=sys.stderr, flush=True)
            return 3
        try:
            answer = lean.answer(request)
        except Unrecorded as exc:
            print(f"lean_fake_repl: {exc.args[0]}", file=sys.stderr, flush=True)
            return 4
        sys.stdout.write(json.dumps(answer, indent=1, ensure_ascii=False) + "\n\n")
        sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
