"""Run untrusted programs (model-written code) in a contained child process.

Spec: ``docs/envs/sandbox.md``.  Standard library only, reusable by any environment.

Each call of :func:`run_python` / :func:`run_command` starts a fresh process tree
(``ragen_envs/sandbox/launcher.py``) and returns a typed :class:`SandboxResult`.  The
containment layers, and what each one depends on (what each cannot stop: the spec page):

=============================  ===============================================  ==========================
Layer                          Mechanism                                        Needs
=============================  ===============================================  ==========================
CPU time                       ``RLIMIT_CPU``, hard = soft (SIGKILL at the      always
                               limit; the program cannot raise it)
Wall-clock time                host timer, SIGKILL to the whole process group;  always
                               the launcher's own backstop at wall + 2 s
Host death                     ``PR_SET_PDEATHSIG``: the launcher (and so the   always
                               PID namespace) dies with the host
Memory of the whole run        one cgroup per run (``memory_mb`` for all its    a writable cgroup (v1/v2)
                               processes, no swap); OOM kill -> memory_limit
Address space                  ``RLIMIT_AS`` (``MemoryError`` in Python)        always
Processes / threads            cgroup ``pids.max`` (exact per run); without a   always
                               cgroup ``RLIMIT_NPROC`` capped at
                               ``max_processes_without_cgroup``
File size                      ``RLIMIT_FSIZE`` (``EFBIG``)                     always
Core dumps                     ``RLIMIT_CORE = 0``                              always
Output size                    host reads both pipes incrementally and kills    always
                               the tree past ``max_output_bytes``
Environment                    empty but ``PATH``, ``LANG``, ``HOME``,          always
                               ``TMPDIR`` (no secrets of the parent)
Private root                   the program sees only an empty read-only root    user namespaces (or root)
                               with the interpreter's library, the shared
                               libraries it loaded, ``/dev`` basics, a private
                               ``/proc`` and a size-limited tmpfs ``/tmp``
                               (cwd ``/tmp/work``) and ``/dev/shm``: no project
                               tree, no data, no host sockets, no host writes
No network                     new network namespace (no interface is up, not   user namespaces (or root)
                               even loopback) + Python ``socket`` disabled
                               (the latter alone is best effort)
SysV IPC                       refused by the seccomp allow-list; behind it     seccomp, or user
                               the IPC namespace, freed with the sandbox        namespaces (or root)
Process cleanup                PID namespace: when the program ends every       user namespaces (or root)
                               process it left behind is killed, even one that
                               left the process group; ``/proc`` shows only
                               the sandbox's processes
Privileges                     ``PR_SET_NO_NEW_PRIVS``; as root the program     always
                               runs as ``run_as_uid`` (65534, ``nobody``)
System calls                   seccomp allow-list (``sandbox.seccomp``): only   seccomp, x86-64/aarch64
                               the calls the Python runner needs; sockets only
                               AF_UNIX; no namespaces, mounts, keyrings,
                               io_uring, bpf, ptrace, vsock, userfaultfd, AIO,
                               inotify/fanotify, page-cache probes (mincore,
                               cachestat, preadv2); EPERM otherwise
Kernel keyring                 a fresh session keyring per run                  keyrings in the kernel
Verdicts (``harness=``)        the harness runs in a separate process and       always
                               reports on a descriptor the program lacks;
                               values cross as decoded literals
Interpreter shutdown           non-daemon threads joined, ``atexit`` run        always
=============================  ===============================================  ==========================

The host's temporary directory is deleted by the launcher as soon as it has copied the
program's files (namespaces) or when it ends (fallback); a host killed in the fallback
leaves one named after its pid, which the next host removes.

Without user namespaces (some distributions disable them for unprivileged users) and
without root, ``namespaces="auto"`` falls back to the rlimit/process-group layers: the
program then can read every file its user may (the project's data included), open
network connections through other means than Python's ``socket`` module (e.g.
``ctypes``), write wherever its user may, leave SysV IPC objects behind, and read the
``/proc/<pid>/environ`` of its user's other processes.  ``namespaces="require"`` turns
that case into a :attr:`SandboxStatus.SANDBOX_ERROR` instead; :func:`isolation_report`
says which layers are active on this machine.

The source of every rule is this module and the launcher; nothing here is copied from
RAGEN, which runs DeepCoder programs in a plain ``subprocess`` with a 3 s timeout and no
other limit (``docs/envs/deepcoder.md``, RAGEN-AI/RAGEN ragen/env/, weakness 10).
"""

from __future__ import annotations

import ast
import enum
import functools
import marshal
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from . import cgroup as _cgroup
from . import launcher as _launcher

__all__ = [
    "SandboxConfig",
    "SandboxDowngradeWarning",
    "SandboxResult",
    "SandboxStatus",
    "isolation_report",
    "sandbox_level",
    "run_command",
    "run_python",
]

_LAUNCHER = Path(__file__).with_name("launcher.py")
# Import the launcher as a module (its .pyc is reused; a script would be recompiled every time).
_BOOT = (
    f"import sys; sys.path.insert(0, {str(_LAUNCHER.parent)!r}); import launcher; launcher.main()"
)

# Exit codes reserved by the launcher (see launcher.py).
_EXIT_MEMORY, _EXIT_FILE_SIZE, _EXIT_PROCESSES, _EXIT_SETUP = 250, 251, 252, 253

#: The only environment variables the program sees (plus HOME and TMPDIR, set to its cwd).
BASE_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
}


class SandboxStatus(str, enum.Enum):
    """How a sandboxed run ended.  The value is the JSON spelling."""

    #: exited with status 0.
    OK = "ok"
    #: exited with a non-zero status or an uncaught exception / fatal signal.
    RUNTIME_ERROR = "runtime_error"
    #: exceeded its CPU time (``detail == "cpu"``) or wall-clock time (``"wall"``).
    TIMEOUT = "timeout"
    #: the address-space limit refused an allocation (``MemoryError``).
    MEMORY_LIMIT = "memory_limit"
    #: printed more than ``max_output_bytes`` on stdout or stderr.
    OUTPUT_LIMIT = "output_limit"
    #: wrote a file larger than ``file_size_mb`` (``EFBIG`` / ``SIGXFSZ``).
    FILE_LIMIT = "file_limit"
    #: could not create a process or thread (``RLIMIT_NPROC``).
    PROCESS_LIMIT = "process_limit"
    #: killed by a signal nobody in the sandbox asked for (e.g. the kernel OOM killer).
    KILLED = "killed"
    #: the sandbox itself could not be set up (message in ``detail`` / ``stderr``).
    SANDBOX_ERROR = "sandbox_error"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and policy of one sandboxed run.

    Attributes:
        cpu_time_s: CPU seconds (user + system) of the program; rounded up to whole
            seconds (``RLIMIT_CPU`` granularity).
        wall_time_s: wall-clock seconds from start to kill.
        memory_mb: address-space limit (``RLIMIT_AS``) in MiB.  Python itself needs
            about 30 MiB.
        file_size_mb: largest file the program may write (``RLIMIT_FSIZE``), MiB.
        max_processes: processes + threads the program may run at once
            (``RLIMIT_NPROC``; see the module table for how exact that is).
        max_output_bytes: cap on each of stdout and stderr; the run is killed and
            reported as ``output_limit`` past it.
        tmp_size_mb: size of the private tmpfs on ``/tmp`` (mount namespace only).
        namespaces: ``"auto"`` (use them when the kernel allows, else fall back),
            ``"require"`` (``sandbox_error`` when unavailable) or ``"off"``.
        python: interpreter for the launcher and Python programs (default
            ``sys.executable``).
        site_packages: let Python programs import installed third-party packages
            (default False: standard library only, ``python -I -S``).
        run_as_uid: uid (and gid) the program runs as when the host is root; ``None``
            keeps root (then ``RLIMIT_NPROC`` does not apply — avoid).
        visible_paths: extra host paths (files or directories) bound read-only into the
            private root (mount namespace only); by default the program sees only its
            working directory and the interpreter's own files.
        cgroup: put the whole run under one cgroup (memory = ``memory_mb`` for all its
            processes together, tasks = ``max_processes``) where this machine allows.
        max_processes_without_cgroup: the process/thread cap used instead of
            ``max_processes`` when no cgroup is available, so that the memory a run
            can take (processes x ``memory_mb``) stays bounded.
    """

    cpu_time_s: float = 2.0
    wall_time_s: float = 5.0
    memory_mb: int = 512
    file_size_mb: int = 16
    max_processes: int = 32
    max_output_bytes: int = 1 << 20
    tmp_size_mb: int = 64
    namespaces: Literal["auto", "require", "off"] = "auto"
    python: str | None = None
    site_packages: bool = False
    run_as_uid: int | None = 65534
    visible_paths: tuple[str, ...] = ()
    cgroup: bool = True
    max_processes_without_cgroup: int = 4

    def __post_init__(self) -> None:
        for name in (
            "cpu_time_s",
            "wall_time_s",
            "memory_mb",
            "file_size_mb",
            "max_processes",
            "max_output_bytes",
            "tmp_size_mb",
            "max_processes_without_cgroup",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if self.namespaces not in ("auto", "require", "off"):
            raise ValueError(
                f"SandboxConfig.namespaces must be auto, require or off, got {self.namespaces!r}"
            )
        for p in self.visible_paths:
            if not isinstance(p, str) or not os.path.isabs(p):
                raise ValueError(f"SandboxConfig.visible_paths must be absolute paths, got {p!r}")

    def with_(self, **changes: Any) -> SandboxConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one sandboxed run.

    Attributes:
        status: the :class:`SandboxStatus`.
        exit_code: the program's exit status, or ``None`` when it was killed by a signal
            (or never ran).
        signal: the signal number that ended the program, or ``None``.
        stdout / stderr: captured output, decoded as UTF-8 (invalid bytes replaced),
            at most ``max_output_bytes`` bytes each.
        stdout_truncated / stderr_truncated: the stream was cut at the cap.
        wall_time_s: seconds from start to the end of the run, as seen by the host.
        cpu_time_s: CPU seconds (user + system) of the program.
        detail: a short explanation (``"cpu"`` / ``"wall"`` for timeouts, the setup
            error, the signal name).
        isolation: which containment layers were active (see :func:`isolation_report`).
        verdict: the values a harness reported with ``report(value)`` (see
            :func:`run_python`), in order; ``()`` without a harness.  Lines that do not
            decode are dropped (a harness writes only what it encodes itself).
        memory_peak_mb: the run's peak memory (all processes together, MiB) when it ran
            under a cgroup that reports it, else ``None``.
    """

    status: SandboxStatus
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    wall_time_s: float
    cpu_time_s: float
    detail: str = ""
    isolation: Mapping[str, Any] = field(default_factory=dict)
    verdict: tuple[Any, ...] = ()
    memory_peak_mb: float | None = None

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0 within every limit."""
        return self.status is SandboxStatus.OK

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view."""
        d = asdict(self)
        d["status"] = self.status.value
        d["verdict"] = list(self.verdict)
        return d


def run_python(
    source: str,
    *,
    stdin: str | bytes = b"",
    config: SandboxConfig | None = None,
    files: Mapping[str, str | bytes] | None = None,
    harness: str | None = None,
) -> SandboxResult:
    """Run Python ``source`` as ``__main__`` in the sandbox.

    Args:
        source: program text (saved as ``main.py`` in the working directory).
        stdin: bytes (or UTF-8 text) fed on standard input.
        config: limits and policy (default :class:`SandboxConfig()`).
        files: extra files for the working directory, ``{name: content}`` (plain names,
            no directories).
        harness: trusted Python source that judges the program from outside it.  The
            program runs first, in its own process; then the harness runs in another
            process of the same sandbox, where every name it does not define stands for
            the program's global of that name (calling it calls the program's function
            with plain-data arguments and returns its plain-data result; an exception
            in the program raises ``ProgramError("Type: message")``; a result that is
            not plain data comes back as an ``Unserializable`` with its ``repr`` as
            ``.text``), ``program(name, prefer_method=False)`` gives such a proxy
            explicitly (``prefer_method``: a method of a fresh ``Solution()`` when the
            program defines that class), and ``report(value)`` sends plain data to
            :attr:`SandboxResult.verdict`.  The program can neither read the harness
            (it is read only after the program's process exists, from a descriptor
            the program does not have) nor write to the verdict channel.

    Returns:
        A :class:`SandboxResult`; this function does not raise for anything the program
        does.

    Raises:
        ValueError: a file name in ``files`` is not a plain name.
    """
    all_files = dict(files or {})
    all_files["main.py"] = source
    return _run({"mode": "python"}, stdin, config or SandboxConfig(), all_files, harness)


def run_command(
    argv: Sequence[str],
    *,
    stdin: str | bytes = b"",
    config: SandboxConfig | None = None,
    files: Mapping[str, str | bytes] | None = None,
) -> SandboxResult:
    """Run the executable ``argv[0]`` (looked up on the sandbox ``PATH``) in the sandbox.

    Same containment as :func:`run_python` except the Python-level socket guard; the
    executable must be readable by the sandbox user.  With a private root the program
    also sees ``/usr`` (read-only, site-/dist-packages hidden), where commands live.
    See :func:`run_python` for the arguments.
    """
    if not argv:
        raise ValueError("argv must not be empty")
    return _run(
        {"mode": "exec", "argv": [str(a) for a in argv]},
        stdin,
        config or SandboxConfig(),
        dict(files or {}),
        None,
    )


@functools.cache
def isolation_report(namespaces: str = "auto") -> dict[str, Any]:
    """Which containment layers a sandboxed run gets on this machine (cached).

    Runs one trivial program and returns its ``isolation`` record, e.g.
    ``{"net_ns": True, "pid_ns": True, "mount_ns": True, "ipc_ns": True,
    "user_ns": False, "private_root": True, "private_tmp": True, "private_proc": True,
    "readonly_root": True, "dropped_to_uid": True, "cgroup": "v1",
    "parent_death": True, "visible_paths": [...], ...}``.
    """
    res = run_python("pass", config=SandboxConfig(namespaces=namespaces))  # type: ignore[arg-type]
    return dict(res.isolation) | {"status": res.status.value}


class SandboxDowngradeWarning(RuntimeWarning):
    """``namespaces="auto"`` fell back to the no-namespace mode on this machine."""


_warned_downgrade = False


def sandbox_level(namespaces: str = "auto") -> str:
    """How contained programs run here under ``namespaces``: ``"namespaces"`` or ``"fallback"``.

    ``"namespaces"``: network, PID and mount namespaces with the private root;
    ``"fallback"``: the rlimit / process-group / seccomp / audit-hook layers only (see the
    module docstring for what that cannot stop).  Cached per process (one trivial run, via
    :func:`isolation_report`).  When ``"auto"`` falls back, one
    :class:`SandboxDowngradeWarning` (a one-line message) is issued per process, so that
    untrusted code never runs weaker than configured without saying so;
    ``"off"`` is weak by request and does not warn.
    """
    global _warned_downgrade
    if namespaces == "off":
        return "fallback"
    iso = isolation_report(namespaces)
    if iso.get("net_ns") and iso.get("pid_ns") and iso.get("mount_ns"):
        return "namespaces"
    if namespaces == "auto" and not _warned_downgrade:
        _warned_downgrade = True
        why = iso.get("namespace_error") or "namespaces unavailable"
        warnings.warn(
            f"ragen sandbox: namespaces are unavailable here ({why}); model-written code runs "
            "in the weaker fallback (no private file system, network or PID isolation). "
            "Set sandbox_namespaces='require' to refuse, or 'off' to accept it silently.",
            SandboxDowngradeWarning,
            stacklevel=2,
        )
    return "fallback"


# ----------------------------------------------------------------------- internals
_TMP_PREFIX = "ragen-sandbox-"


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@functools.cache
def _sweep_stale_dirs(tmp: str) -> None:
    """Remove temporary directories of sandbox hosts that no longer run (once per process).

    The launcher deletes the host's directory itself as soon as it has read the files
    (namespaces), or at its end (fallback); a host and launcher killed together in the
    fallback leave one, named after the host's pid, which the next host removes here.
    """
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for name in names:
        head = name[len(_TMP_PREFIX) :].split("-", 1)[0]
        if not (name.startswith(_TMP_PREFIX) and head.isdigit()) or int(head) == os.getpid():
            continue
        try:
            os.kill(int(head), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
        except OSError:
            pass


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _run(
    spec: dict[str, Any],
    stdin: str | bytes,
    config: SandboxConfig,
    files: Mapping[str, str | bytes],
    harness: str | None,
) -> SandboxResult:
    for name in files:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"file names must be plain names, got {name!r}")
    _sweep_stale_dirs(tempfile.gettempdir())
    base = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-")
    start = time.monotonic()
    cgroup = None
    if config.cgroup:
        # L and C are in the group too (+2); a harnessed run has one more process (+1).
        cgroup = _cgroup.create(
            int(config.memory_mb) << 20, int(config.max_processes) + 2 + (harness is not None)
        )
    try:
        return _run_in(base, spec, stdin, config, files, start, harness, cgroup)
    finally:
        if cgroup is not None:
            cgroup.destroy()
        shutil.rmtree(base, ignore_errors=True)


def _run_in(
    base: str,
    spec: dict[str, Any],
    stdin: str | bytes,
    config: SandboxConfig,
    files: Mapping[str, str | bytes],
    start: float,
    harness: str | None,
    cgroup: _cgroup.RunCgroup | None,
) -> SandboxResult:
    work = os.path.join(base, "work")
    os.mkdir(work, 0o755)
    for name, content in files.items():
        with open(os.path.join(work, name), "wb") as fh:
            fh.write(_as_bytes(content))
    stdin_path = os.path.join(base, "stdin")
    with open(stdin_path, "wb") as fh:
        fh.write(_as_bytes(stdin))
    root = os.geteuid() == 0
    uid = config.run_as_uid
    if root and uid is not None:  # the fallback path runs the program in `work` as `uid`
        os.chmod(base, 0o711)
        for path in [work, *(os.path.join(work, n) for n in files)]:
            os.chown(path, uid, uid)
    status_r, status_w = os.pipe()
    pid_r, pid_w = os.pipe()
    own_fds = [status_r, status_w, pid_r, pid_w]
    child_fds = [status_w, pid_w]
    harness_fd = verdict_r = verdict_w = None
    if harness is not None:
        harness_fd = _memfd("ragen-harness", harness.encode("utf-8"))
        verdict_r, verdict_w = os.pipe()
        own_fds += [harness_fd, verdict_r, verdict_w]
        child_fds += [harness_fd, verdict_w]
    cfg = {
        "mode": spec["mode"],
        "argv": spec.get("argv"),
        "status_fd": status_w,
        "pid_fd": pid_w,
        "harness_fd": harness_fd,
        "verdict_fd": verdict_w,
        "cpu_time_s": config.cpu_time_s,
        "wall_time_s": config.wall_time_s,
        "memory_mb": config.memory_mb,
        "file_size_mb": config.file_size_mb,
        "max_processes": config.max_processes,
        "max_processes_without_cgroup": config.max_processes_without_cgroup,
        "tmp_size_mb": config.tmp_size_mb,
        "namespaces": config.namespaces,
        "run_as_uid": uid if root else None,
        "host_pid": os.getpid(),
        "base": base,
        "visible_paths": list(config.visible_paths),
        "cgroup_procs": cgroup.procs_files if cgroup is not None else [],
        "cgroup_kind": cgroup.kind if cgroup is not None else None,
    }
    python = config.python or sys.executable
    flags = ["-I"] if config.site_packages else ["-I", "-S"]
    env = dict(BASE_ENV, HOME=work, TMPDIR=work)
    try:
        with open(stdin_path, "rb") as stdin_fh:
            proc = subprocess.Popen(
                [python, *flags, "-c", _BOOT, marshal.dumps(cfg).hex()],
                cwd=work,
                env=env,
                stdin=stdin_fh,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(child_fds),
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        for fd in own_fds:
            os.close(fd)
        return _error_result(f"could not start the launcher: {exc}", start)
    for fd in child_fds:
        os.close(fd)
    try:
        return _supervise(proc, status_r, pid_r, verdict_r, config, start, cgroup)
    except BaseException:
        _kill_group(proc.pid)  # e.g. KeyboardInterrupt while waiting: leave nothing running
        try:
            os.waitpid(proc.pid, 0)
        except ChildProcessError:
            pass
        proc.returncode = -9
        raise
    finally:
        for end in (status_r, pid_r, verdict_r):
            if end is not None:
                os.close(end)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


#: Largest verdict the host keeps (bytes); past it the rest is dropped.
_MAX_VERDICT = 16 << 20


def _decode_verdict(buf: bytearray) -> tuple[Any, ...]:
    """The harness's ``report`` values, one encoded literal per line (bad lines dropped)."""
    values = []
    for line in bytes(buf).decode("utf-8", errors="replace").split("\n"):
        if line:
            try:
                values.append(_launcher.decode_value(line))
            except ValueError:
                continue
    return tuple(values)


def _supervise(
    proc: subprocess.Popen,
    status_r: int,
    pid_r: int,
    verdict_r: int | None,
    config: SandboxConfig,
    start: float,
    cgroup: _cgroup.RunCgroup | None,
) -> SandboxResult:
    cap = int(config.max_output_bytes)
    out = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = {"stdout": False, "stderr": False}
    bufs = {"status": bytearray(), "pid": bytearray(), "verdict": bytearray()}
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    sel.register(status_r, selectors.EVENT_READ, "status")
    sel.register(pid_r, selectors.EVENT_READ, "pid")
    if verdict_r is not None:
        sel.register(verdict_r, selectors.EVENT_READ, "verdict")
    deadline = start + float(config.wall_time_s)
    killed_for: str | None = None
    # Once the report has arrived the program has ended; processes it left holding the
    # pipes (possible only without a PID namespace) get a short grace, then the loop
    # stops (L kills them; not a timeout).
    drain_until = float("inf")
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            killed_for = "wall"
            break
        if now >= drain_until:
            break
        for key, _ in sel.select(timeout=min(deadline, drain_until) - now):
            if not _read_into(key, sel, out, truncated, bufs, cap):
                continue
            if key.data == "status" and drain_until == float("inf"):
                drain_until = time.monotonic() + 0.25
            if any(truncated.values()):
                killed_for = "output"
        if killed_for == "output":
            break
    # The launcher L exits by itself once its child C has ended (with a PID namespace,
    # once every process of the namespace is gone; without, once L has killed and
    # reaped the orphans).  A run that must stop is ended by killing C's process group,
    # not L, so that L still reaps C and leaves no orphan; L itself is killed only if it
    # lingers.
    child = int(bufs["pid"]) if bufs["pid"].strip().isdigit() else None
    if killed_for is not None:
        _kill_group(child if child is not None else proc.pid)
    waited = _wait_for(proc.pid, 1.0 if killed_for is None else 2.0)
    if waited is None:
        _kill_group(proc.pid)
        if child is not None:
            _kill_group(child)
    # Final bounded drain: the tree is dead, so the pipes reach EOF at once (unless a
    # process that left the group still holds them; the bound covers that case).
    final = time.monotonic() + 0.2
    while sel.get_map() and time.monotonic() < final:
        for key, _ in sel.select(timeout=max(0.0, final - time.monotonic())):
            _read_into(key, sel, out, truncated, bufs, cap)
    sel.close()
    _, wait_status, usage = waited if waited is not None else os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    wall = time.monotonic() - start
    report = _parse_report(bufs["status"])
    stdout = out["stdout"].decode("utf-8", errors="replace")
    stderr = out["stderr"].decode("utf-8", errors="replace")
    cpu = float(report.get("cpu_time_s", usage.ru_utime + usage.ru_stime))
    iso = report.get("isolation", {})
    peak, oom_kills = cgroup.stats() if cgroup is not None else (None, 0)
    common = dict(
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=truncated["stdout"],
        stderr_truncated=truncated["stderr"],
        wall_time_s=wall,
        cpu_time_s=cpu,
        isolation=iso,
        verdict=_decode_verdict(bufs["verdict"]),
        memory_peak_mb=None if peak is None else peak / (1 << 20),
    )
    if killed_for == "output":
        return SandboxResult(
            SandboxStatus.OUTPUT_LIMIT, None, signal.SIGKILL, detail="output", **common
        )
    if oom_kills:
        # The cgroup's limit for the whole run was hit: the kernel killed a process of it.
        code, sig = report.get("exit_code"), report.get("signal")
        return SandboxResult(
            SandboxStatus.MEMORY_LIMIT,
            code,
            sig,
            detail=f"cgroup memory limit: {oom_kills} process(es) OOM-killed",
            **common,
        )
    if not report:
        if killed_for == "wall":
            return SandboxResult(
                SandboxStatus.TIMEOUT, None, signal.SIGKILL, detail="wall", **common
            )
        detail = "sandbox launcher ended without a report"
        if proc.returncode == _EXIT_SETUP or "ragen-sandbox: setup failed" in stderr:
            detail = stderr.strip().splitlines()[-1] if stderr.strip() else "setup failed"
        return SandboxResult(SandboxStatus.SANDBOX_ERROR, None, None, detail=detail, **common)
    code, sig = report.get("exit_code"), report.get("signal")
    status, detail = _classify(code, sig, cpu, config)
    if killed_for == "wall" and status is not SandboxStatus.OK:
        status, detail = SandboxStatus.TIMEOUT, "wall"
    return SandboxResult(status, code, sig, detail=detail, **common)


_MAX_REPORT = 1 << 16


def _parse_report(buf: bytes | bytearray) -> dict[str, Any]:
    """The launcher's report (a dict literal), or ``{}`` if absent or malformed.

    Parsed with ``ast.literal_eval`` (never ``marshal``/``pickle``): in some modes a
    program running as the same user could write to this pipe.
    """
    if not buf or len(buf) > _MAX_REPORT:
        return {}
    try:
        value = ast.literal_eval(bytes(buf).decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - malformed or hostile: no report
        return {}
    return value if isinstance(value, dict) else {}


def _wait_for(pid: int, timeout: float) -> tuple[int, int, Any] | None:
    """``os.wait4(pid)`` if the process ends within ``timeout`` seconds, else ``None``."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        got = os.wait4(pid, os.WNOHANG)
        if got[0] == pid:
            return got
        if time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _read_into(
    key: selectors.SelectorKey,
    sel: selectors.BaseSelector,
    out: dict[str, bytearray],
    truncated: dict[str, bool],
    bufs: dict[str, bytearray],
    cap: int,
) -> bool:
    """Read one chunk from a ready pipe; unregister it at EOF.  Returns False at EOF."""
    fd = key.fd
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        chunk = b""
    if not chunk:
        sel.unregister(key.fileobj)
        return False
    if key.data in bufs:
        buf = bufs[key.data]
        limit = _MAX_VERDICT if key.data == "verdict" else _MAX_REPORT
        if len(buf) <= limit:
            buf += chunk
        return True
    buf = out[key.data]
    room = cap - len(buf)
    if len(chunk) > room:
        buf += chunk[: max(room, 0)]
        truncated[key.data] = True
    else:
        buf += chunk
    return True


def _classify(
    code: int | None, sig: int | None, cpu: float, config: SandboxConfig
) -> tuple[SandboxStatus, str]:
    if sig is not None:
        name = (
            signal.Signals(sig).name
            if sig in signal.Signals._value2member_map_
            else f"signal {sig}"
        )
        # RLIMIT_CPU is whole seconds with hard = soft: the kernel's SIGKILL at the limit.
        # The CPU time reported by wait4 lags the scheduler's clock (0.91-1.04 s for a 1 s
        # kill measured on the loaded build machine), hence the margin; a program that
        # kills itself after half its CPU time can only mislabel its own failure.
        limit = max(1, math.ceil(float(config.cpu_time_s)))
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limit * 0.5):
            return SandboxStatus.TIMEOUT, "cpu"
        if sig == signal.SIGXFSZ:
            return SandboxStatus.FILE_LIMIT, name
        if sig == signal.SIGKILL:
            return SandboxStatus.KILLED, name
        return SandboxStatus.RUNTIME_ERROR, name
    if code == 0:
        return SandboxStatus.OK, ""
    if code == _EXIT_MEMORY:
        return SandboxStatus.MEMORY_LIMIT, "MemoryError"
    if code == _EXIT_FILE_SIZE:
        return SandboxStatus.FILE_LIMIT, "EFBIG"
    if code == _EXIT_PROCESSES:
        return SandboxStatus.PROCESS_LIMIT, "EAGAIN"
    if code == _EXIT_SETUP:
        return SandboxStatus.SANDBOX_ERROR, "setup failed"
    return SandboxStatus.RUNTIME_ERROR, f"exit status {code}"


def _error_result(detail: str, start: float) -> SandboxResult:
    return SandboxResult(
        SandboxStatus.SANDBOX_ERROR,
        None,
        None,
        "",
        "",
        False,
        False,
        time.monotonic() - start,
        0.0,
        detail=detail,
    )
