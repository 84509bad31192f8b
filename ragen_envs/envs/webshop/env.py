"""WebShop: find and buy the product an instruction describes (spec: ``docs/envs/webshop.md``).

A text version of WebShop (Yao et al. 2022, arXiv 2207.01206): a search page, result
pages of 10 products (``click[next >]`` / ``click[< prev]``), item pages with options,
description and features pages, and ``click[buy now]``, which ends the episode with the
published reward (:mod:`ragen_envs.envs.webshop.reward`; each goal option counts at most once,
so the reward never exceeds 1; success = reward 1).  Every observation shows the
instruction, the page and the list of legal actions.

The shop is a procedurally generated catalogue (:mod:`ragen_envs.envs.webshop.catalog`,
identical in every process) with one goal per product by default, or the original
WebShop files when the user has them (:mod:`ragen_envs.envs.webshop.original`).  Search is
BM25 through ``bm25s`` (:mod:`ragen_envs.envs.webshop.engine`).  Goals are items of a data
set (:class:`~ragen_envs.dataset_env.DatasetEnv`): ``reset(seed=i)`` plays goal ``i mod N`` of
the split, and splits are assigned by a keyed hash of the instruction text, so no test
instruction is ever a training instruction.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ...core import Transition, join_lines
from ...data.splits import canonical_key
from ...dataset_env import DatasetEnv
from .engine import Shop, get_shop
from .products import Goal, Product
from .reward import RewardBreakdown, option_value_matches, webshop_reward

__all__ = ["WebShopEnv", "parse_shop_action"]

_ACTION = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*", re.IGNORECASE | re.DOTALL)
BACK, NEXT, PREV, DESC, FEAT, BUY = (
    "back to search",
    "next >",
    "< prev",
    "description",
    "features",
    "buy now",
)


def parse_shop_action(text: str) -> tuple[str, str] | None:
    """``"click[Buy Now]"`` -> ``("click", "Buy Now")``; ``None`` if not ``search[...]`` / ``click[...]``.

    The verb is case-insensitive; the argument is everything between the first ``[`` and
    the last ``]``, stripped.
    """
    m = _ACTION.fullmatch(text)
    if m is None:
        return None
    return m.group(1).lower(), m.group(2).strip()


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class WebShopEnv(DatasetEnv):
    """The WebShop environment (see the module docstring and the spec page).

    Config (``ragen_envs/envs/webshop/config.schema.json``): ``split``, ``data_source``
    (``generated`` or a folder of original files), ``catalog_seed`` (0), ``catalog_size``
    (3000), ``catalog_variant`` (``plain`` or ``calibrated``: search as hard as the
    published shop's, :mod:`~ragen_envs.envs.webshop.catalog`), ``goals_per_product`` (1),
    ``goal_source`` (``human``), ``results_per_page``
    (10), ``reward_mode`` (``raw`` or ``binary``), ``max_query_chars`` (200),
    ``max_steps`` (15), ``invalid_action_reward`` (-0.1).

    Raises:
        MissingExtraError: ``bm25s`` is not installed (extra ``webshop``).
        DataSourceError: the original files cannot be read.
    """

    env_key = "webshop"

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        #: The oracle always reaches reward 1 on the generated catalogue; human goals of the
        #: original data may ask for options their target does not offer.
        self.oracle_is_exact = self.config["data_source"] == "generated"
        self._page = "search"

    # ------------------------------------------------------------------ shop
    @property
    def shop(self) -> Shop:
        """The shop of this config (built once per process)."""
        c = self.config
        return get_shop(
            c["data_source"],
            int(c["catalog_seed"]),
            int(c["catalog_size"]),
            int(c["goals_per_product"]),
            c["goal_source"],
            c["catalog_variant"],
        )

    @property
    def goal(self) -> Goal:
        """The current goal."""
        return self._item

    # ------------------------------------------------------------- data hooks
    def _table_key(self) -> Hashable:
        c = self.config
        return (
            type(self).__name__,
            c["data_source"],
            c["catalog_seed"],
            c["catalog_size"],
            c["goals_per_product"],
            c["goal_source"],
            c["catalog_variant"],
        )

    def _load_items(self) -> Sequence[Goal]:
        return self.shop.goals

    def _item_key(self, item: Goal) -> str:
        return canonical_key(item.instruction)

    def _start_item(self, item: Goal, options: Mapping[str, Any]) -> None:
        self._shop = self.shop
        self._target = self._shop.by_asin[item.asin.upper()]
        self._page = "search"
        self._query = ""
        self._results: list[int] = []
        self._page_no = 1
        self._product: int | None = None
        self._selected: dict[str, str] = {}
        self._purchase: RewardBreakdown | None = None

    def _reset_info(self) -> dict[str, Any]:
        return {**super()._reset_info(), "page": self._page}

    # ------------------------------------------------------------- pages
    def _n_pages(self) -> int:
        per = int(self.config["results_per_page"])
        return max(1, -(-len(self._results) // per))

    def _open_product(self) -> Product:
        """The product whose page is open (item, description, features or done page).

        Raises:
            AssertionError: no product page is open (a bug in the page logic).
        """
        assert self._product is not None
        return self._shop.products[self._product]

    def _page_products(self) -> list[int]:
        per = int(self.config["results_per_page"])
        return self._results[(self._page_no - 1) * per : self._page_no * per]

    def clickables(self) -> list[str]:
        """The click targets of the current page, in display order (lower case)."""
        if self._page == "results":
            out = [BACK]
            if self._page_no > 1:
                out.append(PREV)
            if self._page_no < self._n_pages():
                out.append(NEXT)
            out += [self._shop.products[i].asin.lower() for i in self._page_products()]
            return out
        if self._page == "item":
            p = self._open_product()
            return [BACK, PREV, DESC, FEAT, *(v for vals in p.options.values() for v in vals), BUY]
        if self._page in ("description", "features"):
            return [BACK, PREV]
        return []

    def legal_actions(self) -> list[str]:
        """The actions listed in the observation (``search[<your query>]`` stands for any query)."""
        if self._page == "search":
            return ["search[<your query>]"]
        return [f"click[{c}]" for c in self.clickables()]

    # ------------------------------------------------------------------ step
    def _step(self, action: str) -> Transition:
        parsed = parse_shop_action(action)
        if parsed is None:
            return self.invalid(
                "expected search[<query>] or click[<target>] with a target listed in the observation"
            )
        verb, arg = parsed
        if verb == "search":
            if self._page != "search":
                return self.invalid(
                    "search[...] is only available on the search page; click[back to search] first"
                )
            if not arg:
                return self.invalid("empty search query")
            if len(arg) > self.config["max_query_chars"]:
                return self.invalid(
                    f"query longer than max_query_chars ({self.config['max_query_chars']})"
                )
            self._query = arg
            self._results = self._shop.search(arg)
            self._page, self._page_no = "results", 1
            return Transition(
                0.0, info={"page": self._page, "query": arg, "n_results": len(self._results)}
            )
        target = _norm(arg)
        if target not in self.clickables():
            return self.invalid(
                f"click[{arg}] is not available on this page; use one of the listed actions"
            )
        return self._click(target)

    def _click(self, target: str) -> Transition:
        effective = True
        if target == BACK:
            self._page, self._query, self._results, self._product, self._selected = (
                "search",
                "",
                [],
                None,
                {},
            )
        elif target == NEXT:
            self._page_no += 1
        elif target == PREV:
            if self._page == "results":
                self._page_no -= 1
            elif self._page == "item":
                self._page, self._product, self._selected = "results", None, {}
            else:
                self._page = "item"
        elif target in (DESC, FEAT):
            self._page = target
        elif target == BUY:
            return self._buy()
        elif self._page == "results":
            self._product = next(
                i for i in self._page_products() if self._shop.products[i].asin.lower() == target
            )
            self._page, self._selected = "item", {}
        else:  # an option value on the item page
            p = self._open_product()
            name = next(n for n, vals in p.options.items() if target in vals)
            effective = self._selected.get(name) != target
            self._selected[name] = target
        return Transition(0.0, action_is_effective=effective, info={"page": self._page})

    def _buy(self) -> Transition:
        p = self._open_product()
        br = webshop_reward(p, self.goal, self._selected)
        self._purchase = br
        self._page = "done"
        success = br.reward >= 1.0 - 1e-9
        reward = br.reward if self.config["reward_mode"] == "raw" else (1.0 if success else 0.0)
        return Transition(
            reward,
            terminated=True,
            success=success,
            info={
                "page": "done",
                "purchased_asin": p.asin,
                "selected_options": dict(self._selected),
                "raw_reward": br.reward,
                "r_type": br.r_type,
                "attribute_matches": br.attribute_matches,
                "option_matches": br.option_matches,
                "price_ok": br.price_ok,
            },
        )

    # ----------------------------------------------------------- rendering
    def _product_line(self, rank: int, p: Product) -> str:
        return f"[{rank}] {p.asin.lower()} | {p.title} | ${p.price:.2f}"

    def _observation(self) -> str:
        lines = ["WebShop", f"Instruction: {self.goal.instruction}"]
        page = self._page
        if page == "search":
            lines += ["Page: search", "Type a query into the search box."]
        elif page == "results":
            if self._results:
                lines.append(
                    f"Page: results of search[{self._query}], page {self._page_no} of {self._n_pages()} "
                    f"({len(self._results)} products)"
                )
                start = (self._page_no - 1) * int(self.config["results_per_page"])
                lines += [
                    self._product_line(start + k + 1, self._shop.products[i])
                    for k, i in enumerate(self._page_products())
                ]
            else:
                lines.append(f"Page: results of search[{self._query}]: no product matches.")
        elif page in ("item", "description", "features"):
            p = self._open_product()
            if page == "item":
                lines += [
                    f"Page: item {p.asin.lower()}",
                    f"Title: {p.title}",
                    f"Price: ${p.price:.2f}",
                ]
                if p.options:
                    lines.append("Options (click a value to select it):")
                    for name, vals in p.options.items():
                        chosen = self._selected.get(name)
                        lines.append(
                            f"  {name}: "
                            + " | ".join(vals)
                            + (f"  (selected: {chosen})" if chosen else "")
                        )
            elif page == "description":
                lines += [f"Page: description of {p.asin.lower()}", p.description]
            else:
                lines += [
                    f"Page: features of {p.asin.lower()}",
                    *(f"- {b}" for b in p.bullet_points),
                ]
        else:
            p = self._open_product()
            br = self._purchase
            assert br is not None  # the "done" page follows a purchase
            opts = ", ".join(f"{k}: {v}" for k, v in self._selected.items()) or "none"
            lines += [
                "Page: purchase complete",
                f"You bought {p.title} ({p.asin.lower()}), options: {opts}, for ${p.price:.2f}.",
                f"Reward: {br.reward:.3f}",
            ]
            return join_lines(lines)
        lines.append("Available actions:")
        lines += self.legal_actions()
        return join_lines(lines)

    @property
    def instruction(self) -> str:
        c = self.config
        reward = (
            "the published WebShop score in [0, 1]: the share of the instruction's attributes, options and "
            "price bound your purchase satisfies, scaled down when the product type is wrong; 1 only for a "
            "perfect match"
            if c["reward_mode"] == "raw"
            else "1 if the purchase matches the instruction perfectly (type, every attribute and option, price), "
            "else 0"
        )
        return join_lines(
            [
                "You are shopping in a web store for the product the instruction describes.",
                "Each turn, take exactly one action from the 'Available actions' list of the current page:",
                "  search[<your query>]  on the search page: search the catalogue (any words);",
                "  click[<target>]       elsewhere: a product id, 'next >', '< prev', 'back to search', "
                "'description', 'features', an option value, or 'buy now'.",
                f"Select the options the instruction asks for before clicking 'buy now'; buying ends the episode. The "
                f"reward is {reward}.",
                f"You have at most {c['max_steps']} actions; an action that is not available on the page is invalid "
                f"({float(c['invalid_action_reward']):g}) and changes nothing.",
                "Example: <answer>search[organic green tea jasmine]</answer>, then <answer>click[b0abc12345]</answer>, "
                "<answer>click[jasmine]</answer>, <answer>click[buy now]</answer>.",
            ]
        )

    # ------------------------------------------------------------ baselines
    def _goal_choice(self) -> list[tuple[str, str]]:
        """The option (name, value) of the target to select for each goal option."""
        p = self._shop.products[self._target]
        out: list[tuple[str, str]] = []
        for name, g in self.goal.options:
            if name and g in p.options.get(name, ()):
                out.append((name, g))
                continue
            for n, vals in p.options.items():
                hit = next((v for v in vals if option_value_matches(n, v, g)), None)
                if hit is not None and all(n != m for m, _ in out):
                    out.append((n, hit))
                    break
        return out

    def _oracle_query(self) -> tuple[str, int]:
        """The query the oracle searches and the target's rank in its results: the goal's
        type and attributes, else those plus the goal option values, whichever first ranks
        the target within the first three result pages; else the target's title."""
        g, per, cap = (
            self.goal,
            int(self.config["results_per_page"]),
            int(self.config["max_query_chars"]),
        )
        base = " ".join([g.query, *g.attributes])
        for q in (base, " ".join([base, *g.option_values])):
            results = self._shop.search(q[:cap])
            if self._target in results[: 3 * per]:
                return q[:cap], results.index(self._target)
        title = self._shop.products[self._target].title[:cap]
        results = self._shop.search(title)
        if self._target in results:
            return title, results.index(self._target)
        raise RuntimeError(f"the oracle cannot find {g.asin} by search (goal {g.id})")

    def _plan_from_search(self) -> list[str]:
        q, rank = self._oracle_query()
        per = int(self.config["results_per_page"])
        return [
            f"search[{q}]",
            *["click[next >]"] * (rank // per),
            f"click[{self._shop.products[self._target].asin.lower()}]",
            *self._plan_on_target({}),
        ]

    def _plan_from_results(self) -> list[str]:
        if self._target not in self._results:
            return ["click[back to search]", *self._plan_from_search()]
        per = int(self.config["results_per_page"])
        page = self._results.index(self._target) // per + 1
        nav = ["click[next >]"] * (page - self._page_no) + ["click[< prev]"] * (
            self._page_no - page
        )
        return [
            *nav,
            f"click[{self._shop.products[self._target].asin.lower()}]",
            *self._plan_on_target({}),
        ]

    def _plan_on_target(self, selected: Mapping[str, str]) -> list[str]:
        return [f"click[{v}]" for n, v in self._goal_choice() if selected.get(n) != v] + [
            "click[buy now]"
        ]

    def oracle_actions(self) -> list[str]:
        """The rest of the plan: search the goal's key words, page to the target, select the
        goal options, buy (from any page: back to the results or the search page first)."""
        if self.status.is_terminal:
            return []
        if self._page == "search":
            return self._plan_from_search()
        if self._page == "results":
            return self._plan_from_results()
        on_target = self._product == self._target
        if self._page in ("description", "features"):
            head = ["click[< prev]"]
        else:
            head = []
        if on_target:
            return [*head, *self._plan_on_target(self._selected)]
        return [*head, "click[< prev]", *self._plan_from_results()]

    def optimal_return(self) -> float:
        """Buying the target with the goal options within the price bound earns 1 (both reward modes)."""
        return 1.0

    def sample_action(self, rng: np.random.Generator) -> str:
        """Random baseline: on the search page 1-3 random catalogue words, elsewhere a uniformly
        random click among the listed ones."""
        if self._page == "search":
            vocab = self._shop.vocabulary
            k = int(rng.integers(1, 4))
            return (
                "search["
                + " ".join(vocab[int(i)] for i in rng.integers(0, len(vocab), size=k))
                + "]"
            )
        clicks = self.clickables()
        return f"click[{clicks[int(rng.integers(len(clicks)))]}]"
