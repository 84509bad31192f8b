"""A base class for environments backed by a data set (MetaMathQA, DeepCoder, ...).

:class:`DatasetEnv` adds, on top of :class:`ragen_envs.core.TextEnv`:

* **Loading once.**  The split table (:func:`ragen_envs.data.splits.partition` over the
  records of the configured source) is built the first time a config's source is used
  and cached per process, keyed by the fields that determine it
  (:meth:`DatasetEnv._table_key`).
* **Seed semantics.**  ``reset(seed=i)`` selects item ``i mod N`` of the configured
  split (``N`` its size, items in the split's fixed hash order): item ``i`` needs no
  other item, and every member of a GRPO group reset with the same seed gets the same
  item.  ``reset()`` without a seed draws the index from ``self.np_random`` (so it
  continues a seeded stream reproducibly).  ``reset(options={"index": j})`` selects item
  ``j mod N`` directly (evaluation sweeps).
* the info entries ``item_id`` and ``item_index`` after every reset.

Subclasses implement :meth:`_load_items` (records -> items), :meth:`_item_key` (the
canonical key deciding the split), :meth:`_item_id`, and ``_start_item`` (episode state
for the selected item).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from .core import TextEnv
from .data.loaders import DataSourceError
from .data.splits import SplitTable, partition

__all__ = ["DatasetEnv"]


class DatasetEnv(TextEnv):
    """Base class of data-backed environments (see the module docstring).

    Config fields it reads: ``split`` and ``split_mode`` (``"hash"`` or ``"source"``).
    """

    _TABLES: ClassVar[dict[Hashable, SplitTable[Any]]] = {}

    #: Feedback on the last attempt, shown under the item's text by :meth:`_observation`
    #: (multi-attempt envs set it in ``step``); ``None``: nothing to add.
    _feedback: str | None = None

    def _item_text(self) -> str:
        """The current item's text as the agent first sees it (multi-attempt envs override it)."""
        raise NotImplementedError

    def _observation(self) -> str:
        """The item's text (:meth:`_item_text`), then the feedback on the last attempt if any."""
        text = self._item_text()
        return text if self._feedback is None else f"{text}\n\n{self._feedback}"

    # ---------------------------------------------------------------- hooks
    def _table_key(self) -> Hashable:
        """The config fields that determine the split table (default: class, source, format, mode)."""
        c = self.config
        return (
            type(self).__name__,
            _freeze(c.get("data_source")),
            c.get("data_format"),
            c.get("split_mode", "hash"),
        )

    def _load_items(self) -> Sequence[Any]:  # pragma: no cover - abstract
        """All items of the configured source (any split), as env-specific objects."""
        raise NotImplementedError

    def _item_key(self, item: Any) -> str:  # pragma: no cover - abstract
        """The canonical key of an item (use :func:`ragen_envs.data.splits.canonical_key`)."""
        raise NotImplementedError

    def _item_group(self, item: Any) -> str:
        """The key whose hash decides the item's split (default: :meth:`_item_key`).

        Override when several items must share a split (all questions about one entity).
        """
        return self._item_key(item)

    def _item_source_split(self, item: Any) -> str | None:
        """The source's split of an item (for ``split_mode="source"``); default: its
        ``source_split`` attribute, none if it has no such attribute."""
        return getattr(item, "source_split", None)

    def _item_id(self, item: Any) -> str:
        """The item's id (default: its ``id`` attribute)."""
        return item.id

    def _start_item(
        self, item: Any, options: Mapping[str, Any]
    ) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # --------------------------------------------------------------- tables
    def split_table(self) -> SplitTable[Any]:
        """The (cached) split table of this env's config."""
        key = self._table_key()
        table = self._TABLES.get(key)
        if table is None:
            items = self._load_items()
            table = partition(
                items,
                self._item_key,
                mode=self.config.get("split_mode", "hash"),
                source_split=self._item_source_split,
                group=self._item_group,
            )
            self._TABLES[key] = table
        return table

    def split_items(self) -> tuple[Any, ...]:
        """The items of the configured split, in their fixed order.

        Raises:
            DataSourceError: the split is empty.
        """
        split = self.config["split"]
        items = self.split_table()[split]
        if not items:
            raise DataSourceError(
                f"split {split!r} of data source {self.config.get('data_source')!r} is empty "
                f"(sizes: {dict(self.split_table().sizes)})"
            )
        return items

    # ------------------------------------------------------------- Gymnasium
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on item ``seed mod N`` of the split (see the module docstring)."""
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _reset(self, options: Mapping[str, Any]) -> None:
        items = self.split_items()
        n = len(items)
        seed = getattr(self, "_reset_seed", None)
        if "index" in options:
            index = int(options["index"]) % n
        elif seed is not None:
            index = int(seed) % n
        else:
            index = int(self.np_random.integers(n))
        self._item = items[index]
        self._item_index = index
        self._start_item(self._item, options)

    def _reset_info(self) -> dict[str, Any]:
        return {"item_id": self._item_id(self._item), "item_index": self._item_index}

    @property
    def item(self) -> Any:
        """The current item."""
        return self._item


def _freeze(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value
