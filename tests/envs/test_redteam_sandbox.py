"""Sandbox syscalls: the second red-team pass's payloads, one case each.

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
import struct
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


# ------------------------------------------------- calls outside the allow-list
#: Calls the deny-list filter let through (a red-team pass showed each working inside the
#: DeepCoder sandbox: vsock reached the hypervisor's transport, inotify saw the host's file
#: activity, page-cache residency carried bits from one episode to a later one).  Each is
#: made with valid arguments, so that "before" it succeeded; now each gets EPERM.
ALLOW_LIST_PROBE = r"""
import ctypes, json, mmap, os
NR = {
    "x86_64": dict(socket=41, userfaultfd=323, memfd_secret=447, io_setup=206, fanotify_init=300,
                   inotify_init1=294, personality=135, mincore=27, cachestat=451, preadv2=327),
    "aarch64": dict(socket=198, userfaultfd=282, memfd_secret=447, io_setup=0, fanotify_init=262,
                    inotify_init1=26, personality=92, mincore=232, cachestat=451, preadv2=286),
}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[a if isinstance(a, ctypes.Array) else
                                                ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
out = {}
AF_INET, AF_INET6, AF_VSOCK, SOCK_STREAM = 2, 10, 40, 1
out["socket_vsock"] = call("socket", AF_VSOCK, SOCK_STREAM, 0)
out["socket_inet"] = call("socket", AF_INET, SOCK_STREAM, 0)
out["socket_inet6"] = call("socket", AF_INET6, SOCK_STREAM, 0)
out["userfaultfd"] = call("userfaultfd", 1)  # UFFD_USER_MODE_ONLY
out["memfd_secret"] = call("memfd_secret", 0)
ctx = ctypes.create_string_buffer(8)
out["io_setup"] = call("io_setup", 1, ctx)
out["fanotify_init"] = call("fanotify_init", 0x200, 0)  # FAN_REPORT_FID: no privilege needed
out["inotify_init1"] = call("inotify_init1", 0)
out["personality"] = call("personality", 0xFFFFFFFF)  # a query only
page = mmap.mmap(-1, mmap.PAGESIZE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
out["mincore"] = call("mincore", addr, mmap.PAGESIZE, ctypes.create_string_buffer(1))
fd = os.open(os.__file__, os.O_RDONLY)  # a library file: shared with every other run
with open("own.bin", "wb") as fh:  # cachestat answers only for a file the caller may write
    fh.write(b"x" * 4096)
own = os.open("own.bin", os.O_RDWR)
rng = ctypes.create_string_buffer(16)  # struct cachestat_range {off, len}: the whole file
out["cachestat"] = call("cachestat", own, rng, ctypes.create_string_buffer(40), 0)
buf = ctypes.create_string_buffer(64)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)  # struct iovec
# RWF_NOWAIT: EAGAIN when the page is not cached (the residency probe itself), else data
out["preadv2_nowait"] = call("preadv2", fd, iov, 1, 0, 0, 8)
print(json.dumps(out))
"""
ALLOW_LIST_EXPECTED = dict.fromkeys(
    [
        "socket_vsock",
        "socket_inet",
        "socket_inet6",
        "userfaultfd",
        "memfd_secret",
        "io_setup",
        "fanotify_init",
        "inotify_init1",
        "personality",
        "mincore",
        "cachestat",
        "preadv2_nowait",
    ],
    errno.EPERM,
)


@pytest.fixture(scope="module")
def allow_list_ns() -> dict:
    res = run_python(ALLOW_LIST_PROBE, config=FAST)
    assert res.status is SandboxStatus.OK, (res.status, res.stderr)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def allow_list_fallback() -> dict:
    python = FALLBACK.python or sys.executable
    res = run_command([python, "-I", "-S", "-c", ALLOW_LIST_PROBE], config=FALLBACK)
    assert res.status is SandboxStatus.OK, (res.status, res.stderr)
    return json.loads(res.stdout)


@needs_ns
@pytest.mark.parametrize("call", sorted(ALLOW_LIST_EXPECTED))
def test_call_outside_the_allow_list_is_denied_with_namespaces(
    allow_list_ns: dict, call: str
) -> None:
    assert allow_list_ns[call] == ALLOW_LIST_EXPECTED[call], f"{call}: errno {allow_list_ns[call]}"


@needs_fallback
@pytest.mark.parametrize("call", sorted(ALLOW_LIST_EXPECTED))
def test_call_outside_the_allow_list_is_denied_in_the_fallback(
    allow_list_fallback: dict, call: str
) -> None:
    got = allow_list_fallback[call]
    assert got == ALLOW_LIST_EXPECTED[call], f"{call}: errno {got}"


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


# ------------------------------------------------- the filter as a program
def _run_filter(prog: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """Evaluate a classic-BPF seccomp program on one ``struct seccomp_data`` (x86-64 /
    aarch64 layout, little-endian), with the semantics of ``Documentation/networking/
    filter.rst``: the opcodes the filter may use; anything else fails the test."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(tuple(args) + (0,) * (6 - len(args))))
    insns = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns) + 1):  # forward jumps only: at most one pass
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # LD W ABS
            assert k % 4 == 0 and k + 4 <= len(data), k
            acc, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        elif code == 0x05:  # JA
            pc += 1 + k
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET (immediate)
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:  # RET K
            return k
        else:
            raise AssertionError(f"opcode {code:#x} at {pc}")
        assert 0 <= pc < len(insns), f"jump out of the program at {pc}"
    raise AssertionError("no return")


ALLOW, DENY, NOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
#: Written out independently of the filter's tables (syscall_64.tbl / asm-generic/unistd.h).
ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _table(text: str) -> dict[str, int]:
    """``"name=number ..."`` as a dict."""
    return {k: int(v) for k, v in (item.split("=") for item in text.split())}


DENIED_NR = {
    "x86_64": _table(
        "socket=41 mincore=27 personality=135 io_setup=206 fanotify_init=300 "
        "inotify_init1=294 userfaultfd=323 preadv2=327 memfd_secret=447 cachestat=451 "
        "unshare=272 mount=165 ptrace=101 fadvise64=221 readahead=187 keyctl=250 "
        "clone=56 madvise=28 prlimit64=302 ioctl=16 shmget=29"
    ),
    "aarch64": _table(
        "socket=198 mincore=232 personality=92 io_setup=0 fanotify_init=262 "
        "inotify_init1=26 userfaultfd=282 preadv2=286 memfd_secret=447 cachestat=451 "
        "unshare=97 mount=40 ptrace=117 fadvise64=223 readahead=213 keyctl=219 "
        "clone=220 madvise=233 prlimit64=261 ioctl=29 shmget=194"
    ),
}
ALLOWED_NR = {
    "x86_64": dict(read=0, write=1, openat=257, mmap=9, futex=202, execve=59, exit_group=231),
    "aarch64": dict(read=63, write=64, openat=56, mmap=222, futex=98, execve=221, exit_group=94),
}


@pytest.mark.parametrize("machine", sorted(ARCH))
def test_the_filter_is_an_allow_list_with_argument_rules(machine: str) -> None:
    """The assembled program, evaluated on chosen calls for both architectures (no
    kernel needed): what the allow-list lets through and what it refuses, with errnos."""
    prog = seccomp.filter_program(machine)
    assert prog is not None and len(prog) % 8 == 0
    assert len(prog) // 8 <= seccomp.MAX_INSTRUCTIONS
    arch, nr, ok = ARCH[machine], DENIED_NR[machine], ALLOWED_NR[machine]
    table = seccomp.SYSCALLS[machine][1]
    for name in seccomp.allowed_calls(machine):
        if name not in seccomp.ARGUMENT_RULES and name != "clone":
            assert _run_filter(prog, arch, table[name]) == ALLOW, name
    for name, number in ok.items():
        assert _run_filter(prog, arch, number) == ALLOW, name
    for name in (
        "mincore",
        "personality",
        "io_setup",
        "fanotify_init",
        "inotify_init1",
        "userfaultfd",
        "preadv2",
        "memfd_secret",
        "cachestat",
        "unshare",
        "mount",
        "ptrace",
        "fadvise64",
        "readahead",
        "keyctl",
        "shmget",
    ):
        assert _run_filter(prog, arch, nr[name]) == DENY, name
    assert _run_filter(prog, arch, 435) == NOSYS  # clone3
    assert _run_filter(prog, arch, 1000) == DENY  # beyond every table
    assert _run_filter(prog, 0x40000003, ok["read"]) == DENY  # i386 calling convention
    if machine == "x86_64":
        assert _run_filter(prog, arch, 0x40000000 | ok["read"]) == DENY  # x32
    # socket(domain): AF_UNIX only; AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK refused
    assert _run_filter(prog, arch, nr["socket"], (1, 1, 0)) == ALLOW
    for domain in (2, 10, 16, 17, 40):
        assert _run_filter(prog, arch, nr["socket"], (domain, 1, 0)) == DENY, domain
    # clone: namespace flags refused (CLONE_NEWUSER | SIGCHLD), a thread or fork allowed
    assert _run_filter(prog, arch, nr["clone"], (0x10000000 | 17,)) == DENY
    assert _run_filter(prog, arch, nr["clone"], (0x003D0F00,)) == ALLOW  # pthread_create
    assert _run_filter(prog, arch, nr["clone"], (0x01200011,)) == ALLOW  # fork()
    # madvise: DONTNEED allowed, PAGEOUT (21, evicts file pages) and MERGEABLE (12) refused
    assert _run_filter(prog, arch, nr["madvise"], (0, 4096, 4)) == ALLOW
    assert _run_filter(prog, arch, nr["madvise"], (0, 4096, 21)) == DENY
    assert _run_filter(prog, arch, nr["madvise"], (0, 4096, 12)) == DENY
    # prlimit64 on the calling process only; ioctl TCGETS yes, TIOCSTI (0x5412) no
    assert _run_filter(prog, arch, nr["prlimit64"], (0, 7, 0, 0)) == ALLOW
    assert _run_filter(prog, arch, nr["prlimit64"], (1, 7, 0, 0)) == DENY
    assert _run_filter(prog, arch, nr["ioctl"], (0, 0x5401)) == ALLOW
    assert _run_filter(prog, arch, nr["ioctl"], (0, 0x5412)) == DENY


def test_the_filter_exists_only_for_known_architectures() -> None:
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
import ctypes, os, struct, sys, warnings
from ragen_envs.sandbox import seccomp
# A host where namespaces are unavailable: unshare(2) gets EPERM, every other call runs.
unshare = {"x86_64": 272, "aarch64": 97}[os.uname().machine]
program = b"".join(struct.pack("=HBBI", *ins) for ins in [
    (0x20, 0, 0, 0), (0x15, 0, 1, unshare), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)])
ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
seccomp.install(program)
import ragen_envs
env = ragen_envs.make("ragen/DeepCoder-v0", sandbox_namespaces=sys.argv[1]).unwrapped
levels = [env.reset(seed=s)[1]["sandbox_level"] for s in range(3)]
print("levels", levels, flush=True)
"""


@pytest.mark.parametrize("mode,level,warned", [("auto", "fallback", 1), ("off", "fallback", 0)])
def test_auto_falling_back_warns_once_and_says_so_in_info(
    mode: str, level: str, warned: int
) -> None:
    """A host where namespaces are refused (a child whose ``unshare`` gets EPERM) runs DeepCoder
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
