"""Products and shopping goals, the two record types of the WebShop environment.

Field names follow the WebShop engine's product dictionaries (Yao et al. 2022, arXiv
2207.01206; ``web_agent_site/engine``) where they exist: ``asin``, ``category``,
``query``, ``product_category`` (a path joined by ``" › "``), ``Title`` → :attr:`Product.title`,
``BulletPoints`` → :attr:`Product.bullet_points`, ``Description``, ``Attributes``,
``options`` (option name → values) and a price.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Goal", "Product", "words"]

_WORD = re.compile(r"[a-z0-9]+")


def _texts(value: str | Iterable[Any] | None) -> tuple[str, ...]:
    """A tuple of strings from ``value``: one string is *one* entry (never split into its
    characters), ``None`` / ``""`` is none, any other iterable gives one entry per element."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def words(text: str) -> list[str]:
    """Lower-case alphanumeric runs of ``text`` (``"X-Large, 2 pack"`` -> ``["x", "large", "2", "pack"]``)."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Product:
    """One product of the catalogue.

    Attributes:
        asin: the product id (10 characters, upper case; clicked as its lower-case form).
        title: the product name shown in results and on its page.
        category: the top-level category (``"fashion"``, ``"food"``, ...).
        query: the product-type query it was listed under (``"running shoes"``); the
            type reward's ``query_match`` compares it.
        product_category: the category path, ``"a › b › c"``.
        name_nouns: the nouns of the title that the type reward compares (WebShop
            parses the title with spaCy and keeps NOUN/PROPN tokens; generated products
            list theirs explicitly, loaded ones use the title's content words).
        attributes: attribute phrases (``"non slip"``, ``"machine washable"``).
        options: option name -> available values (``{"size": ("7", "8")}``), in display order.
        price: the price in dollars.
        bullet_points: feature lines (the item's "features" page).
        description: the item's "description" page.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    name_nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    price: float
    bullet_points: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        # A string where a tuple of strings belongs is one entry (``bullet_points="Soft"`` is
        # ``("Soft",)``, not ``("S", "o", "f", "t")``); lists become tuples, so products compare
        # equal however they were built.
        for name in ("bullet_points", "attributes", "name_nouns"):
            object.__setattr__(self, name, _texts(getattr(self, name)))
        object.__setattr__(
            self, "options", {str(k): _texts(v) for k, v in dict(self.options).items()}
        )

    @property
    def text(self) -> str:
        """Title, bullet points and description, lower-cased (the reward's text fallback)."""
        return " ".join([self.title, " ".join(self.bullet_points), self.description]).lower()


@dataclass(frozen=True)
class Goal:
    """A shopping instruction and what the reward compares against.

    Attributes:
        id: stable id (``<asin>-g<k>``, or the instruction's index for loaded data).
        asin: the target product the goal was made from.
        instruction: the text shown to the agent.
        attributes: goal attributes (``U_att`` of the paper).
        options: goal option values (``U_opt``), with the option name when known
            (``(("color", "black"), ("size", "9"))``; name ``""`` when the source has none).
        price_upper: the price bound in dollars (``u_price``).
        query / product_category / name_nouns: copied from the target product (the type
            reward compares them).
    """

    id: str
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float
    query: str
    product_category: str
    name_nouns: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("attributes", "name_nouns"):
            object.__setattr__(self, name, _texts(getattr(self, name)))
        opts = self.options.items() if isinstance(self.options, Mapping) else self.options
        object.__setattr__(self, "options", tuple((str(k), str(v)) for k, v in opts))

    @property
    def option_values(self) -> tuple[str, ...]:
        """The goal option values, in order."""
        return tuple(v for _, v in self.options)
