"""Retrieval back-ends for SearchQA behind one small interface (spec: ``docs/envs/searchqa.md``).

A *retriever* maps a batch of queries to ranked documents with scores
(:class:`Retriever`).  Two back-ends:

* :class:`BM25Retriever` — an in-process BM25 index (``bm25s``, extra ``search``) over a
  corpus of :class:`Document` records; built once per process and corpus
  (:func:`local_bm25_retriever`).
* :class:`HttpRetriever` — a client of the retrieval-server protocol used by Search-R1
  and RAGEN, so a dense Wikipedia index (E5 + FAISS over wiki-18) plugs in unchanged.
  Two request shapes (``protocol``):

  ``"search-r1"`` (default), as served by Search-R1's ``search_r1/search/retrieval_server.py``
  (repository PeterGriffinJin/Search-R1; FastAPI ``POST /retrieve``)::

      request:  {"queries": ["q1", ...], "topk": 5, "return_scores": true}
      response: {"result": [[{"document": {"id": "...", "contents": "\\"Title\\"\\ntext"},
                               "score": 0.83}, ...], ...]}      # one list per query

  (with ``"return_scores": false`` each inner list holds the documents themselves).
  ``"ragen"``, as served by RAGEN's retrieval server (Flask, one query per request;
  RAGEN-AI/RAGEN ``scripts/retrieval/server.py``)::

      request:  {"query": "q1", "top_k": 5}
      response: {"query": "q1", "results": [{"id": "doc_1", "content": ..., "score": 0.83}, ...]}

  The client uses only the standard library (``urllib``), imported when the first
  request is made; it has a timeout, a response-size bound, and raises
  :class:`RetrievalError` with the URL and the cause (connection refused, timeout,
  HTTP status, malformed JSON) instead of hanging or returning nothing.

Documents follow the wiki-18 convention of Search-R1 (``{"id", "contents"}`` with
``contents = '"Title"\\ntext'``); records with ``title`` / ``text`` fields and HotpotQA
files (their ``context`` paragraphs) are read too (:func:`documents_from_records`).
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...data.loaders import DataSourceError, load_source

__all__ = [
    "BM25Retriever",
    "Document",
    "Hit",
    "HttpRetriever",
    "RetrievalError",
    "Retriever",
    "corpus_documents",
    "documents_from_records",
    "format_hits",
    "local_bm25_retriever",
    "parse_search_r1_response",
]

#: Largest HTTP response body the client accepts (bytes).
MAX_RESPONSE_BYTES = 64 << 20


class RetrievalError(RuntimeError):
    """The retrieval back-end failed (server unreachable, timeout, bad response)."""


@dataclass(frozen=True)
class Document:
    """One passage of a retrieval corpus.

    Attributes:
        id: the document id (``"france-economy"``; wiki-18 uses row numbers).
        title: the title (Wikipedia article title), possibly ``""``.
        text: the passage text without the title.
    """

    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The wiki-18 ``contents`` field: ``'"Title"\\ntext'`` (just the text if untitled)."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text

    def as_record(self) -> dict[str, str]:
        """The record served over HTTP: ``id``, ``title``, ``text`` and ``contents``."""
        return {"id": self.id, "title": self.title, "text": self.text, "contents": self.contents}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], default_id: str = "") -> Document:
        """Read ``{"id", "contents"}`` (wiki-18), ``{"id", "title", "text"}`` or a string.

        The title of a wiki-18 ``contents`` is its first line with surrounding double
        quotes removed (Search-R1's convention).

        Raises:
            DataSourceError: the record has neither ``contents`` nor ``text``/``content``.
        """
        if isinstance(record, str):
            return cls._from_contents(default_id, record)
        ident = str(record.get("id", record.get("doc_id", record.get("_id", default_id))))
        if "text" in record and isinstance(record["text"], str):
            return cls(ident, str(record.get("title") or ""), record["text"])
        contents = record.get("contents", record.get("content"))
        if isinstance(contents, Mapping):  # RAGEN's server returns corpus entries as they are
            return cls.from_record({**contents, "id": contents.get("id", ident)}, ident)
        if isinstance(contents, str):
            return cls._from_contents(ident, contents)
        raise DataSourceError(
            f"a corpus record needs 'contents' or 'text'; got keys {sorted(record)}"
        )

    @classmethod
    def _from_contents(cls, ident: str, contents: str) -> Document:
        head, sep, rest = contents.partition("\n")
        if sep and head.startswith('"') and head.endswith('"') and len(head) >= 2:
            return cls(ident, head[1:-1], rest)
        return cls(ident, "", contents)


@dataclass(frozen=True)
class Hit:
    """A retrieved document and its score (``None`` when the server sent no score)."""

    document: Document
    score: float | None


class Retriever(Protocol):
    """The retrieval interface: ``retrieve(queries, topk) -> one ranked hit list per query``."""

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """Best-first hits for each query (at most ``topk`` each)."""
        ...


# ----------------------------------------------------------------- corpora
def documents_from_records(records: Iterable[Mapping[str, Any]]) -> list[Document]:
    """Corpus documents from records (see :meth:`Document.from_record`).

    HotpotQA records (with ``context: [[title, [sentence, ...]], ...]``) contribute one
    document per distinct context title (sentences joined by spaces, id = the title).

    Raises:
        DataSourceError: a record is of no known corpus shape.
    """
    docs: list[Document] = []
    seen_titles: set[str] = set()
    for i, rec in enumerate(records):
        if "context" in rec and "question" in rec:
            for title, sentences in rec["context"]:
                if title not in seen_titles:
                    seen_titles.add(title)
                    docs.append(
                        Document(
                            str(title), str(title), " ".join(str(s).strip() for s in sentences)
                        )
                    )
            continue
        docs.append(Document.from_record(rec, default_id=str(i)))
    return docs


@functools.lru_cache(maxsize=8)
def corpus_documents(spec: str) -> tuple[Document, ...]:
    """The documents of corpus source ``spec`` (a :func:`ragen_envs.data.load_source` spec), cached.

    Raises:
        DataSourceError: unreadable source, unknown record shape, duplicate ids or an
            empty corpus.
    """
    docs = documents_from_records(load_source(spec))
    if not docs:
        raise DataSourceError(f"corpus {spec!r} has no documents")
    ids = [d.id for d in docs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataSourceError(f"corpus {spec!r} has duplicate document id {dup!r}")
    return tuple(docs)


# ------------------------------------------------------------------- BM25
class BM25Retriever:
    """Okapi BM25 over a list of documents (``bm25s``; title and text are indexed).

    Args:
        documents: the corpus.

    Attributes:
        build_seconds: wall time the index took to build.

    Raises:
        MissingExtraError: ``bm25s`` is not installed (extra ``search``).
    """

    def __init__(self, documents: Sequence[Document]):
        from ...bm25 import BM25Index

        start = time.perf_counter()
        self.documents = tuple(documents)
        self._index = BM25Index(
            [f"{d.title}\n{d.text}" for d in self.documents],
            extra="search",
            purpose="the SearchQA BM25 retriever",
        )
        self.build_seconds = time.perf_counter() - start

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """Best-first hits per query; ties by corpus order; zero-score documents left out."""
        return [
            [Hit(self.documents[i], s) for i, s in self._index.search(q, topk)] for q in queries
        ]


@functools.lru_cache(maxsize=4)
def local_bm25_retriever(spec: str) -> BM25Retriever:
    """The BM25 retriever of corpus ``spec``, built once per process."""
    return BM25Retriever(corpus_documents(spec))


# ------------------------------------------------------------------- HTTP
def parse_search_r1_response(payload: Any, n_queries: int) -> list[list[Hit]]:
    """Hits from a Search-R1 ``/retrieve`` response body (see the module docstring).

    Accepts ``{"result": [...]}`` or the bare list some forks return; inner items are
    ``{"document": doc, "score": s}`` (``return_scores`` true) or bare documents.

    Raises:
        RetrievalError: the body has another shape or another number of result lists.
    """
    result = payload.get("result") if isinstance(payload, Mapping) else payload
    if not isinstance(result, list) or len(result) != n_queries:
        raise RetrievalError(
            f"expected a 'result' list with {n_queries} entries, got {_shape(payload)}"
        )
    out: list[list[Hit]] = []
    for per_query in result:
        if not isinstance(per_query, list):
            raise RetrievalError(f"expected a list of documents per query, got {_shape(per_query)}")
        hits = []
        for j, item in enumerate(per_query):
            if isinstance(item, Mapping) and "document" in item:
                doc, score = item["document"], item.get("score")
            else:
                doc, score = item, None
            hits.append(Hit(_document(doc, j), _score(score)))
        out.append(hits)
    return out


def parse_ragen_response(payload: Any) -> list[Hit]:
    """Hits from a RAGEN ``/retrieve`` response body (``{"results": [{"id", "content", "score"}]}``).

    Raises:
        RetrievalError: another shape, or the server reported ``{"error": ...}``.
    """
    if isinstance(payload, Mapping) and "error" in payload and "results" not in payload:
        raise RetrievalError(f"server error: {payload['error']}")
    results = payload.get("results") if isinstance(payload, Mapping) else None
    if not isinstance(results, list):
        raise RetrievalError(f"expected a 'results' list, got {_shape(payload)}")
    return [
        Hit(_document(item, j), _score(item.get("score") if isinstance(item, Mapping) else None))
        for j, item in enumerate(results)
    ]


def _document(doc: Any, j: int) -> Document:
    try:
        return Document.from_record(doc, default_id=f"doc_{j + 1}")
    except (DataSourceError, AttributeError, TypeError) as exc:
        raise RetrievalError(f"malformed document in the response: {exc}") from None


def _score(value: Any) -> float | None:
    if value is None:
        return None
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise RetrievalError(f"malformed score {value!r} in the response") from None
    return score if math.isfinite(score) else None


def _shape(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 200 else text[:200] + "..."


class HttpRetriever:
    """Client of a retrieval server (Search-R1 or RAGEN protocol; module docstring).

    Args:
        url: the full endpoint, e.g. ``"http://127.0.0.1:8000/retrieve"``.
        protocol: ``"search-r1"`` (batched ``queries`` / ``topk`` / ``return_scores``) or
            ``"ragen"`` (one ``query`` / ``top_k`` per request).
        timeout_s: per-request timeout in seconds (connect and read).

    Raises:
        ValueError: unknown protocol or a non-http(s) URL.

    Requests to a loopback host (``127.0.0.1``, ``localhost``, ``::1``) bypass any
    ``http_proxy`` set in the environment.
    """

    def __init__(self, url: str, *, protocol: str = "search-r1", timeout_s: float = 10.0):
        if protocol not in ("search-r1", "ragen"):
            raise ValueError(f"unknown retrieval protocol {protocol!r}; known: search-r1, ragen")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retriever_url must start with http:// or https://, got {url!r}")
        self.url = url
        self.protocol = protocol
        self.timeout_s = float(timeout_s)
        self._opener: Any = None

    def _post(self, body: Mapping[str, Any]) -> Any:
        import urllib.error
        import urllib.parse
        import urllib.request

        if self._opener is None:
            host = urllib.parse.urlsplit(self.url).hostname or ""
            handlers = (
                [urllib.request.ProxyHandler({})]
                if host in ("127.0.0.1", "localhost", "::1")
                else []
            )
            self._opener = urllib.request.build_opener(*handlers)
        data = json.dumps(body).encode("utf-8")
        req = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        where = f"retrieval server {self.url} ({self.protocol} protocol)"
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", errors="replace") if exc.fp is not None else ""
            raise RetrievalError(
                f"{where} answered HTTP {exc.code} {exc.reason}: {detail}".rstrip(": ")
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise RetrievalError(
                    f"{where} did not answer within {self.timeout_s:g} s"
                ) from None
            raise RetrievalError(
                f"cannot reach {where}: {exc.reason} (is the server running? start a local "
                "one with `python -m ragen_envs.envs.searchqa.serve --port 8000`)"
            ) from None
        except TimeoutError:
            raise RetrievalError(f"{where} did not answer within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise RetrievalError(f"{where}: {type(exc).__name__}: {exc}") from None
        if len(raw) > MAX_RESPONSE_BYTES:
            raise RetrievalError(f"{where} sent more than {MAX_RESPONSE_BYTES} bytes")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise RetrievalError(f"{where} sent a body that is not JSON: {exc}") from None

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """Best-first hits per query, as ranked by the server (at most ``topk`` each).

        Raises:
            RetrievalError: see the class docstring.
        """
        queries = list(queries)
        if self.protocol == "search-r1":
            payload = self._post({"queries": queries, "topk": int(topk), "return_scores": True})
            return [hits[:topk] for hits in parse_search_r1_response(payload, len(queries))]
        return [
            parse_ragen_response(self._post({"query": q, "top_k": int(topk)}))[:topk]
            for q in queries
        ]


# ------------------------------------------------------------- rendering
def format_hits(hits: Sequence[Hit], *, max_doc_chars: int, max_total_chars: int) -> str:
    """Render hits as the observation shows them (RAGEN's layout, RAGEN-AI/RAGEN ragen/env/).

    Each hit is ``[Document i] (ID: <id>, Score: <score, 3 decimals or n/a>)`` followed by
    its ``contents`` cut to ``max_doc_chars`` characters (``...`` marks a cut); hits are
    separated by a blank line.  The documents are cut to ``max_total_chars`` in all (the
    last one shown may end in ``...``), and a last line says how many documents the cap
    left out.
    """
    if not hits:
        return "No documents found."
    blocks = []
    for i, hit in enumerate(hits, 1):
        body = hit.document.contents
        if len(body) > max_doc_chars:
            body = body[:max_doc_chars].rstrip() + "..."
        score = "n/a" if hit.score is None else f"{hit.score:.3f}"
        blocks.append(f"[Document {i}] (ID: {hit.document.id}, Score: {score})\n{body}")
    text, shown = "", 0
    for block in blocks:
        candidate = block if not text else f"{text}\n\n{block}"
        if len(candidate) > max_total_chars:
            room = max_total_chars - len(text) - (2 if text else 0) - 3
            if room > 40:  # show the start of a document only when a useful part fits
                text = (f"{text}\n\n" if text else "") + block[:room].rstrip() + "..."
                shown += 1
            break
        text, shown = candidate, shown + 1
    if shown < len(blocks):
        text += f"\n({len(blocks) - shown} more document(s) not shown: length cap)"
    return text
