"""One memory and task limit for a whole sandboxed run: a cgroup per run (stdlib only).

Used by :mod:`ragen_envs.sandbox` (spec: ``docs/envs/sandbox.md``).  The host makes a
child cgroup per run with ``memory`` = ``SandboxConfig.memory_mb`` (no swap) and
``pids`` = ``max_processes`` + the launcher's own processes; the launcher writes its pid
into the group's ``cgroup.procs`` before it forks, so every process of the run is
counted together (RLIMIT_AS, by contrast, limits each process alone).  After the run the
host reads the peak memory and the number of OOM kills, kills anything left and removes
the group.

Both cgroup versions are supported:

* **v2** (unified): under the host process's own cgroup when the ``memory`` and ``pids``
  controllers can be enabled there (a delegated subtree), else under the root of the
  cgroup2 mount (root only).  Files: ``memory.max``, ``memory.swap.max``, ``pids.max``,
  ``memory.peak``, ``memory.events`` (``oom_kill``), ``cgroup.kill``.
* **v1**: the ``memory`` and ``pids`` hierarchies, each under the host's own group
  there.  Files: ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``,
  ``pids.max``, ``memory.max_usage_in_bytes``, ``memory.oom_control`` (``oom_kill``).

Groups are named ``ragen-sandbox/<host pid>-<n>``; groups of host processes that no
longer exist (a host killed mid-run) are removed the first time a process sets up.
When nothing is writable (unprivileged without delegation, a read-only
``/sys/fs/cgroup``) :func:`create` returns ``None`` and the sandbox falls back to
per-process limits (documented on the spec page).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass

__all__ = ["RunCgroup", "create", "layout"]

_PARENT = "ragen-sandbox"
_counter = itertools.count()
_lock = threading.Lock()


@dataclass(frozen=True)
class Layout:
    """Where this process makes its run cgroups: ``kind`` is ``"v2"`` or ``"v1"``;
    ``memory_parent`` / ``pids_parent`` are the ``ragen-sandbox`` directories (equal for v2)."""

    kind: str
    memory_parent: str
    pids_parent: str


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
                out.append((fields[4], rfields[0], set(rfields[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path."""
    paths = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(parent: str) -> None:
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        head = name.split("-", 1)[0]
        if (
            head.isdigit()
            and os.path.isdir(os.path.join(parent, name))
            and not _pid_alive(int(head))
        ):
            _destroy_dir(
                os.path.join(parent, name),
                v2=os.path.exists(os.path.join(parent, "cgroup.subtree_control")),
            )


def _v2_parent(mount: str, own: str) -> str | None:
    for base in (os.path.join(mount, own.lstrip("/")), mount):
        parent = os.path.join(base, _PARENT)
        try:
            enabled = _read(os.path.join(base, "cgroup.subtree_control")).split()
            if not {"memory", "pids"} <= set(enabled):
                _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
            os.makedirs(parent, exist_ok=True)
            if not {"memory", "pids"} <= set(
                _read(os.path.join(parent, "cgroup.subtree_control")).split()
            ):
                _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
            return parent
        except OSError:
            continue
    return None


@functools.cache
def layout() -> Layout | None:
    """This process's cgroup layout for sandbox runs, or ``None`` (cached; cleans stale groups)."""
    try:
        mounts, own = _mounts(), _own_paths()
    except (OSError, ValueError):
        return None
    found: Layout | None = None
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own and os.access(point, os.W_OK):
            try:
                controllers = set(_read(os.path.join(point, "cgroup.controllers")).split())
            except OSError:
                continue
            if {"memory", "pids"} <= controllers:
                parent = _v2_parent(point, own[""])
                if parent is not None:
                    found = Layout("v2", parent, parent)
                    break
    if found is None:
        v1 = {}
        for point, fstype, opts in mounts:
            for c in ("memory", "pids"):
                if fstype == "cgroup" and c in opts and c in own and c not in v1:
                    v1[c] = os.path.join(point, own[c].lstrip("/"), _PARENT)
        if len(v1) == 2:
            try:
                for parent in v1.values():
                    os.makedirs(parent, exist_ok=True)
                found = Layout("v1", v1["memory"], v1["pids"])
            except OSError:
                found = None
    if found is not None:
        for parent in {found.memory_parent, found.pids_parent}:
            _remove_stale(parent)
    return found


def _destroy_dir(path: str, v2: bool) -> bool:
    """Kill every process of the group and remove it; False if it stays (busy)."""
    for attempt in range(50):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            pass
        try:
            if v2 and os.path.exists(os.path.join(path, "cgroup.kill")):
                _write(os.path.join(path, "cgroup.kill"), "1")
            else:
                for pid in _read(os.path.join(path, "cgroup.procs")).split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
        except OSError:
            pass
        time.sleep(0.002 * (attempt + 1))
    return False


class RunCgroup:
    """The cgroup(s) of one sandboxed run.

    Attributes:
        kind: ``"v1"`` or ``"v2"``.
        procs_files: the ``cgroup.procs`` files the launcher writes its pid into.
    """

    def __init__(self, lay: Layout, memory_bytes: int, max_tasks: int) -> None:
        with _lock:
            name = f"{os.getpid()}-{next(_counter)}"
        self.kind = lay.kind
        self._dirs = [os.path.join(lay.memory_parent, name)]
        if lay.pids_parent != lay.memory_parent:
            self._dirs.append(os.path.join(lay.pids_parent, name))
        for d in self._dirs:
            os.mkdir(d)
        try:
            mem, pids = self._dirs[0], self._dirs[-1]
            if self.kind == "v2":
                _write(os.path.join(mem, "memory.max"), str(memory_bytes))
                if os.path.exists(os.path.join(mem, "memory.swap.max")):
                    _write(os.path.join(mem, "memory.swap.max"), "0")
            else:
                _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory_bytes))
                if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):
                    _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(memory_bytes))
            _write(os.path.join(pids, "pids.max"), str(max_tasks))
        except OSError:
            self.destroy()
            raise
        self.procs_files = [os.path.join(d, "cgroup.procs") for d in self._dirs]

    def stats(self) -> tuple[int | None, int]:
        """``(peak memory in bytes or None if the kernel does not say, OOM kills)``."""
        mem = self._dirs[0]
        peak_file = "memory.peak" if self.kind == "v2" else "memory.max_usage_in_bytes"
        events_file = "memory.events" if self.kind == "v2" else "memory.oom_control"
        try:
            peak: int | None = int(_read(os.path.join(mem, peak_file)).split()[0])
        except (OSError, ValueError, IndexError):
            peak = None
        kills = 0
        try:
            for line in _read(os.path.join(mem, events_file)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    kills = int(value)
        except (OSError, ValueError):
            pass
        return peak, kills

    def destroy(self) -> None:
        """Kill what is left in the group(s) and remove them (left for the stale sweep if busy)."""
        for d in self._dirs:
            _destroy_dir(d, v2=self.kind == "v2")


def create(memory_bytes: int, max_tasks: int) -> RunCgroup | None:
    """A cgroup for one run, or ``None`` where this machine gives none."""
    lay = layout()
    if lay is None:
        return None
    try:
        return RunCgroup(lay, memory_bytes, max_tasks)
    except OSError:
        return None
