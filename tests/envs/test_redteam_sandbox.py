"""Issue 28, sandbox syscalls: the second red-team pass's payloads, one case each.

Each probe runs inside the real sandbox (with namespaces, and in the fallback through
``run_command`` so that ``ctypes`` is usable there too) and calls the kernel directly
with ``syscall(2)``.  Before the seccomp filter most of them succeeded (a user namespace
with full capabilities, then ``mount``; a key added to the user keyring and read back by
a later run; an io_uring instance; ``PTRACE_TRACEME``; a perf counter); now each gets
``EPERM`` (``ENOSYS`` for ``clone3``).  Syscall numbers are written out here
independently of ``ragen_envs.sandbox.seccomp`` (x86-64: ``syscall_64.tbl``; aarch64:
``asm-generic/unistd.h``), so a wrong number in the filter fails these tests.
"""

from __future__ import annotations

import errno
import json
import os
import sys

import pytest

from ragen_envs.sandbox import SandboxStatus, run_command, run_python, seccomp
from tests.envs.test_sandbox import FALLBACK, FAST, needs_fallback, needs_ns

MACHINE = os.uname().machine
pytestmark = pytest.mark.skipif(
    MACHINE not in ("x86_64", "aarch64"), reason=f"no seccomp filter for {MACHINE}"
)

PROBE = r"""
import ctypes, json, os
NR = {
    "x86_64": dict(clone=56, ptrace=101, mount=165, add_key=248, request_key=249, keyctl=250,
                   unshare=272, perf_event_open=298, setns=308, bpf=321, io_uring_setup=425,
                   fsopen=430, clone3=435),
    "aarch64": dict(clone=220, ptrace=117, mount=40, add_key=217, request_key=218, keyctl=219,
                    unshare=97, perf_event_open=241, setns=268, bpf=280, io_uring_setup=425,
                    fsopen=430, clone3=435),
}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(NR[name]), *[a if isinstance(a, (bytes, ctypes.Array)) else L(a)
                                    for a in args])
    return (r, 0) if r >= 0 else (r, ctypes.get_errno())
NEWUSER, NEWNS, SIGCHLD = 0x10000000, 0x20000, 17
def in_child(fn):
    # run fn in a forked child, so that a namespace it enters does not affect the next probe
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, json.dumps(fn()).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.waitpid(pid, 0)
    return json.loads(data)
out = {}
out["unshare_user"] = in_child(lambda: call("unshare", NEWUSER)[1])
def mount_in_new_namespaces():
    # before the filter: a fresh user+mount namespace, and a tmpfs mounted in it
    uid = os.getuid()
    if call("unshare", NEWUSER | NEWNS)[1] == 0:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {os.getgid()} 1")):
            try:
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
            except OSError:
                pass  # unmapped: the capabilities inside are there all the same
    return [call("mount", b"none", b"/tmp", b"tmpfs", 0, 0)[1], call("fsopen", b"tmpfs", 0)[1]]
out["mount"], out["fsopen"] = in_child(mount_in_new_namespaces)
def clone_newuser():
    r, e = call("clone", NEWUSER | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)  # the child of a successful clone
    if r > 0:
        os.waitpid(r, 0)
    return e
out["clone_newuser"] = in_child(clone_newuser)
out["clone3"] = call("clone3", 0, 0)[1]
out["add_key"] = call("add_key", b"user", b"ragen-redteam", b"secret", 6, -4)[1]
out["request_key"] = call("request_key", b"user", b"ragen-redteam", 0, 0)[1]
out["keyctl"] = call("keyctl", 0, -3, 0)[1]  # KEYCTL_GET_KEYRING_ID of the session keyring
params = ctypes.create_string_buffer(120)
out["io_uring_setup"] = call("io_uring_setup", 1, params)[1]
attr = ctypes.create_string_buffer(128)
attr[4] = 64  # size = PERF_ATTR_SIZE_VER0; type 1 (software), config 0 (cpu clock)
attr[0] = 1
attr[40] = 0x60  # exclude_kernel | exclude_hv
out["perf_event_open"] = call("perf_event_open", attr, 0, -1, -1, 0)[1]
out["bpf"] = call("bpf", 0, ctypes.create_string_buffer(128), 128)[1]  # BPF_MAP_CREATE
out["ptrace"] = call("ptrace", 0, 0, 0, 0)[1]  # PTRACE_TRACEME
out["setns"] = call("setns", os.open("/proc/self/ns/net", os.O_RDONLY), 0)[1]
print(json.dumps(out))
"""

EXPECTED = {
    "unshare_user": errno.EPERM,
    "mount": errno.EPERM,
    "fsopen": errno.EPERM,
    "clone_newuser": errno.EPERM,
    "clone3": errno.ENOSYS,
    "add_key": errno.EPERM,
    "request_key": errno.EPERM,
    "keyctl": errno.EPERM,
    "io_uring_setup": errno.EPERM,
    "perf_event_open": errno.EPERM,
    "bpf": errno.EPERM,
    "ptrace": errno.EPERM,
    "setns": errno.EPERM,
}


def _probe_namespaces() -> dict:
    res = run_python(PROBE, config=FAST)
    assert res.status is SandboxStatus.OK, (res.status, res.stderr)
    return json.loads(res.stdout)


def _probe_fallback() -> dict:
    python = FALLBACK.python or sys.executable
    res = run_command([python, "-I", "-S", "-c", PROBE], config=FALLBACK)
    assert res.status is SandboxStatus.OK, (res.status, res.stderr)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def probed_ns() -> dict:
    return _probe_namespaces()


@pytest.fixture(scope="module")
def probed_fallback() -> dict:
    return _probe_fallback()


@needs_ns
@pytest.mark.parametrize("call", sorted(EXPECTED))
def test_syscall_is_denied_with_namespaces(probed_ns: dict, call: str) -> None:
    assert probed_ns[call] == EXPECTED[call], f"{call}: errno {probed_ns[call]}"


@needs_fallback
@pytest.mark.parametrize("call", sorted(EXPECTED))
def test_syscall_is_denied_in_the_fallback(probed_fallback: dict, call: str) -> None:
    assert probed_fallback[call] == EXPECTED[call], f"{call}: errno {probed_fallback[call]}"


ADD_KEY = (
    PROBE.split("out = {}")[0]
    + r"""
print(call("add_key", b"user", b"ragen-redteam-28", b"s3cret", 6, -4)[1])
print(call("request_key", b"user", b"ragen-redteam-28", 0, -4)[1])
"""
)


@needs_ns
def test_the_isolation_record_names_the_filter() -> None:
    iso = run_python("pass", config=FAST).isolation
    assert iso.get("seccomp") is True and iso.get("session_keyring") is True


@needs_ns
def test_a_key_added_in_one_run_is_not_found_by_the_next() -> None:
    first = run_python(ADD_KEY, config=FAST)
    second = run_python(ADD_KEY.replace("s3cret", "other"), config=FAST)
    assert first.stdout.split() == [str(errno.EPERM)] * 2
    assert second.stdout.split() == [str(errno.EPERM)] * 2
    assert first.isolation["session_keyring"] is True  # L joined a fresh session keyring
    with open("/proc/keys") as fh:
        assert "ragen-redteam-28" not in fh.read()


@needs_ns
def test_ordinary_programs_still_fork_and_start_threads() -> None:
    src = (
        "import os, threading\n"
        "out = []\n"
        "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "pid = os.fork()\n"
        "if pid == 0: os._exit(7)\n"
        "print(sorted(out), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    res = run_python(src, config=FAST)
    assert res.status is SandboxStatus.OK, res.stderr
    assert res.stdout.strip() == "[0, 1, 2, 3] 7"


def test_the_filter_jumps_only_forward_and_fits() -> None:
    for machine in seccomp.SYSCALLS:
        prog = seccomp.filter_program(machine)
        assert prog is not None and len(prog) % 8 == 0 and len(prog) // 8 < 64
    assert seccomp.filter_program("s390x") is None


@needs_ns
def test_a_program_cannot_raise_its_cpu_limit() -> None:
    src = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))\n"
        "print(resource.getrlimit(resource.RLIMIT_CPU), flush=True)\n"
        "while True: pass\n"
    )
    # a generous wall limit: on a loaded machine 1 s of CPU can take longer than FAST's 4 s
    res = run_python(src, config=FAST.with_(wall_time_s=30))
    assert res.stdout.strip() == "(1, 1)"
    assert res.status is SandboxStatus.TIMEOUT and res.detail == "cpu"
    assert res.cpu_time_s < 1.5, res.cpu_time_s  # was ~2 s: the soft limit raised to hard


# ------------------------------------------------- silent weak fallback (DeepCoder)
FALLBACK_CHILD = r"""
import sys, warnings
from ragen_envs.sandbox import seccomp
import ctypes
ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
seccomp.install(seccomp.filter_program())  # no unshare here: namespaces are unavailable
import ragen_envs
env = ragen_envs.make("ragen/DeepCoder-v0", sandbox_namespaces=sys.argv[1]).unwrapped
levels = [env.reset(seed=s)[1]["sandbox_level"] for s in range(3)]
print("levels", levels, flush=True)
"""


@pytest.mark.parametrize("mode,level,warned", [("auto", "fallback", 1), ("off", "fallback", 0)])
def test_auto_falling_back_warns_once_and_says_so_in_info(
    mode: str, level: str, warned: int
) -> None:
    """A host where namespaces are refused (a child under our own filter) runs DeepCoder
    with ``sandbox_namespaces="auto"``: one warning line per process, and every episode's
    info says ``sandbox_level="fallback"`` (before: no warning, no field)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", FALLBACK_CHILD, mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"levels {[level] * 3}" in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if "SandboxDowngradeWarning" in ln]
    assert len(lines) == warned, proc.stderr
    if warned:
        assert "model-written code runs in the weaker fallback" in lines[0]


@needs_ns
def test_deepcoder_info_names_the_sandbox_level() -> None:
    import ragen_envs

    env = ragen_envs.make("ragen/DeepCoder-v0")
    _, info = env.reset(seed=0)
    assert info["sandbox_level"] == "namespaces"
    _, _, _, _, info = env.step("<answer>```python\nprint(1)\n```</answer>")
    assert info["sandbox_level"] == "namespaces"
