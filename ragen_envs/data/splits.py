"""Train / validation / test splits of a data set, disjoint by construction.

An item's split is a function of its *canonical key* alone: the text that identifies
it (for a math word problem, the original question), normalised so that copies that
differ only in Unicode form, letter case or whitespace get the same key.  Two ways to
assign splits (``split_mode`` in env configs):

``"hash"`` (default)
    ``ragen_envs.seeding.instance_split(key)``: a keyed BLAKE2b hash puts 80% of the
    key space in ``train``, 10% in ``validation``, 10% in ``test``.  Equal keys land in
    the same split, so a near-duplicate can never straddle two splits, and adding or
    removing other items never moves an item.
``"source"``
    the source's own split (``_source_split``, e.g. GSM8K's train/test files) is kept;
    a source without a validation split lends the ``train`` items whose hash split is
    ``validation``.  Then leaks are removed in the direction test > validation > train:
    a validation item whose key also occurs in test is dropped, and so is a train item
    whose key occurs in validation or test.  Items without a source split fall back to
    the hash.

Within a split, exact key duplicates are dropped (the first occurrence is kept), and the
remaining items are ordered by a second keyed hash of their key (not by file order, so
that a file sorted by difficulty or topic does not give seeds 0..k one kind of item).
Item ``i`` of a split is then ``items[i % len(items)]`` (see
:class:`ragen_envs.dataset_env.DatasetEnv`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..seeding import SPLITS, instance_split
from .loaders import SOURCE_SPLIT_KEY, normalise_split_name

__all__ = [
    "LeakageError",
    "SplitTable",
    "assert_disjoint",
    "canonical_key",
    "normalize_text",
    "order_key",
    "partition",
]

T = TypeVar("T")

_WS = re.compile(r"\s+")


class LeakageError(AssertionError):
    """An item (by canonical key) appears in two splits."""


def normalize_text(text: str) -> str:
    """Normalise text for duplicate detection: NFKC, case-folded, whitespace collapsed.

    ``"  What is 2+2?\\n"`` and ``"what is  2+2?"`` give the same string.  Punctuation
    and digits are kept (``2+2`` and ``2+3`` must stay different).
    """
    return _WS.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold()).strip()


def canonical_key(*parts: str) -> str:
    """The canonical key of an item from its identifying text fields (normalised, joined by U+001F)."""
    return "\x1f".join(normalize_text(p) for p in parts)


def order_key(key: str) -> bytes:
    """Sort key that fixes the order of items within a split (keyed BLAKE2b of the key)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"ragen-order-v0").digest()


@dataclass(frozen=True)
class SplitTable(Generic[T]):
    """Items per split, plus what :func:`partition` removed.

    Attributes:
        splits: ``{"train": (...), "validation": (...), "test": (...)}``, each ordered by
            :func:`order_key`.
        keys: the canonical key of each item, parallel to ``splits``.
        duplicates_dropped: items dropped because an equal key came earlier in the same split.
        leaks_dropped: items dropped (``split_mode="source"``) because their key occurs in
            a later split of the order test > validation > train.
        mode: ``"hash"`` or ``"source"``.
    """

    splits: Mapping[str, tuple[T, ...]]
    keys: Mapping[str, tuple[str, ...]]
    duplicates_dropped: int = 0
    leaks_dropped: int = 0
    mode: str = "hash"
    sizes: Mapping[str, int] = field(default_factory=dict)

    def __getitem__(self, split: str) -> tuple[T, ...]:
        return self.splits[split]


def partition(
    items: Iterable[T],
    key: Callable[[T], str],
    *,
    mode: str = "hash",
    source_split: Callable[[T], str | None] | None = None,
    group: Callable[[T], str] | None = None,
) -> SplitTable[T]:
    """Assign items to train / validation / test (see the module docstring).

    Args:
        items: the data set.
        key: the item's canonical key (use :func:`canonical_key`).
        mode: ``"hash"`` or ``"source"``.
        source_split: the source's split of an item (``None`` if it has none); default
            reads ``item[SOURCE_SPLIT_KEY]`` from mapping items.
        group: the key whose hash decides an item's split (default: ``key``).  Items
            that must share a split (every question about one country, every goal of
            one product) return the same group key; ``key`` still identifies duplicates.

    Returns:
        A :class:`SplitTable`; splits are pairwise disjoint by key (checked).

    Raises:
        ValueError: unknown ``mode``.
        LeakageError: never, unless this function has a bug (it re-checks its output).
    """
    if mode not in ("hash", "source"):
        raise ValueError(f"split mode must be 'hash' or 'source', got {mode!r}")
    if source_split is None:

        def source_split(item: T) -> str | None:  # noqa: F811 - documented default
            return item.get(SOURCE_SPLIT_KEY) if isinstance(item, Mapping) else None

    buckets: dict[str, list[tuple[str, T]]] = {s: [] for s in SPLITS}
    hash_split: dict[str, str] = {}
    for item in items:
        k = key(item)
        split = hash_split[k] = instance_split(group(item) if group is not None else k)
        if mode == "source":
            split = normalise_split_name(source_split(item)) or split
        buckets[split].append((k, item))
    if mode == "source":
        has_validation = any(
            normalise_split_name(source_split(it)) == "validation"
            for _, it in buckets["validation"]
        )
        if not has_validation:
            moved = [(k, it) for k, it in buckets["train"] if hash_split[k] == "validation"]
            buckets["train"] = [
                (k, it) for k, it in buckets["train"] if hash_split[k] != "validation"
            ]
            buckets["validation"].extend(moved)
    leaks = 0
    if mode == "source":
        later: set[str] = set()
        for split in ("test", "validation", "train"):
            kept = [(k, it) for k, it in buckets[split] if k not in later]
            leaks += len(buckets[split]) - len(kept)
            buckets[split] = kept
            later.update(k for k, _ in kept)
    dups = 0
    splits: dict[str, tuple[T, ...]] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for split in SPLITS:
        seen: set[str] = set()
        unique = []
        for k, it in buckets[split]:
            if k in seen:
                dups += 1
                continue
            seen.add(k)
            unique.append((k, it))
        unique.sort(key=lambda pair: (order_key(pair[0]), pair[0]))
        splits[split] = tuple(it for _, it in unique)
        keys[split] = tuple(k for k, _ in unique)
    table = SplitTable(
        splits=splits,
        keys=keys,
        duplicates_dropped=dups,
        leaks_dropped=leaks,
        mode=mode,
        sizes={s: len(v) for s, v in splits.items()},
    )
    assert_disjoint(keys)
    return table


def assert_disjoint(keys_by_split: Mapping[str, Sequence[str]]) -> None:
    """Raise :class:`LeakageError` if a canonical key occurs in two splits."""
    owner: dict[str, str] = {}
    for split, keys in keys_by_split.items():
        for k in keys:
            if k in owner and owner[k] != split:
                raise LeakageError(f"item {k[:80]!r} is in both {owner[k]} and {split}")
            owner[k] = split
