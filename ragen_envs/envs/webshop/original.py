"""Loader for the original WebShop data files (Yao et al. 2022), for users who have them.

The files are not ours to ship (scraped Amazon product data); download them with
WebShop's ``setup.sh`` and point the env's ``data_source`` at the folder.  Files read
(the ``_1000`` small variants are used when the full ones are absent, as WebShop's
``-d small`` setup does):

``items_shuffle.json`` / ``items_shuffle_1000.json`` — a JSON list of products::

    {"asin": "B0...", "name": "<title>", "category": "fashion", "query": "<search query>",
     "product_category": "Clothing, Shoes & Jewelry › Men › Shoes", "full_description": "...",
     "small_description": ["<bullet>", ...] | "<bullet>", "pricing": "$12.99" | "$10.00 - $20.00",
     "customization_options": {"<name>": [{"value": "<value>", "image": "<url>"}, ...] | null, ...},
     "images": [...], ...}

``items_ins_v2.json`` / ``items_ins_v2_1000.json`` — a JSON object keyed by ASIN::

    {"<asin>": {"attributes": ["<attribute>", ...], "instruction": "<synthetic instruction>",
                "instruction_attributes": ["<attribute>", ...]}, ...}

``items_human_ins.json`` — a JSON object keyed by ASIN (human-written goals)::

    {"<asin>": [{"instruction": "<text>", "instruction_attributes": [...],
                 "instruction_options": ["<option value>", ...]}, ...], ...}

Processing follows WebShop's ``engine.load_products`` and ``goal.get_human_goals`` /
``get_synthetic_goals``: option names are lower-cased, option values lower-cased with
``/`` written as ``" | "`` and whitespace collapsed (repeated values, and values equal to a
fixed click target such as ``buy now``, are dropped); products with a bad ASIN (``nan``, more than 10
characters) or repeated ASINs are skipped; a product without attributes gets
``["DUMMY_ATTR"]``; prices come from ``pricing`` (no price: 100).  Two differences make
loading deterministic where WebShop calls the unseeded global ``random``: a price
*range* gives the product the price ``low + (high - low) * u`` and a goal's price bound
draws its two grid prices with ``u1, u2``, where the ``u`` are uniforms of a generator
seeded by a BLAKE2b hash of the ASIN / goal id.  Human goals: one per instruction with
at least one attribute; synthetic goals: one per combination of the product's option
values (WebShop's enumeration).  Name nouns (for the type reward) are the title's words
of three or more letters, a stand-in for WebShop's spaCy noun filter.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np

from ...data.loaders import DataSourceError
from .catalog import NO_PRICE_BOUND, price_upper_bound
from .products import Goal, Product, words
from .vocab import RESERVED_CLICKS

__all__ = ["load_webshop_dir", "product_from_record"]

_STOP = frozenset({"and", "the", "for", "with", "set", "pack", "inch", "inches"})


def _uniforms(key: str, n: int) -> list[float]:
    seed = int.from_bytes(
        hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"ragen-webshop-or").digest(),
        "little",
    )
    return np.random.default_rng(seed).random(n).tolist()


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise DataSourceError(f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise DataSourceError(f"{path}: invalid JSON ({exc})") from None


def _first(folder: Path, *names: str) -> Path | None:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def _prices(pricing: Any) -> list[float]:
    if not pricing:
        return [100.0]
    out = []
    for part in str(pricing).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            out.append(float(Decimal(digits)))
        except InvalidOperation:
            continue
    return out[:2] or [100.0]


def product_from_record(rec: Mapping[str, Any], attributes: list[str]) -> Product:
    """One product of ``items_shuffle.json`` (module docstring) with its mined attributes."""
    asin = str(rec["asin"]).upper()
    title = str(rec.get("name") or "")
    bullets = rec.get("small_description")  # a list or one string; Product normalises both
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in (rec.get("customization_options") or {}).items():
        if contents is None:
            continue
        vals = tuple(
            dict.fromkeys(
                " ".join(str(c["value"]).replace("/", " | ").lower().split()) for c in contents
            )
        )
        vals = tuple(v for v in vals if v and v not in RESERVED_CLICKS)
        if vals:
            options[str(name).lower()] = vals
    prices = _prices(rec.get("pricing"))
    price = (
        prices[0]
        if len(prices) == 1
        else prices[0] + (prices[1] - prices[0]) * _uniforms(asin, 1)[0]
    )
    nouns = tuple(dict.fromkeys(w for w in words(title) if len(w) >= 3 and w not in _STOP))
    return Product(
        asin=asin,
        title=title,
        category=str(rec.get("category", "")),
        query=str(rec.get("query", "")).lower().strip(),
        product_category=str(rec.get("product_category", "")),
        name_nouns=nouns,
        attributes=tuple(attributes) or ("DUMMY_ATTR",),
        options=options,
        price=round(price, 2),
        bullet_points=bullets,  # type: ignore[arg-type]  # Product normalises a list or one str
        description=str(rec.get("full_description") or ""),
    )


def _goal(
    gid: str,
    p: Product,
    instruction: str,
    attributes: list[str],
    options: tuple[tuple[str, str], ...],
) -> Goal:
    u1, u2 = _uniforms(gid, 2)
    bound = price_upper_bound(p.price, u1, u2)
    text = instruction.strip().strip(".")
    if bound < NO_PRICE_BOUND:
        text += f", and price lower than {bound:.2f} dollars"
    return Goal(
        id=gid,
        asin=p.asin,
        instruction=text,
        attributes=tuple(attributes),
        options=options,
        price_upper=bound,
        query=p.query,
        product_category=p.product_category,
        name_nouns=p.name_nouns,
    )


def load_webshop_dir(
    folder: str | Path, *, goal_source: str = "human"
) -> tuple[tuple[Product, ...], tuple[Goal, ...]]:
    """Products and goals from a folder of original WebShop files (module docstring).

    Args:
        folder: the folder (``WebShop/data``).
        goal_source: ``"human"`` (``items_human_ins.json``) or ``"synthetic"``
            (``items_ins_v2*.json`` instructions, every option combination).

    Raises:
        DataSourceError: a file is missing or malformed, or no goal results.
        ValueError: unknown ``goal_source``.
    """
    if goal_source not in ("human", "synthetic"):
        raise ValueError(f"goal_source must be 'human' or 'synthetic', got {goal_source!r}")
    root = Path(folder).expanduser()
    items_path = _first(root, "items_shuffle.json", "items_shuffle_1000.json")
    attrs_path = _first(root, "items_ins_v2.json", "items_ins_v2_1000.json")
    if items_path is None or attrs_path is None:
        raise DataSourceError(
            f"{root} must hold items_shuffle[_1000].json and items_ins_v2[_1000].json "
            "(the original WebShop data; see docs/envs/webshop.md)"
        )
    items = _read_json(items_path)
    attrs = _read_json(attrs_path)
    if not isinstance(items, list) or not isinstance(attrs, Mapping):
        raise DataSourceError(
            f"{items_path} must be a JSON list and {attrs_path} a JSON object keyed by ASIN"
        )
    products: list[Product] = []
    seen: set[str] = set()
    for rec in items:
        asin = str(rec.get("asin", ""))
        if asin in ("", "nan") or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        try:
            products.append(
                product_from_record(rec, list((attrs.get(asin) or {}).get("attributes") or []))
            )
        except (KeyError, TypeError) as exc:
            raise DataSourceError(f"{items_path}: malformed product {asin}: {exc}") from None
    by_asin = {p.asin: p for p in products}
    goals: list[Goal] = []
    if goal_source == "human":
        human_path = _first(root, "items_human_ins.json")
        if human_path is None:
            raise DataSourceError(
                f"{root} has no items_human_ins.json (use goal_source='synthetic' instead)"
            )
        human = _read_json(human_path)
        for asin, instructions in human.items():
            p = by_asin.get(str(asin).upper())
            if p is None:
                continue
            for k, ins in enumerate(instructions):
                att = list(ins.get("instruction_attributes") or [])
                if not att:
                    continue
                opts = tuple(("", str(v)) for v in ins.get("instruction_options") or [])
                goals.append(_goal(f"{p.asin}-h{k}", p, str(ins["instruction"]), att, opts))
    else:
        for p in products:
            meta = attrs.get(p.asin) or attrs.get(p.asin.lower()) or {}
            text, att = meta.get("instruction"), list(meta.get("instruction_attributes") or [])
            if not text or not att:
                continue
            names = sorted(p.options)
            for k, combo in enumerate(itertools.product(*(p.options[n] for n in names))):
                opts = tuple(zip(names, combo))
                opt_text = (" with " + ", and ".join(f"{n}: {v}" for n, v in opts)) if opts else ""
                goals.append(
                    _goal(f"{p.asin}-s{k}", p, f"{text.strip().strip('.')}{opt_text}", att, opts)
                )
    if not goals:
        raise DataSourceError(f"no {goal_source} goals in {root}")
    return tuple(products), tuple(goals)
