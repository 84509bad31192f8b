"""A procedurally generated product catalogue and shopping goals (spec: ``docs/envs/webshop.md``).

**Products.**  Product ``j`` of the catalogue with seed ``s`` is drawn from row ``j`` of
``numpy.random.default_rng([s, 0]).random((size, 64))`` (PCG64 over a ``SeedSequence``;
the 64 uniforms of a row are consumed in a fixed order, subsets by the random-keys
method), so the catalogue is identical in every process and platform, and a catalogue
of size ``n`` is a prefix of every larger one.  A product draws, uniformly: a product type
(:data:`~ragen_envs.envs.webshop.vocab.PRODUCT_TYPES`), a brand, 3-5 attributes from the
type's pool, for each option group 2 or more of its values (in vocabulary order), a
price uniform in the type's range (whole dollars + 0.99), a title suffix, and one or two
of its attributes for the title ``Brand + attributes + type + suffix`` (title-cased).  Its ASIN is
``B0`` + 8 base-36 characters of a keyed BLAKE2b hash of ``"s:j"``.

**Goals** (``goals_per_product``, default 1).  Goal ``k`` of product ``j`` draws from row
``j * goals_per_product + k`` of ``default_rng([s, 1]).random((size * goals_per_product, 32))``: 1-3 of the product's attributes, one value of each of its
option groups, and a price bound by WebShop's rule (``web_agent_site/engine/goal.py``):
of the prices ``10, 20, ..., 990`` above the product's price take the first four, draw two
of them and keep the larger (no bound, ``1e6``, when fewer than two exist).  The text
follows WebShop's synthetic instructions: ``<opening> <attributes> <type> with <name>:
<value>, and <name>: <value>, and price lower than <bound> dollars``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np

from .products import Goal, Product, words
from .vocab import BRANDS, PRODUCT_TYPES, RESERVED_CLICKS

__all__ = ["generate_catalog", "generate_goals", "price_upper_bound"]

_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_OPENINGS = ("i need", "i'm looking for", "find me", "i want to buy", "please find")
#: WebShop's price grid: 10, 20, ..., 990 dollars.
PRICE_GRID = tuple(10.0 * i for i in range(1, 100))
#: Uniform draws per product / per goal (rows of one generator's stream).
_PRODUCT_DRAWS = 64
_GOAL_DRAWS = 32
#: The price bound of a goal whose product is too expensive for the grid (WebShop: 1000000).
NO_PRICE_BOUND = 1_000_000.0


def _asin(seed: int, j: int) -> str:
    h = int.from_bytes(
        hashlib.blake2b(
            f"{int(seed)}:{int(j)}".encode(), digest_size=8, person=b"ragen-webshop-as"
        ).digest(),
        "little",
    )
    chars = []
    for _ in range(8):
        h, r = divmod(h, 36)
        chars.append(_B36[r])
    return "B0" + "".join(chars)


def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


def _join_and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class _Draws:
    """Uniform draws from one generator, consumed in order (one numpy call per item, not per choice)."""

    def __init__(self, row: list[float]):
        self._u = row
        self._i = 0

    def uniform(self) -> float:
        u = self._u[self._i]
        self._i += 1
        return u

    def index(self, n: int) -> int:
        """Uniform in ``range(n)``."""
        return min(int(self.uniform() * n), n - 1)

    def subset(self, n: int, k: int) -> list[int]:
        """A uniformly random ``k``-subset of ``range(n)``, sorted (random-keys method)."""
        keys = [self.uniform() for _ in range(n)]
        return sorted(sorted(range(n), key=keys.__getitem__)[:k])


def _make_product(seed: int, j: int, row: list[float]) -> Product:
    d = _Draws(row)
    pt = PRODUCT_TYPES[d.index(len(PRODUCT_TYPES))]
    brand = BRANDS[d.index(len(BRANDS))]
    n_att = 3 + d.index(min(5, len(pt.attributes)) - 2)
    attributes = tuple(pt.attributes[i] for i in d.subset(len(pt.attributes), n_att))
    options: dict[str, tuple[str, ...]] = {}
    for name, values in pt.options:
        k = 2 + d.index(len(values) - 1)
        options[name] = tuple(values[i] for i in d.subset(len(values), k))
    lo, hi = pt.price
    price = float(int(lo + (hi - lo) * d.uniform())) + 0.99
    suffix = pt.suffixes[d.index(len(pt.suffixes))]
    title_atts = [attributes[i] for i in d.subset(n_att, 1 + d.index(2))]
    title = _title_case(" ".join([brand, *title_atts, pt.name, suffix]).strip())
    nouns = (*words(brand), *pt.nouns, *(w for w in words(suffix) if w in ("men", "women")))
    bullets = tuple(a[:1].upper() + a[1:] for a in attributes) + tuple(
        f"Available {name}s: {', '.join(vals)}" for name, vals in options.items()
    )
    description = (
        f"The {brand} {pt.name}: {_join_and(list(attributes))}. "
        f"Part of our {pt.path[-1]} range; ships in a plain box."
    )
    return Product(
        asin=_asin(seed, j),
        title=title,
        category=pt.category,
        query=pt.name,
        product_category=" › ".join(pt.path),
        name_nouns=tuple(nouns),
        attributes=attributes,
        options=options,
        price=price,
        bullet_points=bullets,
        description=description,
    )


@functools.lru_cache(maxsize=8)
def generate_catalog(seed: int, size: int) -> tuple[Product, ...]:
    """The catalogue of ``size`` products for ``seed`` (module docstring), cached per process.

    Raises:
        ValueError: ``size < 1``, or (never expected) two products with one ASIN or an
            option value equal to a reserved click target.
    """
    if size < 1:
        raise ValueError(f"catalog_size must be >= 1, got {size}")
    rows = np.random.default_rng([int(seed), 0]).random((size, _PRODUCT_DRAWS)).tolist()
    products = tuple(_make_product(seed, j, row) for j, row in enumerate(rows))
    asins = {p.asin for p in products}
    if len(asins) != len(products):
        raise ValueError(f"ASIN collision in the catalogue of seed {seed}")
    for p in products:
        vals = [v for vs in p.options.values() for v in vs]
        if len(set(vals)) != len(vals) or set(vals) & set(RESERVED_CLICKS):
            raise ValueError(f"product {p.asin}: option values must be distinct and not reserved")
    return products


def price_upper_bound(price: float, u1: float, u2: float) -> float:
    """WebShop's goal price bound for a product costing ``price`` (module docstring).

    ``u1``, ``u2`` are uniform draws in ``[0, 1)`` choosing the two grid prices (without
    replacement) among the first four above ``price``; the larger is the bound.
    """
    above = [p for p in PRICE_GRID if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_BOUND
    first = min(int(u1 * len(above)), len(above) - 1)
    rest = above[:first] + above[first + 1 :]
    second = rest[min(int(u2 * len(rest)), len(rest) - 1)]
    return max(above[first], second)


def _make_goal(k: int, product: Product, row: list[float]) -> Goal:
    d = _Draws(row)
    n_att = 1 + d.index(min(3, len(product.attributes)))
    attributes = tuple(product.attributes[i] for i in d.subset(len(product.attributes), n_att))
    options = tuple((name, vals[d.index(len(vals))]) for name, vals in product.options.items())
    bound = price_upper_bound(product.price, d.uniform(), d.uniform())
    opening = _OPENINGS[d.index(len(_OPENINGS))]
    text = f"{opening} {_join_and(list(attributes))} {product.query}"
    if options:
        text += " with " + ", and ".join(f"{name}: {value}" for name, value in options)
    if bound < NO_PRICE_BOUND:
        text += f", and price lower than {bound:.2f} dollars"
    return Goal(
        id=f"{product.asin}-g{k}",
        asin=product.asin,
        instruction=text,
        attributes=attributes,
        options=options,
        price_upper=bound,
        query=product.query,
        product_category=product.product_category,
        name_nouns=product.name_nouns,
    )


@functools.lru_cache(maxsize=8)
def generate_goals(seed: int, size: int, goals_per_product: int = 1) -> tuple[Goal, ...]:
    """``goals_per_product`` goals for every product of ``generate_catalog(seed, size)``."""
    products = generate_catalog(seed, size)
    rows = (
        np.random.default_rng([int(seed), 1])
        .random((size * goals_per_product, _GOAL_DRAWS))
        .tolist()
    )
    return tuple(
        _make_goal(k, p, rows[j * goals_per_product + k])
        for j, p in enumerate(products)
        for k in range(goals_per_product)
    )
