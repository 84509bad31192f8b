"""Question records for SearchQA: our format, HotpotQA and Natural Questions (spec: ``docs/envs/searchqa.md``).

Every loader turns one record into a :class:`QAItem` (or ``None`` when the record has
no usable gold answer).  Formats (``data_format`` in the env config; ``auto`` picks one
by the record's keys):

``ragen`` (our bundled questions, ``bundled:searchqa-countries``)
    ``{"id", "question", "answers": [...], "supporting_titles": [...], "type", "hops",
    "entity"}``.  ``entity`` (the country a question is about) decides the split.
``hotpotqa`` (Yang et al. 2018; ``hotpot_train_v1.1.json``, ``hotpot_dev_distractor_v1.json``,
``hotpot_dev_fullwiki_v1.json``: a JSON list)
    ``{"_id", "question", "answer", "type": "bridge"|"comparison", "level",
    "supporting_facts": [[title, sentence_index], ...], "context": [[title, [sentence, ...]], ...]}``.
    Gold = ``answer`` (may be ``yes`` / ``no``); supporting titles = the distinct titles
    of ``supporting_facts`` in order.  The unlabelled test file (no ``answer``) yields
    nothing.  Its ``context`` paragraphs can serve as a BM25 corpus
    (:func:`ragen_envs.envs.searchqa.retrieval.documents_from_records`).
``nq`` (Natural Questions, Kwiatkowski et al. 2019; the *simplified* JSONL
``simplified-nq-train.jsonl`` and the original ``nq-*.jsonl.gz`` layout)
    ``{"example_id", "question_text", "document_text" | "document_tokens",
    "document_title"?, "annotations": [{"short_answers": [{"start_token", "end_token"}],
    "yes_no_answer": "NONE"|"YES"|"NO", "long_answer": {...}}]}``.  Golds = the text of
    every short-answer span of every annotation (``document_text.split(" ")[start:end]``
    in the simplified layout; non-HTML ``document_tokens[start:end]`` in the original),
    plus ``yes`` / ``no`` for yes/no annotations; a question with no short or yes/no
    answer is skipped.  Supporting title = ``document_title`` when present.
``nq_open`` (NQ-Open, Lee et al. 2019; also TriviaQA/WebQuestions exports)
    ``{"question", "answer": [...]}``.
``search_r1`` (Search-R1's processed parquet/JSONL: NQ, HotpotQA, ...; RAGEN's
``data/search/*.parquet``)
    ``{"id"?, "question", "golden_answers": [...]}`` or ``{"question", "ground_truth"}``
    where ``ground_truth`` is a string, a list, or ``{"target": [...]}``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...data.loaders import SOURCE_SPLIT_KEY, DataSourceError

__all__ = ["FORMATS", "QAItem", "detect_format", "qa_item_from_record"]

#: Known record formats (besides ``auto``).
FORMATS = ("ragen", "hotpotqa", "nq", "nq_open", "search_r1")


@dataclass(frozen=True)
class QAItem:
    """One question.

    Attributes:
        id: stable id (the record's, else ``<format>-<12 hex of BLAKE2b(question)>``).
        question: the question text shown to the agent.
        answers: the gold answers (aliases), at least one; the first is canonical.
        supporting_titles: titles of the documents that hold the answer (may be empty).
        type: a question type (``capital``, ``bridge``, ...), ``""`` if unknown.
        hops: documents needed (len of ``supporting_titles`` when known, else 1).
        key_text: the text that decides the split (the entity for our questions, else
            the question).
        source_split: the source's own split, if any.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    supporting_titles: tuple[str, ...] = ()
    type: str = ""
    hops: int = 1
    key_text: str = ""
    source_split: str | None = field(default=None, compare=False)


def detect_format(record: Mapping[str, Any]) -> str:
    """The format of a record, by its keys.

    Raises:
        DataSourceError: no known format has these keys.
    """
    if "question_text" in record and "annotations" in record:
        return "nq"
    if "question" in record:
        if "answers" in record and "supporting_titles" in record:
            return "ragen"
        if "supporting_facts" in record or "context" in record:
            return "hotpotqa"
        if "golden_answers" in record or "ground_truth" in record:
            return "search_r1"
        if "answer" in record:
            return "nq_open"
        if "answers" in record:
            return "ragen"
    raise DataSourceError(
        f"cannot tell the question format from keys {sorted(record)}; "
        f"set data_format to one of {', '.join(FORMATS)}"
    )


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return _as_list(value.get("target", value.get("answers")))
    if isinstance(value, Sequence) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [str(v) for v in items if v is not None]
    return [str(value)]


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for it in items:
        it = str(it).strip()
        if it and it not in out:
            out.append(it)
    return tuple(out)


def _nq_answers(record: Mapping[str, Any]) -> list[str]:
    if "document_tokens" in record:
        tokens = record["document_tokens"]

        def span(start: int, end: int) -> str:
            return " ".join(
                str(t["token"]) for t in tokens[start:end] if not t.get("html_token", False)
            )
    else:
        words = str(record.get("document_text", "")).split(" ")

        def span(start: int, end: int) -> str:
            return " ".join(words[start:end])

    golds: list[str] = []
    for ann in record.get("annotations") or []:
        for sa in ann.get("short_answers") or []:
            start, end = int(sa.get("start_token", -1)), int(sa.get("end_token", -1))
            if 0 <= start < end:
                golds.append(span(start, end))
        yn = str(ann.get("yes_no_answer", "NONE")).upper()
        if yn in ("YES", "NO"):
            golds.append(yn.lower())
    return golds


def qa_item_from_record(record: Mapping[str, Any], fmt: str = "auto") -> QAItem | None:
    """Convert one record (see the module docstring) to a :class:`QAItem`.

    Returns ``None`` when the record has no gold answer (HotpotQA test, NQ questions
    without a short answer).

    Raises:
        DataSourceError: unknown format or a missing required field.
    """
    fmt = detect_format(record) if fmt == "auto" else fmt
    try:
        if fmt == "ragen":
            question = str(record["question"])
            answers = _unique(_as_list(record["answers"]))
            titles = _unique(_as_list(record.get("supporting_titles")))
            qtype, key = str(record.get("type", "")), str(record.get("entity") or question)
            ident = record.get("id")
        elif fmt == "hotpotqa":
            question = str(record["question"])
            answers = _unique(_as_list(record.get("answer")))
            titles = _unique([str(sf[0]) for sf in record.get("supporting_facts") or []])
            qtype, key, ident = (
                str(record.get("type", "")),
                question,
                record.get("_id", record.get("id")),
            )
        elif fmt == "nq":
            question = str(record["question_text"])
            answers = _unique(_nq_answers(record))
            title = record.get("document_title")
            titles = (str(title),) if title else ()
            qtype, key, ident = "nq", question, record.get("example_id")
        elif fmt == "nq_open":
            question = str(record["question"])
            answers = _unique(_as_list(record["answer"]))
            titles, qtype, key, ident = (), "", question, record.get("id")
        elif fmt == "search_r1":
            question = str(record["question"])
            gold = (
                record["golden_answers"] if "golden_answers" in record else record["ground_truth"]
            )
            answers = _unique(_as_list(gold))
            titles, qtype, key, ident = (
                (),
                str(record.get("data_source", "")),
                question,
                record.get("id"),
            )
        else:
            raise DataSourceError(
                f"unknown question format {fmt!r}; known: auto, {', '.join(FORMATS)}"
            )
    except KeyError as exc:
        raise DataSourceError(f"{fmt} record lacks the field {exc.args[0]!r}") from None
    question = question.strip()
    if not answers or not question:
        return None
    if ident is None or str(ident) == "":
        ident = f"{fmt}-{hashlib.blake2b(question.encode('utf-8'), digest_size=6).hexdigest()}"
    hops = int(record.get("hops", 0) or 0) or max(1, len(titles))
    return QAItem(
        str(ident), question, answers, titles, qtype, hops, key, record.get(SOURCE_SPLIT_KEY)
    )
