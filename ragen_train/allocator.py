"""The process's memory allocator on CPU: tcmalloc or jemalloc where installed, else glibc
with a fixed mmap threshold.

A CPU training step allocates and frees tensors of every size (each micro-batch has other
lengths). glibc's ``malloc`` serves blocks under its mmap threshold, which it raises
dynamically up to 32 MiB, from heap arenas that rarely shrink, so the resident set grows with
every new shape. One ``cpu-sokoban-lora`` step (docs/training.md, "Memory on CPU"; same
rollouts, same gradient norm) peaked at 13.0 GiB with glibc's defaults (update 285 s), 9.5 GiB
with tcmalloc (266 s), 9.1 GiB with jemalloc (329 s) and 9.0 GiB with glibc and a fixed 4 MiB
mmap threshold (328 s). An allocator can only be swapped before the process allocates, so
:func:`maybe_reexec` starts the same command again with the library in ``LD_PRELOAD``
(``os.execve`` keeps the process id, so torchrun and job schedulers see the same process);
glibc's threshold is set in place with ``mallopt``.

``trainer.allocator`` picks it: ``auto`` (on CPU: tcmalloc, else jemalloc, else the glibc
threshold; on GPU the host allocator barely matters and nothing changes), ``tcmalloc`` or
``jemalloc`` (an error when missing), ``glibc`` (the threshold only) or ``system`` (leave the
process alone).
``RAGEN_ALLOCATOR`` in the environment overrides the config, so a launcher can change it
without editing configs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Library file names of each allocator, most specific first; ``auto`` tries them in this order.
LIBRARIES: dict[str, tuple[str, ...]] = {
    "tcmalloc": ("libtcmalloc.so.4", "libtcmalloc_minimal.so.4", "libtcmalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
}
#: Choices of ``trainer.allocator``.
CHOICES = ("auto", "tcmalloc", "jemalloc", "glibc", "system")
#: glibc's fixed mmap threshold under ``auto`` (bytes): blocks from 4 MiB up (a layer's
#: activations for a few hundred tokens) are mapped and unmapped, not kept in the heap.
GLIBC_MMAP_THRESHOLD = 4 * 2**20
_M_MMAP_THRESHOLD = -3  # mallopt parameter number (malloc.h)
#: jemalloc settings used unless ``MALLOC_CONF`` is set: purge freed pages after about 2 s
#: from a background thread, so the resident set follows the live tensors.
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:2000,muzzy_decay_ms:0"
#: Set in the re-executed process; a second start never re-executes again.
MARKER = "RAGEN_ALLOCATOR_REEXEC"
#: Environment override of ``trainer.allocator``.
ENV_CHOICE = "RAGEN_ALLOCATOR"

_SEARCH_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
)


class AllocatorError(ValueError):
    """An allocator was asked for by name and is not installed, or the name is unknown."""


@dataclass(frozen=True)
class AllocatorPlan:
    """What :func:`plan` decided.

    Attributes:
        name: ``"tcmalloc"``, ``"jemalloc"``, ``"glibc"`` (glibc with
            :data:`GLIBC_MMAP_THRESHOLD`) or ``"system"`` (the allocator as it is).
        library: the shared library to preload (None: nothing to preload).
        reexec: whether the process must start again to load it.
        reason: one line for the log.
        mmap_threshold: glibc's mmap threshold to set in place (bytes), or None.
    """

    name: str
    library: str | None
    reexec: bool
    reason: str
    mmap_threshold: int | None = None


def find_library(
    name: str,
    search_dirs: Sequence[str] = _SEARCH_DIRS,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The path of allocator ``name``'s shared library, or None when none is installed.

    Looks in ``$LD_LIBRARY_PATH``'s folders, ``$CONDA_PREFIX/lib``, then the usual library
    folders, then asks ``ctypes.util.find_library`` (which gives a path on macOS only).

    Raises:
        AllocatorError: ``name`` is not ``jemalloc`` or ``tcmalloc``.
    """
    if name not in LIBRARIES:
        raise AllocatorError(f"unknown allocator {name!r}; expected one of {sorted(LIBRARIES)}")
    env = os.environ if environ is None else environ
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    if env.get("CONDA_PREFIX"):
        dirs.append(str(Path(env["CONDA_PREFIX"]) / "lib"))
    for d in [*dirs, *search_dirs]:
        for lib in LIBRARIES[name]:
            usable = _preloadable(Path(d) / lib)
            if usable is not None:
                return usable
    found = ctypes.util.find_library(name)
    return _preloadable(Path(found)) if found and "/" in found else None


def _preloadable(path: Path) -> str | None:
    """``path`` (or, through its symlinks, its target) when it is an ELF file whose path
    ``LD_PRELOAD`` can hold: ld.so splits the variable at spaces and colons, with no escape."""
    for candidate in (str(path), os.path.realpath(path)):
        if any(c in candidate for c in " :"):
            continue
        try:
            with open(candidate, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    return candidate
        except OSError:
            return None
    return None


def loaded_allocator(maps: str | None = None) -> str:
    """Which allocator this process has loaded: ``jemalloc``, ``tcmalloc`` or ``system``.

    Args:
        maps: the text of ``/proc/self/maps`` (read when None; ``system`` where unreadable).
    """
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return "system"
    for name in LIBRARIES:
        if f"lib{name}" in maps:
            return name
    return "system"


def plan(
    choice: str,
    device: str,
    environ: Mapping[str, str] | None = None,
    *,
    loaded: str | None = None,
    search_dirs: Sequence[str] = _SEARCH_DIRS,
) -> AllocatorPlan:
    """Decide whether to start again with tcmalloc or jemalloc preloaded, or to fix glibc's
    mmap threshold.

    Args:
        choice: ``trainer.allocator`` (``RAGEN_ALLOCATOR`` in ``environ`` wins over it).
        device: the trainer's device; ``auto`` acts on CPU only.
        environ: the environment (``os.environ`` when None).
        loaded: the allocator already loaded (:func:`loaded_allocator` when None).

    Raises:
        AllocatorError: the choice is unknown, or names an allocator that is not installed
            or that was preloaded and did not load.
    """
    env = os.environ if environ is None else environ
    source = ENV_CHOICE if env.get(ENV_CHOICE) else "trainer.allocator"
    choice = env.get(ENV_CHOICE) or choice
    if choice not in CHOICES:
        raise AllocatorError(f"{source} must be one of {', '.join(CHOICES)}; got {choice!r}")
    loaded = loaded_allocator() if loaded is None else loaded
    if choice == "system":
        return AllocatorPlan(loaded, None, False, f"{loaded} ({source}=system)")
    if loaded != "system":
        how = "preloaded by ragen-train" if env.get(MARKER) else "already loaded"
        if choice in LIBRARIES and choice != loaded:
            how += f"; {source}={choice} not applied"
        return AllocatorPlan(loaded, None, False, f"{loaded} ({how})")
    if choice == "auto" and not str(device).startswith("cpu"):
        return AllocatorPlan(
            "system", None, False, f"system (device {device}: auto acts on CPU only)"
        )
    if not sys.platform.startswith("linux"):
        return AllocatorPlan(
            "system", None, False, f"system (LD_PRELOAD is Linux-only; {sys.platform})"
        )
    names = () if choice == "glibc" else tuple(LIBRARIES) if choice == "auto" else (choice,)
    failed = ""
    for name in names:
        lib = find_library(name, search_dirs, env)
        if lib is None:
            continue
        if env.get(MARKER):  # preloaded once already and still not loaded: do not loop
            failed = f"{lib} was preloaded but did not load"
            if choice in LIBRARIES:
                raise AllocatorError(f"{source}={choice}: {failed} (see ld.so's message above)")
            break
        return AllocatorPlan(name, lib, True, f"{name} ({lib})")
    else:
        if choice in LIBRARIES:
            package = "libjemalloc2" if choice == "jemalloc" else "libtcmalloc-minimal4"
            raise AllocatorError(
                f"{source}={choice}: lib{choice} is not installed (Debian/Ubuntu: apt-get "
                f"install {package}); use {source}=auto or system"
            )
    why = failed or (
        f"{source}=glibc"
        if choice == "glibc"
        else "neither tcmalloc nor jemalloc is installed; `apt-get install libtcmalloc-minimal4` "
        "on Debian/Ubuntu trains faster"
    )
    if env.get("MALLOC_MMAP_THRESHOLD_"):
        return AllocatorPlan(
            "system",
            None,
            False,
            f"system (MALLOC_MMAP_THRESHOLD_ is set in the environment; {why})",
        )
    if not _is_glibc():
        return AllocatorPlan("system", None, False, f"system ({why})")
    return AllocatorPlan(
        "glibc",
        None,
        False,
        f"glibc, mmap threshold fixed at {GLIBC_MMAP_THRESHOLD // 2**20} MiB ({why})",
        GLIBC_MMAP_THRESHOLD,
    )


def _is_glibc() -> bool:
    import platform

    return platform.libc_ver()[0] == "glibc"


def set_mmap_threshold(nbytes: int) -> bool:
    """Fix glibc's mmap threshold at ``nbytes`` (``mallopt(M_MMAP_THRESHOLD)``; this also
    stops glibc raising it dynamically). True when glibc took it."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    except (OSError, AttributeError):
        return False


def peak_rss_gib() -> float:
    """This process's peak resident set so far, GiB (``getrusage`` ``ru_maxrss``: KiB on
    Linux, bytes on macOS; Linux keeps it across the allocator restart's ``execve``, which
    happens before the process holds much); NaN where ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20


def reexec_environ(p: AllocatorPlan, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the restarted process: ``LD_PRELOAD`` with the library first, the
    marker, and :data:`JEMALLOC_CONF` for jemalloc unless ``MALLOC_CONF`` is set."""
    env = dict(environ)
    assert p.library is not None
    env["LD_PRELOAD"] = " ".join(x for x in (p.library, env.get("LD_PRELOAD", "")) if x)
    env[MARKER] = "1"
    if p.name == "jemalloc":
        env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    return env


def maybe_reexec(choice: str, device: str) -> AllocatorPlan:
    """Apply :func:`plan`: start this same command again with the allocator preloaded
    (does not return then) or set glibc's threshold, and return the plan for the log.

    Raises:
        AllocatorError: as :func:`plan`.
    """
    p = plan(choice, device)
    if p.mmap_threshold is not None and not set_mmap_threshold(p.mmap_threshold):
        p = dataclasses.replace(p, name="system", reason="system (mallopt was refused)")
    if p.reexec:
        restart(p)
    return p


def restart(p: AllocatorPlan) -> None:
    """Start this same command again (same process id, same arguments) with ``p``'s library
    preloaded (:func:`reexec_environ`); does not return."""
    sys.stdout.flush()
    sys.stderr.flush()
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    os.execve(sys.executable, [sys.executable, *argv[1:]], reexec_environ(p, os.environ))
