"""The math-verify worker process (spec: ``docs/envs/metamathqa.md``, "Equivalence").

math-verify bounds its work with ``signal.alarm``, which only works in a process's main
thread; the bench runs envs in worker threads, where a pathological answer such as
``\\binom{10^{9}}{5\\cdot 10^{8}}`` ran for minutes.  Off the main thread,
:mod:`.equivalence` therefore sends each comparison to this process, where it runs in the
main thread with math-verify's own timeouts, and kills the process if no answer comes
in time.

Protocol (one line each, UTF-8): the worker writes ``ready`` once it has imported
math-verify; then for each request line ``[pred, gold]`` (JSON) it writes ``1`` (equal)
or ``0``.  It exits at the end of its input.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    """Serve requests from stdin until it closes (protocol in the module docstring)."""
    from ragen_envs.envs.metamathqa.equivalence import _math_verify_equal

    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        try:
            pred, gold = json.loads(line)
            ok = _math_verify_equal(str(pred), str(gold))
        except Exception:  # noqa: BLE001 - a malformed request or checker failure: not equal
            ok = False
        out.write("1\n" if ok else "0\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
