"""Answer scoring for open-domain question answering: SQuAD normalisation, EM, F1.

The rules are the standard ones:

* **Normalisation** (SQuAD v1.1 official evaluation script, Rajpurkar et al. 2016,
  arXiv 1606.05250): lower-case, remove ASCII punctuation, remove the articles
  ``a`` / ``an`` / ``the``, collapse whitespace.
* **Exact match (EM)**: normalised prediction equals a normalised gold answer.
* **F1**: token-level F1 between the normalised prediction and a gold answer (bag of
  tokens, multiplicity counted).  As in HotpotQA's official evaluation (Yang et al.
  2018, arXiv 1809.09600, ``hotpot_evaluate_v1.py``), if either normalised string is
  ``yes``, ``no`` or ``noanswer`` and the two differ, F1 is 0 (so ``yes`` vs ``no`` is
  never partial credit).
* With several gold answers (aliases, Natural Questions' answer lists) the best score
  over the golds counts.
* **Reward** (RAGEN's SearchQA rule, RAGEN-AI/RAGEN ragen/env/: "reward 1 on exact
  match after SQuAD normalisation; else the F1 score if F1 >= 0.3; else 0"):
  :func:`qa_reward` with ``mode="em_or_f1"`` and ``f1_threshold=0.3``; ``"em"`` and
  ``"f1"`` modes are also available.
* **Strict variant**: with ``numbers_must_match``, partial credit needs
  every number token of the gold in the prediction (:func:`score_answer`), so a constant
  unit word (``million``) earns nothing on "N million" golds.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["QAScore", "exact_match", "f1_score", "normalize_answer", "qa_reward", "score_answer"]

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = frozenset({"yes", "no", "noanswer"})

#: Reward modes of :func:`qa_reward`.
REWARD_MODES = ("em_or_f1", "em", "f1")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles, collapse spaces.

    ``"The Eiffel Tower."`` and ``"eiffel  tower"`` both give ``"eiffel tower"``.
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    """Normalised strings are equal."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 of the normalised strings, with HotpotQA's yes/no/noanswer rule.

    Returns a number in ``[0, 1]``; 0 when no token is shared, and 0 whenever either
    side normalises to ``yes``, ``no`` or ``noanswer`` and the two sides differ.
    """
    p, g = normalize_answer(prediction), normalize_answer(gold)
    if (p in _SPECIAL or g in _SPECIAL) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    common = sum((Counter(pt) & Counter(gt)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pt), common / len(gt)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class QAScore:
    """Best EM and F1 of a prediction over the gold answers.

    Attributes:
        exact_match: some gold matches exactly (after normalisation).
        f1: the best F1 over the golds (1.0 when ``exact_match``).
        best_gold: the gold answer that gave the best score (``""`` if there is none).
    """

    exact_match: bool
    f1: float
    best_gold: str


def _misses_a_number(prediction: str, gold: str) -> bool:
    """The normalised gold has a token with a digit that the normalised prediction lacks."""
    pred = set(normalize_answer(prediction).split())
    return any(
        any(ch.isdigit() for ch in t) and t not in pred for t in normalize_answer(gold).split()
    )


def score_answer(
    prediction: str, golds: Sequence[str], *, numbers_must_match: bool = False
) -> QAScore:
    """EM and F1 of ``prediction`` against every gold answer; the best counts.

    With ``numbers_must_match`` (the strict variant), a gold's F1 counts as 0
    when the prediction lacks one of the gold's number tokens: ``million`` then earns
    nothing against ``83 million`` (F1 0.67 otherwise, above RAGEN's 0.3 threshold).
    """
    best = QAScore(False, 0.0, golds[0] if golds else "")
    for gold in golds:
        if exact_match(prediction, gold):
            return QAScore(True, 1.0, gold)
        if numbers_must_match and _misses_a_number(prediction, gold):
            continue
        f1 = f1_score(prediction, gold)
        if f1 > best.f1:
            best = QAScore(False, f1, gold)
    return best


def qa_reward(score: QAScore, *, mode: str = "em_or_f1", f1_threshold: float = 0.3) -> float:
    """The reward of a scored answer.

    Args:
        score: from :func:`score_answer`.
        mode: ``"em_or_f1"`` (RAGEN: 1 for EM, else F1 if ``F1 >= f1_threshold``, else
            0), ``"em"`` (1 for EM, else 0) or ``"f1"`` (the F1 itself).
        f1_threshold: the F1 below which ``em_or_f1`` pays 0 (RAGEN: 0.3).

    Raises:
        ValueError: unknown mode.
    """
    if mode == "em":
        return 1.0 if score.exact_match else 0.0
    if mode == "f1":
        return float(score.f1)
    if mode == "em_or_f1":
        if score.exact_match:
            return 1.0
        return float(score.f1) if score.f1 >= f1_threshold else 0.0
    raise ValueError(f"unknown reward mode {mode!r}; known: {', '.join(REWARD_MODES)}")
