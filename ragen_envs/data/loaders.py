"""Reading data sets: local JSONL / JSON / parquet files and the Hugging Face hub.

Every loader returns a list of plain ``dict`` records (one per item).  Heavy libraries
(``pyarrow``, ``datasets``) are imported only inside the functions that need them, and
their absence is a :class:`MissingExtraError` naming the ``pip`` extra to install.

A *source spec* (the ``data_source`` field of data-backed env configs) names where the
records come from; :func:`load_source` understands:

``bundled:<name>``
    a split shipped with ``ragen_envs`` (:mod:`ragen_envs.data.bundled`).
``hub:<owner>/<name>[:<config>]``
    a data set on the Hugging Face hub, every split, through ``datasets.load_dataset``
    (cached by ``datasets`` in its own cache, ``HF_DATASETS_CACHE``).
``<path>`` or ``file:<path>``
    a local file (``.jsonl``, ``.jsonl.gz``, ``.ndjson``, ``.json``, ``.json.gz``,
    ``.parquet``) or a directory of such files.  A file whose name starts with
    ``train`` / ``validation`` / ``val`` / ``dev`` / ``test`` — in a directory or passed
    alone — gives its records that *source split* (the Hugging Face layout
    ``test-00000-of-00001.parquet`` works as is); other files give records without one.

Records from a source with splits carry the source split name under the key
:data:`SOURCE_SPLIT_KEY` (``"_source_split"``), which
:func:`ragen_envs.data.splits.partition` can honour (``split_mode="source"``).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any

from ..jsonutil import MAX_DEPTH, JSONFileError, NestingTooDeep, check_depth
from ..safeload import read_json_lines
from .bundled import bundled_info

__all__ = [
    "SOURCE_SPLIT_KEY",
    "DataSourceError",
    "ENVS_EXTRAS",
    "MissingExtraError",
    "load_bundled",
    "load_hub",
    "load_source",
    "read_records",
    "skipped_lines",
]

#: Key under which a record carries the split its source assigned it (if any).
SOURCE_SPLIT_KEY = "_source_split"

_SPLIT_ALIASES = {
    "train": "train",
    "training": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
    "testing": "test",
}
_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".json", ".json.gz", ".parquet")


class DataSourceError(RuntimeError):
    """A data source could not be read (missing file, bad format, unreachable hub)."""


#: Extras that the env-only distribution ``ragen-envs`` defines
#: (``packaging/ragen-envs/pyproject.toml``); the full ``ragen`` defines these and more.
ENVS_EXTRAS = frozenset({"pettingzoo", "search", "webshop", "math", "lean"})


class MissingExtraError(ImportError):
    """An optional dependency is not installed.

    Attributes:
        package: the import name that failed (``"pyarrow"``).
        extra: the extra that installs it (``"datasets"``).  The message names
            ``'ragen-envs[<extra>]'`` (the env-only distribution) and ``'ragen[<extra>]'``
            (the full project) when both define it (:data:`ENVS_EXTRAS`), else only
            ``'ragen[<extra>]'``; and the bare package.
    """

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        if extra in ENVS_EXTRAS:
            how = (
                f"pip install 'ragen-envs[{extra}]' (or 'ragen[{extra}]' for the full project, "
                f"or just pip install {package})"
            )
        else:
            how = f"pip install 'ragen[{extra}]' (or just pip install {package})"
        super().__init__(f"{purpose} needs the optional package {package!r}; install it with {how}")


def normalise_split_name(name: str | None) -> str | None:
    """Map a source's split name to ``train`` / ``validation`` / ``test`` (None if unknown)."""
    if name is None:
        return None
    return _SPLIT_ALIASES.get(str(name).strip().lower())


def _split_from_filename(name: str) -> str | None:
    stem = name.lower()
    for sep in ("-", "_", "."):
        head = stem.split(sep, 1)[0]
        if head in _SPLIT_ALIASES:
            return _SPLIT_ALIASES[head]
    return None


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    return path.suffix.lower()


def read_records(
    path: str | os.PathLike[str], *, format: str | None = None
) -> list[dict[str, Any]]:
    """Read every record of one local file.

    Args:
        path: the file.
        format: ``"jsonl"``, ``"json"`` or ``"parquet"``; inferred from the suffix when
            ``None`` (``.jsonl``, ``.ndjson``, ``.jsonl.gz`` → jsonl; ``.json``,
            ``.json.gz`` → json; ``.parquet`` → parquet).

    JSON files hold a list of objects, or an object with a list under ``"data"`` or
    ``"rows"``.  JSONL files hold one object per non-blank line; a line nested deeper
    than :data:`~ragen_envs.jsonutil.MAX_DEPTH` (or over
    :data:`~ragen_envs.safeload.MAX_DATA_LINE_BYTES`) is skipped and named
    (``file:line``) in a warning and in :func:`skipped_lines`
    (:func:`ragen_envs.safeload.read_json_lines`).

    Returns:
        The records, in file order.

    Raises:
        DataSourceError: the file is missing, of an unknown format, or malformed
            (the message names the file and line; a whole JSON file nested too deeply).
        MissingExtraError: a parquet file and ``pyarrow`` is not installed.
    """
    p = Path(path)
    if not p.is_file():
        raise DataSourceError(f"no such data file: {p}")
    suffix = _suffix(p)
    fmt = format or {
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".jsonl.gz": "jsonl",
        ".json": "json",
        ".json.gz": "json",
        ".parquet": "parquet",
    }.get(suffix)
    if fmt == "parquet":
        return _read_parquet(p)
    opener = gzip.open if p.name.lower().endswith(".gz") else open
    if fmt == "jsonl":
        records = []
        skipped: list[str] = []
        try:
            for lineno, rec in read_json_lines(p, skipped=skipped):
                if not isinstance(rec, dict):
                    raise DataSourceError(
                        f"{p}:{lineno}: expected a JSON object, got {type(rec).__name__}"
                    )
                records.append(rec)
        except JSONFileError as exc:
            raise DataSourceError(str(exc)) from None
        _report_skipped(p, skipped)
        return records
    if fmt == "json":
        try:
            with opener(p, "rt", encoding="utf-8") as fh:
                text = fh.read()
            check_depth(text, MAX_DEPTH)
            data = json.loads(text)
        except (NestingTooDeep, RecursionError):
            raise DataSourceError(f"{p}: nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:
            raise DataSourceError(f"{p}: invalid JSON ({exc})") from None
        if isinstance(data, dict):
            for key in ("data", "rows"):
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DataSourceError(f"{p}: expected a list of JSON objects (or {{'data': [...]}})")
        return list(data)
    raise DataSourceError(f"{p}: unknown data format {suffix!r} (known: {', '.join(_SUFFIXES)})")


#: ``file:line: reason`` of every JSONL line skipped so far, per file (see :func:`skipped_lines`).
_SKIPPED: dict[str, tuple[str, ...]] = {}


def _report_skipped(path: Path, skipped: list[str]) -> None:
    _SKIPPED[str(path)] = tuple(skipped)
    if skipped:
        shown = "; ".join(skipped[:5]) + (
            f"; ... {len(skipped) - 5} more" if len(skipped) > 5 else ""
        )
        warnings.warn(f"skipped {len(skipped)} unreadable line(s): {shown}", stacklevel=3)


def skipped_lines(spec: str) -> tuple[str, ...]:
    """``file:line: reason`` of the lines the last read of source ``spec`` skipped (a file,
    or every file of a directory; ``()`` for bundled and hub sources)."""
    spec = spec.strip()
    path = spec[len("file:") :] if spec.startswith("file:") else spec
    if spec.startswith(("bundled:", "hub:")):
        return ()
    root = Path(path).expanduser()
    return tuple(
        line
        for name, lines in _SKIPPED.items()
        if name == str(root) or Path(name).is_relative_to(root)
        for line in lines
    )


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("pyarrow", "datasets", f"reading the parquet file {path}") from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types
        raise DataSourceError(
            f"{path}: cannot read parquet ({type(exc).__name__}: {exc})"
        ) from None


def load_hub(
    name: str,
    *,
    config: str | None = None,
    split: str | None = None,
    cache_dir: str | None = None,
    revision: str | None = None,
) -> list[dict[str, Any]]:
    """Load a data set from the Hugging Face hub with ``datasets.load_dataset``.

    Args:
        name: ``"owner/name"``, e.g. ``"meta-math/MetaMathQA"``.
        config: the data set's config name (``"main"`` for ``openai/gsm8k``).
        split: one split, or ``None`` for every split (each record then carries
            :data:`SOURCE_SPLIT_KEY`).
        cache_dir: passed to ``datasets`` (default: its own cache).
        revision: a git revision of the data set, for reproducibility.

    Returns:
        The records.

    Raises:
        MissingExtraError: ``datasets`` is not installed (extra ``datasets``).
        DataSourceError: the hub is unreachable or the data set does not exist; the
            message says how to use a local copy instead.
    """
    try:
        import datasets
    except ImportError:
        raise MissingExtraError(
            "datasets", "datasets", f"loading {name!r} from the Hugging Face hub"
        ) from None
    try:
        loaded = datasets.load_dataset(
            name, config, split=split, cache_dir=cache_dir, revision=revision
        )
    except Exception as exc:  # noqa: BLE001 - network, auth and format errors alike
        raise DataSourceError(
            f"could not load {name!r} (config {config!r}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}. If the hub is unreachable, download the files "
            "(JSONL / JSON / parquet) and set data_source to their local path."
        ) from None
    if split is not None:
        return [dict(r) for r in loaded]
    records: list[dict[str, Any]] = []
    for split_name, part in loaded.items():
        for r in part:
            rec = dict(r)
            rec[SOURCE_SPLIT_KEY] = normalise_split_name(split_name) or str(split_name)
            records.append(rec)
    return records


def _load_path(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _suffix(p) in _SUFFIXES)
        if not files:
            raise DataSourceError(f"no data files ({', '.join(_SUFFIXES)}) in directory {path}")
        records: list[dict[str, Any]] = []
        for f in files:
            split = _split_from_filename(f.name)
            for rec in read_records(f):
                if split is not None:
                    rec = {**rec, SOURCE_SPLIT_KEY: split}
                records.append(rec)
        return records
    split = _split_from_filename(path.name)  # a single file, too: test.jsonl is test
    records = read_records(path)
    return records if split is None else [{**rec, SOURCE_SPLIT_KEY: split} for rec in records]


def load_bundled(name: str) -> list[dict[str, Any]]:
    """The records of bundled data set ``name`` (:mod:`ragen_envs.data.bundled`), in file order.

    Raises:
        KeyError: unknown name.
    """
    return read_records(bundled_info(name).path)


@functools.lru_cache(maxsize=16)
def _load_source_cached(spec: str) -> tuple[dict[str, Any], ...]:
    if spec.startswith("bundled:"):
        return tuple(load_bundled(spec[len("bundled:") :]))
    if spec.startswith("hub:"):
        rest = spec[len("hub:") :]
        name, _, config = rest.partition(":")
        return tuple(load_hub(name, config=config or None))
    path = spec[len("file:") :] if spec.startswith("file:") else spec
    return tuple(_load_path(Path(path).expanduser()))


def load_source(spec: str) -> tuple[dict[str, Any], ...]:
    """Load the records named by a source spec (see the module docstring).

    Results are cached per spec within the process (at most 16 sources); treat the
    returned records as read-only.

    Raises:
        DataSourceError, MissingExtraError: see :func:`read_records` / :func:`load_hub`.
        KeyError: an unknown bundled name.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DataSourceError(f"data_source must be a non-empty string, got {spec!r}")
    return _load_source_cached(spec.strip())
