"""WebShop: the published reward (options at most once), the generated catalogue and its
determinism across processes, goals and splits, pages and legal actions, invalid actions,
the original-file loader, and the oracle."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import ragen_envs
from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode
from ragen_envs.data.loaders import DataSourceError, MissingExtraError
from ragen_envs.envs.webshop import parse_shop_action
from ragen_envs.envs.webshop.catalog import generate_catalog, generate_goals, price_upper_bound
from ragen_envs.envs.webshop.original import load_webshop_dir
from ragen_envs.envs.webshop.products import Goal, Product, words
from ragen_envs.envs.webshop.reward import (
    attribute_matches,
    combine,
    option_matches,
    token_set_ratio,
    type_score,
    webshop_reward,
)
from ragen_envs.envs.webshop.rule import PAPER_SCORE, PAPER_SUCCESS, rule_policy
from ragen_envs.envs.webshop.vocab import PRODUCT_TYPES

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "webshop"
ENV_ID = "ragen/WebShop-v0"
CALIBRATED_ID = "ragen/WebShop-Calibrated-v0"


# ------------------------------------------------------------------- reward
@pytest.mark.parametrize(
    ("r_type", "n_att", "g_att", "n_opt", "g_opt", "price_ok", "expected"),
    [
        (
            0.5,
            1,
            3,
            2,
            3,
            True,
            2 / 7,
        ),  # the documented worked case: 0.5 * (1 + 2 + 1) / (3 + 3 + 1)
        (1.0, 3, 3, 3, 3, True, 1.0),
        (1.0, 3, 3, 3, 3, False, 6 / 7),
        (1.0, 0, 1, 0, 0, True, 1 / 2),
        (0.1, 2, 2, 1, 1, True, 0.1),
        (0.0, 2, 2, 1, 1, True, 0.0),
        (1.0, 0, 2, 0, 2, False, 0.0),
    ],
)
def test_reward_formula_table(
    r_type: float, n_att: int, g_att: int, n_opt: int, g_opt: int, price_ok: bool, expected: float
) -> None:
    assert combine(r_type, n_att, g_att, n_opt, g_opt, price_ok) == pytest.approx(expected)


def test_combine_refuses_counts_that_would_exceed_one() -> None:
    with pytest.raises(ValueError, match="out of range"):
        combine(1.0, 1, 1, 3, 2, True)


def _product(**kw: object) -> Product:
    base = dict(
        asin="B0AAAAAAAA",
        title="Zeta Canvas Bag",
        category="fashion",
        query="tote bag",
        product_category="a › b › c",
        name_nouns=("zeta", "canvas", "bag"),
        attributes=("waterproof",),
        options={},
        price=20.0,
        bullet_points=(),
        description="",
    )
    base.update(kw)
    return Product(**base)  # type: ignore[arg-type]


def _goal(**kw: object) -> Goal:
    base = dict(
        id="g",
        asin="B0BBBBBBBB",
        instruction="i need a thing",
        attributes=("waterproof",),
        options=(),
        price_upper=30.0,
        query="tote bag",
        product_category="a › b › c",
        name_nouns=("zeta", "canvas", "bag"),
    )
    base.update(kw)
    return Goal(**base)  # type: ignore[arg-type]


def test_two_sevenths_through_the_full_scorer() -> None:
    """1 of 3 attributes, 2 of 3 options, within price, type score 0.5 -> 2/7."""
    goal = _goal(
        attributes=("waterproof", "leather strap", "gift box"),
        options=(("color", "red"), ("size", "large"), ("pattern", "striped")),
        query="travel backpack",
        product_category="luggage › backpacks › travel",
        name_nouns=("alpha", "travel", "backpack", "laptop", "compartment"),
        price_upper=50.0,
    )
    product = _product(
        title="Omega Hiking Rucksack",
        attributes=("waterproof", "padded back"),
        query="hiking rucksack",
        product_category="sports › outdoors › hiking",
        name_nouns=("omega", "hiking", "rucksack", "travel"),
        options={
            "color": ("red", "blue"),
            "size": ("medium", "large"),
            "pattern": ("plain", "dotted"),
        },
        price=45.0,
    )
    br = webshop_reward(product, goal, {"color": "red", "size": "large", "pattern": "plain"})
    assert (br.r_type, br.query_match, br.category_match, br.title_score) == (
        0.5,
        False,
        False,
        0.2,
    )
    assert (br.attribute_matches, br.option_matches, br.price_ok) == (1, 2, True)
    assert br.reward == pytest.approx(2 / 7)


@pytest.mark.parametrize(
    ("purchased_nouns", "query", "category", "expected"),
    [
        (("zeta", "canvas", "bag"), "tote bag", "a › b › c", 1.0),  # query match
        (("omega", "x", "y", "z"), "other", "a › b › q", 0.0),  # category match, title score 0 -> 0
        (("zeta", "x"), "other", "q › r › s", 1.0),  # title score 1/3 > 0.2
        (("bag", "x"), "other", "q › r › s", 1.0),
    ],
)
def test_type_score(
    purchased_nouns: tuple[str, ...], query: str, category: str, expected: float
) -> None:
    goal = _goal()
    product = _product(name_nouns=purchased_nouns, query=query, product_category=category)
    assert type_score(product, goal)[0] == expected


def test_type_score_low_title_overlap() -> None:
    goal = _goal(name_nouns=tuple(f"n{i}" for i in range(12)))
    assert (
        type_score(_product(name_nouns=("n0",), query="q", product_category="x › y › z"), goal)[0]
        == 0.1
    )  # 1/12
    assert (
        type_score(
            _product(name_nouns=("n0", "n1"), query="q", product_category="x › y › z"), goal
        )[0]
        == 0.5
    )


def test_each_goal_option_counts_at_most_once() -> None:
    product = _product(
        title="Zeta Red Canvas Bag", options={"color": ("red", "blue"), "trim": ("red", "gold")}
    )
    # The engine would count both purchased options (and the title) for the one goal option "red".
    assert option_matches(product, ["red"], {"color": "red", "trim": "red"}) == 1
    assert option_matches(product, ["red", "red"], {"color": "red", "trim": "red"}) == 2
    assert option_matches(product, ["red", "gold"], {"color": "red"}) == 1
    assert option_matches(product, ["red"], {}) == 0  # offered but not chosen: no text credit
    plain = _product(title="Zeta Red Canvas Bag", options={})
    assert option_matches(plain, ["red"], {}) == 1  # a property of the product that needs no choice
    sized = _product(options={"size": ("9", "9.5")})
    assert option_matches(sized, ["9"], {"size": "9.5"}) == 0  # sizes match exactly
    assert option_matches(sized, ["9"], {"size": "9"}) == 1


def test_attribute_matching() -> None:
    product = _product(
        attributes=("waterproof fabric", "padded"), bullet_points=("Gift box included",)
    )
    assert attribute_matches(product, ["waterproof"]) == 1  # token subset: ratio 100
    assert attribute_matches(product, ["gift box"]) == 1  # found in the bullet points
    assert attribute_matches(product, ["leather strap"]) == 0
    assert token_set_ratio("waterproof", "waterproof jacket") == 100
    assert token_set_ratio("non slip", "slip resistant") < 85
    assert token_set_ratio("", "x") == 0


def test_reward_never_exceeds_one_on_random_purchases() -> None:
    products = generate_catalog(0, 3000)
    goals = generate_goals(0, 3000)
    rng = np.random.default_rng(0)
    for _ in range(1500):
        g = goals[int(rng.integers(len(goals)))]
        p = products[int(rng.integers(len(products)))]
        chosen = {
            n: vals[int(rng.integers(len(vals)))]
            for n, vals in p.options.items()
            if rng.random() < 0.7
        }
        br = webshop_reward(p, g, chosen)
        assert 0.0 <= br.reward <= 1.0 and br.option_matches <= len(g.options)
        assert br.r_type in (0.0, 0.1, 0.5, 1.0)


def test_price_bound_rule() -> None:
    assert price_upper_bound(1_500.0, 0.1, 0.1) == 1_000_000.0  # no grid price above: no bound
    assert price_upper_bound(985.0, 0.0, 0.0) == 1_000_000.0  # one grid price above (990): no bound
    assert price_upper_bound(12.5, 0.0, 0.0) == 30.0  # grid above: 20, 30, 40, 50; picks 20 and 30
    assert price_upper_bound(12.5, 0.99, 0.99) == 50.0
    for u1 in np.linspace(0, 0.99, 7):
        for u2 in np.linspace(0, 0.99, 7):
            assert price_upper_bound(12.5, u1, u2) in (30.0, 40.0, 50.0)


# ---------------------------------------------------------------- catalogue
def _catalogue_digest() -> str:
    products = generate_catalog(0, 3000)
    goals = generate_goals(0, 3000)
    payload = json.dumps(
        [[asdict(p) for p in products], [asdict(g) for g in goals]], sort_keys=True
    )
    from ragen_envs.envs.webshop.engine import get_shop

    shop = get_shop("generated", 0, 3000, 1, "human")
    searches = [
        shop.search(q) for q in ("running shoes black", "organic green tea", "x-large hoodie", "9")
    ]
    return hashlib.sha256((payload + json.dumps(searches)).encode()).hexdigest()


def test_catalogue_and_search_identical_across_processes() -> None:
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); from tests.envs.test_webshop import _catalogue_digest; print(_catalogue_digest())"
    digests = set()
    for hash_seed in ("0", "4242"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        digests.add(out.stdout.strip())
    digests.add(_catalogue_digest())
    assert len(digests) == 1


def test_catalogue_shape() -> None:
    products = generate_catalog(0, 3000)
    assert len(products) == 3000 and len({p.asin for p in products}) == 3000
    assert generate_catalog(0, 200) == products[:200]  # a smaller catalogue is a prefix
    assert generate_catalog(1, 200) != products[:200]
    assert {p.category for p in products} == {
        "beauty",
        "electronics",
        "fashion",
        "food",
        "furniture",
    }
    assert len({p.query for p in products}) == len(PRODUCT_TYPES) == 33
    for p in products[:500]:
        assert re.fullmatch(r"B0[0-9A-Z]{8}", p.asin) and 3 <= len(p.attributes) <= 5
        assert all(len(v) >= 2 for v in p.options.values())


@pytest.mark.parametrize("variant", ["plain", "calibrated"])
def test_every_generated_goal_is_satisfiable_by_its_target(variant: str) -> None:
    products = {p.asin: p for p in generate_catalog(0, 3000, variant)}
    for g in generate_goals(0, 3000, 1, variant):
        p = products[g.asin]
        assert 1 <= len(g.attributes) <= 3 and p.price <= g.price_upper
        assert webshop_reward(p, g, dict(g.options)).reward == 1.0
        assert g.instruction.startswith(
            ("i need", "i'm looking for", "find me", "i want to buy", "please find")
        )


def test_goal_splits_are_disjoint() -> None:
    seen: dict[str, str] = {}
    sizes = {}
    for split in ("train", "validation", "test"):
        items = ragen_envs.make(ENV_ID, split=split).unwrapped.split_items()
        sizes[split] = len(items)
        for g in items:
            assert seen.setdefault(" ".join(g.instruction.lower().split()), split) == split
    assert min(sizes.values()) >= 200 and sum(sizes.values()) >= 2900


# ------------------------------------------------------------ pages / actions
def _listed_actions(obs: str) -> list[str]:
    return (
        obs.split("Available actions:\n", 1)[1].splitlines() if "Available actions:" in obs else []
    )


def test_legal_actions_listed_and_all_valid() -> None:
    env = ragen_envs.make(ENV_ID)
    base = env.unwrapped
    rng = np.random.default_rng(3)
    for seed in range(30):
        obs, _ = env.reset(seed=seed)
        for _ in range(12):
            listed = _listed_actions(obs)
            assert listed == base.legal_actions() and listed
            action = base.sample_action(rng)
            if not action.startswith("search["):
                assert action in listed
            obs, _, terminated, truncated, info = env.step(action)
            assert info["action_is_valid"]
            if terminated or truncated:
                break


def test_invalid_actions() -> None:
    env = ragen_envs.make(ENV_ID)
    obs0, _ = env.reset(seed=1)
    for bad in (
        "click[buy now]",
        "click[next >]",
        "search[]",
        "search[" + "w" * 201 + "]",
        "buy",
        "Search for shoes",
    ):
        obs, reward, terminated, _, info = env.step(bad)
        assert (obs, reward, terminated, info["action_is_valid"]) == (obs0, -0.1, False, False), bad
    obs1, *_ = env.step("search[green tea]")
    for bad in ("search[coffee]", "click[b0zzzzzzzz]", "click[description]", "click[buy now]"):
        obs, reward, _, _, info = env.step(bad)
        assert (obs, info["action_is_valid"]) == (obs1, False), bad
        assert "not available" in info["invalid_reason"] or "search page" in info["invalid_reason"]


def test_navigation_and_option_selection() -> None:
    env = ragen_envs.make(ENV_ID)
    base = env.unwrapped
    env.reset(seed=0)
    obs, *_, info = env.step("search[shoes]")
    assert info["n_results"] == 50 and "page 1 of 5" in obs and "click[< prev]" not in obs
    obs, *_ = env.step("CLICK[Next >]")  # verb and target are case-insensitive
    assert "page 2 of 5" in obs and "click[< prev]" in obs and "[11] " in obs
    for _ in range(3):
        obs, *_ = env.step("click[next >]")
    assert "page 5 of 5" in obs and "click[next >]" not in obs
    first = _listed_actions(obs)[2]
    obs, *_, info = env.step(first)
    assert info["page"] == "item"
    p = base.shop.products[base._product]
    name, values = next(iter(p.options.items()))
    obs, _, _, _, info = env.step(f"click[{values[1]}]")
    assert f"(selected: {values[1]})" in obs and info["action_is_effective"]
    assert not env.step(f"click[{values[1]}]")[4][
        "action_is_effective"
    ]  # selecting again changes nothing
    obs, *_ = env.step("click[features]")
    assert "Page: features of" in obs and _listed_actions(obs) == [
        "click[back to search]",
        "click[< prev]",
    ]
    obs, *_ = env.step("click[< prev]")
    assert f"(selected: {values[1]})" in obs  # selections survive the sub-page
    obs, *_ = env.step("click[< prev]")
    assert "page 5 of 5" in obs
    obs, *_, info = env.step("click[back to search]")
    assert info["page"] == "search" and _listed_actions(obs) == ["search[<your query>]"]


def test_buying_ends_the_episode_with_the_reward() -> None:
    for env_id, mode in ((ENV_ID, "raw"), ("ragen/WebShop-Binary-v0", "binary")):
        env = ragen_envs.make(env_id)
        base = env.unwrapped
        env.reset(seed=5)
        env.step(f"search[{base.goal.query}]")
        listed = [
            a
            for a in _listed_actions(env.unwrapped._observation())
            if re.fullmatch(r"click\[b0\w{8}\]", a)
        ]
        obs, reward, terminated, _, info = env.step(listed[0])
        obs, reward, terminated, _, info = env.step("click[buy now]")
        assert terminated and info["page"] == "done" and "Page: purchase complete" in obs
        raw = info["raw_reward"]
        assert 0 <= raw < 1 or info["success"]
        assert reward == (raw if mode == "raw" else float(info["success"]))


def test_parse_shop_action() -> None:
    assert parse_shop_action(" click [ Buy Now ] ") == ("click", "Buy Now")
    assert parse_shop_action("search[a [b] c]") == ("search", "a [b] c")
    assert parse_shop_action("buy now") is None


# ------------------------------------------------------------------- oracle
@pytest.mark.parametrize(
    ("env_id", "split"),
    [
        (ENV_ID, "train"),
        (ENV_ID, "validation"),
        (ENV_ID, "test"),
        ("ragen/WebShop-Binary-v0", "test"),
        (CALIBRATED_ID, "train"),
        (CALIBRATED_ID, "test"),
    ],
)
def test_oracle_reaches_reward_one_within_the_turn_budget(env_id: str, split: str) -> None:
    env = ragen_envs.make(env_id, split=split)
    budget = ragen_envs.get_entry(env_id).agent_defaults["max_turns"]
    for seed in range(200):
        result = run_episode(env, oracle_policy, seed=seed)
        assert result.success and result.episode_return == 1.0, seed
        assert len(result.actions) <= budget
        assert result.infos[-1]["purchased_asin"] == env.unwrapped.goal.asin


def test_oracle_recovers_from_any_page() -> None:
    env = ragen_envs.make(ENV_ID)
    rng = np.random.default_rng(11)
    for seed in range(40):
        env.reset(seed=seed)
        base = env.unwrapped
        for _ in range(int(rng.integers(1, 5))):  # wander first (never buying)
            action = base.sample_action(rng)
            if action != "click[buy now]":
                env.step(action)
        result_actions = base.oracle_actions()
        for a in result_actions:
            *_, terminated, truncated, info = env.step(a)
            if terminated or truncated:
                break
        assert info.get("success") or truncated, (seed, result_actions)


def test_random_baseline() -> None:
    env = ragen_envs.make(ENV_ID)
    results = [run_episode(env, make_random_policy(5), seed=s) for s in range(200)]
    assert sum(r.success for r in results) <= 4
    assert all(0 <= r.episode_return <= 1 for r in results)


# ----------------------------------------------------------- original files
def test_original_file_loader() -> None:
    products, goals = load_webshop_dir(DATA, goal_source="human")
    assert [p.asin for p in products] == [
        "B0TEST0001",
        "B0TEST0002",
        "B0TEST0003",
    ]  # duplicate and 'nan' skipped
    shoes, tea, table = products
    assert shoes.options == {"color": ("black | white", "navy blue"), "size": ("9", "10")}
    assert shoes.price == 39.99 and shoes.bullet_points[0] == "Breathable mesh upper"
    assert 8.0 <= tea.price <= 14.0 and tea.bullet_points == ("Organic and fair trade",)
    assert table.price == 100.0 and table.attributes == ("DUMMY_ATTR",)
    assert [g.id for g in goals] == [
        "B0TEST0001-h0",
        "B0TEST0002-h0",
    ]  # no-attribute and unknown-ASIN goals skipped
    assert goals[0].option_values == ("navy blue", "10") and goals[0].attributes == (
        "lightweight",
        "rubber sole",
    )
    assert goals[0].instruction.endswith(
        f", and price lower than {goals[0].price_upper:.2f} dollars"
    )
    assert load_webshop_dir(DATA, goal_source="human") == (products, goals)  # deterministic
    _, synthetic = load_webshop_dir(DATA, goal_source="synthetic")
    assert len(synthetic) == 4 + 2  # every option combination of the two products with instructions
    with pytest.raises(DataSourceError, match="items_shuffle"):
        load_webshop_dir(DATA / "missing")


def test_env_over_original_files() -> None:
    for goal_source in ("human", "synthetic"):
        for split in ("train", "validation", "test"):
            env = ragen_envs.make(
                ENV_ID, data_source=str(DATA), goal_source=goal_source, split=split
            )
            try:
                n = len(env.unwrapped.split_items())
            except DataSourceError:
                continue  # a two-goal file leaves some splits empty
            for seed in range(n):
                result = run_episode(env, oracle_policy, seed=seed)
                assert result.success, (goal_source, split, seed)


def test_missing_bm25s_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragen_envs.envs.webshop.engine import Shop

    monkeypatch.setitem(sys.modules, "bm25s", None)
    with pytest.raises(
        MissingExtraError,
        match=re.escape(
            "pip install 'ragen-envs[webshop]' (or 'ragen[webshop]' for the full project"
        ),
    ):
        Shop(generate_catalog(0, 20), ())


def test_product_built_directly_with_a_string_bullet_points_is_not_split_into_characters() -> None:
    """The constructor normalises like the loader does — a string is one
    entry, a list becomes a tuple, and the reward's text fallback sees the words."""
    p = _product(
        bullet_points="Machine washable cotton",
        attributes="waterproof",
        name_nouns=["zeta", "bag"],
        options={"size": "large", "color": ["black", "navy"]},
    )
    assert p.bullet_points == ("Machine washable cotton",)
    assert p.attributes == ("waterproof",)
    assert p.name_nouns == ("zeta", "bag")
    assert p.options == {"size": ("large",), "color": ("black", "navy")}
    assert "machine washable cotton" in p.text
    assert p == _product(
        bullet_points=("Machine washable cotton",),
        attributes=("waterproof",),
        name_nouns=("zeta", "bag"),
        options={"size": ("large",), "color": ("black", "navy")},
    )
    assert (
        _product(bullet_points="").bullet_points == ()
        and _product(bullet_points=None).bullet_points == ()
    )
    g = _goal(attributes="waterproof", options={"color": "black"}, name_nouns=["bag"])
    assert (g.attributes, g.options, g.name_nouns) == (
        ("waterproof",),
        (("color", "black"),),
        ("bag",),
    )


# ------------------------------------------------- calibration against the paper
def _mean_and_success(env_id: str, split: str, policy_for, n: int | None) -> tuple[float, float]:
    """Mean return and success rate over seeds ``0 .. n - 1`` (``None``: every goal of the split)."""
    env = ragen_envs.make(env_id, split=split)
    seeds = range(len(env.unwrapped.split_items()) if n is None else n)
    results = [run_episode(env, policy_for(s), seed=s) for s in seeds]
    return (
        sum(r.episode_return for r in results) / len(results),
        sum(r.success for r in results) / len(results),
    )


# Golden numbers (scripts/measure_reward_exploits.py webshop prints them): the paper's rule
# baseline on every test goal (327 plain, 311 calibrated), the random baseline (policy seed = env seed) on train
# seeds 0-199.
RULE_GOLDEN = {ENV_ID: (0.6356, 0.0), CALIBRATED_ID: (0.4603, 0.09)}
RANDOM_GOLDEN = {ENV_ID: 0.0135, CALIBRATED_ID: 0.0122}


@pytest.mark.parametrize("env_id", [ENV_ID, CALIBRATED_ID])
def test_rule_baseline_golden_numbers(env_id: str) -> None:
    """Search the instruction, click the first result, buy without options (WebShop paper,
    Table 2, "Rule": 45.6 score, 9.6 % success on the real catalogue)."""
    mean, success = _mean_and_success(env_id, "test", lambda s: rule_policy, None)
    assert (round(mean, 4), round(success, 4)) == RULE_GOLDEN[env_id]
    if env_id == CALIBRATED_ID:  # as hard as the published catalogue
        assert abs(100 * mean - PAPER_SCORE) < 1.5 and abs(success - PAPER_SUCCESS) < 0.01
    else:  # the plain catalogue is easier: the first hit is always of the goal's type
        assert 100 * mean > PAPER_SCORE + 10


@pytest.mark.parametrize("env_id", [ENV_ID, CALIBRATED_ID])
def test_random_baseline_golden_numbers(env_id: str) -> None:
    mean, success = _mean_and_success(env_id, "train", make_random_policy, 200)
    assert round(mean, 4) == RANDOM_GOLDEN[env_id] and success == 0.0


def test_rule_baseline_reads_only_the_observation() -> None:
    env = ragen_envs.make(CALIBRATED_ID, split="test")
    obs, _ = env.reset(seed=3)
    base = env.unwrapped
    (search,) = rule_policy(base, obs)
    assert search == f"search[{base.goal.instruction[:200]}]"
    obs, *_ = env.step(search)
    (click,) = rule_policy(base, obs)
    assert click == f"click[{base.shop.products[base._results[0]].asin.lower()}]"
    obs, *_ = env.step(click)
    assert rule_policy(base, obs) == ["click[buy now]"]


def test_calibrated_catalogue_keeps_the_plain_draws_and_adds_accessories() -> None:
    from ragen_envs.envs.webshop.catalog import ACCESSORY_SHARE, NO_OPTION_GOAL_SHARE

    plain, cal = generate_catalog(0, 3000), generate_catalog(0, 3000, "calibrated")
    assert generate_catalog(0, 200, "calibrated") == cal[:200]  # still a prefix
    changed = [(p, c) for p, c in zip(plain, cal) if p != c]
    assert abs(len(changed) / 3000 - ACCESSORY_SHARE) < 0.03
    for p, c in changed:
        assert c.asin == p.asin and c.attributes == p.attributes and c.options == p.options
        assert c.category == "accessories" and c.query.startswith(p.query + " ")
        assert not set(words(p.query)) & set(c.name_nouns)  # another product: no type nouns
    goals = generate_goals(0, 3000, 1, "calibrated")
    no_options = sum(not g.options for g in goals) / len(goals)
    assert abs(no_options - NO_OPTION_GOAL_SHARE) < 0.03
    assert generate_goals(0, 3000) != goals
    with pytest.raises(ValueError, match="catalog_variant must be one of"):
        generate_catalog(0, 10, "hard")
