"""Run ids: one plain directory name each, safe to show and to pass on a command line."""

from __future__ import annotations

import os

from .controls import is_control

#: Bidirectional formatting characters (Unicode's Bidi_Control property): marks, embeddings,
#: overrides (U+202E) and isolates; they reorder how a name is shown.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def check_run_id(run_id: str) -> None:
    """Refuse a run id that is not one plain directory name.

    Raises:
        ValueError: empty, ``.``/``..``, containing a path separator, containing a
            control character (a newline in a run id splits log lines and tables) or a
            bidirectional control (U+202E shows ``exe.txt`` as ``txt.exe``), with leading
            or trailing white space (a lone space), or starting with ``-`` (read as an
            option by every command it is passed to).
    """
    bad = next((c for c in run_id if is_control(c)), None)  # C0, DEL, C1, U+2028, U+2029
    if bad is not None:
        raise ValueError(f"--run-id must not contain control characters, got {run_id!r}")
    bidi = next((c for c in run_id if c in _BIDI_CONTROLS), None)
    if bidi is not None:
        raise ValueError(
            f"--run-id must not contain bidirectional controls (U+{ord(bidi):04X}), got {run_id!r}"
        )
    if run_id != run_id.strip():
        raise ValueError(f"--run-id must not start or end with white space, got {run_id!r}")
    if run_id.startswith("-"):
        raise ValueError(
            f"--run-id must not start with '-' (it would read as an option), got {run_id!r}"
        )
    if (
        not run_id
        or run_id in (".", "..")
        or "/" in run_id
        or (os.sep in run_id)
        or (os.altsep is not None and os.altsep in run_id)
    ):
        raise ValueError(
            f"--run-id must be a plain directory name (no path separators), got {run_id!r}"
        )
