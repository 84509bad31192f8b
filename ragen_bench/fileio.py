"""Crash-safe file writes: atomic replacement of files and directories, fsync, torn-line repair.

Everything a run rewrites (``summary.json``, ``run.json``, leaderboards, checkpoints, saved
models) is written to a temporary sibling, flushed and ``fsync``-ed, then renamed over the
target with :func:`os.replace` (atomic on POSIX: a reader sees the old file or the new
one, never a mix), and the parent directory is ``fsync``-ed so the rename itself
survives power loss.  Everything a run appends to (``episodes.jsonl``, ``metrics.jsonl``)
can end in one torn line after a kill; :func:`repair_jsonl_tail` cuts it off.

A killed writer leaves at most a temporary sibling (``.<name>.tmp-<pid>``) that
:func:`remove_stale_temporaries` deletes.

Files in a run or checkpoint folder may come from someone else (a shared run folder, a
published checkpoint), so they are opened as data that must stay inside the folder:
:func:`open_regular` opens with ``O_NOFOLLOW`` and accepts only a regular file, and
:func:`check_regular` does the same check (``lstat``) where a library opens the path itself.
A symbolic link (``.lock`` -> ``~/.bashrc``), a FIFO or a device in their place is refused
with :class:`NotRegularFileError`, one line naming the file; nothing outside is read,
truncated or written.  The atomic writers refuse to replace such a target too, and create
their temporary sibling with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragen_envs import jsonutil

from .redaction import redact

#: Marker in the names of temporary siblings (``.summary.json.tmp-123``, ``.step_000010.tmp-123``).
TMP_MARK = ".tmp-"
#: Marker of directories renamed aside before they are deleted or replaced.
OLD_MARK = ".old-"


class NotRegularFileError(OSError):
    """A file in a run or checkpoint folder is a symbolic link, a FIFO, a device or a
    directory, or lies outside the folder; the message is one line naming it."""


#: Flags every open of a run-folder file adds: no symbolic link as the last component, no
#: blocking on a FIFO planted in its place, not inherited by subprocesses.
_SAFE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _refusal(path: str | os.PathLike[str], what: str) -> NotRegularFileError:
    return NotRegularFileError(
        f"{path}: {what}; refused (files in a run or checkpoint folder must be regular files "
        "inside it, not links)"
    )


#: Why a regular file with more than one name is refused: one of its other names may lie
#: outside the folder (a hard link passes O_NOFOLLOW and the regular-file check).
_HARD_LINKED = "has other hard links (it may also be a file outside the folder)"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISDIR(mode):
        return "is a directory"
    return "is not a regular file (a FIFO, socket or device)"


def check_regular(
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    missing_ok: bool = False,
) -> bool:
    """Check that ``path`` is a regular file (``lstat``: a symbolic link is refused, not
    followed), and, with ``root``, that its real parent directory lies inside ``root``'s.

    For paths a library opens itself (``safetensors``, ``save_pretrained``); where this
    module opens the file, :func:`open_regular` checks the opened descriptor instead (no
    window between check and use).

    Returns:
        ``True`` when the file exists and passes; ``False`` when it is missing and
        ``missing_ok``.
    Raises:
        NotRegularFileError: a link (symbolic, or a file with other hard links), FIFO,
            device or directory, or outside ``root`` (one line naming the file).
        FileNotFoundError: missing and not ``missing_ok``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return False
        raise
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(path, _kind(st.st_mode))
    if st.st_nlink > 1:
        raise _refusal(path, _HARD_LINKED)
    if root is not None:
        real_root = os.path.realpath(root)
        parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        if os.path.commonpath([real_root, parent]) != real_root:
            raise _refusal(path, f"lies outside {root}")
    return True


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` for a file in a run or checkpoint folder: with ``O_NOFOLLOW``
    (a symbolic link as the last component is refused, never followed) and ``O_NONBLOCK``
    (a FIFO in its place does not hang the open), and the opened descriptor must be a
    regular file.  ``O_TRUNC`` is applied only after that check, so a refused file is never
    emptied.  Returns the descriptor (blocking mode restored; close it yourself).

    Raises:
        NotRegularFileError: ``path`` is a link (symbolic, or a regular file with other hard
            links), FIFO, device or directory (one line naming it).
        OSError: the open itself failed (missing file without ``O_CREAT``, permissions).
    """
    truncate = flags & os.O_TRUNC
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC) | _SAFE_FLAGS, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link
            raise _refusal(path, "is a symbolic link") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise _refusal(path, _kind(os.lstat(path).st_mode)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refusal(path, _kind(st.st_mode))
        if st.st_nlink > 1:  # a hard link: the same file may also lie outside the folder
            raise _refusal(path, _HARD_LINKED)
        if _SAFE_FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_file(path: str | os.PathLike[str], mode: str = "rb", **kwargs: Any) -> Any:
    """:func:`open_regular` as a Python file object: ``mode`` is one of ``"r"``, ``"rb"``,
    ``"a"``, ``"ab"``, ``"w"``, ``"wb"``, ``"r+b"``; ``kwargs`` go to :func:`os.fdopen`
    (``encoding``).

    Raises:
        NotRegularFileError, OSError: as :func:`open_regular`.  ValueError: another ``mode``.
    """
    flags = {
        "r": os.O_RDONLY,
        "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
        "r+": os.O_RDWR,
    }.get(mode.replace("b", ""))
    if flags is None:
        raise ValueError(f"open_regular_file: unsupported mode {mode!r}")
    return os.fdopen(open_regular(path, flags), mode, **kwargs)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """``fsync`` a directory so that renames and new entries in it are durable (no-op where
    directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - not POSIX
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike[str]) -> None:
    """``fsync`` every file and directory under ``root`` (and ``root`` itself)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(dirpath)


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically and durably; returns ``path``.

    The bytes go to ``.<name>.tmp-<pid>`` in the same directory, which is flushed,
    ``fsync``-ed and renamed over ``path``; then the directory is ``fsync``-ed.  A crash at
    any moment leaves either the old file or the new one.
    """
    path = Path(path)
    check_regular(path, missing_ok=True)  # never replace a planted link / FIFO silently
    tmp = _tmp_sibling(path)
    try:
        with open_regular_file(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """:func:`atomic_write_bytes` of ``text`` (secrets redacted: :mod:`ragen_bench.redaction`)
    encoded with ``encoding``."""
    return atomic_write_bytes(path, redact(text).encode(encoding))


def atomic_write_json(
    path: str | os.PathLike[str],
    obj: Any,
    *,
    indent: int | None = 2,
    ensure_ascii: bool = False,
    **dumps: Any,
) -> Path:
    """:func:`atomic_write_text` of strict JSON (:func:`ragen_envs.jsonutil.dumps`: a NaN or
    infinity raises ``NonFiniteNumberError`` naming its path) plus a final newline.  If
    serialising raises, the old file is left untouched."""
    text = jsonutil.dumps(obj, indent=indent, ensure_ascii=ensure_ascii, **dumps) + "\n"
    return atomic_write_text(path, text)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a directory under a temporary name and move it into place as a whole.

    Yields the temporary directory (``.<name>.tmp-<pid>`` next to ``path``, empty) to be
    filled.  When the ``with`` block ends normally, every file in it is ``fsync``-ed and
    it is renamed to ``path``; an existing ``path`` is first renamed aside
    (``.<name>.old-<pid>``) and deleted after the swap.  When the block raises, the
    temporary directory is deleted and ``path`` is untouched.  A crash at any moment
    leaves either the old directory or the new one under ``path`` (or, in the instant
    between the two renames, only the old one under its aside name), plus temporaries
    that :func:`remove_stale_temporaries` cleans up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(path)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, path)


def replace_directory(src: Path, dest: Path) -> None:
    """Rename directory ``src`` to ``dest``, replacing an existing ``dest`` (see
    :func:`atomic_directory`); the parent directory is ``fsync``-ed."""
    aside = None
    if dest.exists():
        aside = dest.with_name(f".{dest.name}{OLD_MARK}{os.getpid()}")
        if aside.exists():
            shutil.rmtree(aside)
        os.replace(dest, aside)
    os.replace(src, dest)
    fsync_dir(dest.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def remove_directory(path: Path) -> None:
    """Delete a directory so that a crash midway never leaves a half-deleted one under its
    name: it is renamed aside first (``.<name>.old-<pid>``), then removed."""
    aside = path.with_name(f".{path.name}{OLD_MARK}{os.getpid()}")
    os.replace(path, aside)
    fsync_dir(path.parent)
    shutil.rmtree(aside, ignore_errors=True)


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries (``.*.tmp-*``, ``.*.old-*``) that killed writers left in
    ``directory``; returns what was removed.  Call it only while holding the directory's
    single-writer role (a live writer's temporaries would be removed too)."""
    removed = []
    d = Path(directory)
    if not d.is_dir():
        return removed
    for p in d.iterdir():
        if p.name.startswith(".") and (TMP_MARK in p.name or OLD_MARK in p.name):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open_regular_file(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def repair_jsonl_tail(path: str | os.PathLike[str]) -> int:
    """Cut a torn last line off a JSON-lines file that is only ever appended to; returns the
    bytes removed (0 when the file is intact or missing).

    A writer killed mid-line leaves a last line without its newline, or (a torn write that
    happened to end in one) a last line that is not valid JSON; either is removed so that
    the next append starts on a fresh line.  Earlier lines are never touched.

    Raises:
        NotRegularFileError: ``path`` is a symbolic link (or FIFO, device): nothing is cut.
    """
    p = Path(path)
    if not check_regular(p, missing_ok=True):
        return 0
    with open_regular_file(p, "rb") as fh:
        data = fh.read()
    keep = len(data)
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
    else:
        start = data.rfind(b"\n", 0, max(0, len(data) - 1)) + 1
        if data[start:].strip():
            try:
                json.loads(data[start:])
            except ValueError:
                keep = start
    if keep < len(data):
        with open_regular_file(p, "r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return len(data) - keep


__all__ = [
    "NotRegularFileError",
    "atomic_directory",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_regular",
    "fsync_dir",
    "fsync_tree",
    "open_regular",
    "open_regular_file",
    "remove_directory",
    "remove_stale_temporaries",
    "repair_jsonl_tail",
    "replace_directory",
    "sha256_file",
]
