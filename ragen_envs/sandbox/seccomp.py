"""The sandboxed program's system calls by allow-list, and a fresh session keyring (stdlib only).

Imported by :mod:`ragen_envs.sandbox.launcher` before it enters the private root; the
program process installs the filter just before the program runs (after
``PR_SET_NO_NEW_PRIVS``, which lets an unprivileged process install one).  The filter is a
classic-BPF program (``Documentation/userspace-api/seccomp_filter.rst`` in the Linux
tree) built here, so no libseccomp is needed.

A call is allowed only if it is in :data:`GROUPS` (one reason per group; the list was
found by tracing every bundled and test-suite reference solution and the sandbox's own
test programs: ``scripts/trace_sandbox_syscalls.py``), and, for the calls of
:data:`ARGUMENT_RULES` and ``clone``, only with the listed argument values.  Every other
call returns ``EPERM`` (the default of Docker's profile), except ``clone3``, which returns
``ENOSYS`` (its flags live in memory a filter cannot read; C libraries then fall back to
``clone``, whose flags it can read).  Calls under another architecture's calling
convention (``int 0x80`` on x86-64) and x32-ABI calls get ``EPERM`` too.

Denied among others (``docs/envs/sandbox.md`` has the table): namespaces (``unshare``,
``setns``, ``clone`` with a ``CLONE_NEW*`` flag), mounts and the new mount API, keyrings,
io_uring, ``bpf``, ``ptrace``, ``perf_event_open``, AIO (``io_setup``), ``userfaultfd``,
``memfd_secret``, ``fanotify_init``, ``inotify_init1``, ``personality``, SysV IPC, sockets other
than ``AF_UNIX`` (vsock, ``AF_INET``, ``AF_INET6``, netlink, packet), and the page-cache
probes and levers ``mincore``, ``cachestat``, ``preadv2``/``pwritev2`` (``RWF_NOWAIT``),
``fadvise64``, ``readahead`` and ``madvise`` advice that evicts or merges pages.

Argument checks read the low 32 bits of an argument (``struct seccomp_data`` on a
little-endian machine): each checked argument is an ``int`` or ``unsigned int`` in the
kernel (``clone``'s flags above bit 31 exist only for ``clone3``).

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
_JA = 0x05  # BPF_JMP | BPF_JA: unconditional, 32-bit offset in k
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
EPERM, ENOSYS = 1, 38
#: The kernel's limit on a classic-BPF program (BPF_MAXINSNS).
MAX_INSTRUCTIONS = 4096

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_low(index: int) -> int:
    """Offset of the low word of ``args[index]`` (little-endian)."""
    return 16 + 8 * index


#: Every CLONE_NEW* flag (linux/sched.h): NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
#: NEWUSER, NEWPID, NEWNET.
NAMESPACE_FLAGS = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
NAMESPACE_FLAGS |= 0x20000000 | 0x40000000

#: The allow-list: ``(group, why the program needs it, calls)``.  A name an architecture
#: lacks (aarch64 has no ``open``, ``stat``, ``fork``, ``poll``, ...; ``arch_prctl`` is
#: x86-64's) is skipped there.
GROUPS: tuple[tuple[str, str, str], ...] = (
    (
        "files and descriptors",
        "the interpreter imports the standard library, the program reads its input and "
        "writes files in its private /tmp; shutil copies with sendfile/copy_file_range",
        (
            "read write readv writev pread64 pwrite64 preadv pwritev open openat close "
            "close_range lseek fstat stat lstat newfstatat statx access faccessat faccessat2 "
            "readlink readlinkat getdents64 fcntl ioctl dup dup2 dup3 pipe pipe2 ftruncate "
            "truncate fsync fdatasync mkdir mkdirat rmdir unlink unlinkat rename renameat "
            "renameat2 link linkat symlink symlinkat chmod fchmod fchmodat getcwd chdir "
            "fchdir umask utimensat fstatfs statfs sendfile copy_file_range flock fallocate "
            "getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr"
        ),
    ),
    (
        "memory",
        "the allocator (brk, mmap, mremap, madvise) and the dynamic loader (mprotect)",
        "brk mmap munmap mremap mprotect madvise msync",
    ),
    (
        "processes and threads",
        "threading, os.fork, subprocess and multiprocessing (clone without namespace flags, "
        "execve, wait4), the C library's thread set-up (set_tid_address, set_robust_list, "
        "rseq, futex), os.cpu_count (sched_getaffinity), the launcher's own prctl calls",
        (
            "clone fork vfork execve exit exit_group wait4 waitid getpid getppid gettid "
            "getpgid setpgid getpgrp getsid setsid set_tid_address set_robust_list rseq futex "
            "sched_yield sched_getaffinity getpriority setpriority arch_prctl prctl kill "
            "tgkill tkill"
        ),
    ),
    (
        "signals and time",
        "signal handlers, faulthandler's alternate stack, time.sleep, time.time, "
        "signal.alarm / setitimer",
        (
            "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigsuspend rt_sigtimedwait "
            "sigaltstack alarm setitimer getitimer pause clock_gettime clock_getres "
            "clock_nanosleep nanosleep gettimeofday time times"
        ),
    ),
    (
        "waiting on descriptors",
        "select/selectors on pipes (subprocess.communicate, the harness)",
        ("poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait"),
    ),
    (
        "identity and limits",
        "os.getuid and friends, resource.getrlimit/setrlimit (lowering only: hard = soft), "
        "os.uname, os.urandom / random seeding (getrandom), resource.getrusage",
        (
            "getuid geteuid getgid getegid getgroups getresuid getresgid getrlimit setrlimit "
            "prlimit64 getrusage sysinfo uname getrandom"
        ),
    ),
    (
        "local sockets",
        "a socket pair between the program's own processes (multiprocessing.Pipe); "
        "AF_UNIX only (ARGUMENT_RULES)",
        (
            "socket socketpair connect sendmsg recvmsg sendto recvfrom shutdown getsockopt setsockopt "
            "getsockname getpeername"
        ),
    ),
)
ALLOWED: frozenset[str] = frozenset(name for _, _, names in GROUPS for name in names.split())

AF_UNIX = 1
#: ``name: (argument index, allowed values, what the argument is)``: calls of the allow-list
#: permitted only for these values of one argument (low 32 bits); ``EPERM`` otherwise.
ARGUMENT_RULES: dict[str, tuple[int, frozenset[int], str]] = {
    # socket(2) / socketpair(2) domain: no AF_INET/AF_INET6, AF_VSOCK (40), AF_NETLINK (16),
    # AF_PACKET (17), ...
    "socket": (0, frozenset({AF_UNIX}), "domain"),
    "socketpair": (0, frozenset({AF_UNIX}), "domain"),
    # prctl(2) options (linux/prctl.h): PDEATHSIG, DUMPABLE, NAME, SECCOMP (a filter can
    # only narrow), CAPBSET_READ, TIMERSLACK (read), NO_NEW_PRIVS, THP_DISABLE (read), VMA
    # names (glibc).  Not PR_SET_MM, PR_SET_PTRACER, PR_SET_CHILD_SUBREAPER, ...
    "prctl": (
        0,
        frozenset({1, 2, 3, 4, 15, 16, 21, 22, 23, 30, 38, 39, 42, 0x53564D41}),
        "option",
    ),
    # ioctl(2) requests: TCGETS (isatty), TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX
    # (asm-generic/ioctls.h, the same numbers on x86-64 and aarch64); not TIOCSTI & co.
    "ioctl": (1, frozenset({0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451}), "request"),
    # prlimit64(2) on the calling process only (pid 0: what setrlimit/getrlimit use); not
    # another process's limits.
    "prlimit64": (0, frozenset({0}), "pid"),
    # madvise(2) advice: NORMAL, RANDOM, SEQUENTIAL, WILLNEED, DONTNEED, FREE, DONTFORK,
    # DOFORK, HUGEPAGE, NOHUGEPAGE, DONTDUMP, DODUMP; not COLD/PAGEOUT (they evict file
    # pages: a page-cache lever), MERGEABLE (KSM), REMOVE, HWPOISON, POPULATE_*.
    "madvise": (2, frozenset({0, 1, 2, 3, 4, 8, 10, 11, 14, 15, 16, 17}), "advice"),
}
#: Calls answered ``ENOSYS`` (a C library falls back to a call the filter can read).
NOSYS = ("clone3",)
#: Frequent calls first (the filter is read top to bottom; order measured with
#: scripts/trace_sandbox_syscalls.py on the reference solutions).
_HOT = (
    "newfstatat read lseek close openat ioctl write brk "
    "getdents64 mmap fstat futex clone prctl exit_group "
    "set_robust_list gettid pipe2 getcwd munmap mremap wait4 "
    "mprotect rt_sigaction rt_sigprocmask stat lstat fcntl"
).split()

# Numbers of the calls named above (and keyctl, for the session keyring): one table per
# architecture, sorted by number.
# fmt: off
_X86_64 = dict(
    read=0, write=1, open=2, close=3, stat=4, fstat=5, lstat=6, poll=7, lseek=8, mmap=9,
    mprotect=10, munmap=11, brk=12, rt_sigaction=13, rt_sigprocmask=14, rt_sigreturn=15, ioctl=16,
    pread64=17, pwrite64=18, readv=19, writev=20, access=21, pipe=22, select=23, sched_yield=24,
    mremap=25, msync=26, madvise=28, dup=32, dup2=33, pause=34, nanosleep=35, getitimer=36,
    alarm=37, setitimer=38, getpid=39, sendfile=40, socket=41, connect=42, sendto=44, recvfrom=45, sendmsg=46,
    recvmsg=47, shutdown=48, getsockname=51, getpeername=52, socketpair=53, setsockopt=54,
    getsockopt=55, clone=56, fork=57, vfork=58, execve=59, exit=60, wait4=61, kill=62, uname=63,
    fcntl=72, flock=73, fsync=74, fdatasync=75, truncate=76, ftruncate=77, getcwd=79, chdir=80,
    fchdir=81, rename=82, mkdir=83, rmdir=84, link=86, unlink=87, symlink=88, readlink=89,
    chmod=90, fchmod=91, umask=95, gettimeofday=96, getrlimit=97, getrusage=98, sysinfo=99,
    times=100, getuid=102, getgid=104, geteuid=107, getegid=108, setpgid=109, getppid=110,
    getpgrp=111, setsid=112, getgroups=115, getresuid=118, getresgid=120, getpgid=121, getsid=124,
    rt_sigtimedwait=128, rt_sigsuspend=130, sigaltstack=131, statfs=137, fstatfs=138,
    getpriority=140, setpriority=141, prctl=157, arch_prctl=158, setrlimit=160, gettid=186,
    getxattr=191, lgetxattr=192, fgetxattr=193, listxattr=194, llistxattr=195, flistxattr=196,
    tkill=200, time=201, futex=202, sched_getaffinity=204, epoll_create=213, getdents64=217,
    set_tid_address=218, clock_gettime=228, clock_getres=229, clock_nanosleep=230, exit_group=231,
    epoll_wait=232, epoll_ctl=233, tgkill=234, waitid=247, keyctl=250, openat=257, mkdirat=258,
    newfstatat=262, unlinkat=263, renameat=264, linkat=265, symlinkat=266, readlinkat=267,
    fchmodat=268, faccessat=269, pselect6=270, ppoll=271, set_robust_list=273, utimensat=280,
    epoll_pwait=281, fallocate=285, epoll_create1=291, dup3=292, pipe2=293, preadv=295,
    pwritev=296, prlimit64=302, renameat2=316, getrandom=318, copy_file_range=326, statx=332,
    rseq=334, clone3=435, close_range=436, faccessat2=439,
)
_AARCH64 = dict(
    getxattr=8, lgetxattr=9, fgetxattr=10, listxattr=11, llistxattr=12, flistxattr=13, getcwd=17,
    epoll_create1=20, epoll_ctl=21, epoll_pwait=22, dup=23, dup3=24, fcntl=25, ioctl=29, flock=32,
    mkdirat=34, unlinkat=35, symlinkat=36, linkat=37, renameat=38, statfs=43, fstatfs=44,
    truncate=45, ftruncate=46, fallocate=47, faccessat=48, chdir=49, fchdir=50, fchmod=52,
    fchmodat=53, openat=56, close=57, pipe2=59, getdents64=61, lseek=62, read=63, write=64,
    readv=65, writev=66, pread64=67, pwrite64=68, preadv=69, pwritev=70, sendfile=71, pselect6=72,
    ppoll=73, readlinkat=78, newfstatat=79, fstat=80, fsync=82, fdatasync=83, utimensat=88,
    exit=93, exit_group=94, waitid=95, set_tid_address=96, futex=98, set_robust_list=99,
    nanosleep=101, getitimer=102, setitimer=103, clock_gettime=113, clock_getres=114,
    clock_nanosleep=115, sched_getaffinity=123, sched_yield=124, kill=129, tkill=130, tgkill=131,
    sigaltstack=132, rt_sigsuspend=133, rt_sigaction=134, rt_sigprocmask=135, rt_sigtimedwait=137,
    rt_sigreturn=139, setpriority=140, getpriority=141, getresuid=148, getresgid=150, times=153,
    setpgid=154, getpgid=155, getsid=156, setsid=157, getgroups=158, uname=160, getrlimit=163,
    setrlimit=164, getrusage=165, umask=166, prctl=167, gettimeofday=169, getpid=172, getppid=173,
    getuid=174, geteuid=175, getgid=176, getegid=177, gettid=178, sysinfo=179, socket=198,
    socketpair=199, connect=203, getsockname=204, getpeername=205, sendto=206, recvfrom=207, setsockopt=208,
    getsockopt=209, shutdown=210, sendmsg=211, recvmsg=212, brk=214, munmap=215, mremap=216,
    keyctl=219, clone=220, execve=221, mmap=222, mprotect=226, msync=227, madvise=233, wait4=260,
    prlimit64=261, renameat2=276, getrandom=278, copy_file_range=285, statx=291, rseq=293,
    clone3=435, close_range=436, faccessat2=439,
)
# fmt: on

#: machine -> (AUDIT_ARCH_* from linux/audit.h, syscall numbers).
SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _X86_64),
    "aarch64": (0xC00000B7, _AARCH64),
}
_X32_BIT = 0x40000000


def allowed_calls(machine: str) -> list[str]:
    """The allowed calls that exist on ``machine``, in the order the filter tests them."""
    nr = SYSCALLS[machine][1]
    names = [n for n in _HOT if n in ALLOWED] + sorted(ALLOWED - set(_HOT))
    return [n for n in names if n in nr]


def _assemble(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions for ``machine``.

    Layout: the architecture check, the x32 check, ``clone3``, then one ``JEQ`` per
    allowed call (frequent calls first), each followed by its ``RET ALLOW`` or, for a call
    with an argument rule, a ``JA`` to that rule's block after the default ``RET EPERM``.
    Conditional jumps skip at most a few instructions (their offsets are 8-bit); the long
    jumps are ``JA`` (32-bit).
    """
    arch, nr = SYSCALLS[machine]
    deny, nosys, allow = _RET_ERRNO | EPERM, _RET_ERRNO | ENOSYS, _RET_ALLOW
    prog: list[tuple] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, deny),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, deny)]
    for name in NOSYS:
        prog += [(_JEQ_K, 0, 1, nr[name]), (_RET_K, 0, 0, nosys)]
    blocks: dict[str, list[tuple[int, int, int, int]]] = {}
    for name in allowed_calls(machine):
        if name == "clone":
            blocks[name] = [
                (_LD_W_ABS, 0, 0, _arg_low(0)),
                (_JSET_K, 0, 1, NAMESPACE_FLAGS),
                (_RET_K, 0, 0, deny),
                (_RET_K, 0, 0, allow),
            ]
        elif name in ARGUMENT_RULES:
            index, values, _ = ARGUMENT_RULES[name]
            vals = sorted(values)
            blocks[name] = [(_LD_W_ABS, 0, 0, _arg_low(index))]
            blocks[name] += [(_JEQ_K, len(vals) - i, 0, v) for i, v in enumerate(vals)]
            blocks[name] += [(_RET_K, 0, 0, deny), (_RET_K, 0, 0, allow)]
        if name in blocks:
            prog += [(_JEQ_K, 0, 1, nr[name]), ("ja", name)]
        else:
            prog += [(_JEQ_K, 0, 1, nr[name]), (_RET_K, 0, 0, allow)]
    prog.append((_RET_K, 0, 0, deny))
    starts: dict[str, int] = {}
    for name, block in blocks.items():
        starts[name] = len(prog)
        prog += block
    return [
        (_JA, 0, 0, starts[ins[1]] - i - 1) if ins[0] == "ja" else ins for i, ins in enumerate(prog)
    ]


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
