"""Config and data files read with bounds: size, nesting depth, YAML aliases and expanded size.

A 460-byte "billion laughs" YAML (nine levels of anchors, each alias repeated
nine times) given to ``ragen-train show-config -c`` ran past 60 s and 731 MB, and deeply
nested JSON/YAML ended in an uncaught ``RecursionError``.  :func:`load_config_file` reads
a JSON or YAML config and refuses, with a one-line :class:`ConfigFileError`:

* a file over :data:`MAX_CONFIG_BYTES` (checked on its size before reading);
* nesting deeper than :data:`~ragen_envs.jsonutil.MAX_DEPTH` (JSON: a bracket scan before
  parsing; YAML: counted while the document is composed);
* more than :data:`MAX_YAML_ALIASES` alias uses (``*name``) in a YAML document;
* a YAML document whose tree, with every alias expanded, would hold more than
  :data:`MAX_YAML_NODES` nodes (computed on the composed graph, without expanding it).

YAML needs PyYAML (imported only for ``.yaml``/``.yml`` files); the pure-Python
``SafeLoader`` is used (its composer can be bounded; config files are small).

Data files (JSONL: data sets, demonstration episodes) are read line by line with
:func:`read_json_lines`, which *skips and names* a line it cannot read safely — nested
deeper than :data:`~ragen_envs.jsonutil.MAX_DEPTH` (a 100,000-deep line was an uncaught
``RecursionError`` that failed the whole source) or longer than its byte bound — as
``file:line: reason``, so that one hostile record costs that record, not the source.
The data loaders (:func:`ragen_envs.data.loaders.read_records`) and the SFT demonstration
reader (``ragen_train.sft.demos_from_jsonl``) both read through it.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from .jsonutil import MAX_DEPTH, JSONFileError, NestingTooDeep, check_depth, raw_lines

#: Largest config file read, bytes.
MAX_CONFIG_BYTES = 1 << 20
#: Most alias uses in one YAML document (ordinary configs use none or a few).
MAX_YAML_ALIASES = 64
#: Most nodes of a YAML document with every alias expanded.
MAX_YAML_NODES = 100_000


#: Longest data line :func:`read_json_lines` reads by default, bytes (LiveCodeBench's
#: largest records hold tens of MB of base64 test cases).
MAX_DATA_LINE_BYTES = 1 << 30


class ConfigFileError(ValueError):
    """A config file that cannot be read safely; ``str()`` is one line naming the file."""


def load_config_file(path: str | Path) -> Any:
    """The document of the JSON or YAML (``.yaml``/``.yml``) file ``path``, within the bounds.

    Returns:
        The parsed document (``None`` for an empty YAML file).

    Raises:
        ConfigFileError: unreadable, too large, not UTF-8, invalid JSON/YAML (the message
            names the line and column), nested too deeply, too many aliases, or expanding
            past the node bound; or PyYAML is missing for a YAML file.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigFileError(
                f"{p} is {size} bytes, over the {MAX_CONFIG_BYTES}-byte limit of a config file"
            )
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read {p}: {exc}") from None
    if p.suffix in (".yaml", ".yml"):
        return parse_yaml(text, str(p))
    return parse_json(text, str(p))


def parse_json(text: str, where: str) -> Any:
    """JSON ``text`` (``where`` names it in errors); see :func:`load_config_file`."""
    try:
        check_depth(text, MAX_DEPTH)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except (NestingTooDeep, RecursionError):
        raise ConfigFileError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None


def _bounded_loader(yaml: Any) -> type:
    class BoundedLoader(yaml.SafeLoader):
        """A ``SafeLoader`` whose composer counts depth and alias uses."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = self.aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise ConfigFileError(f"more than {MAX_YAML_ALIASES} YAML aliases")
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ConfigFileError(f"nested deeper than {MAX_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def _expanded_nodes(node: Any, memo: dict[int, int]) -> int:
    """Nodes of the tree under ``node`` with aliases expanded (shared nodes counted each time)."""
    key = id(node)
    if key not in memo:
        memo[key] = 1  # a cycle (a recursive alias) counts once instead of looping
        value = node.value
        if isinstance(value, list):
            children = [c for pair in value for c in (pair if isinstance(pair, tuple) else (pair,))]
            memo[key] = 1 + sum(_expanded_nodes(c, memo) for c in children)
    return memo[key]


def parse_yaml(text: str, where: str) -> Any:
    """YAML ``text`` (``where`` names it in errors); see :func:`load_config_file`."""
    try:
        import yaml
    except ImportError:
        raise ConfigFileError("reading YAML needs PyYAML (pip install pyyaml)") from None
    loader = _bounded_loader(yaml)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        nodes = _expanded_nodes(node, {})
        if nodes > MAX_YAML_NODES:
            raise ConfigFileError(
                f"expands to {nodes} nodes through its aliases, over {MAX_YAML_NODES}"
            )
        return loader.construct_document(node)
    except ConfigFileError as exc:
        raise ConfigFileError(f"{where}: refused YAML: {exc}") from None
    except RecursionError:
        raise ConfigFileError(f"{where}: refused YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigFileError(f"{where}: invalid YAML{at}: {problem}") from None
    finally:
        loader.dispose()


def _line_value(raw: bytes) -> Any:
    """One JSON line, depth-checked before parsing (``NaN``/``Infinity`` read as Python does)."""
    check_depth(raw, MAX_DEPTH)
    return json.loads(raw.decode("utf-8"))


def read_json_lines(
    path: str | os.PathLike[str],
    *,
    skipped: list[str],
    max_line_bytes: int = MAX_DATA_LINE_BYTES,
    invalid: Literal["raise", "skip"] = "raise",
) -> Iterator[tuple[int, Any]]:
    """``(line_number, value)`` for each non-blank line of a JSONL file (``.gz`` read as gzip).

    A line nested deeper than :data:`~ragen_envs.jsonutil.MAX_DEPTH` or longer than
    ``max_line_bytes`` (not read further than that) is skipped, and
    ``"<path>:<line>: <reason> (skipped)"`` is appended to ``skipped``; so is a line that
    is not UTF-8 JSON when ``invalid="skip"``.  Lines are numbered from 1.

    Raises:
        JSONFileError: the file cannot be opened, or (``invalid="raise"``) a line is not
            UTF-8 JSON (``path:line: invalid JSON (...)``).
    """
    p = Path(path)
    try:
        fh = gzip.open(p, "rb") if p.name.lower().endswith(".gz") else open(p, "rb")
    except OSError as exc:
        raise JSONFileError(p, f"cannot read ({exc.strerror or exc})") from None
    with fh:
        for n, raw in raw_lines(fh, max_line_bytes):
            if raw is None:
                skipped.append(f"{p}:{n}: longer than {max_line_bytes} bytes (skipped)")
                continue
            if not raw.strip():
                continue
            try:
                value = _line_value(raw)
            except (NestingTooDeep, RecursionError):
                skipped.append(f"{p}:{n}: nested deeper than {MAX_DEPTH} levels (skipped)")
                continue
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                if invalid == "skip":
                    skipped.append(f"{p}:{n}: invalid JSON ({exc}) (skipped)")
                    continue
                raise JSONFileError(p, f"invalid JSON ({exc})", n) from None
            yield n, value
