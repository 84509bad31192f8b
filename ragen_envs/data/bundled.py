"""Small data splits shipped inside ``ragen_envs`` (package data), each with provenance.

Every bundled data file ``ragen_envs/data/bundled/<file>`` has a sidecar
``<name>.provenance.json`` (validated against ``schemas/data/provenance.schema.json``)
that names the data set, its file, where it came from (``source``, ``source_url``), its
licence (an SPDX id from :data:`PERMISSIVE_LICENSES`), the copyright holder, the
licence text file when the licence requires shipping it, how the file was made
(``created_by``), its record count and its SHA-256.  The registry is the set of
sidecars: :func:`list_bundled` reads them, so adding a data set means adding a file and
its sidecar (``python -m ragen_envs.data.build_bundled`` rebuilds ours).

Load one with ``load_source("bundled:<name>")`` or :func:`load_bundled`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .loaders import read_records

__all__ = ["BUNDLED_DIR", "PERMISSIVE_LICENSES", "BundledDataset", "bundled_info", "list_bundled", "load_bundled"]

#: The folder with the bundled files and their sidecars.
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"

#: Licences a bundled file may carry (SPDX ids).
PERMISSIVE_LICENSES = frozenset({"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "CC0-1.0", "CC-BY-4.0"})


@dataclass(frozen=True)
class BundledDataset:
    """One bundled data set (the content of its provenance sidecar).

    Attributes:
        name: the name used in ``bundled:<name>``.
        file: the data file, relative to :data:`BUNDLED_DIR`.
        format: the record format (e.g. ``"metamathqa"``, ``"gsm8k"``, ``"humaneval"``).
        description: one line.
        source / source_url: where the data comes from.
        license: SPDX licence id.
        copyright: the copyright holder line.
        license_file: a licence text shipped beside the data (relative), or ``None``.
        created_by: the command that produced the file.
        records: number of records.
        sha256: hex digest of the file.
    """

    name: str
    file: str
    format: str
    description: str
    source: str
    source_url: str
    license: str
    copyright: str
    license_file: str | None
    created_by: str
    records: int
    sha256: str

    @property
    def path(self) -> Path:
        """Absolute path of the data file."""
        return BUNDLED_DIR / self.file


@functools.cache
def list_bundled() -> dict[str, BundledDataset]:
    """Every bundled data set by name (read from the ``*.provenance.json`` sidecars)."""
    out: dict[str, BundledDataset] = {}
    for sidecar in sorted(BUNDLED_DIR.glob("*.provenance.json")):
        with open(sidecar, encoding="utf-8") as fh:
            meta: dict[str, Any] = json.load(fh)
        fields = {k: meta.get(k) for k in BundledDataset.__dataclass_fields__}
        ds = BundledDataset(**fields)  # type: ignore[arg-type]
        out[ds.name] = ds
    return out


def bundled_info(name: str) -> BundledDataset:
    """The provenance of bundled data set ``name``.

    Raises:
        KeyError: no such bundled data set (the message lists the known names).
    """
    known = list_bundled()
    if name not in known:
        raise KeyError(f"no bundled data set {name!r}; bundled: {', '.join(sorted(known))}")
    return known[name]


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def load_bundled(name: str) -> list[dict[str, Any]]:
    """The records of bundled data set ``name`` (in file order).

    Raises:
        KeyError: unknown name.
    """
    return read_records(bundled_info(name).path)
