"""A seccomp filter and a fresh session keyring for the sandboxed program (stdlib only).

Imported by :mod:`ragen_envs.sandbox.launcher` before it enters the private root; the
program process installs the filter just before the program runs (after
``PR_SET_NO_NEW_PRIVS``, which lets an unprivileged process install one).  The filter is a
small classic-BPF program (``Documentation/userspace-api/seccomp_filter.rst`` in the Linux
tree) built here, so no libseccomp is needed.  It returns ``EPERM`` for the calls below and
``ENOSYS`` for ``clone3`` (whose flags live in memory a filter cannot read; C libraries then
fall back to ``clone``, whose flags it can read: the convention of Docker's default profile).

Denied: ``unshare``/``clone`` with any namespace flag, ``setns``, ``mount``/``umount2``/
``pivot_root`` and the new mount API (``open_tree``, ``move_mount``, ``fsopen``,
``fsconfig``, ``fsmount``, ``fspick``, ``mount_setattr``), ``keyctl``/``add_key``/
``request_key``, ``io_uring_setup``/``io_uring_enter``/``io_uring_register``, ``bpf``,
``ptrace``, ``perf_event_open``; on x86-64 also every x32-ABI call, and on both
architectures every call made under another architecture's calling convention
(e.g. ``int 0x80`` on x86-64).

Syscall numbers: x86-64 from ``arch/x86/entry/syscalls/syscall_64.tbl``; aarch64 from
``include/uapi/asm-generic/unistd.h`` (Linux 6.x).  Other architectures get no filter
(:func:`filter_program` returns ``None``; the isolation record says ``seccomp: False``).
"""

from __future__ import annotations

import os
import struct

PR_GET_SECCOMP = 21
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
KEYCTL_JOIN_SESSION_KEYRING = 1

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
EPERM, ENOSYS = 1, 38

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16  # little-endian: low word of args[0]

#: Every CLONE_NEW* flag (linux/sched.h): NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
#: NEWUSER, NEWPID, NEWNET.
NAMESPACE_FLAGS = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
NAMESPACE_FLAGS |= 0x20000000 | 0x40000000

_DENIED_NAMES = (
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "ptrace",
    "perf_event_open",
)

#: machine -> (AUDIT_ARCH_* from linux/audit.h, syscall numbers).
_NEW_API = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "mount_setattr": 442,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}
SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        _NEW_API
        | {
            "clone": 56,
            "ptrace": 101,
            "pivot_root": 155,
            "mount": 165,
            "umount2": 166,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "unshare": 272,
            "perf_event_open": 298,
            "setns": 308,
            "bpf": 321,
        },
    ),
    "aarch64": (
        0xC00000B7,
        _NEW_API
        | {
            "umount2": 39,
            "mount": 40,
            "pivot_root": 41,
            "unshare": 97,
            "ptrace": 117,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "clone": 220,
            "perf_event_open": 241,
            "setns": 268,
            "bpf": 280,
        },
    ),
}
_X32_BIT = 0x40000000


def _assemble(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions for ``machine``."""
    arch, nr = SYSCALLS[machine]
    deny, nosys, flags = "deny", "nosys", "flags"  # labels; every jump goes forward
    prog: list[tuple] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, None, deny, arch),  # None: fall through
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        prog.append((_JGE_K, deny, None, _X32_BIT))
    prog += [(_JEQ_K, deny, None, nr[name]) for name in _DENIED_NAMES]
    prog += [
        (_JEQ_K, nosys, None, nr["clone3"]),
        (_JEQ_K, flags, None, nr["clone"]),
        (_JEQ_K, flags, None, nr["unshare"]),
        ("allow", 0, 0, _RET_ALLOW),
        ("flags", 0, 0, 0),
        (_JSET_K, deny, None, NAMESPACE_FLAGS),
        ("allow_flags", 0, 0, _RET_ALLOW),
        ("deny", 0, 0, _RET_ERRNO | EPERM),
        ("nosys", 0, 0, _RET_ERRNO | ENOSYS),
    ]
    labels: dict[str, int] = {}
    body: list[tuple] = []
    for ins in prog:
        if ins[0] == "flags":  # a label only: load the flags word
            labels["flags"] = len(body)
            body.append((_LD_W_ABS, 0, 0, _OFF_ARG0_LOW))
        elif isinstance(ins[0], str):  # a labelled return
            labels[ins[0]] = len(body)
            body.append((_RET_K, 0, 0, ins[3]))
        else:
            body.append(ins)

    def rel(target, i: int) -> int:
        return 0 if target in (None, 0) else labels[target] - i - 1

    return [(code, rel(jt, i), rel(jf, i), k) for i, (code, jt, jf, k) in enumerate(body)]


def filter_program(machine: str | None = None) -> bytes | None:
    """The packed ``struct sock_filter[]`` for this machine, or ``None`` if unsupported."""
    machine = machine or os.uname().machine
    if machine not in SYSCALLS:
        return None
    return b"".join(struct.pack("=HBBI", *ins) for ins in _assemble(machine))


def available() -> bool:
    """Whether this kernel has seccomp (``PR_GET_SECCOMP`` answers) and the arch is known."""
    import ctypes

    if filter_program() is None:
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0


def install(program: bytes) -> None:
    """Install ``program`` on the calling thread (needs ``PR_SET_NO_NEW_PRIVS`` first).

    Raises:
        OSError: the kernel refused the filter.
    """
    import ctypes

    n = len(program) // 8
    buf = ctypes.create_string_buffer(program, len(program))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Prog(n, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def join_fresh_session_keyring() -> bool:
    """Give the calling process a new anonymous session keyring (``keyctl(2)``).

    Keys a previous run left in *its* session keyring are then out of reach; the filter
    blocks the key calls inside the program anyway.  Returns False where the kernel has
    no keyrings or the call is refused.
    """
    import ctypes

    machine = os.uname().machine
    if machine not in SYSCALLS:
        return False
    nr = SYSCALLS[machine][1]["keyctl"]
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(nr, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0
