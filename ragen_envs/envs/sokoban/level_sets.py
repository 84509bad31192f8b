"""Where fixed Sokoban levels come from (config field ``levels``).

The value is one of

* ``"builtin:<name>"``: the XSB file ``levels/<name>.xsb`` shipped inside this package
  (``builtin:starter`` is our own ten-level set, MIT);
* a text containing a line break: inline XSB text;
* anything else: the path of an XSB file (``~`` expanded).
"""

from __future__ import annotations

import functools
import os
from importlib import resources

from .room import Puzzle
from .xsb import XSBError, load_xsb, parse_xsb

BUILTIN_PREFIX = "builtin:"


def builtin_names() -> list[str]:
    """Names of the level sets shipped with the package (``builtin:<name>``)."""
    folder = resources.files(__package__) / "levels"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".xsb"))


def load_level_source(spec: str) -> tuple[Puzzle, ...]:
    """Load the levels named by ``spec`` (see the module docstring).

    Built-in sets and inline texts are parsed once per process (memoised); a file path is
    read again on every call, so an edited file is seen by the next environment.

    Raises:
        XSBError: unknown built-in name, or the text is not valid XSB.
        OSError: the file cannot be read.
    """
    if spec.startswith(BUILTIN_PREFIX) or "\n" in spec:
        return _load_cached(spec)
    return tuple(load_xsb(os.path.expanduser(spec)))


@functools.lru_cache(maxsize=16)
def _load_cached(spec: str) -> tuple[Puzzle, ...]:
    if spec.startswith(BUILTIN_PREFIX):
        name = spec[len(BUILTIN_PREFIX) :]
        if name not in builtin_names():
            raise XSBError(
                f"no built-in level set {name!r}; available: {', '.join(builtin_names())}",
                source=spec,
            )
        ref = resources.files(__package__) / "levels" / f"{name}.xsb"
        return tuple(parse_xsb(ref.read_text(encoding="utf-8"), source=spec))
    return tuple(parse_xsb(spec, source="<inline levels>"))
