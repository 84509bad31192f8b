"""A small, deterministic wrapper around the ``bm25s`` library (Okapi BM25 ranking).

Used by the SearchQA local retriever (:mod:`ragen_envs.envs.searchqa.retrieval`) and the WebShop
search engine (:mod:`ragen_envs.envs.webshop.engine`).  The ranking itself is ``bm25s``'s
(Lù 2024, arXiv 2407.03618; default scoring variant ``"lucene"``, k1 = 1.5, b = 0.75);
this module only fixes the parts that decide reproducibility:

* **Tokenisation** (:func:`tokenize`): NFKC, case-folded, ``\\w+`` runs (so single
  characters such as a shoe size ``9`` are tokens), minus ``bm25s``'s English stop words.
  The vocabulary is numbered in order of first occurrence (never by ``set`` order), so
  an index is the same in every process whatever ``PYTHONHASHSEED`` is.
* **Ranking order**: documents are sorted by decreasing score, ties broken by the lower
  document index; only documents with a positive score are returned (a query that
  shares no term with a document never retrieves it, as in Lucene).

``bm25s`` is an optional dependency: it is imported when the first index is built, and
its absence raises :class:`ragen_envs.data.MissingExtraError` naming the extra to install.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from .data.loaders import MissingExtraError

__all__ = ["BM25Index", "import_bm25s", "tokenize"]

_WORD = re.compile(r"\w+")
_STOPWORDS: frozenset[str] | None = None


def import_bm25s(extra: str, purpose: str) -> Any:
    """Import ``bm25s`` or raise :class:`MissingExtraError` naming ``extra``.

    Args:
        extra: the ``ragen`` extra that installs it (``"search"`` or ``"webshop"``).
        purpose: what needs it, for the message (``"the SearchQA BM25 retriever"``).
    """
    try:
        import bm25s
    except ImportError:
        raise MissingExtraError("bm25s", extra, purpose) from None
    return bm25s


def _stopwords() -> frozenset[str]:
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOPWORDS = frozenset(STOPWORDS_EN)
    return _STOPWORDS


def tokenize(text: str) -> list[str]:
    """Index/query tokens of ``text``: NFKC, case-folded ``\\w+`` runs without stop words.

    ``"The Capital of FRANCE, size 9"`` gives ``["capital", "france", "size", "9"]``.
    Needs ``bm25s`` (for its stop-word list).
    """
    stop = _stopwords()
    return [
        t for t in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()) if t not in stop
    ]


class BM25Index:
    """An in-memory BM25 index over a fixed list of texts.

    Args:
        texts: the documents, ``(n_docs,)``; document ``i`` is returned as index ``i``.
        extra: the ``ragen`` extra named in the error when ``bm25s`` is missing.
        purpose: what the index is for (error messages).
        k1, b: BM25 parameters (Robertson & Zaragoza 2009, eq. 3.3; ``bm25s`` defaults).

    Raises:
        MissingExtraError: ``bm25s`` is not installed.
    """

    def __init__(
        self, texts: Sequence[str], *, extra: str, purpose: str, k1: float = 1.5, b: float = 0.75
    ):
        bm25s = import_bm25s(extra, purpose)
        vocab: dict[str, int] = {}
        ids: list[list[int]] = []
        for text in texts:
            ids.append([vocab.setdefault(tok, len(vocab)) for tok in tokenize(text)])
        self._vocab = vocab
        self._n = len(ids)
        self._model = bm25s.BM25(k1=k1, b=b, method="lucene")
        if self._n:
            self._model.index((ids, dict(vocab)), show_progress=False)

    def __len__(self) -> int:
        return self._n

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, shape ``(n_docs,)`` (float32)."""
        q = [self._vocab[t] for t in tokenize(query) if t in self._vocab]
        if not q or not self._n:
            return np.zeros(self._n, dtype=np.float32)
        return np.asarray(self._model.get_scores(q), dtype=np.float32)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The top ``k`` documents for ``query`` as ``(index, score)``, best first.

        Order: decreasing score, ties by increasing index; documents with score 0 are
        left out, so fewer than ``k`` may come back.
        """
        if k <= 0:
            return []
        s = self.scores(query)
        positive = np.flatnonzero(s > 0)
        if positive.size == 0:
            return []
        if positive.size > 4 * k:
            # Pre-select with a partial sort, keeping every document tied with the k-th.
            kth = np.partition(s[positive], positive.size - k)[positive.size - k]
            positive = positive[s[positive] >= kth]
        order = np.lexsort((positive, -s[positive]))[:k]
        return [(int(positive[j]), float(s[positive[j]])) for j in order]
