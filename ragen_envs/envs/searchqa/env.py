"""SearchQA: answer a question by searching a corpus (spec: ``docs/envs/searchqa.md``).

Multi-turn tool use in RAGEN's style (RAGEN-AI/RAGEN ragen/env/): the agent issues
``search[query]`` actions, reads the retrieved documents (ids, scores, text capped in
length), and ends the episode with ``finish[answer]``, scored by exact match / F1 after
SQuAD normalisation (:mod:`ragen_envs.envs.searchqa.scoring`).  Retrieval goes through one
interface (:mod:`ragen_envs.envs.searchqa.retrieval`): a local BM25 index over the configured
corpus (default: our bundled country passages) or an HTTP retrieval server speaking
Search-R1's or RAGEN's protocol (a dense Wikipedia index plugs in unchanged).

Differences from RAGEN, each a documented choice: text that is neither ``search[...]``
nor ``finish[...]`` is an *invalid action* (state unchanged, penalty), not an answer
scored with ``valid=False``; splits are disjoint by construction (RAGEN validates on its
training file, weakness 6); the server URL and protocol are configurable (RAGEN
hard-codes port 8000, shared with Lean, weakness 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core import Transition, join_lines
from ...data.loaders import load_source
from ...data.splits import canonical_key
from ...dataset_env import DatasetEnv
from .questions import QAItem, qa_item_from_record
from .retrieval import Hit, HttpRetriever, Retriever, format_hits, local_bm25_retriever
from .scoring import qa_reward, score_answer

__all__ = ["SearchQAEnv", "format_deviation", "parse_search_action"]

_ACTION = re.compile(r"\s*(search|finish)\s*\[(.*)\]\s*([.!?,;:]*)\s*", re.IGNORECASE | re.DOTALL)

#: Words the random baseline draws its queries from (besides words of the question).
_RANDOM_WORDS = (
    "capital",
    "currency",
    "language",
    "population",
    "continent",
    "country",
    "city",
    "economy",
    "demographics",
    "official",
    "history",
    "river",
    "president",
    "year",
    "war",
    "music",
)


def parse_search_action(text: str) -> tuple[str, str] | None:
    """``"search[capital of France]"`` -> ``("search", "capital of France")``; else ``None``.

    The verb is case-insensitive, surrounding whitespace is ignored, the argument is
    everything between the first ``[`` and the last ``]`` (stripped); sentence
    punctuation after the ``]`` (``finish[Paris].``) is tolerated — see
    :func:`format_deviation`.
    """
    m = _ACTION.fullmatch(text)
    if m is None:
        return None
    return m.group(1).lower(), m.group(2).strip()


def format_deviation(text: str) -> str | None:
    """How a parsable action strays from the exact grammar, or ``None`` if it does not.

    Today: punctuation after the closing bracket (``finish[Paris].``), which is parsed
    as ``finish[Paris]`` and recorded in ``info["format_deviation"]``.
    """
    m = _ACTION.fullmatch(text)
    if m is None or not m.group(3):
        return None
    return f"text after the closing bracket ignored: {m.group(3)!r}"


class SearchQAEnv(DatasetEnv):
    """Question answering with a search tool (see the module docstring and the spec page).

    Config (``ragen_envs/envs/searchqa/config.schema.json``): ``split``, ``split_mode``,
    ``data_source``, ``data_format``, ``retriever`` (``bm25`` | ``http``), ``corpus``,
    ``retriever_url``, ``retriever_protocol``, ``retriever_timeout_s``, ``topk`` (5),
    ``max_doc_chars`` (800), ``max_results_chars`` (4000), ``max_query_chars`` (300),
    ``max_answer_chars`` (300), ``reward_mode`` (``em_or_f1``), ``f1_threshold`` (0.3),
    ``numbers_must_match`` (false; the strict variant of partial credit),
    ``max_steps`` (10), ``invalid_action_reward`` (-0.1).

    Raises:
        MissingExtraError: ``retriever="bm25"`` and ``bm25s`` is not installed (extra ``search``).
        RetrievalError: from ``step`` when the HTTP back-end fails (unreachable, timeout,
            malformed response); the episode cannot continue.
    """

    env_key = "searchqa"

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        c = self.config
        self._retriever: Retriever | None = None
        if c["retriever"] == "http":
            self._retriever = HttpRetriever(
                c["retriever_url"],
                protocol=c["retriever_protocol"],
                timeout_s=c["retriever_timeout_s"],
            )
        self._queries: list[str] = []
        self._last: tuple[str, list[Hit]] | None = None
        self._final: str | None = None

    @property
    def retriever(self) -> Retriever:
        """The retrieval back-end (the local BM25 index is built on first use, once per process)."""
        if self._retriever is None:
            self._retriever = local_bm25_retriever(self.config["corpus"])
        return self._retriever

    def check_ready(self) -> None:
        """Build what the first ``search[...]`` needs (the local BM25 index), so that a
        missing ``bm25s`` is reported before any episode is played (``ragen_bench.preflight``).

        Raises:
            MissingExtraError: ``retriever="bm25"`` and ``bm25s`` is not installed.
        """
        _ = self.retriever

    # ------------------------------------------------------------- data hooks
    def _load_items(self) -> Sequence[QAItem]:
        items = []
        for rec in load_source(self.config["data_source"]):
            item = qa_item_from_record(rec, self.config["data_format"])
            if item is not None:
                items.append(item)
        return items

    def _item_key(self, item: QAItem) -> str:
        return canonical_key(item.question)

    def _item_group(self, item: QAItem) -> str:
        # Our questions share a split per country (entity); other sources per question.
        return canonical_key(item.key_text)

    def _start_item(self, item: QAItem, options: Mapping[str, Any]) -> None:
        self._queries = []
        self._last = None
        self._final = None

    def _reset_info(self) -> dict[str, Any]:
        return {**super()._reset_info(), "question_type": self._item.type, "hops": self._item.hops}

    # ------------------------------------------------------------------ API
    def _step(self, action: str) -> Transition:
        c = self.config
        parsed = parse_search_action(action)
        if parsed is None:
            return self.invalid(
                "expected search[<query>] or finish[<answer>], e.g. search[capital of France]"
            )
        verb, arg = parsed
        deviation = format_deviation(action)
        extra = {"format_deviation": deviation} if deviation else {}
        if not arg:
            return self.invalid(
                f"empty {verb}[...]: put a {'query' if verb == 'search' else 'answer'} "
                "between the brackets"
            )
        if verb == "search":
            if len(arg) > c["max_query_chars"]:
                return self.invalid(f"query longer than max_query_chars ({c['max_query_chars']})")
            hits = self.retriever.retrieve([arg], int(c["topk"]))[0]
            self._queries.append(arg)
            self._last = (arg, hits)
            return Transition(
                reward=0.0,
                info={
                    "action_type": "search",
                    "query": arg,
                    "n_results": len(hits),
                    "result_ids": [h.document.id for h in hits],
                    "searches": len(self._queries),
                    **extra,
                },
            )
        if len(arg) > c["max_answer_chars"]:
            return self.invalid(f"answer longer than max_answer_chars ({c['max_answer_chars']})")
        score = score_answer(
            arg, self._item.answers, numbers_must_match=bool(c["numbers_must_match"])
        )
        reward = qa_reward(score, mode=c["reward_mode"], f1_threshold=float(c["f1_threshold"]))
        self._final = (
            f"Your answer: {arg}\nGold answer: {self._item.answers[0]}\n"
            f"Exact match: {'yes' if score.exact_match else 'no'}; F1: {score.f1:.3f}; reward {reward:g}."
        )
        return Transition(
            reward=reward,
            terminated=True,
            success=score.exact_match,
            info={
                "action_type": "finish",
                "answer": arg,
                "exact_match": score.exact_match,
                "f1": score.f1,
                "searches": len(self._queries),
                **extra,
            },
        )

    def _observation(self) -> str:
        c = self.config
        lines = [f"Question: {self._item.question}"]
        if self._final is not None:
            return join_lines([*lines, self._final])
        if self._last is not None:
            query, hits = self._last
            lines.append(f"Results of search[{query}] (top {c['topk']}):")
            lines.append(
                format_hits(
                    hits,
                    max_doc_chars=int(c["max_doc_chars"]),
                    max_total_chars=int(c["max_results_chars"]),
                )
            )
        lines.append("Available actions: search[<query>], finish[<answer>]")
        return join_lines(lines)

    @property
    def instruction(self) -> str:
        c = self.config
        reward = {
            "em_or_f1": f"1 for an exact match, else your answer's F1 word overlap with the gold answer if it is at "
            f"least {float(c['f1_threshold']):g}, else 0",
            "em": "1 for an exact match, else 0",
            "f1": "your answer's F1 word overlap with the gold answer",
        }[c["reward_mode"]]
        return join_lines(
            [
                "You answer a question by searching a document collection.",
                "Each turn, take one action:",
                f"  search[<query>]  retrieves the top {c['topk']} documents for the query (shown with ids and scores);",
                "  finish[<answer>]  gives your final answer and ends the episode.",
                f"Answers are compared after lower-casing and removing punctuation and articles; the reward is {reward}. "
                "Searching earns nothing; give a short answer (a name, a number, yes or no).",
                f"You have at most {c['max_steps']} actions; text that is not one of the two actions is invalid "
                f"({float(c['invalid_action_reward']):g}).",
                "Example: <answer>search[capital of France]</answer>, then <answer>finish[Paris]</answer>.",
            ]
        )

    # ------------------------------------------------------------ baselines
    def oracle_actions(self) -> list[str]:
        """Search each supporting title not yet searched, then finish with the first gold answer.

        Items without supporting titles (Natural Questions) search the question itself.
        """
        if self.status.is_terminal:
            return []
        queries = list(self._item.supporting_titles) or [
            self._item.question[: self.config["max_query_chars"]]
        ]
        plan = [f"search[{q}]" for q in queries if q not in self._queries]
        return [*plan, f"finish[{self._item.answers[0]}]"]

    def optimal_return(self) -> float:
        """An exact match earns 1 (searches earn 0)."""
        return 1.0

    def sample_action(self, rng: np.random.Generator) -> str:
        """Random baseline: with probability 3/4 search 1-3 random words (from the question and a
        fixed list), else finish with one random word of the question."""
        words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", self._item.question)] or ["unknown"]
        if rng.random() < 0.75:
            pool = words + list(_RANDOM_WORDS)
            k = int(rng.integers(1, 4))
            return (
                "search[" + " ".join(pool[int(i)] for i in rng.integers(0, len(pool), size=k)) + "]"
            )
        return f"finish[{words[int(rng.integers(len(words)))]}]"
