"""Small data splits shipped inside ``ragen_envs`` (package data), each with provenance.

Each data-backed environment keeps its bundled files in its own package, in
``ragen_envs/envs/<key>/bundled/`` (:data:`BUNDLED_GLOB`).  Every bundled data file
``<file>`` has a sidecar ``<name>.provenance.json`` beside it (validated against
``schemas/data/provenance.schema.json``) that names the data set, its file, where it
came from (``source``, ``source_url``), its licence (an SPDX id from
:data:`PERMISSIVE_LICENSES`), the copyright holder, the licence text file when the
licence requires shipping it, how the file was made (``created_by``), its record count
and its SHA-256.  The registry is the set of sidecars: :func:`list_bundled` reads them,
so adding a data set means adding a file and its sidecar to the env's ``bundled/``
folder (``scripts/build_bundled.py`` rebuilds ours).

Load one with ``load_source("bundled:<name>")`` or
:func:`ragen_envs.data.loaders.load_bundled`; this module only finds and describes them
(it imports no reader, so ``loaders`` imports it in one direction).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BUNDLED_GLOB",
    "PERMISSIVE_LICENSES",
    "BundledDataset",
    "bundled_dir",
    "bundled_dirs",
    "bundled_info",
    "list_bundled",
]

_ENVS_DIR = Path(__file__).resolve().parents[1] / "envs"

#: Where bundled files and their sidecars live, relative to ``ragen_envs/envs/``.
BUNDLED_GLOB = "*/bundled"

#: Licences a bundled file may carry (SPDX ids).
PERMISSIVE_LICENSES = frozenset(
    {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "CC0-1.0", "CC-BY-4.0"}
)


@dataclass(frozen=True)
class BundledDataset:
    """One bundled data set (the content of its provenance sidecar).

    Attributes:
        name: the name used in ``bundled:<name>``.
        file: the data file, relative to :attr:`folder`.
        format: the record format (e.g. ``"metamathqa"``, ``"gsm8k"``, ``"humaneval"``).
        description: one line.
        source / source_url: where the data comes from.
        license: SPDX licence id.
        copyright: the copyright holder line.
        license_file: a licence text shipped beside the data (relative), or ``None``.
        created_by: the command that produced the file.
        records: number of records.
        sha256: hex digest of the file.
        folder: the ``bundled/`` folder holding the file and its sidecar (not a sidecar
            field: where the sidecar was found).
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
    folder: Path

    @property
    def path(self) -> Path:
        """Absolute path of the data file."""
        return self.folder / self.file

    @property
    def sidecar(self) -> Path:
        """Absolute path of the provenance sidecar."""
        return self.folder / f"{self.name}.provenance.json"


def bundled_dir(env_key: str) -> Path:
    """The ``bundled/`` folder of env package ``env_key`` (``ragen_envs/envs/<key>/bundled``)."""
    return _ENVS_DIR / env_key / "bundled"


def bundled_dirs() -> list[Path]:
    """The ``bundled/`` folders of the env packages, in name order."""
    return sorted(p for p in _ENVS_DIR.glob(BUNDLED_GLOB) if p.is_dir())


@functools.cache
def list_bundled() -> dict[str, BundledDataset]:
    """Every bundled data set by name (read from the ``*.provenance.json`` sidecars).

    Raises:
        ValueError: two env packages bundle a data set of the same name.
    """
    out: dict[str, BundledDataset] = {}
    for folder in bundled_dirs():
        for sidecar in sorted(folder.glob("*.provenance.json")):
            with open(sidecar, encoding="utf-8") as fh:
                meta: dict[str, Any] = json.load(fh)
            fields = {k: meta.get(k) for k in BundledDataset.__dataclass_fields__ if k != "folder"}
            ds = BundledDataset(**fields, folder=folder)  # type: ignore[arg-type]
            if ds.name in out:
                raise ValueError(
                    f"bundled data set {ds.name!r} is in both {out[ds.name].folder} and {folder}"
                )
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
