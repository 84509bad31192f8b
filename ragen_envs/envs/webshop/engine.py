"""The shop behind the WebShop environment: a catalogue, its goals and a BM25 search engine.

:func:`get_shop` builds (once per process and configuration) a :class:`Shop` from either
the generated catalogue (:mod:`.catalog`) or the original WebShop files (:mod:`.original`).
Search is ``bm25s`` BM25 (:class:`ragen_envs.bm25.BM25Index`, extra ``webshop``) over each
product's title, category path, product query, attributes, option values, bullet points
and description; a query returns at most ``SEARCH_RETURN_N`` products with a positive
score, best first (ties by catalogue order), as WebShop's engine returns its top 50
(``web_agent_site/engine/engine.py``: ``SEARCH_RETURN_N = 50``, ``PRODUCT_WINDOW = 10``).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from .products import Goal, Product, words

__all__ = ["SEARCH_RETURN_N", "Shop", "get_shop"]

#: Products a search returns (WebShop: 50).
SEARCH_RETURN_N = 50


def _search_text(p: Product) -> str:
    opts = " ".join(v for vals in p.options.values() for v in vals)
    return "\n".join(
        [
            p.title,
            p.product_category,
            p.query,
            " ".join(p.attributes),
            opts,
            " ".join(p.bullet_points),
            p.description,
        ]
    )


@dataclass
class Shop:
    """A catalogue, its goals and its search index.

    Attributes:
        products: the catalogue, ``(n_products,)``.
        goals: every goal (all splits).
        by_asin: ASIN (upper case) -> index into ``products``.
        vocabulary: sorted distinct words of product queries and attributes (the random
            baseline's search terms).
        build_seconds: time to build the catalogue and the index.
    """

    products: tuple[Product, ...]
    goals: tuple[Goal, ...]
    by_asin: dict[str, int] = field(default_factory=dict)
    vocabulary: tuple[str, ...] = ()
    build_seconds: float = 0.0

    def __post_init__(self) -> None:
        from ...bm25 import BM25Index

        start = time.perf_counter()
        self.by_asin = {p.asin.upper(): i for i, p in enumerate(self.products)}
        self._index = BM25Index(
            [_search_text(p) for p in self.products],
            extra="webshop",
            purpose="the WebShop search engine",
        )
        vocab = {w for p in self.products for w in words(" ".join([p.query, *p.attributes]))}
        self.vocabulary = tuple(sorted(vocab))
        self.build_seconds += time.perf_counter() - start

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices of the top ``k`` products for ``query`` (positive BM25 score, best first)."""
        return [i for i, _ in self._index.search(query, k)]


@functools.lru_cache(maxsize=4)
def get_shop(
    source: str,
    catalog_seed: int,
    catalog_size: int,
    goals_per_product: int,
    goal_source: str,
    catalog_variant: str = "plain",
) -> Shop:
    """The shop of a configuration, built once per process.

    Args:
        source: ``"generated"`` or a directory with the original WebShop files.
        catalog_seed, catalog_size, goals_per_product, catalog_variant: the generated
            catalogue's parameters (:mod:`.catalog`).
        goal_source: ``"human"`` or ``"synthetic"`` (original files only).

    Raises:
        MissingExtraError: ``bm25s`` is not installed (extra ``webshop``).
        DataSourceError: the original files are missing or malformed.
    """
    start = time.perf_counter()
    if source == "generated":
        from .catalog import generate_catalog, generate_goals

        products = generate_catalog(catalog_seed, catalog_size, catalog_variant)
        goals = generate_goals(catalog_seed, catalog_size, goals_per_product, catalog_variant)
    else:
        from .original import load_webshop_dir

        products, goals = load_webshop_dir(source, goal_source=goal_source)
    shop = Shop(products, goals)
    shop.build_seconds = time.perf_counter() - start
    return shop
