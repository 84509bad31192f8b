"""scripts/trace_sandbox_syscalls.py: the tool that found the sandbox's allow-list.

It must count only calls made under the seccomp filter (the program's process after it
installed the filter, and every process and thread started from there), never the
host's, the launcher's or the namespace set-up's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "trace_sandbox_syscalls.py"
_spec = importlib.util.spec_from_file_location("trace_sandbox_syscalls", SCRIPT)
assert _spec is not None and _spec.loader is not None
trace = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trace)

#: strace -f -q --decode-pids=pidns output in strace 6.1's format: the host (100) starts
#: the launcher (200), which unshares and forks G (300, pid 2 in its namespace); G installs
#: the filter and forks P (400), whose first line comes before G's clone returns; a host
#: helper 500 exits and its pid is reused by a second child of G.  strace pads a pid
#: shorter than 5 digits (``400   getpid()``).
WRITTEN = """\
100 openat(AT_FDCWD, "/etc/passwd", O_RDONLY) = 3
500 read(0, "", 1) = 0
500 +++ exited with 0 +++
100 vfork( <unfinished ...>
200 unshare(CLONE_NEWNS|CLONE_NEWNET) = 0
100 <... vfork resumed>)              = 200
200 mount(NULL, "/", NULL, MS_REC|MS_PRIVATE, NULL) = 0
200 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD <unfinished ...>
200 <... clone resumed>, child_tidptr=0x7f) = 2 /* 300 in strace's PID NS */
300 read(3, "x", 1) = 1
300 prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, {len=3, filter=0x7f}) = 0
300 getppid() = 1
300 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD <unfinished ...>
400   getpid() = 3
400 exit_group(0) = ?
300 <... clone resumed>, child_tidptr=0x7f) = 3 /* 400 in strace's PID NS */
300 wait4(-1, NULL, 0, NULL) = 3 /* 400 in strace's PID NS */
300 --- SIGCHLD {si_signo=SIGCHLD} ---
300 fork() = 4 /* 500 in strace's PID NS */
500 getuid() = 65534
500 +++ exited with 0 +++
300 exit_group(0) = ?
300 +++ exited with 0 +++
200 wait4(-1, NULL, 0, NULL) = 2 /* 300 in strace's PID NS */
"""


def test_only_calls_under_the_filter_are_counted() -> None:
    counts = trace.filtered_calls(WRITTEN.splitlines())
    assert dict(counts) == {
        "getppid": 1,
        "clone": 1,
        "fork": 1,
        "getuid": 1,
        "getpid": 1,
        "exit_group": 2,
        "wait4": 1,
    }


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_real_sandboxed_run_is_traced(tmp_path: Path) -> None:
    """Real strace over a real sandboxed run: the program's call is listed, the launcher's
    namespace set-up (``unshare``, ``mount``, ``pivot_root``) is not."""
    program = "import os\nos.getppid()\nos.getppid()\n"
    workload = (
        "from ragen_envs.sandbox import SandboxConfig, run_python\n"
        f"r = run_python({program!r}, config=SandboxConfig(namespaces='require'))\n"
        "assert r.ok, (r.status, r.stderr)\n"
    )
    out = tmp_path / "calls.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out), "--", sys.executable, "-c", workload],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    if "PTRACE_TRACEME" in proc.stderr or "Operation not permitted" in proc.stderr:
        pytest.skip(f"ptrace is not permitted here: {proc.stderr.strip()[-200:]}")
    if proc.returncode != 0 and "namespaces unavailable" in proc.stderr:
        pytest.skip("this kernel refuses the sandbox's namespaces here")
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = json.loads(out.read_text())
    assert calls.get("getppid", 0) >= 2, calls
    assert not {"unshare", "mount", "pivot_root"} & set(calls), calls
