"""MetaMathQA: answer a math word problem, with optional retries (spec: ``docs/envs/metamathqa.md``).

The observation is the question; the action is the content of the agent's
``<answer>`` block, from which the final answer is extracted
(:mod:`ragen_envs.envs.metamathqa.extract`) and compared with the gold answer
(:mod:`ragen_envs.envs.metamathqa.equivalence`).  A wrong answer gets feedback and, while
attempts remain, the episode continues; attempt ``k`` (from 0) that is correct earns
``attempt_decay**k`` (RAGEN's ``1/2**k``, RAGEN-AI/RAGEN ragen/env/).

The same env reads MetaMathQA records (``query`` / ``response`` ending in ``The answer
is: X`` / ``original_question``), GSM8K records (``question`` / ``answer`` ending in
``#### X``) and plain question/answer records (``data_format``).  Splits are assigned
by the normalised *original* question, so MetaMathQA's rephrasings of one question
never straddle train and test (RAGEN validates on the training split, weakness 6).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core import Transition, join_lines
from ...data.attempts import AttemptTracker, attempts_rule
from ...data.loaders import SOURCE_SPLIT_KEY, DataSourceError, load_source
from ...data.splits import canonical_key
from ...dataset_env import DatasetEnv
from .equivalence import answers_equal
from .extract import extract_answer, normalize_answer

__all__ = ["MathItem", "MetaMathQAEnv", "math_item_from_record"]


@dataclass(frozen=True)
class MathItem:
    """One math question.

    Attributes:
        id: stable id (``<format>-<12 hex of BLAKE2b(question)>`` unless the record has one).
        question: the text shown to the agent.
        answer: the gold final answer (normalised).
        key_text: the text that decides the split (the original question when known).
        source_split: the source's split (``_source_split``), if any.
    """

    id: str
    question: str
    answer: str
    key_text: str
    source_split: str | None = None


def _detect(record: Mapping[str, Any]) -> str:
    if "query" in record and "response" in record:
        return "metamathqa"
    if (
        "question" in record
        and isinstance(record.get("answer"), str)
        and "####" in record["answer"]
    ):
        return "gsm8k"
    if "question" in record and "answer" in record:
        return "qa"
    raise DataSourceError(f"cannot tell the math record format from keys {sorted(record)}")


def math_item_from_record(record: Mapping[str, Any], fmt: str = "auto") -> MathItem | None:
    """Convert one record to a :class:`MathItem` (``None`` when no gold answer can be extracted).

    Formats: ``metamathqa`` (gold from ``response``: last ``\\boxed``, else ``The answer
    is``), ``gsm8k`` (gold after ``####`` in ``answer``), ``qa`` (``answer`` is the gold
    answer itself).

    Raises:
        DataSourceError: a required field is missing.
    """
    fmt = _detect(record) if fmt == "auto" else fmt
    try:
        if fmt == "metamathqa":
            question = str(record["query"])
            key_text = str(record.get("original_question") or question)
            gold = extract_answer(str(record["response"]))
            answer = gold.text if gold is not None else None
        elif fmt == "gsm8k":
            question = key_text = str(record["question"])
            gold = extract_answer(str(record["answer"]))
            answer = gold.text if gold is not None else None
        elif fmt == "qa":
            question = key_text = str(record["question"])
            answer = normalize_answer(str(record["answer"])) or None
        else:
            raise DataSourceError(
                f"unknown math data format {fmt!r}; known: auto, metamathqa, gsm8k, qa"
            )
    except KeyError as exc:
        raise DataSourceError(f"{fmt} record lacks the field {exc.args[0]!r}") from None
    if not answer:
        return None
    ident = (
        record.get("id") or f"{fmt}-{hashlib.blake2b(question.encode(), digest_size=6).hexdigest()}"
    )
    return MathItem(str(ident), question, answer, key_text, record.get(SOURCE_SPLIT_KEY))


class MetaMathQAEnv(DatasetEnv):
    """Math word problems with answer extraction, equivalence checking and retries.

    Config (``ragen_envs/envs/metamathqa/config.schema.json``): ``split``, ``split_mode``,
    ``data_source``, ``data_format``, ``max_attempts`` (1), ``attempt_decay`` (0.5),
    ``equivalence`` (``math_verify``), ``max_answer_chars`` (10000), ``max_steps`` (3, must be
    >= ``max_attempts``), ``invalid_action_reward`` (-0.1).

    Invalid actions (state unchanged, ``invalid_action_reward``, no attempt used): an
    answer longer than ``max_answer_chars``, or one from which no final answer with at
    least one letter or digit can be extracted.

    Raises:
        ConfigError: ``max_steps < max_attempts``.

    The checker's package (extra ``math``) is imported only when an answer needs the
    symbolic stage; without it such a step raises ``MissingExtraError`` naming the extra
    (answers decided by exact text or number comparison — the oracle's among them —
    need nothing).
    """

    env_key = "metamathqa"

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        self._tracker = AttemptTracker.from_config(self.env_key, self.config)
        self._feedback: str | None = None

    # ------------------------------------------------------------- data hooks
    def _load_items(self) -> Sequence[MathItem]:
        items = []
        for rec in load_source(self.config["data_source"]):
            item = math_item_from_record(rec, self.config["data_format"])
            if item is not None:
                items.append(item)
        return items

    def _item_key(self, item: MathItem) -> str:
        return canonical_key(item.key_text)

    def _start_item(self, item: MathItem, options: Mapping[str, Any]) -> None:
        self._tracker.reset()
        self._feedback = None

    # ------------------------------------------------------------------ API
    def _step(self, action: str) -> Transition:
        limit = int(self.config["max_answer_chars"])
        if len(action) > limit:
            return self.invalid(
                f"the answer is longer than {limit} characters; give only the final answer"
            )
        extracted = extract_answer(action)
        if extracted is None or not any(ch.isalnum() for ch in extracted.text):
            return self.invalid(
                "no final answer found: put only the final answer in the answer block, "
                "e.g. <answer>42</answer>"
            )
        correct = answers_equal(
            extracted.text, self._item.answer, checker=self.config["equivalence"]
        )
        attempt = self._tracker.attempts
        reward = self._tracker.record(1.0 if correct else 0.0)
        left = self._tracker.remaining
        terminated = correct or self._tracker.exhausted
        if correct:
            self._feedback = f"Your answer {extracted.text} is correct."
        elif terminated:
            self._feedback = f"Your answer {extracted.text} is incorrect. No attempts are left."
        else:
            self._feedback = (
                f"Your answer {extracted.text} is incorrect. You have {left} attempt"
                f"{'s' if left != 1 else ''} left; think again and give a new final answer."
            )
        return Transition(
            reward=reward,
            terminated=terminated,
            success=correct,
            info={
                "extracted_answer": extracted.text,
                "answer_source": extracted.source,
                "correct": correct,
                "attempt": attempt,
                "attempts_left": left,
            },
        )

    def _item_text(self) -> str:
        return self._item.question

    @property
    def instruction(self) -> str:
        retry = attempts_rule(
            self.config,
            "a correct answer at attempt k (counting from 0) earns {decay}^k points, "
            "a wrong one earns 0 and you may try again.",
            "a correct answer earns 1 point.",
        )
        return join_lines(
            [
                "You are solving a math word problem.",
                "Reason step by step, then give only the final answer in the answer block: a number "
                "(no units), a fraction or an expression.",
                "If you write more than the answer, put the final answer in \\boxed{...}; otherwise the "
                "last number you write is taken as the answer.",
                retry,
                "Example: <answer>42</answer> or <answer>\\frac{3}{4}</answer>.",
            ]
        )

    def oracle_actions(self) -> list[str]:
        """The gold answer."""
        return [] if self.status.is_terminal else [self._item.answer]

    def optimal_return(self) -> float:
        """A correct first attempt earns ``attempt_decay**0 = 1``."""
        return 1.0

    def sample_action(self, rng: np.random.Generator) -> str:
        """A random non-negative integer below 100 (a well-formed, usually wrong answer)."""
        return str(int(rng.integers(0, 100)))
