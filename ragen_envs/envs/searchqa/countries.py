"""The bundled SearchQA data: passages and questions built from our country-facts table.

Source: ``ragen_envs/envs/searchqa/country_facts.tsv``, a table of public facts about 165
countries (capital, continent, currency, official languages, rounded population)
written by the ragen authors and dedicated to the public domain (CC0-1.0); facts are
not copyrightable, and the wording of every passage and question here is ours.

**Corpus** (:func:`build_documents`, wiki-18 layout ``{"id", "title", "text", "contents"}``):
four passages per country, so that multi-hop questions need two documents —

* ``<Country>``: continent and capital (``id`` = the country's slug);
* ``Economy of <Country>``: the currency and its ISO 4217 code;
* ``Demographics of <Country>``: the rounded population and the official languages;
* ``<Capital>``: the city, naming its country (and nothing else).

**Questions** (:func:`build_questions`, format ``ragen`` of :mod:`.questions`): eleven per
country — capital, continent, currency, official language, population, the country of a
capital, four two-hop questions through the capital ("What currency is used in the
country whose capital is Lima?": ``Lima`` → ``Economy of Peru``), and one yes/no question
("Is Peru in Europe?", the continent asked chosen by a stable hash).  Every answer is
stated in the corpus; aliases (other names, ISO codes, ASCII spellings of accented
names) are accepted.  ``entity`` = the country, so all questions about one country fall
in one split (a test country is never asked about in training).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...seeding import derive_seed

__all__ = [
    "CONTINENTS",
    "Country",
    "FACTS_PATH",
    "build_documents",
    "build_questions",
    "load_countries",
    "population_text",
]

#: The table of facts (tab-separated, ``#`` comments).
FACTS_PATH = Path(__file__).resolve().parent / "country_facts.tsv"

CONTINENTS = ("Africa", "Asia", "Europe", "North America", "Oceania", "South America")


@dataclass(frozen=True)
class Country:
    """One row of the facts table (lists split on ``"; "``)."""

    name: str
    aliases: tuple[str, ...]
    capital: str
    capital_aliases: tuple[str, ...]
    continent: str
    currency: str
    currency_aliases: tuple[str, ...]
    languages: tuple[str, ...]
    population_millions: float

    @property
    def currency_code(self) -> str:
        """The ISO 4217 code (the three-capital-letter alias)."""
        return next((a for a in self.currency_aliases if re.fullmatch(r"[A-Z]{3}", a)), "")


def _split(cell: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in cell.split(";") if x.strip())


def load_countries(path: Path = FACTS_PATH) -> list[Country]:
    """The rows of the facts table, in file order.

    Raises:
        ValueError: a malformed row (wrong column count, unknown continent, no ISO code),
            or a repeated country or capital name.
    """
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != 9:
            raise ValueError(f"{path}:{lineno}: expected 9 tab-separated columns, got {len(cells)}")
        c = Country(
            cells[0].strip(),
            _split(cells[1]),
            cells[2].strip(),
            _split(cells[3]),
            cells[4].strip(),
            cells[5].strip(),
            _split(cells[6]),
            _split(cells[7]),
            float(cells[8]),
        )
        if c.continent not in CONTINENTS:
            raise ValueError(f"{path}:{lineno}: unknown continent {c.continent!r}")
        if not c.currency_code:
            raise ValueError(f"{path}:{lineno}: no ISO 4217 code among the currency aliases")
        rows.append(c)
    names = [c.name for c in rows] + [c.capital for c in rows]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: a country or capital name is repeated")
    return rows


def population_text(millions: float) -> str:
    """``1430 -> "1.43 billion"``, ``68.2 -> "68 million"``, ``5.9 -> "5.9 million"``."""
    if millions >= 1000:
        return f"{millions / 1000:.2f} billion"
    if millions >= 10:
        return f"{round(millions)} million"
    return f"{millions:.1f} million"


def _ascii(text: str) -> str:
    return "".join(
        ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)
    )


def _with_ascii(names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for n in names:
        for v in (n, _ascii(n)):
            if v not in out:
                out.append(v)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _ascii(text).lower()).strip("-")


def _join(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _titles(c: Country) -> dict[str, str]:
    return {
        "country": c.name,
        "economy": f"Economy of {c.name}",
        "demographics": f"Demographics of {c.name}",
        "capital": c.capital,
    }


def build_documents(countries: list[Country]) -> list[dict[str, Any]]:
    """The corpus records (module docstring), four per country, in table order."""
    docs = []
    country_slugs = {_slug(c.name) for c in countries}
    for c in countries:
        t = _titles(c)
        known_as = f" (also known as {_join(c.aliases)})" if c.aliases else ""
        langs = (
            f"The official language of {c.name} is {c.languages[0]}."
            if len(c.languages) == 1
            else f"The official languages of {c.name} are {_join(c.languages)}."
        )
        texts = {
            "country": f"{c.name}{known_as} is a sovereign country in {c.continent}. Its capital is {c.capital}.",
            "economy": f"The currency of {c.name} is the {c.currency} (ISO 4217 code {c.currency_code}). "
            f"Prices, wages and taxes in {c.name} are stated in this currency.",
            "demographics": f"{c.name} has a population of about {population_text(c.population_millions)} people "
            f"(a rounded estimate from the early 2020s). {langs}",
            "capital": f"{c.capital} is the capital city of {c.name}.",
        }
        base = _slug(c.name)
        city = (
            _slug(c.capital)
            if _slug(c.capital) not in country_slugs
            else f"{_slug(c.capital)}-city"
        )
        ids = {
            "country": base,
            "economy": f"{base}-economy",
            "demographics": f"{base}-demographics",
            "capital": city,
        }
        for kind in ("country", "economy", "demographics", "capital"):
            title, text = t[kind], texts[kind]
            docs.append(
                {"id": ids[kind], "title": title, "text": text, "contents": f'"{title}"\n{text}'}
            )
    return docs


def build_questions(countries: list[Country]) -> list[dict[str, Any]]:
    """The question records (module docstring), eleven per country, in table order."""
    out = []
    for c in countries:
        t = _titles(c)
        capital = _with_ascii((c.capital, *c.capital_aliases))
        country = _with_ascii((c.name, *c.aliases))
        currency = _with_ascii((c.currency, *c.currency_aliases))
        langs = _with_ascii(c.languages)
        pop = [population_text(c.population_millions)]
        y = c.capital
        specs = [
            ("capital", f"What is the capital of {c.name}?", capital, [t["country"]]),
            ("continent", f"On which continent is {c.name}?", [c.continent], [t["country"]]),
            ("currency", f"What is the currency of {c.name}?", currency, [t["economy"]]),
            ("language", f"What is an official language of {c.name}?", langs, [t["demographics"]]),
            (
                "population",
                f"What is the approximate population of {c.name}?",
                pop,
                [t["demographics"]],
            ),
            (
                "country_of_capital",
                f"{y} is the capital of which country?",
                country,
                [t["capital"]],
            ),
            (
                "currency_via_capital",
                f"What currency is used in the country whose capital is {y}?",
                currency,
                [t["capital"], t["economy"]],
            ),
            (
                "language_via_capital",
                f"What is an official language of the country whose capital is {y}?",
                langs,
                [t["capital"], t["demographics"]],
            ),
            (
                "continent_via_capital",
                f"On which continent is the country whose capital is {y}?",
                [c.continent],
                [t["capital"], t["country"]],
            ),
            (
                "population_via_capital",
                f"What is the approximate population of the country whose capital is {y}?",
                pop,
                [t["capital"], t["demographics"]],
            ),
        ]
        h = derive_seed("searchqa-countries-yesno", c.name)
        if h % 2 == 0:
            specs.append(("yes_no", f"Is {c.name} in {c.continent}?", ["yes"], [t["country"]]))
        else:
            others = [k for k in CONTINENTS if k != c.continent]
            specs.append(
                (
                    "yes_no",
                    f"Is {c.name} in {others[(h >> 1) % len(others)]}?",
                    ["no"],
                    [t["country"]],
                )
            )
        for qtype, question, answers, titles in specs:
            out.append(
                {
                    "id": f"countries-{_slug(c.name)}-{qtype.replace('_', '-')}",
                    "question": question,
                    "answers": list(answers),
                    "supporting_titles": list(titles),
                    "type": qtype,
                    "hops": len(titles),
                    "entity": c.name,
                }
            )
    return out
