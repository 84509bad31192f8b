"""The WebShop reward (Yao et al. 2022, arXiv 2207.01206, section 3.2 and appendix; engine
``web_agent_site/engine/goal.py``), with each goal option satisfied at most once.

For a purchase ``y`` (product, chosen options, price) and a goal ``u``::

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price]) / (|U_att| + |U_opt| + 1)

* ``r_type`` (:func:`type_score`) in ``{0, 0.1, 0.5, 1}``: ``query_match`` (same product
  query), ``category_match`` (at least two category-path elements shared),
  ``title_score`` = |goal name nouns ∩ purchased name nouns| / |goal name nouns| (0.2 when
  the goal has none).  ``r_type = 1``; it becomes 0.5 when neither ``query_match`` nor
  ``category_match`` holds and ``title_score <= 0.2``; then 0.1 if ``title_score < 0.1``;
  then 0 if ``title_score == 0`` (the engine's order of checks).
* ``|U_att ∩ Y_att|`` (:func:`attribute_matches`): a goal attribute is matched when some
  product attribute has ``token_set_ratio > 85`` with it, or when it occurs in the
  product's title, bullet points or description (lower-cased substring).
* ``|U_opt ∩ Y_opt|`` (:func:`option_matches`): **each goal option counts at most once.**
  A chosen option ``(name, value)`` satisfies a not yet satisfied goal option ``g`` when
  ``value == g`` exactly for the option name ``size`` (the engine's ``EXACT_MATCH_OPTS``),
  else when ``token_set_ratio(g, value) > 85``; each chosen option is used once.  A goal
  option left unsatisfied still counts when its text occurs in the product's title,
  bullet points or description *and* the product offers no option value matching it (a
  property of the product that needed no choice).

Differences from the engine, and why: the engine loops over the *purchased* options and
adds one per purchased option that matches any goal option or merely appears in the
product text, so several purchased options can count for one goal option and the
reward can exceed 1; here ``|U_opt ∩ Y_opt| <= |U_opt|`` and so ``r <= 1``.  The engine's
``normalize_color`` step and spaCy noun parsing are not reproduced (products carry their
name nouns, :attr:`~ragen_envs.envs.webshop.products.Product.name_nouns`); ``token_set_ratio``
is re-implemented on :mod:`difflib` (as ``fuzzywuzzy`` computes it without
``python-Levenshtein``), so no extra dependency is needed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .products import Goal, Product, words

__all__ = [
    "RewardBreakdown",
    "attribute_matches",
    "combine",
    "option_matches",
    "option_value_matches",
    "token_set_ratio",
    "type_score",
    "webshop_reward",
]

#: Option names matched exactly rather than fuzzily (WebShop's ``EXACT_MATCH_OPTS``).
EXACT_MATCH_OPTIONS = frozenset({"size"})
#: Fuzzy-match threshold (the engine's ``score > 85``).
FUZZY_THRESHOLD = 85


def token_set_ratio(a: str, b: str) -> int:
    """``fuzzywuzzy`` / ``thefuzz`` ``token_set_ratio`` (0-100) with the default processing.

    Strings are lower-cased and cut into alphanumeric tokens; with ``I`` the sorted shared
    tokens and ``A``, ``B`` the sorted tokens only in ``a`` / ``b``, the result is the
    largest :class:`difflib.SequenceMatcher` ratio among ``(I, I+A)``, ``(I, I+B)`` and
    ``(I+A, I+B)``, times 100, rounded.  A token subset scores 100 (``"waterproof"`` vs
    ``"waterproof jacket"``); 0 if either string has no token.
    """
    ta, tb = set(words(a)), set(words(b))
    if not ta or not tb:
        return 0
    inter = " ".join(sorted(ta & tb))
    ca = " ".join(filter(None, [inter, " ".join(sorted(ta - tb))]))
    cb = " ".join(filter(None, [inter, " ".join(sorted(tb - ta))]))

    def ratio(x: str, y: str) -> float:
        return difflib.SequenceMatcher(None, x, y).ratio() if x and y else 0.0

    return int(round(100 * max(ratio(inter, ca), ratio(inter, cb), ratio(ca, cb))))


def _fuzzy(a: str, b: str) -> bool:
    return token_set_ratio(a, b) > FUZZY_THRESHOLD


def type_score(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` (module docstring)."""
    query_match = product.query == goal.query
    pc = {x.strip() for x in product.product_category.split("›")}
    gc = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(pc & gc) >= 2
    desired = set(goal.name_nouns)
    title_score = 0.2 if not desired else len(set(product.name_nouns) & desired) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_matches(product: Product, goal_attributes: Sequence[str]) -> int:
    """``|U_att ∩ Y_att|``: goal attributes found among the product's attributes or text."""
    text = product.text
    n = 0
    for g in goal_attributes:
        if any(_fuzzy(p, g) for p in product.attributes) or g.lower() in text:
            n += 1
    return n


def option_value_matches(name: str, value: str, goal_value: str) -> bool:
    """A chosen option ``name: value`` satisfies ``goal_value`` (exact for ``size``, else fuzzy > 85)."""
    if name.lower() in EXACT_MATCH_OPTIONS:
        return value.strip().lower() == goal_value.strip().lower()
    return _fuzzy(goal_value, value)


def option_matches(product: Product, goal_options: Sequence[str], chosen: Mapping[str, str]) -> int:
    """``|U_opt ∩ Y_opt|`` with each goal option satisfied at most once (module docstring).

    Args:
        product: the purchased product.
        goal_options: the goal option values ``U_opt``.
        chosen: the options selected at purchase, name -> value.

    Returns:
        An integer in ``[0, len(goal_options)]``.
    """
    unused = list(chosen.items())
    satisfied = [False] * len(goal_options)
    for i, g in enumerate(goal_options):
        for j, (name, value) in enumerate(unused):
            if option_value_matches(name, value, g):
                satisfied[i] = True
                del unused[j]
                break
    text = product.text
    offered = [(name, v) for name, vals in product.options.items() for v in vals]
    for i, g in enumerate(goal_options):
        if (
            not satisfied[i]
            and g.lower() in text
            and not any(option_value_matches(n, v, g) for n, v in offered)
        ):
            satisfied[i] = True
    return sum(satisfied)


def combine(
    r_type: float, n_att: int, goal_att: int, n_opt: int, goal_opt: int, price_ok: bool
) -> float:
    """``r_type * (n_att + n_opt + 1[price_ok]) / (goal_att + goal_opt + 1)`` (the paper's formula).

    Raises:
        ValueError: a match count outside ``[0, goal count]`` (which would let ``r > 1``).
    """
    if not (0 <= n_att <= goal_att and 0 <= n_opt <= goal_opt):
        raise ValueError(
            f"match counts out of range: {n_att}/{goal_att} attributes, {n_opt}/{goal_opt} options"
        )
    return float(r_type) * (n_att + n_opt + (1 if price_ok else 0)) / (goal_att + goal_opt + 1)


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one purchase and its parts (module docstring)."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attribute_matches: int
    goal_attributes: int
    option_matches: int
    goal_options: int
    price_ok: bool


def webshop_reward(
    product: Product, goal: Goal, chosen: Mapping[str, str], price: float | None = None
) -> RewardBreakdown:
    """Score buying ``product`` with options ``chosen`` (name -> value) against ``goal``.

    Args:
        price: the price paid (default ``product.price``).

    Returns:
        A :class:`RewardBreakdown`; ``reward`` is in ``[0, 1]`` and equals 1 exactly when
        the type matches fully and every attribute, option and the price are satisfied.
    """
    r_type, qm, cm, ts = type_score(product, goal)
    n_att = attribute_matches(product, goal.attributes)
    n_opt = option_matches(product, goal.option_values, chosen)
    price_ok = (product.price if price is None else price) <= goal.price_upper
    reward = combine(r_type, n_att, len(goal.attributes), n_opt, len(goal.options), price_ok)
    return RewardBreakdown(
        reward, r_type, qm, cm, ts, n_att, len(goal.attributes), n_opt, len(goal.options), price_ok
    )
