"""SearchQA and WebShop speed (pytest-benchmark): index builds, resets/s, steps/s by action kind,
and the random baseline's success rate.

Run with ``pytest benchmarks/test_search_webshop_speed.py --benchmark-only`` (see
``benchmarks/README.md``).  Every figure is per call on the unwrapped env; resets/s and
steps/s are ``1 / mean``.  ``test_random_baseline`` times 200 random-baseline episodes and
stores the success rate and mean return in ``extra_info`` (``--benchmark-json`` keeps them).

* ``test_index_build``: building the BM25 index of the bundled SearchQA corpus (660 passages)
  and of the generated WebShop catalogue (3000 products; catalogue generation included);
  both are built once per process and cached by the envs.
* ``test_reset``: ``reset(seed=k)`` with a new seed per call (the shop / index already built).
* ``test_step``: one step of the given kind, everything else (reset, navigation) in ``setup``:
  SearchQA ``search`` (a BM25 query over 660 passages and rendering 5 documents) and
  ``finish`` (scoring); WebShop ``search`` (BM25 over 3000 products, top 50), ``click``
  (``next >`` on a result page) and ``buy`` (the reward).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import ragen_envs
from ragen_envs.baselines import make_random_policy, run_episode

SEARCHQA, WEBSHOP = "ragen/SearchQA-v0", "ragen/WebShop-v0"


def test_index_build_searchqa(benchmark: Any) -> None:
    from ragen_envs.envs.searchqa.retrieval import BM25Retriever, corpus_documents

    docs = corpus_documents("bundled:searchqa-countries-corpus")
    benchmark.group = "index build"
    benchmark.pedantic(lambda: BM25Retriever(docs), rounds=5, warmup_rounds=1)


def test_index_build_webshop(benchmark: Any) -> None:
    from ragen_envs.envs.webshop import catalog
    from ragen_envs.envs.webshop.engine import Shop

    def build() -> Shop:
        catalog.generate_catalog.cache_clear()
        catalog.generate_goals.cache_clear()
        return Shop(catalog.generate_catalog(0, 3000), catalog.generate_goals(0, 3000))

    benchmark.group = "index build"
    benchmark.pedantic(build, rounds=3, warmup_rounds=1)


@pytest.mark.parametrize("env_id", [SEARCHQA, WEBSHOP])
def test_reset(benchmark: Any, env_id: str) -> None:
    env = ragen_envs.make(env_id).unwrapped
    env.reset(seed=0)
    env.step("search[warm up]")  # build the index outside the timed region
    seeds = itertools.count()
    benchmark.group = "reset"
    benchmark.extra_info["env_id"] = env_id
    obs, _ = benchmark(lambda: env.reset(seed=next(seeds)))
    assert isinstance(obs, str)


class _Runner:
    """Prepares the env in ``setup`` so that the timed call is exactly one step of one kind."""

    def __init__(self, env_id: str, kind: str):
        self.env = ragen_envs.make(env_id).unwrapped
        self.kind = kind
        self.seeds = itertools.count()
        self.invalid = 0

    def setup(self) -> tuple[tuple[str], dict[str, Any]]:
        env = self.env
        env.reset(seed=next(self.seeds))
        if env.env_key == "searchqa":
            question = env.item.question
            return (
                (
                    f"search[{question}]"
                    if self.kind == "search"
                    else f"finish[{env.item.answers[0]}]"
                ),
            ), {}
        if self.kind == "search":
            return (f"search[{env.goal.query} {' '.join(env.goal.attributes)}]",), {}
        env.step(f"search[{env.goal.query}]")
        if self.kind == "click":
            return ("click[next >]",), {}
        env.step(env.legal_actions()[2])  # the first product on the page
        return ("click[buy now]",), {}

    def step(self, action: str) -> None:
        *_, info = self.env.step(action)
        self.invalid += not info["action_is_valid"]


@pytest.mark.parametrize(
    ("env_id", "kind"),
    [
        (SEARCHQA, "search"),
        (SEARCHQA, "finish"),
        (WEBSHOP, "search"),
        (WEBSHOP, "click"),
        (WEBSHOP, "buy"),
    ],
)
def test_step(benchmark: Any, env_id: str, kind: str) -> None:
    runner = _Runner(env_id, kind)
    runner.setup()  # build the index outside the timed region
    runner.env.step("search[warm up]") if runner.env.status.value == "running" else None
    benchmark.group = "step"
    benchmark.extra_info.update(env_id=env_id, kind=kind)
    benchmark.pedantic(runner.step, setup=runner.setup, rounds=1000, warmup_rounds=5)
    assert runner.invalid == 0


@pytest.mark.parametrize("env_id", [SEARCHQA, WEBSHOP, "ragen/WebShop-Binary-v0"])
def test_random_baseline(benchmark: Any, env_id: str) -> None:
    env = ragen_envs.make(env_id)
    episodes = 200

    def run() -> list[Any]:
        policy = make_random_policy(0)
        return [run_episode(env, policy, seed=s) for s in range(episodes)]

    benchmark.group = "random baseline (200 episodes)"
    results = benchmark.pedantic(run, rounds=1, warmup_rounds=0)
    benchmark.extra_info.update(
        env_id=env_id,
        success_rate=float(np.mean([r.success for r in results])),
        mean_return=float(np.mean([r.episode_return for r in results])),
        mean_length=float(np.mean([len(r.actions) for r in results])),
    )
