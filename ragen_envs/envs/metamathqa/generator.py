"""Math word problems written by the ragen authors, generated from templates (MIT).

The bundled MetaMathQA-format and GSM8K-format splits (``bundled:math-templates-*``,
built by ``python scripts/build_bundled.py``) come from here: we may not ship
MetaMathQA (MIT, but derived from GSM8K/MATH model outputs we did not vet) or GSM8K
(MIT) files we cannot download on the build machine, so we wrote our own problems.
Every template's wording is ours; every answer is computed exactly in code with
:class:`fractions.Fraction`, independently of the worked solution text.

A problem is a :class:`WordProblem` (question, worked solution, exact answer).
:func:`generate` draws ``n`` distinct problems (distinct by normalised question) from a
seeded ``numpy`` generator, cycling through the templates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ...data.splits import normalize_text
from ...seeding import attempt_rng, derive_seed

__all__ = ["TEMPLATES", "WordProblem", "format_answer", "generate"]

_NAMES = (
    "Amara",
    "Bruno",
    "Chen",
    "Dalia",
    "Emeka",
    "Freya",
    "Gustavo",
    "Hana",
    "Ines",
    "Jonas",
    "Kofi",
    "Leila",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Samir",
    "Tove",
    "Umar",
    "Vera",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zofia",
)
_ITEMS = ("stickers", "marbles", "postcards", "seashells", "pencils", "buttons", "stamps", "beads")


@dataclass(frozen=True)
class WordProblem:
    """One generated problem.

    Attributes:
        template: template name.
        question: the problem text.
        steps: worked-solution lines (no final-answer line).
        answer: the exact answer.
    """

    template: str
    question: str
    steps: tuple[str, ...]
    answer: Fraction


def format_answer(value: Fraction, *, style: str = "latex", thousands: bool = False) -> str:
    """Spell an exact answer: an integer, a terminating decimal, or a fraction.

    Args:
        value: the answer.
        style: ``"latex"`` writes fractions as ``\\frac{p}{q}``, ``"plain"`` as ``p/q``.
        thousands: group integer digits with commas (``8,000``).
    """
    if value.denominator == 1:
        n = int(value)
        return f"{n:,}" if thousands else str(n)
    den = value.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1:  # terminating decimal
        digits = 0
        scaled = value
        while scaled.denominator != 1:
            scaled *= 10
            digits += 1
        s = f"{float(value):.{digits}f}"
        return s
    sign = "-" if value < 0 else ""
    p, q = abs(value.numerator), value.denominator
    return f"{sign}\\frac{{{p}}}{{{q}}}" if style == "latex" else f"{sign}{p}/{q}"


def _n(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _name(rng: np.random.Generator) -> str:
    return _NAMES[_n(rng, 0, len(_NAMES) - 1)]


def _money(x: Fraction) -> str:
    return format_answer(x) if x.denominator == 1 else f"{float(x):.2f}"


# Each template: rng -> WordProblem.  Steps use plain arithmetic text.
def _bags(rng):
    name, a, b = _name(rng), _n(rng, 3, 12), _n(rng, 4, 15)
    c = _n(rng, 1, a * b - 1)
    item = _ITEMS[_n(rng, 0, len(_ITEMS) - 1)]
    q = (
        f"{name} buys {a} packs of {item} with {b} {item} in each pack, then gives {c} of them to a "
        f"friend. How many {item} does {name} keep?"
    )
    return WordProblem(
        "bags",
        q,
        (f"{a} packs hold {a} * {b} = {a * b} {item}.", f"Keeping {a * b} - {c} = {a * b - c}."),
        Fraction(a * b - c),
    )


def _wage(rng):
    name, w, h, k = _name(rng), _n(rng, 12, 45), _n(rng, 10, 40), _n(rng, 2, 12)
    q = f"{name} is paid ${w} an hour and works {h} hours every week. How many dollars does {name} earn in {k} weeks?"
    return WordProblem(
        "wage",
        q,
        (
            f"One week pays {w} * {h} = {w * h} dollars.",
            f"{k} weeks pay {w * h} * {k} = {w * h * k} dollars.",
        ),
        Fraction(w * h * k),
    )


def _discount(rng):
    p, d = 20 * _n(rng, 2, 30), 5 * _n(rng, 1, 14)
    q = f"A coat has a price of ${p}. During a sale every price is cut by {d}%. What is the sale price of the coat in dollars?"
    cut = Fraction(p * d, 100)
    return WordProblem(
        "discount",
        q,
        (
            f"The cut is {p} * {d} / 100 = {_money(cut)} dollars.",
            f"The sale price is {p} - {_money(cut)} = {_money(p - cut)} dollars.",
        ),
        p - cut,
    )


def _distance(rng):
    v, t = _n(rng, 30, 120), _n(rng, 2, 9)
    half = _n(rng, 0, 1)
    time = Fraction(2 * t + half, 2)
    q = f"A bus drives at a steady {v} kilometres per hour for {format_answer(time)} hours. How many kilometres does it cover?"
    return WordProblem(
        "distance",
        q,
        (f"Distance = {v} * {format_answer(time)} = {format_answer(v * time)} km.",),
        v * time,
    )


def _average(rng):
    name, n = _name(rng), _n(rng, 3, 6)
    scores = [_n(rng, 55, 100) for _ in range(n)]
    listed = ", ".join(str(s) for s in scores[:-1]) + f" and {scores[-1]}"
    q = f"{name} scored {listed} on {n} quizzes. What is the mean score?"
    mean = Fraction(sum(scores), n)
    return WordProblem(
        "average",
        q,
        (f"The scores add up to {sum(scores)}.", f"The mean is {sum(scores)} / {n}."),
        mean,
    )


def _pizza(rng):
    a_name, b_name = _name(rng), _name(rng)
    if a_name == b_name:
        return None
    n = _n(rng, 6, 16)
    a = _n(rng, 1, n - 2)
    b = _n(rng, 1, n - a - 1)
    q = (
        f"A pie is cut into {n} equal slices. {a_name} eats {a} slices and {b_name} eats {b}. "
        "What fraction of the pie is left?"
    )
    return WordProblem(
        "pie",
        q,
        (f"{a} + {b} = {a + b} slices are eaten, so {n - a - b} of {n} are left.",),
        Fraction(n - a - b, n),
    )


def _garden(rng):
    length, width = _n(rng, 4, 60), _n(rng, 3, 40)
    if _n(rng, 0, 1):
        q = f"A rectangular garden is {length} metres long and {width} metres wide. What is its area in square metres?"
        return WordProblem(
            "area", q, (f"Area = {length} * {width} = {length * width}.",), Fraction(length * width)
        )
    q = f"A fence goes once around a rectangular field {length} metres long and {width} metres wide. How many metres long is the fence?"
    return WordProblem(
        "perimeter",
        q,
        (f"Perimeter = 2 * ({length} + {width}) = {2 * (length + width)}.",),
        Fraction(2 * (length + width)),
    )


def _ages(rng):
    name, a, k, n = _name(rng), _n(rng, 3, 14), _n(rng, 2, 4), _n(rng, 1, 15)
    q = f"{name} is {a} years old and {name}'s aunt is {k} times as old. How old will the aunt be in {n} years?"
    return WordProblem(
        "ages",
        q,
        (f"The aunt is {a} * {k} = {a * k} now.", f"In {n} years: {a * k} + {n} = {a * k + n}."),
        Fraction(a * k + n),
    )


def _savings(rng):
    name, s, w = _name(rng), _n(rng, 5, 60), _n(rng, 3, 30)
    start = _n(rng, 0, 100)
    q = (
        f"{name} already has ${start} and puts ${s} more into a jar every week. "
        f"After how many weeks will the jar hold exactly ${start + s * w}?"
    )
    return WordProblem(
        "savings",
        q,
        (
            f"{name} needs {start + s * w} - {start} = {s * w} more dollars.",
            f"{s * w} / {s} = {w} weeks.",
        ),
        Fraction(w),
    )


def _cartons(rng):
    e, c, d = _n(rng, 20, 90), _n(rng, 6, 12), _n(rng, 2, 9)
    total = e * d
    if _n(rng, 0, 1):
        q = f"A farm collects {e} eggs each day and packs them in boxes of {c}. How many full boxes can it fill from {d} days of eggs?"
        return WordProblem(
            "boxes",
            q,
            (f"{e} * {d} = {total} eggs.", f"{total} // {c} = {total // c} full boxes."),
            Fraction(total // c),
        )
    q = f"A farm collects {e} eggs each day and packs them in boxes of {c}. After filling as many boxes as possible with {d} days of eggs, how many eggs are left over?"
    return WordProblem(
        "leftover",
        q,
        (f"{e} * {d} = {total} eggs.", f"{total} mod {c} = {total % c}."),
        Fraction(total % c),
    )


def _change(rng):
    name, a, b = _name(rng), _n(rng, 2, 9), _n(rng, 2, 9)
    p1, p2 = Fraction(_n(rng, 50, 600), 100), Fraction(_n(rng, 25, 300), 100)
    cost = a * p1 + b * p2
    bill = next(x for x in (20, 50, 100) if x > cost)
    q = (
        f"{name} buys {a} notebooks at ${_money(p1)} each and {b} pens at ${_money(p2)} each, and pays with "
        f"a ${bill} note. How much change, in dollars, does {name} get?"
    )
    return WordProblem(
        "change",
        q,
        (
            f"The total is {_money(cost)} dollars.",
            f"Change = {bill} - {_money(cost)} = {_money(bill - cost)}.",
        ),
        bill - cost,
    )


def _percent_of(rng):
    n = 20 * _n(rng, 2, 40)
    p = 5 * _n(rng, 1, 19)
    q = f"In a school of {n} pupils, {p}% walk to school. How many pupils walk to school?"
    return WordProblem(
        "percent",
        q,
        (f"{n} * {p} / 100 = {format_answer(Fraction(n * p, 100))}.",),
        Fraction(n * p, 100),
    )


def _consecutive(rng):
    k, m = _n(rng, 3, 5), _n(rng, 5, 300)
    total = sum(range(m, m + k))
    q = f"The sum of {k} consecutive whole numbers is {total}. What is the largest of them?"
    return WordProblem(
        "consecutive",
        q,
        (
            f"The smallest is ({total} - {k * (k - 1) // 2}) / {k} = {m}.",
            f"The largest is {m} + {k - 1} = {m + k - 1}.",
        ),
        Fraction(m + k - 1),
    )


def _linear(rng):
    a, b, c = _n(rng, 2, 9), _n(rng, 1, 50), _n(rng, 51, 200)
    q = f"If {a} times a number, increased by {b}, equals {c}, what is the number?"
    return WordProblem(
        "linear", q, (f"{a}x + {b} = {c}, so x = ({c} - {b}) / {a}.",), Fraction(c - b, a)
    )


def _power(rng):
    b, e = _n(rng, 2, 9), _n(rng, 2, 6)
    q = f"A cell splits into {b} cells every hour. Starting from one cell, how many cells are there after {e} hours?"
    return WordProblem(
        "power", q, (f"After {e} hours there are {b}^{e} = {b**e} cells.",), Fraction(b**e)
    )


def _laps(rng):
    name, k, m = _name(rng), _n(rng, 3, 30), 50 * _n(rng, 2, 10)
    q = f"{name} runs {k} laps around a {m}-metre track. How many kilometres is that?"
    return WordProblem(
        "laps",
        q,
        (f"{k} * {m} = {k * m} metres = {format_answer(Fraction(k * m, 1000))} km.",),
        Fraction(k * m, 1000),
    )


def _unit_price(rng):
    n, m = _n(rng, 2, 12), _n(rng, 2, 30)
    c = Fraction(n * _n(rng, 10, 150), 100)
    q = f"{n} erasers cost ${_money(c)} in total. At the same price each, what do {m} erasers cost in dollars?"
    value = c / n * m
    if (value * 100).denominator != 1:
        return None
    return WordProblem(
        "unit_price",
        q,
        (f"One eraser costs {_money(c)} / {n}.", f"{m} erasers cost {_money(value)}."),
        value,
    )


def _together(rng):
    a_name, b_name = _name(rng), _name(rng)
    a, b = _n(rng, 2, 12), _n(rng, 2, 12)
    if a_name == b_name or a == b:
        return None
    q = (
        f"{a_name} can paint a shed alone in {a} hours and {b_name} alone in {b} hours. "
        "Working together at those rates, how many hours do they need?"
    )
    return WordProblem(
        "together",
        q,
        (
            f"Together they paint 1/{a} + 1/{b} of the shed per hour.",
            f"Time = 1 / (1/{a} + 1/{b}) = {a * b}/{a + b} hours.",
        ),
        Fraction(a * b, a + b),
    )


def _marbles(rng):
    r, b, g = _n(rng, 1, 20), _n(rng, 1, 20), _n(rng, 0, 10)
    q = (
        f"A jar holds {r} red, {b} blue and {g} green marbles. One marble is drawn at random. "
        "What is the probability that it is red?"
    )
    return WordProblem(
        "probability", q, (f"{r} of the {r + b + g} marbles are red.",), Fraction(r, r + b + g)
    )


def _factory(rng):
    n, d = 250 * _n(rng, 2, 40), _n(rng, 3, 30)
    q = f"A factory makes {n} bottles a day. How many bottles does it make in {d} days?"
    return WordProblem("factory", q, (f"{n} * {d} = {n * d}.",), Fraction(n * d))


def _temperature(rng):
    start, drop = _n(rng, -5, 15), _n(rng, 6, 30)
    q = f"At noon the temperature was {start} degrees. By midnight it had fallen by {drop} degrees. What was the temperature at midnight?"
    return WordProblem(
        "temperature", q, (f"{start} - {drop} = {start - drop}.",), Fraction(start - drop)
    )


TEMPLATES: tuple[Callable[[np.random.Generator], WordProblem | None], ...] = (
    _bags,
    _wage,
    _discount,
    _distance,
    _average,
    _pizza,
    _garden,
    _ages,
    _savings,
    _cartons,
    _change,
    _percent_of,
    _consecutive,
    _linear,
    _power,
    _laps,
    _unit_price,
    _together,
    _marbles,
    _factory,
    _temperature,
)


def generate(n: int, *, seed: int) -> list[WordProblem]:
    """Generate ``n`` distinct problems (by normalised question), cycling through :data:`TEMPLATES`.

    Problem ``j`` uses template ``j % len(TEMPLATES)`` and the generator
    ``attempt_rng(derive_seed("math-templates", seed, j), attempt)`` (retrying while a
    draw is rejected or duplicates an earlier question), so the output depends only on
    ``(n, seed)``.

    Raises:
        RuntimeError: a template could not produce a new problem in 1000 attempts.
    """
    out: list[WordProblem] = []
    seen: set[str] = set()
    for j in range(n):
        template = TEMPLATES[j % len(TEMPLATES)]
        base = derive_seed("math-templates", seed, j)
        for attempt in range(1000):
            problem = template(attempt_rng(base, attempt))
            if problem is None:
                continue
            key = normalize_text(problem.question)
            if key in seen:
                continue
            seen.add(key)
            out.append(problem)
            break
        else:
            raise RuntimeError(f"template {template.__name__} produced no new problem for item {j}")
    return out
