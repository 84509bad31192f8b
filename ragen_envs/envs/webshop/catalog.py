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

**Variants** (``catalog_variant``).  ``plain`` (the default) is the catalogue above: a
pasted instruction's first search hit is always a product of the goal's type with all of
its attributes, so WebShop's rule baseline (search the instruction, click the first
result, buy without options) earned 0.63, against the paper's 45.6 score (mean reward
0.456) and 9.6 % success on the real catalogue (Yao et al. 2022, Table 2, "Rule").
``calibrated`` adds two things real shop data has:

* **accessories** (share :data:`ACCESSORY_SHARE`, drawn from row ``j`` of
  ``default_rng([s, 2]).random((size, 16))``, so the plain draws are untouched and the
  prefix property holds): product ``j`` becomes an accessory of its type (``... Storage
  Ottoman Cover``, a noun of :data:`ACCESSORY_NOUNS` that is none of the type's words),
  with the same words, attributes and options, so it ranks with the real thing for a
  pasted instruction; but its query is ``<type> <noun>``, its category path
  ``accessories › <type> accessories › <noun>s``, its price a fifth to a half of the
  original, and its name nouns its brand's and the accessory noun's, not the type's, so
  buying it for the type scores ``r_type = 0`` (no title noun in common) unless it is of
  the target's brand;
* **goals without options** (share :data:`NO_OPTION_GOAL_SHARE`, goal ``i`` by draw ``i``
  of ``default_rng([s, 3]).random(size * goals_per_product)``): the instruction asks for
  no option value, as many of WebShop's human instructions do.

Together they bring the rule baseline to the paper's numbers (measured in
``scripts/measure_reward_exploits.py webshop``; pinned in ``tests/envs/test_webshop.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Sequence

import numpy as np

from .products import Goal, Product, words
from .vocab import BRANDS, PRODUCT_TYPES, RESERVED_CLICKS

__all__ = [
    "ACCESSORY_NOUNS",
    "ACCESSORY_SHARE",
    "CATALOG_VARIANTS",
    "NO_OPTION_GOAL_SHARE",
    "generate_catalog",
    "generate_goals",
    "price_upper_bound",
]

_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_OPENINGS = ("i need", "i'm looking for", "find me", "i want to buy", "please find")
#: WebShop's price grid: 10, 20, ..., 990 dollars.
PRICE_GRID = tuple(10.0 * i for i in range(1, 100))
#: Uniform draws per product / per goal (rows of one generator's stream).
_PRODUCT_DRAWS = 64
_GOAL_DRAWS = 32
#: The price bound of a goal whose product is too expensive for the grid (WebShop: 1000000).
NO_PRICE_BOUND = 1_000_000.0
#: ``catalog_variant`` values (module docstring).
CATALOG_VARIANTS = ("plain", "calibrated")
#: Calibrated variant: share of goals that ask for no option.
NO_OPTION_GOAL_SHARE = 0.16
#: Calibrated variant: share of products that are an accessory of their type.
ACCESSORY_SHARE = 0.2
#: What an accessory is (``"storage ottoman cover"``).
ACCESSORY_NOUNS = ("cover", "case", "organizer", "stand", "replacement kit", "carry bag")
#: Uniform draws per product of the calibrated variant.
_CALIBRATION_DRAWS = 16


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


def _accessory(p: Product, row: list[float]) -> Product:
    """``p`` of the calibrated variant: with probability :data:`ACCESSORY_SHARE` it becomes an
    accessory of its type (module docstring), else it is unchanged."""
    d = _Draws(row)
    if d.uniform() >= ACCESSORY_SHARE:
        return p
    words_of_type = p.query
    type_words = set(words(words_of_type))
    nouns = [n for n in ACCESSORY_NOUNS if not set(words(n)) & type_words]
    noun = nouns[d.index(len(nouns))]
    return dataclasses.replace(
        p,
        title=f"{p.title} {_title_case(noun)}",
        category="accessories",
        query=f"{words_of_type} {noun}",
        product_category=f"accessories › {words_of_type} accessories › {noun}s",
        name_nouns=(*(w for w in p.name_nouns if w not in type_words), *words(noun)),
        price=float(int(p.price * (0.2 + 0.3 * d.uniform()))) + 0.99,
        description=f"A {noun} for the {words_of_type}: {p.description}",
    )


@functools.lru_cache(maxsize=8)
def generate_catalog(seed: int, size: int, variant: str = "plain") -> tuple[Product, ...]:
    """The catalogue of ``size`` products for ``seed`` and ``variant`` (module docstring),
    cached per process.

    Raises:
        ValueError: ``size < 1``, an unknown variant, or (never expected) two products
            with one ASIN or an option value equal to a reserved click target.
    """
    if variant not in CATALOG_VARIANTS:
        raise ValueError(f"catalog_variant must be one of {CATALOG_VARIANTS}, got {variant!r}")
    if size < 1:
        raise ValueError(f"catalog_size must be >= 1, got {size}")
    rows = np.random.default_rng([int(seed), 0]).random((size, _PRODUCT_DRAWS)).tolist()
    products = tuple(_make_product(seed, j, row) for j, row in enumerate(rows))
    if variant == "calibrated":
        cal = np.random.default_rng([int(seed), 2]).random((size, _CALIBRATION_DRAWS)).tolist()
        products = tuple(_accessory(p, r) for p, r in zip(products, cal))
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


def _make_goal(k: int, product: Product, row: list[float], with_options: bool = True) -> Goal:
    d = _Draws(row)
    n_att = 1 + d.index(min(3, len(product.attributes)))
    attributes = tuple(product.attributes[i] for i in d.subset(len(product.attributes), n_att))
    options = tuple((name, vals[d.index(len(vals))]) for name, vals in product.options.items())
    if not with_options:
        options = ()
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
def generate_goals(
    seed: int, size: int, goals_per_product: int = 1, variant: str = "plain"
) -> tuple[Goal, ...]:
    """``goals_per_product`` goals for every product of ``generate_catalog(seed, size, variant)``
    (in the calibrated variant a share :data:`NO_OPTION_GOAL_SHARE` of them asks for no option)."""
    products = generate_catalog(seed, size, variant)
    rows = (
        np.random.default_rng([int(seed), 1])
        .random((size * goals_per_product, _GOAL_DRAWS))
        .tolist()
    )
    n = size * goals_per_product
    if variant == "calibrated":
        draws = np.random.default_rng([int(seed), 3]).random(n)
        with_options = (draws >= NO_OPTION_GOAL_SHARE).tolist()
    else:
        with_options = [True] * n
    return tuple(
        _make_goal(k, p, rows[j * goals_per_product + k], with_options[j * goals_per_product + k])
        for j, p in enumerate(products)
        for k in range(goals_per_product)
    )
