"""The in-sandbox half of :mod:`ragen_envs.sandbox` (runs as its own interpreter; stdlib only).

Started by the host as ``python -I -S -c "<import this module from its folder>; main()"
CONFIG_HEX`` (imported, not run as a script, so that its compiled ``.pyc`` is reused: a
script is recompiled on every start; the config dict is ``marshal``-encoded as hex,
because ``json`` costs 12 ms to import) in a fresh
session (process group), with an empty environment, stdin/stdout/stderr wired by the
host and two extra file descriptors: ``pid_fd`` (L writes C's pid there, so that the host
can kill C's process group without killing L) and ``status_fd`` (the result).
It is *not* imported by ``ragen_envs``; it never imports anything outside the standard
library.  Process tree and what each process does:

``L`` (this script, the launcher)
    1. tries to enter new namespaces (``unshare``): mount, network and PID, plus a user
       namespace when not root.  ``namespaces == "off"`` skips this; ``"require"``
       turns a failure into a setup error.
    2. with a mount namespace: makes every inherited mount read-only, mounts a private,
       size-limited tmpfs on ``/tmp`` (the program's working directory is
       ``/tmp/work`` inside it), ``/var/tmp`` and ``/dev/shm``; when it will drop to
       an unprivileged uid and the interpreter's library lives below a directory that
       uid cannot enter (e.g. a pyenv under ``/root``), it hides that directory under
       an empty tmpfs and bind-mounts back only the library directories.
    3. forks ``C``, reports its pid on ``pid_fd``, and waits for it.  Without a PID
       namespace L is a child subreaper: every orphaned descendant is re-parented to
       it, and after ``C`` has ended L kills and reaps them all before exiting, so when
       the host has reaped L nothing of the run is left.
``C`` (PID 1 of the new PID namespace when there is one; leader of its own process group)
    mounts a fresh ``/proc`` (only this namespace's processes are visible), forks
    ``G``, reaps every child until ``G`` has ended, writes ``G``'s wait status and CPU
    time (the ``repr`` of a dict of literals) to ``status_fd`` and exits.  When PID 1 exits the kernel
    kills every process left in the namespace (daemons, escaped ``setsid`` children).
``G`` (the program)
    closes ``status_fd``, sets ``PR_SET_NO_NEW_PRIVS``, the resource limits
    (``RLIMIT_CPU`` soft/hard, ``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC``,
    ``RLIMIT_CORE = 0``), drops to ``run_as_uid`` when started as root (or drops every
    capability inside a user namespace), installs an audit hook that refuses every
    ``socket.*`` event (and, without namespaces, ``ctypes``, ``exec``/``spawn`` and
    opening other processes' ``/proc`` files: best effort), then runs the program
    (``compile`` + ``exec`` as ``__main__`` for Python source, ``execve`` for a command).

Reserved exit codes of ``G`` (the host maps them to statuses): 250 uncaught
``MemoryError``, 251 ``OSError(EFBIG)`` (file-size limit), 252 process/thread creation
refused (``EAGAIN``), 253 sandbox setup failure (message on stderr).
"""

from __future__ import annotations

import errno
import marshal
import os
import resource
import stat
import sys

EXIT_MEMORY = 250
EXIT_FILE_SIZE = 251
EXIT_PROCESSES = 252
EXIT_SETUP = 253

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9  # not from `signal`: importing it costs ~8 ms (enum)

_libc = None


def _c():
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    if hasattr(os, "unshare"):  # Python >= 3.12
        os.unshare(flags)
    else:
        _check(_c().unshare(flags), "unshare")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_c().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _prctl(option: int, arg: int) -> None:
    _check(_c().prctl(option, arg, 0, 0, 0), "prctl")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            raw = line.split()[4]
            points.append(raw.encode().decode("unicode_escape"))
    return points


def _readonly_remount_all() -> int:
    """Bind-remount every inherited mount read-only (keeping its locked flags)."""
    failed = 0
    flag_map = (
        (os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME),
    )
    for point in sorted(set(_mount_points()), key=len):
        if point == "/proc" or point.startswith("/proc/"):
            continue
        try:
            st = os.statvfs(point)
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for st_flag, ms_flag in flag_map:
                if st.f_flag & st_flag:
                    flags |= ms_flag
            _mount(None, point, None, flags)
        except OSError:
            failed += 1
    return failed


def _library_paths() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(p)]


def _blocked_ancestor(path: str) -> str | None:
    """The top-most ancestor of ``path`` that "other" users cannot enter, if any."""
    parts = os.path.realpath(path).split(os.sep)
    cur = ""
    for part in parts[1:]:
        parent = cur or "/"
        cur = f"{cur}/{part}"
        try:
            mode = os.stat(parent).st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return parent
    try:
        mode = os.stat(cur).st_mode
    except OSError:
        return None
    if not (mode & stat.S_IXOTH and mode & stat.S_IROTH):
        return cur
    return None


def _expose_library(paths: list[str]) -> list[str]:
    """Hide each blocking ancestor under a tmpfs and bind-mount ``paths`` back into it."""
    blocked: dict[str, list[str]] = {}
    for p in paths:
        anc = _blocked_ancestor(p)
        if anc is not None:
            blocked.setdefault(anc, []).append(os.path.realpath(p))
    exposed = []
    for anc, subs in blocked.items():
        fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in subs}
        _mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        for p, fd in fds.items():
            os.makedirs(p, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
            try:
                _mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            except OSError:
                pass
            os.close(fd)
            exposed.append(p)
    return exposed


def _count_user_tasks(uid: int) -> int:
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                n += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return n


def _setup_namespaces(cfg: dict, iso: dict) -> None:
    root = os.geteuid() == 0
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | (0 if root else CLONE_NEWUSER)
    uid, gid = os.getuid(), os.getgid()
    _unshare(flags)
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        iso["user_ns"] = True
    iso["net_ns"] = iso["pid_ns"] = iso["mount_ns"] = True
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    iso["readonly_mount_failures"] = _readonly_remount_all()
    iso["readonly_root"] = iso["readonly_mount_failures"] == 0
    # Files of the program, written by the host into the current directory.
    files = {}
    for name in os.listdir("."):
        with open(name, "rb") as fh:
            files[name] = fh.read()
    lib_fds_needed = root and cfg["run_as_uid"] is not None
    if lib_fds_needed:
        iso["exposed_paths"] = _expose_library(_library_paths())
    size = f"size={int(cfg['tmp_size_mb'])}m"
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
    for extra in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(extra):
            try:
                _mount("tmpfs", extra, "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
            except OSError:
                pass
    os.mkdir("/tmp/work", 0o755)
    for name, data in files.items():
        with open(os.path.join("/tmp/work", name), "wb") as fh:
            fh.write(data)
    if lib_fds_needed:
        for dirpath, _dirs, names in os.walk("/tmp/work"):
            os.chown(dirpath, cfg["run_as_uid"], cfg["run_as_uid"])
            for n in names:
                os.chown(os.path.join(dirpath, n), cfg["run_as_uid"], cfg["run_as_uid"])
    os.chdir("/tmp/work")
    iso["private_tmp"] = True


def _set_limits(cfg: dict, iso: dict) -> None:
    cpu = max(1, int(-(-float(cfg["cpu_time_s"]) // 1)))  # ceil, whole seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = int(cfg["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    fsize = int(cfg["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(cfg["max_processes"])
    if not iso["user_ns"] and not iso["dropped_to_uid"]:
        # Same uid as the host: RLIMIT_NPROC counts all of its tasks.
        nproc += _count_user_tasks(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _drop_capabilities() -> None:
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    hdr = Header(0x20080522, 0)
    data = (Data * 2)()
    _check(_c().capset(ctypes.byref(hdr), data), "capset")


def _install_audit_guard(strict: bool) -> None:
    """Refuse network use from Python (and, when ``strict``, the usual ways around it).

    An audit hook (PEP 578) cannot be removed by the program once installed.  The
    network namespace is the guarantee; this hook is the only network barrier when no
    namespace is available, and there it also refuses ``ctypes``, starting other
    executables and reading other processes' ``/proc`` entries.  Best effort: a
    program could still reach the C level through modules that raise no audit event.
    """
    blocked_prefixes = ("socket.",)
    if strict:
        blocked_prefixes += ("ctypes.dlopen", "ctypes.dlsym", "os.exec", "os.posix_spawn", "os.spawn",
                             "os.system", "subprocess.Popen", "os.fork_exec", "_posixsubprocess")

    def hook(event: str, args: tuple) -> None:
        if event.startswith(blocked_prefixes):
            raise PermissionError(errno.EACCES, f"{event} is disabled in the ragen sandbox")
        if strict and event == "open" and args and isinstance(args[0], str) and args[0].startswith("/proc/"):
            head = args[0][6:].split("/", 1)[0]
            if head.isdigit() and int(head) != os.getpid():
                raise PermissionError(errno.EACCES, "reading other processes is disabled in the ragen sandbox")

    sys.addaudithook(hook)


def _run_program(cfg: dict, iso: dict) -> None:
    """Runs in ``G``; never returns."""
    try:
        os.close(cfg["status_fd"])
        _prctl(PR_SET_DUMPABLE, 1)  # inherited from C; the program itself stays an ordinary process
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        uid = cfg["run_as_uid"]
        if iso["dropped_to_uid"]:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            iso["dropped_to_uid"] = True
        elif iso["user_ns"]:
            _drop_capabilities()
        _set_limits(cfg, iso)
        os.environ["HOME"] = os.environ["TMPDIR"] = os.getcwd()
        if cfg["mode"] == "exec":
            argv = cfg["argv"]
            os.execvpe(argv[0], argv, dict(os.environ))
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
        sys.modules.pop("_sandbox_launcher", None)
        _install_audit_guard(strict=not iso["net_ns"])
        import builtins

        with open("main.py", "rb") as fh:
            source = fh.read()
        main = type(sys)("__main__")
        main.__file__ = "main.py"
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
    except BaseException as exc:  # noqa: BLE001 - report any setup failure
        sys.stderr.write(f"ragen-sandbox: setup failed: {exc!r}\n")
        sys.stderr.flush()
        os._exit(EXIT_SETUP)
    code = 0
    try:
        sys.argv = ["main.py"]
        exec(compile(source, "main.py", "exec"), main.__dict__)
    except SystemExit as exc:
        c = exc.code
        if c is None:
            code = 0
        elif isinstance(c, int):
            code = c & 0xFF
        else:
            sys.stderr.write(f"{c}\n")
            code = 1
    except MemoryError:
        code = EXIT_MEMORY
        sys.stderr.write("MemoryError\n")
    except BaseException as exc:  # noqa: BLE001 - the program's uncaught error
        if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
            code = EXIT_FILE_SIZE
        elif isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
            code = EXIT_PROCESSES
        elif isinstance(exc, RuntimeError) and "new thread" in str(exc):
            code = EXIT_PROCESSES
        else:
            code = 1
        try:
            import traceback

            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != "main.py":
                tb = tb.tb_next
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:  # noqa: BLE001
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. EFBIG on a redirected stream
            pass
    os._exit(code)


def _release_output() -> None:
    """Point stdout/stderr at /dev/null so that the host sees EOF as soon as ``G`` (and
    whatever it started) has exited, without waiting for ``L`` and ``C``."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _supervise(cfg: dict, iso: dict) -> None:
    """Runs in ``C``; never returns."""
    try:
        _prctl(PR_SET_PDEATHSIG, SIGKILL)
    except OSError:
        pass
    os.setpgid(0, 0)  # C and G form their own group: the host kills it, L survives to reap C
    try:
        # Not dumpable: a program running as the same user (user-namespace mode) cannot
        # open C's /proc/<pid>/fd entries (the report pipe) or ptrace it.
        _prctl(PR_SET_DUMPABLE, 0)
    except OSError:
        pass
    if iso["pid_ns"]:
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            iso["private_proc"] = True
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        _run_program(cfg, iso)
    _release_output()
    report = {"exit_code": None, "signal": None, "cpu_time_s": 0.0}
    while True:
        try:
            got, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if got == pid:
            report["cpu_time_s"] = usage.ru_utime + usage.ru_stime
            if os.WIFSIGNALED(status):
                report["signal"] = os.WTERMSIG(status)
            else:
                report["exit_code"] = os.WEXITSTATUS(status)
            break
    report["isolation"] = iso
    # repr, read back with ast.literal_eval: the host must never unmarshal bytes that a
    # program running as the same user might have written into this pipe.
    os.write(cfg["status_fd"], repr(report).encode())
    os._exit(0)


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    iso = {"user_ns": False, "net_ns": False, "pid_ns": False, "mount_ns": False,
           "private_tmp": False, "private_proc": False, "readonly_root": False,
           "dropped_to_uid": os.geteuid() == 0 and cfg["run_as_uid"] is not None, "exposed_paths": []}
    if cfg["namespaces"] != "off":
        try:
            _setup_namespaces(cfg, iso)
        except OSError as exc:
            if cfg["namespaces"] == "require" or iso["mount_ns"]:
                # Half-built namespaces are not a state to run a program in.
                sys.stderr.write(f"ragen-sandbox: setup failed: namespaces unavailable: {exc}\n")
                sys.exit(EXIT_SETUP)
            for k in ("user_ns", "net_ns", "pid_ns", "mount_ns"):
                iso[k] = False
            iso["namespace_error"] = str(exc)
    if (not iso["mount_ns"] and os.geteuid() == 0 and cfg["run_as_uid"] is not None
            and any(_blocked_ancestor(p) for p in _library_paths())):
        sys.stderr.write(
            "ragen-sandbox: setup failed: running as root without a mount namespace, the program "
            f"would run as uid {cfg['run_as_uid']}, which cannot read the interpreter's library "
            f"({sys.prefix}); use an interpreter readable by that uid (SandboxConfig.python)\n")
        sys.exit(EXIT_SETUP)
    if not iso["pid_ns"]:
        # Without a PID namespace, orphaned descendants are re-parented to L (a "child
        # subreaper"), which kills and reaps them before it exits.
        try:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
            iso["subreaper"] = True
        except OSError:
            iso["subreaper"] = False
    pid = os.fork()
    if pid == 0:
        os.close(cfg["pid_fd"])
        _supervise(cfg, iso)
    os.write(cfg["pid_fd"], f"{pid}\n".encode())
    os.close(cfg["pid_fd"])
    os.close(cfg["status_fd"])
    _release_output()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if iso.get("subreaper"):
        _reap_orphans()
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _children() -> list[int]:
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _reap_orphans() -> None:
    """Kill and reap every process re-parented to L, until none is left."""
    while True:
        kids = _children()
        for kid in kids:
            try:
                os.kill(kid, SIGKILL)
            except OSError:
                pass
        try:
            got, _ = os.waitpid(-1, 0 if kids else os.WNOHANG)
        except ChildProcessError:
            return
        if got == 0 and not kids:
            return

if __name__ == "__main__":
    main()
