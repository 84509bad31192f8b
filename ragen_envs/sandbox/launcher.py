"""The in-sandbox half of :mod:`ragen_envs.sandbox` (runs as its own interpreter; stdlib only).

Started by the host as ``python -I -S -c "<import this module from its folder>; main()"
CONFIG_HEX`` (imported, not run as a script, so that its compiled ``.pyc`` is reused: a
script is recompiled on every start; the config dict is ``marshal``-encoded as hex,
because ``json`` costs 12 ms to import) in a fresh session (process group), with an
empty environment, stdin/stdout/stderr wired by the host and extra file descriptors:
``pid_fd`` (L writes C's pid there, so that the host can kill C's process group without
killing L), ``status_fd`` (C's report of how the program ended) and, for a harnessed run,
``harness_fd`` (the harness source, a memfd) and ``verdict_fd`` (what the harness
reports).  The host imports this module only for :func:`encode_value` /
:func:`decode_value`.  Process tree and what each process does:

``L`` (the launcher)
    1. ``PR_SET_PDEATHSIG``: L is killed when the host dies (and exits at once if the
       host is already gone); joins the run's cgroup(s) when the host made them (every
       process of the run is then under one memory and one task limit).
    2. tries to enter new namespaces (``unshare``): mount, network, PID and IPC, plus a
       user namespace when not root.  ``namespaces == "off"`` skips this; ``"require"``
       turns a failure into a setup error.
    3. with namespaces: reads the program's files and deletes the host's temporary
       directory (so nothing is left in the host's ``/tmp`` even if the host is killed),
       then builds a **private root**: an empty read-only tmpfs holding only read-only
       bind mounts of the interpreter's library directories (``sys.path`` minus the
       project tree), the directories of the shared libraries the interpreter has
       loaded, ``/etc/ld.so.cache``, ``/usr`` for commands, the paths of
       ``visible_paths``; a ``/dev`` with ``null``, ``zero``, ``full``, ``random`` and
       ``urandom``; a size-limited tmpfs on ``/tmp`` (the program's working directory
       is ``/tmp/work``) and ``/dev/shm``, with the bound paths that lie under the
       host's ``/tmp`` or ``/dev/shm`` (a venv under ``/tmp``) bound on top of them;
       site-/dist-packages directories of ``/usr`` are hidden under empty tmpfs.
       Nothing else of the host file system exists.
    4. forks ``C``, reports its pid on ``pid_fd`` and waits for it, with its own wall
       limit (``wall_time_s + 2``, a backstop should the host be stopped).  Without a
       PID namespace L is a child subreaper: every orphaned descendant is re-parented to
       it, and after ``C`` has ended L kills and reaps them all before exiting.
``C`` (PID 1 of the new PID namespace when there is one; leader of its own process group)
    mounts a fresh ``/proc`` inside the private root, ``pivot_root``\\s into it (the old
    root is detached), forks ``G``, reaps every child until ``G`` has ended, writes
    ``G``'s wait status and CPU time (the ``repr`` of a dict of literals) to
    ``status_fd`` and exits.  When PID 1 exits the kernel kills every process left in
    the namespace; with an IPC namespace its SysV shared memory, semaphores and message
    queues are freed with it.
``G`` (the program)
    closes ``status_fd``, sets ``PR_SET_NO_NEW_PRIVS``, the resource limits
    (``RLIMIT_CPU`` with hard = soft, ``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC``,
    ``RLIMIT_CORE = 0``), drops to ``run_as_uid`` when started as root (or drops every
    capability inside a user namespace), installs the seccomp filter of
    :mod:`ragen_envs.sandbox.seccomp` (L joined a fresh session keyring), installs an audit hook that refuses every
    ``socket.*`` event (and, without namespaces, ``ctypes``, ``exec``/``spawn`` and
    opening other processes' ``/proc`` files: best effort), then runs the program
    (``compile`` + ``exec`` as ``__main__`` for Python source, then, as the
    interpreter's own shutdown does, waits for non-daemon threads and runs ``atexit``
    handlers; ``execve`` for a command).
``P`` (the program, in a harnessed run; ``G`` is then the harness)
    ``G`` forks ``P`` before it reads the harness, ``P`` closes the harness and verdict
    descriptors and runs the program as ``__main__``, then answers calls (``name``,
    arguments) from ``G`` over a pipe pair with the result encoded by
    :func:`encode_value`.  ``G`` (not dumpable, so ``P`` cannot open its ``/proc``
    entries or ptrace it) runs the harness source with the program's globals as
    proxies and writes each ``report(value)`` as one encoded line to ``verdict_fd``:
    nothing the program prints or returns can become a verdict line.

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

if __package__:  # imported by the host as ragen_envs.sandbox.launcher
    from . import seccomp as _seccomp
else:  # imported by the sandbox's interpreter from this folder
    import seccomp as _seccomp  # type: ignore[import-not-found, no-redef]  # this folder is sys.path[0] there

EXIT_MEMORY = 250
EXIT_FILE_SIZE = 251
EXIT_PROCESSES = 252
EXIT_SETUP = 253

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
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
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9  # not from `signal`: importing it costs ~8 ms (enum)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

#: Devices bound into the private ``/dev``.
_DEVICES = ("null", "zero", "full", "random", "urandom")
#: Largest frame between the harness and the program (bytes).
_MAX_FRAME = 64 << 20

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


def _mount(
    src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_c().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _prctl(option: int, arg: int) -> None:
    _check(_c().prctl(option, arg, 0, 0, 0), "prctl")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


# ------------------------------------------------------------- value encoding
# A value crosses a process boundary as the text of a Python literal and is read back
# by a small evaluator of the literal's syntax tree (never ``eval``/``marshal``/
# ``pickle``).  Values a literal cannot spell are written as tagged tuples.
_TAG = "\x1eragen"
_BIG = 1 << 12000  # larger ints go as hex: decimal conversion of >4300 digits raises
_MAX_DEPTH = 60


class NotLiteral(TypeError):
    """A value that :func:`encode_value` cannot encode (not plain data)."""


def _plain(v, depth: int):
    t = type(v)
    if v is None or t is bool or t is str or t is bytes:
        return v
    if t is int:
        return v if -_BIG < v < _BIG else (_TAG, "int", hex(v))
    if t is float:
        return v if v - v == 0.0 else (_TAG, "float", repr(v))  # inf - inf and nan - nan are nan
    if depth > _MAX_DEPTH:
        raise NotLiteral("nested too deeply")
    d = depth + 1
    if t is list:
        return [_plain(x, d) for x in v]
    if t is tuple:
        items = tuple(_plain(x, d) for x in v)
        return (_TAG, "tuple", list(items)) if items[:1] == (_TAG,) else items
    if t is dict:
        return {_plain(k, d): _plain(x, d) for k, x in v.items()}
    if t is set or t is frozenset:
        return (_TAG, t.__name__, [_plain(x, d) for x in v])
    if t is complex:
        return (_TAG, "complex", [_plain(v.real, d), _plain(v.imag, d)])
    raise NotLiteral(f"a {t.__name__} is not plain data")


def encode_value(value) -> str:
    """The text of a Python literal for plain data (``None``, ``bool``, ``int``,
    ``float`` incl. non-finite, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``,
    ``dict``, ``set``, ``frozenset``; exact types only, nested at most 60 deep).

    Raises:
        NotLiteral: anything else (subclasses included: their ``==`` is not plain).
    """
    return repr(_plain(value, 0))


def _literal(node, depth: int):
    import _ast

    if depth > 2 * _MAX_DEPTH + 8:
        raise ValueError("nested too deeply")
    d = depth + 1
    t = type(node)
    if t is _ast.Constant and type(node.value) in (int, float, str, bytes, bool, type(None)):
        return node.value
    if (
        t is _ast.UnaryOp
        and type(node.op) is _ast.USub
        and type(node.operand) is _ast.Constant
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value  # type: ignore[operator]  # an int or a float, checked above
    if t is _ast.List:
        return [_literal(e, d) for e in node.elts]
    if t is _ast.Tuple:
        items = tuple(_literal(e, d) for e in node.elts)
        if len(items) == 3 and items[0] == _TAG and type(items[1]) is str:
            return _untag(items[1], items[2])
        return items
    if t is _ast.Dict:
        if any(k is None for k in node.keys):
            raise ValueError("** in a literal")
        return {_literal(k, d): _literal(v, d) for k, v in zip(node.keys, node.values)}
    if t is _ast.Set:
        return {_literal(e, d) for e in node.elts}
    raise ValueError(f"not a literal: {t.__name__}")


def _untag(kind: str, payload):
    if kind == "int" and type(payload) is str:
        return int(payload, 16)  # hex: no digit limit
    if kind == "float" and payload in ("inf", "-inf", "nan"):
        return float(payload)
    if kind in ("tuple", "set", "frozenset") and type(payload) is list:
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[kind](payload)
    if kind == "complex" and type(payload) is list and len(payload) == 2:
        return complex(*payload)
    raise ValueError(f"bad tagged value {kind!r}")


def decode_value(text: str):
    """Read back :func:`encode_value`'s text; ``ValueError`` for anything else.

    Safe on hostile input: only literal syntax is accepted, no code runs, no
    ``int``/``str`` conversion limit is hit (big ints travel as hex), deep nesting and
    parse errors become ``ValueError``.
    """
    try:
        tree = compile(text, "<value>", "eval", 1024)  # ast.PyCF_ONLY_AST, without importing ast
        return _literal(tree.body, 0)  # type: ignore[attr-defined]  # PyCF_ONLY_AST: an ast.Expression
    except ValueError:
        raise
    except (SyntaxError, TypeError, RecursionError, MemoryError, OverflowError) as exc:
        raise ValueError(f"not a literal: {type(exc).__name__}") from None


# ------------------------------------------------------------- private root
def _mount_flags_of(path: str) -> int:
    """The MS_* flags a read-only bind remount of ``path`` must keep (locked in a user ns)."""
    st = os.statvfs(path)
    flags = 0
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if st.f_flag & st_flag:
            flags |= ms_flag
    return flags


def _library_paths() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(p)]


def _project_root() -> str:
    """The checkout holding ``ragen_envs`` (this file is ``ragen_envs/sandbox/launcher.py``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _is_project_path(real: str, project: str) -> bool:
    """``real`` is the project tree, inside it, an ancestor of it, or another source checkout
    of the project (a ``sys.path`` entry of an editable install).  A site-/dist-packages
    directory never is, even inside the checkout (a ``.venv`` there): this project's packages
    in it are hidden on their own (:func:`_hidden_package_dirs`)."""
    if os.path.basename(real) in ("site-packages", "dist-packages"):
        return False
    return (
        real == project
        or real.startswith(project + "/")
        or project.startswith(real.rstrip("/") + "/")
        or os.path.isdir(os.path.join(real, "ragen_envs"))
    )


def _loaded_libraries() -> list[str]:
    """Files of the shared libraries mapped into this process."""
    libs = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and ".so" in parts[5] and parts[5].startswith("/"):
                    libs.add(parts[5].strip())
    except OSError:
        pass
    return sorted(libs)


def _visible_sources(cfg: dict) -> tuple[list[str], set[str]]:
    """Host paths (real paths, outermost only) bound read-only into the private root, and
    every path asked for (package directories among them are not hidden)."""
    project = _project_root()
    here = os.path.dirname(os.path.realpath(__file__))
    wanted = []
    for p in _library_paths() + [x for x in sys.path if x.endswith(".zip") and os.path.isfile(x)]:
        real = os.path.realpath(p)
        if real != here and not _is_project_path(real, project):
            wanted.append(real)
    python_dirs = list(wanted)
    for lib in _loaded_libraries():
        d = os.path.dirname(lib)
        # A directory holding a Python library (e.g. <prefix>/lib with libpython) would
        # expose its site-packages: bind such a library file alone.
        inside = any(p == d or p.startswith(d + "/") for p in python_dirs) or _is_project_path(
            d, project
        )
        wanted.append(lib if inside else d)
    wanted += ["/etc/ld.so.cache"]
    if cfg["mode"] == "exec":
        wanted += ["/usr"] + [
            f"/{d}"
            for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
            if os.path.isdir(f"/{d}") and not os.path.islink(f"/{d}")
        ]
    wanted += [os.path.realpath(p) for p in cfg.get("visible_paths") or ()]
    asked = {w for w in wanted if os.path.exists(w)}
    chosen: list[str] = []
    for real in sorted(asked, key=len):
        if not any(real == c or real.startswith(c.rstrip("/") + "/") for c in chosen):
            chosen.append(real)
    return chosen, asked


def _bind_readonly(src: str, target: str, host_path: str, allow_dev: bool = False) -> None:
    _mount(src, target, None, MS_BIND)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | _mount_flags_of(host_path)
    if not allow_dev:
        flags |= MS_NODEV
    _mount(None, target, None, flags)


#: Packages of this project, hidden wherever they are installed (their data holds the answers).
_PROJECT_PACKAGES = ("ragen_envs", "ragen_bench", "ragen_train")


def _hidden_package_dirs(root: str, sources: list[str], asked: set[str]) -> list[str]:
    """site-/dist-packages directories inside the bound trees, except those asked for, and
    this project's packages wherever they are installed."""
    found = []
    for d in sorted(set(sources) | asked):
        found += [f"{d}/{n}" for n in _PROJECT_PACKAGES if os.path.isdir(f"{root}{d}/{n}")]
    for src in sources:
        candidates = [src]
        for lib in (src, f"{src}/lib", f"{src}/lib64", f"{src}/local/lib"):
            try:
                candidates += [
                    f"{lib}/{n}" for n in os.listdir(root + lib) if n.startswith("python")
                ]
            except OSError:
                continue
        for c in candidates:
            for sub in ("site-packages", "dist-packages"):
                path = f"{c}/{sub}"
                if (
                    path not in asked
                    and os.path.isdir(root + path)
                    and not os.path.islink(root + path)
                ):
                    found.append(path)
    return sorted(set(found))


def _remove_host_dir(base: str, work: str) -> None:
    """Delete the host's temporary directory (its files are in memory by now)."""
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)
    for name in os.listdir(base):
        os.unlink(os.path.join(base, name))
    os.rmdir(base)


#: The size-limited private tmpfs of the sandbox (the host's are never seen).
_PRIVATE_TMPS = ("/tmp", "/dev/shm")


def _inside_private_tmp(path: str) -> bool:
    """``path`` lies strictly inside ``/tmp`` or ``/dev/shm`` (so inside a private tmpfs)."""
    return any(path.startswith(t + "/") for t in _PRIVATE_TMPS)


def _bind_fd(fd: int, target: str) -> None:
    """Bind the host path held by the ``O_PATH`` descriptor ``fd`` read-only at ``target``."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "wb").close()
    _bind_readonly(f"/proc/self/fd/{fd}", target, f"/proc/self/fd/{fd}")
    os.close(fd)


def _build_root(
    cfg: dict, iso: dict, files: dict[str, bytes], fds: dict[str, int], asked: set[str]
) -> str:
    """Assemble the private root under a tmpfs on ``/tmp`` (this mount namespace only)."""
    old_umask = os.umask(0o022)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    root = "/tmp/root"
    os.mkdir(root, 0o755)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    # A source inside the private /tmp or /dev/shm (a venv under /tmp) is bound after
    # those tmpfs are mounted, on top of them: bound before, the tmpfs would hide it.
    # Only that path of the host's /tmp is seen, nothing beside it.
    in_tmp = {p: fd for p, fd in fds.items() if _inside_private_tmp(p)}
    for path, fd in fds.items():
        if path not in in_tmp:
            _bind_fd(fd, root + path)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink(f"/{name}"):
            os.symlink(os.readlink(f"/{name}"), f"{root}/{name}")
    os.makedirs(f"{root}/dev", 0o755, exist_ok=True)
    size = f"size={int(cfg['tmp_size_mb'])}m"
    for tmp in _PRIVATE_TMPS:
        os.makedirs(root + tmp, 0o755, exist_ok=True)
        _mount("tmpfs", root + tmp, "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
    for path, fd in in_tmp.items():
        _bind_fd(fd, root + path)
    for path in _hidden_package_dirs(root, list(fds), asked):
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=0755")
    for dev in _DEVICES:
        if os.path.exists(f"/dev/{dev}"):
            open(f"{root}/dev/{dev}", "wb").close()
            _bind_readonly(f"/dev/{dev}", f"{root}/dev/{dev}", f"/dev/{dev}", allow_dev=True)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    os.mkdir(f"{root}/proc", 0o555)
    work = f"{root}/tmp/work"
    os.makedirs(work, 0o755, exist_ok=True)  # exists when a bound source lies under /tmp/work
    for name, data in files.items():
        with open(os.path.join(work, name), "wb") as fh:
            fh.write(data)
    uid = cfg["run_as_uid"]
    if os.geteuid() == 0 and uid is not None:
        os.chown(work, uid, uid)
        for name in files:
            os.chown(os.path.join(work, name), uid, uid)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.umask(old_umask)
    iso["private_root"] = iso["readonly_root"] = iso["private_tmp"] = True
    return root


def _enter_root(root: str) -> None:
    """``pivot_root`` into ``root`` and detach the host's root (``chroot`` if unsupported)."""
    os.chdir(root)
    nr = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None or _c().syscall(nr, b".", b".") != 0:
        os.chroot(".")
    else:
        _check(_c().umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/tmp/work")


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


def _setup_namespaces(cfg: dict, iso: dict) -> str:
    """Enter the namespaces and build the private root; returns its path (entered by C)."""
    root = os.geteuid() == 0
    flags = (
        CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | (0 if root else CLONE_NEWUSER)
    )
    uid, gid = os.getuid(), os.getgid()
    _unshare(flags)
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        iso["user_ns"] = True
    iso["net_ns"] = iso["pid_ns"] = iso["mount_ns"] = iso["ipc_ns"] = True
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    sources, asked = _visible_sources(cfg)
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in sources}
    work = os.getcwd()
    files = {}
    for name in os.listdir(work):
        with open(os.path.join(work, name), "rb") as fh:
            files[name] = fh.read()
    _remove_host_dir(cfg["base"], work)
    iso["host_dir_removed"] = True
    iso["visible_paths"] = sources
    return _build_root(cfg, iso, files, fds, asked)


# ------------------------------------------------------------- the program
def _set_limits(cfg: dict, iso: dict) -> None:
    cpu = max(1, int(-(-float(cfg["cpu_time_s"]) // 1)))  # ceil, whole seconds
    # hard == soft: a program may raise its soft limit up to the hard one, so
    # the kernel's SIGKILL at the hard limit is the CPU limit (the host labels it "cpu").
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    mem = int(cfg["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    fsize = int(cfg["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(cfg["max_processes"])
    if not iso["cgroup"]:
        # No limit for the whole sandbox: the memory a run can take is processes x RLIMIT_AS.
        nproc = min(nproc, int(cfg["max_processes_without_cgroup"]))
    elif iso["dropped_to_uid"]:
        # The cgroup's pids.max is the exact per-sandbox cap; RLIMIT_NPROC of the shared
        # uid would also count the tasks of concurrent sandboxes.
        nproc = max(nproc * 16, 4096)
    if not iso["user_ns"] and not iso["dropped_to_uid"]:
        # Same uid as the host: RLIMIT_NPROC counts all of its tasks.
        nproc += _count_user_tasks(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _drop_capabilities() -> None:
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

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
    blocked_prefixes: tuple[str, ...] = ("socket.",)
    if strict:
        blocked_prefixes += (
            "ctypes.dlopen",
            "ctypes.dlsym",
            "os.exec",
            "os.posix_spawn",
            "os.spawn",
            "os.system",
            "subprocess.Popen",
            "os.fork_exec",
            "_posixsubprocess",
        )

    def hook(event: str, args: tuple) -> None:
        if event.startswith(blocked_prefixes):
            raise PermissionError(errno.EACCES, f"{event} is disabled in the ragen sandbox")
        if (
            strict
            and event == "open"
            and args
            and isinstance(args[0], str)
            and args[0].startswith("/proc/")
        ):
            head = args[0][6:].split("/", 1)[0]
            if head.isdigit() and int(head) != os.getpid():
                raise PermissionError(
                    errno.EACCES, "reading other processes is disabled in the ragen sandbox"
                )

    sys.addaudithook(hook)


def _main_module():
    import builtins

    main = type(sys)("__main__")
    main.__file__ = "main.py"
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = ["main.py"]
    return main


def _exit_code_of(exc: BaseException) -> int:
    """The exit status an uncaught exception gives (reserved codes for limits)."""
    if isinstance(exc, MemoryError):
        return EXIT_MEMORY
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return EXIT_FILE_SIZE
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
        return EXIT_PROCESSES
    if isinstance(exc, RuntimeError) and "new thread" in str(exc):
        return EXIT_PROCESSES
    return 1


def _print_program_error(exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        sys.stderr.write("MemoryError\n")
        return
    try:
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != "main.py":
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
    except BaseException:  # noqa: BLE001
        pass


def _exec_program(source: bytes, main) -> tuple[int, bool]:
    """Run the program as ``__main__``; returns (exit status, ended normally)."""
    try:
        exec(compile(source, "main.py", "exec"), main.__dict__)
    except SystemExit as exc:
        c = exc.code
        if c is None:
            return 0, True
        if isinstance(c, int):
            return c & 0xFF, True
        sys.stderr.write(f"{c}\n")
        return 1, True
    except BaseException as exc:  # noqa: BLE001 - the program's uncaught error
        _print_program_error(exc)
        return _exit_code_of(exc), False
    return 0, True


def _shutdown(code: int, normal: bool) -> int:
    """What interpreter shutdown does: join non-daemon threads (after a normal end only:
    a failed run is reported at once), run ``atexit`` handlers, flush."""
    if normal and "threading" in sys.modules:
        try:
            sys.modules["threading"]._shutdown()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else code
        except BaseException:  # noqa: BLE001
            pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. EFBIG on a redirected stream
            pass
    return code


def _run_program(cfg: dict, iso: dict) -> None:
    """Runs in ``G``; never returns."""
    try:
        os.close(cfg["status_fd"])
        try:
            _write(
                "/proc/self/oom_score_adj", "0"
            )  # L and C are shielded from the OOM killer; G is not
        except OSError:
            pass
        _prctl(PR_SET_DUMPABLE, 1)  # inherited from C; the program itself stays an ordinary process
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        uid = cfg["run_as_uid"]
        if iso["dropped_to_uid"]:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        elif iso["user_ns"]:
            _drop_capabilities()
        _prctl(PR_SET_PDEATHSIG, SIGKILL)  # after the uid change, which clears it
        _set_limits(cfg, iso)
        if cfg.get("seccomp_program"):
            _seccomp.install(cfg["seccomp_program"])  # last privileged step
        os.environ["HOME"] = os.environ["TMPDIR"] = os.getcwd()
        if cfg["mode"] == "exec":
            argv = cfg["argv"]
            os.execvpe(argv[0], argv, dict(os.environ))
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
        _install_audit_guard(strict=not iso["net_ns"])
        with open("main.py", "rb") as fh:
            source = fh.read()
        main = _main_module()
    except BaseException as exc:  # noqa: BLE001 - report any setup failure
        sys.stderr.write(f"ragen-sandbox: setup failed: {exc!r}\n")
        sys.stderr.flush()
        os._exit(EXIT_SETUP)
    if cfg.get("harness_fd") is not None:
        _run_harnessed(cfg, source, main)
    _forget_sandbox_modules()
    os._exit(_shutdown(*_exec_program(source, main)))


def _forget_sandbox_modules() -> None:
    """Drop the launcher's own modules from ``sys.modules`` before the program runs (the
    program's ``import launcher`` / ``import seccomp`` finds nothing, as outside)."""
    for name in ("launcher", "seccomp"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", "").startswith(
            os.path.dirname(os.path.abspath(__file__))
        ):
            del sys.modules[name]


# ------------------------------------------------------------- harnessed runs
def _send(fd: int, text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    data = len(data).to_bytes(8, "little") + data
    while data:
        data = data[os.write(fd, data) :]


def _recv_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv(fd: int) -> str | None:
    head = _recv_exact(fd, 8)
    if head is None:
        return None
    n = int.from_bytes(head, "little")
    if n > _MAX_FRAME:
        raise ValueError(f"frame of {n} bytes")
    data = _recv_exact(fd, n)
    return None if data is None else data.decode("utf-8", "surrogatepass")


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:  # noqa: BLE001 - str() of a hostile exception
        return type(exc).__name__


def _serve_calls(req_r: int, resp_w: int, g: dict) -> None:
    """In ``P``: answer ``(name, args, prefer_method)`` calls until the harness closes the pipe."""
    while True:
        frame = _recv(req_r)
        if frame is None:
            return
        name, args, prefer_method = decode_value(frame)
        try:
            cls = g.get("Solution") if prefer_method else None
            if isinstance(cls, type) and hasattr(cls, name):
                fn = getattr(cls(), name)
            elif name in g:
                fn = g[name]
            else:
                raise NameError(f"name {name!r} is not defined")
            result = fn(*args)
            try:
                reply = ("ok", result)
                text = encode_value(reply)
            except NotLiteral:
                text = encode_value(("repr", repr(result)[:100_000]))
        except BaseException as exc:  # noqa: BLE001 - the program's error is the call's result
            text = encode_value(("raise", _describe(exc)))
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        _send(resp_w, text)


class ProgramError(Exception):
    """A call into the program raised (message ``"TypeName: text"``) or the program ended."""


class Unserializable:
    """A call result that is not plain data; ``text`` is its ``repr`` (cut)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        raise TypeError("the program returned something that is not plain data")


class _Program:
    """The harness's end of the pipes to ``P``."""

    def __init__(self, req_w: int, resp_r: int) -> None:
        self.req_w, self.resp_r = req_w, resp_r
        self.state: str | None = None  # None until P said "ready" or failed

    def _reply(self):
        try:
            frame = _recv(self.resp_r)
            if frame is None:
                raise ProgramError("the program ended")
            reply = decode_value(frame)
        except (OSError, ValueError) as exc:
            self.state = self.state or "failed"
            raise ProgramError(f"no reply from the program: {exc}") from None
        if type(reply) is not tuple or len(reply) != 2:
            raise ProgramError("malformed reply from the program")
        return reply

    def call(self, name: str, args: tuple, prefer_method: bool):
        if self.state is None:
            try:
                tag, payload = self._reply()
            except ProgramError:
                self.state = "failed"
                raise
            self.state = "ready" if tag == "ready" else "failed"
        if self.state != "ready":
            raise ProgramError("the program did not load")
        try:
            _send(self.req_w, encode_value((name, tuple(args), prefer_method)))
        except NotLiteral as exc:
            raise TypeError(f"argument of {name}() is not plain data: {exc}") from None
        except OSError:
            self.state = "failed"
            raise ProgramError("the program ended") from None
        tag, payload = self._reply()
        if tag == "ok":
            return payload
        if tag == "repr" and type(payload) is str:
            return Unserializable(payload)
        raise ProgramError(str(payload))


class _Remote:
    """A callable standing for the program's global ``name``."""

    def __init__(self, program: _Program, name: str, prefer_method: bool = False) -> None:
        self._program, self._name, self._prefer = program, name, prefer_method
        self.__name__ = name

    def __call__(self, *args):
        return self._program.call(self._name, args, self._prefer)

    def __repr__(self) -> str:
        return f"<program function {self._name}>"


class _HarnessGlobals(dict):
    """Harness globals: a name the harness does not define is the program's (a proxy)."""

    def __init__(self, program: _Program) -> None:
        super().__init__()
        self._program = program

    def __missing__(self, key: str):
        import builtins

        if key in builtins.__dict__ or key.startswith("__"):
            raise KeyError(key)
        return _Remote(self._program, key)


def _run_harnessed(cfg: dict, source: bytes, main) -> None:
    """In ``G``: fork ``P`` to run the program, then run the harness here; never returns."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # P
        try:
            for fd in (cfg["harness_fd"], cfg["verdict_fd"], req_w, resp_r):
                os.close(fd)
            _prctl(PR_SET_DUMPABLE, 1)
            _prctl(PR_SET_PDEATHSIG, SIGKILL)
        except BaseException:  # noqa: BLE001
            os._exit(EXIT_SETUP)
        _forget_sandbox_modules()
        code, normal = _exec_program(source, main)
        if not normal or code != 0:
            _shutdown(code, False)
            try:
                _send(resp_w, encode_value(("failed", code)))
            except OSError:
                pass
            os._exit(code or 1)
        try:
            _send(resp_w, encode_value(("ready", None)))
            _serve_calls(req_r, resp_w, main.__dict__)
        except BaseException:  # noqa: BLE001 - a broken channel ends the program
            pass
        os._exit(_shutdown(0, False))
    for fd in (req_r, resp_w):
        os.close(fd)
    _prctl(PR_SET_DUMPABLE, 0)  # P runs as the same uid: no /proc/<G>/fd, no ptrace
    harness_fd, verdict_fd = cfg["harness_fd"], cfg["verdict_fd"]
    chunks = []
    while True:
        chunk = os.read(harness_fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(harness_fd)
    program = _Program(req_w, resp_r)

    def report(value) -> None:
        """Send one verdict value (plain data) to the host."""
        line = (encode_value(value) + "\n").encode()
        while line:
            line = line[os.write(verdict_fd, line) :]

    g = _HarnessGlobals(program)
    g.update(
        __name__="__ragen_harness__",
        __builtins__=__builtins__,
        report=report,
        ProgramError=ProgramError,
        Unserializable=Unserializable,
        program=lambda name, prefer_method=False: _Remote(program, name, prefer_method),
    )
    code = 0
    try:
        sys.set_int_max_str_digits(0)
    except AttributeError:
        pass
    try:
        exec(compile(b"".join(chunks), "<harness>", "exec"), g)
    except BaseException as exc:  # noqa: BLE001 - reported as the run's error
        sys.stderr.write(f"harness: {_describe(exc)}\n")
        code = 1
    os.close(verdict_fd)
    os.close(req_w)  # P sees EOF and exits
    _, status = os.waitpid(pid, 0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        os.kill(os.getpid(), sig)  # the run ends the way the program did (e.g. SIGXCPU)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) or code)


# ------------------------------------------------------------- C and L
def _release_output() -> None:
    """Point stdout/stderr at /dev/null so that the host sees EOF as soon as ``G`` (and
    whatever it started) has exited, without waiting for ``L`` and ``C``."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _supervise(cfg: dict, iso: dict, root: str | None) -> None:
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
            _mount("proc", (root or "") + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            iso["private_proc"] = True
        except OSError:
            pass
    if root is not None:
        try:
            _enter_root(root)
        except OSError as exc:
            sys.stderr.write(f"ragen-sandbox: setup failed: cannot enter the private root: {exc}\n")
            sys.stderr.flush()
            os._exit(EXIT_SETUP)
    pid = os.fork()
    if pid == 0:
        _run_program(cfg, iso)
    for key in ("harness_fd", "verdict_fd"):
        if cfg.get(key) is not None:
            os.close(cfg[key])
    _release_output()
    report: dict[str, object] = {"exit_code": None, "signal": None, "cpu_time_s": 0.0}
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


def _join_cgroups(cfg: dict, iso: dict) -> None:
    procs = cfg.get("cgroup_procs") or []
    if not procs:
        return
    try:
        for path in procs:
            _write(path, str(os.getpid()))
        iso["cgroup"] = cfg["cgroup_kind"]
    except OSError as exc:
        iso["cgroup_error"] = str(exc)


def _wait_with_backstop(pid: int, limit_s: float) -> int:
    """``waitpid(pid)``; past ``limit_s`` seconds C's process group is killed first."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        import select

        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(int(limit_s * 1000)):
            try:
                os.killpg(pid, SIGKILL)
            except OSError:
                pass
        os.close(pidfd)
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    iso = {
        "user_ns": False,
        "net_ns": False,
        "pid_ns": False,
        "mount_ns": False,
        "ipc_ns": False,
        "private_root": False,
        "private_tmp": False,
        "private_proc": False,
        "readonly_root": False,
        "dropped_to_uid": os.geteuid() == 0 and cfg["run_as_uid"] is not None,
        "cgroup": False,
        "parent_death": False,
        "visible_paths": [],
    }
    try:
        _prctl(PR_SET_PDEATHSIG, SIGKILL)
        iso["parent_death"] = True
    except OSError:
        pass
    if os.getppid() != cfg["host_pid"]:
        os._exit(EXIT_SETUP)  # the host died before PR_SET_PDEATHSIG took effect
    if os.geteuid() == 0:
        try:
            _write("/proc/self/oom_score_adj", "-1000")  # the OOM killer picks the program, not L/C
        except OSError:
            pass
    _join_cgroups(cfg, iso)
    root = None
    if cfg["namespaces"] != "off":
        try:
            root = _setup_namespaces(cfg, iso)
        except OSError as exc:
            if cfg["namespaces"] == "require" or iso["mount_ns"]:
                # Half-built namespaces are not a state to run a program in.
                sys.stderr.write(f"ragen-sandbox: setup failed: namespaces unavailable: {exc}\n")
                sys.exit(EXIT_SETUP)
            for k in ("user_ns", "net_ns", "pid_ns", "mount_ns", "ipc_ns"):
                iso[k] = False
            iso["namespace_error"] = str(exc)
    if (
        not iso["mount_ns"]
        and os.geteuid() == 0
        and cfg["run_as_uid"] is not None
        and any(_blocked_ancestor(p) for p in _library_paths())
    ):
        sys.stderr.write(
            "ragen-sandbox: setup failed: running as root without a mount namespace, the program "
            f"would run as uid {cfg['run_as_uid']}, which cannot read the interpreter's library "
            f"({sys.prefix}); use an interpreter readable by that uid (SandboxConfig.python)\n"
        )
        sys.exit(EXIT_SETUP)
    # A fresh session keyring per run, and the seccomp filter G installs.
    iso["session_keyring"] = _seccomp.join_fresh_session_keyring()
    iso["seccomp"] = _seccomp.available()
    cfg["seccomp_program"] = _seccomp.filter_program() if iso["seccomp"] else None
    if not iso["pid_ns"]:
        # Without a PID namespace, orphaned descendants are re-parented to L (a "child
        # subreaper"), which kills and reaps them before it exits.
        try:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
            iso["subreaper"] = True
        except OSError:
            iso["subreaper"] = False
    try:
        _prctl(PR_SET_DUMPABLE, 0)  # a same-uid program cannot open L's /proc/<pid>/fd
    except OSError:
        pass
    pid = os.fork()
    if pid == 0:
        os.close(cfg["pid_fd"])
        _supervise(cfg, iso, root)
    os.write(cfg["pid_fd"], f"{pid}\n".encode())
    for key in ("pid_fd", "status_fd", "harness_fd", "verdict_fd"):
        if cfg.get(key) is not None:
            os.close(cfg[key])
    _release_output()
    status = _wait_with_backstop(pid, float(cfg["wall_time_s"]) + 2.0)
    if iso.get("subreaper"):
        _reap_orphans()
    if root is None:
        _remove_fallback_dir(cfg["base"])
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _remove_fallback_dir(base: str) -> None:
    """Delete the host's temporary directory after a fallback run (not ``shutil``: 38 ms to import)."""
    try:
        for top, dirs, names in os.walk(base, topdown=False):
            for name in names:
                os.unlink(os.path.join(top, name))
            for name in dirs:
                path = os.path.join(top, name)
                os.unlink(path) if os.path.islink(path) else os.rmdir(path)
        os.rmdir(base)
    except OSError:  # e.g. a directory the program made unreadable: the host removes it too
        pass


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
