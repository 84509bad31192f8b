"""Cross-scoring through an OpenAI-compatible ``/v1/completions`` endpoint.

Each request sends token-id prompts ``x_j ⊕ z_i`` with ``echo=True, logprobs=0,
max_tokens=0``: the server returns the log-probability of every prompt token and
generates nothing, and ``log p(z_i | x_j)`` is the sum over the last ``|z_i|`` positions
(``shared/tools/README.md``, "Scoring log p(text | prompt) through the endpoint"; tested
with vLLM 0.32).  Token ids, not strings, so that BPE cannot merge across the x/z
boundary.  Several pairs go in one request (``prompt`` is a list of id lists) and up to
``max_concurrency`` requests are in flight.

Servers that reject ``echo`` with ``logprobs`` (HTTP 400/404/422/501...), or answer
without prompt log-probabilities, raise :class:`ScoringNotSupported`.

Tokenisation uses a local Hugging Face tokenizer of the served model when given
(``tokenizer=``), else the server's ``POST /tokenize`` (a vLLM extension, at the server
root): ``{"messages": ..., "add_generation_prompt": true}`` for prompts and
``{"prompt": text, "add_special_tokens": false}`` for text.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..types import Message
from .samples import HFTextTokenizer, TextTokenizer
from .scorer import CrossScores, ScoringNotSupported, check_pairs

_UNSUPPORTED_STATUS = frozenset({400, 404, 405, 415, 422, 501})


def _not_supported(what: str, detail: str) -> ScoringNotSupported:
    return ScoringNotSupported(
        f"{what} is not supported by this endpoint ({detail}); "
        "cross-scoring needs /v1/completions with echo=True and logprobs, as vLLM serves"
    )


class RemoteTokenizer:
    """:class:`TextTokenizer` through the server's ``POST /tokenize`` (vLLM).

    Args:
        base_url: the OpenAI base URL (``http://host:port/v1``); ``/tokenize`` is at its root.
        model: the served model name.
        http: an ``httpx.Client`` (default: a new one).

    Raises:
        ScoringNotSupported: (on use) the server has no ``/tokenize``.
    """

    def __init__(self, base_url: str, model: str, *, http: Any = None, timeout: float = 60.0):
        import httpx

        root = base_url.rstrip("/")
        self.url = (root[:-3] if root.endswith("/v1") else root) + "/tokenize"
        self.model = model
        self.http = http or httpx.Client(timeout=timeout)

    def _post(self, body: dict[str, Any]) -> list[int]:
        r = self.http.post(self.url, json={"model": self.model, **body})
        if r.status_code in _UNSUPPORTED_STATUS:
            raise _not_supported(
                "POST /tokenize", f"HTTP {r.status_code}; pass a local tokenizer instead"
            )
        r.raise_for_status()
        tokens = r.json().get("tokens")
        if not isinstance(tokens, list):
            raise _not_supported(
                "POST /tokenize", "no 'tokens' in the answer; pass a local tokenizer instead"
            )
        return [int(t) for t in tokens]

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        return self._post(
            {"messages": list(messages), "add_generation_prompt": True, "add_special_tokens": False}
        )

    def encode(self, text: str) -> list[int]:
        return self._post({"prompt": text, "add_special_tokens": False})


class OpenAICompletionsScorer:
    """Scores ``log p(z | x)`` through ``/v1/completions`` with ``echo`` and ``logprobs``.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model name.
        api_key: the key (never recorded); ``"EMPTY"`` for local servers.
        tokenizer: a Hugging Face tokenizer (object or path) of the served model; default:
            the server's ``/tokenize``.
        pairs_per_request: prompts per request.
        max_concurrency: requests in flight.
        client: an ``openai.OpenAI`` client to use instead of building one.
        timeout: seconds per request.
    """

    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        tokenizer: Any = None,
        pairs_per_request: int = 16,
        max_concurrency: int = 4,
        client: Any = None,
        timeout: float = 300.0,
        max_retries: int = 2,
    ):
        from openai import OpenAI

        self.base_url = base_url
        self.model = model
        self.client = client or OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        if tokenizer is None:
            self.text_tokenizer: TextTokenizer = RemoteTokenizer(base_url, model, timeout=timeout)
        else:
            if isinstance(tokenizer, str):
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(tokenizer)
            self.text_tokenizer = HFTextTokenizer(tokenizer)
        self.pairs_per_request = max(1, int(pairs_per_request))
        self.max_concurrency = max(1, int(max_concurrency))

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "base_url": self.base_url}

    def score(
        self,
        xs: Sequence[Sequence[int]],
        zs: Sequence[Sequence[int]],
        *,
        own: Sequence[int] | None = None,
    ) -> CrossScores:
        """See :meth:`ragen_bench.diagnostics.scorer.Scorer.score` (``own_entropy`` is ``None``).

        Raises:
            ScoringNotSupported: the endpoint rejects or ignores echo with logprobs.
        """
        check_pairs(xs, zs, own)
        n, m = len(zs), len(xs)
        pairs = [(i, j) for j in range(m) for i in range(n)]
        batches = [
            pairs[k : k + self.pairs_per_request]
            for k in range(0, len(pairs), self.pairs_per_request)
        ]
        seq = np.zeros((n, m), dtype=np.float64)

        def run(batch: list[tuple[int, int]]) -> list[tuple[int, int, float]]:
            return [
                (i, j, s)
                for (i, j), s in zip(batch, self._request([(xs[j], zs[i]) for i, j in batch]))
            ]

        if self.max_concurrency == 1 or len(batches) == 1:
            results = [run(b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
                results = list(pool.map(run, batches))
        for part in results:
            for i, j, s in part:
                seq[i, j] = s
        return CrossScores(
            seq=seq, lengths=np.array([len(z) for z in zs], dtype=np.int64), own_entropy=None
        )

    def _request(self, pairs: list[tuple[Sequence[int], Sequence[int]]]) -> list[float]:
        import openai

        prompts = [list(map(int, x)) + list(map(int, z)) for x, z in pairs]
        try:
            r = self.client.completions.create(
                model=self.model,
                prompt=prompts,
                max_tokens=0,
                echo=True,
                logprobs=0,
                temperature=0.0,
            )
        except openai.APIStatusError as exc:
            if exc.status_code in _UNSUPPORTED_STATUS:
                raise _not_supported(
                    "echo with logprobs", f"HTTP {exc.status_code}: {_message(exc)}"
                ) from None
            raise
        choices = sorted(r.choices or [], key=lambda c: c.index)
        if len(choices) != len(prompts):
            raise _not_supported(
                "echo with logprobs", f"{len(choices)} choices for {len(prompts)} prompts"
            )
        out = []
        for (x, z), choice in zip(pairs, choices):
            lp = (
                getattr(choice.logprobs, "token_logprobs", None)
                if choice.logprobs is not None
                else None
            )
            if not lp or len(lp) < len(x) + len(z):
                raise _not_supported(
                    "echo with logprobs", "the answer carries no prompt log-probabilities"
                )
            part = lp[len(x) : len(x) + len(z)]
            if any(v is None for v in part):
                raise _not_supported(
                    "echo with logprobs", "a prompt token came back without a log-probability"
                )
            out.append(float(np.sum(np.asarray(part, dtype=np.float64))))
        return out


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc)[:300]
