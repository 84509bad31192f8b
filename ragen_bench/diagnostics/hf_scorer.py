"""Teacher-forced cross-scoring with a local transformers causal LM.

For each input ``x_j`` the prefix is run once (``use_cache=True``); its key/value cache
is then shared, without copying, by micro-batches of reasonings ``z_i`` (right-padded,
longest first), so the cost is ``M`` prefix passes plus ``N × M`` passes over the
reasoning tokens only — not ``N × M`` passes over ``|x| + |z|`` tokens as in RAGEN
(RAGEN-2, arXiv 2604.06268, as implemented in RAGEN: "Cost: N × NK forward sequences").  Right padding needs no attention
mask: under a causal mask a real token never sees the padding after it.

The log-probability of ``z[0]`` comes from the prefix's last logits; that of ``z[t]``
(t >= 1) from the logits at ``z[t-1]``.  Log-softmax is taken in float32 (whatever the
model dtype) and sums are accumulated in float64.  Models whose cache cannot be
shared this way (sliding-window or non-standard caches) use the plain path: one
forward over ``x_j ⊕ z_i`` per pair (``prefix_cache=False`` forces it; tests check
that both paths agree).

torch and transformers are imported only when a scorer is built.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .samples import HFTextTokenizer
from .scorer import CrossScores, check_pairs

#: Most prefix tokens run in one forward pass (bounds activation memory).
_PREFIX_TOKENS = 32768


class HFScorer:
    """Scores ``log p(z | x)`` with a transformers causal LM.

    Args:
        model: a model directory, a hub id, ``"tiny"``, or a loaded ``PreTrainedModel``
            (then ``tokenizer`` is required).
        tokenizer: a tokenizer with a chat template (default: loaded from ``model``).
        device: torch device for a model loaded here.
        dtype: ``float32`` | ``bfloat16`` | ``float16`` for a model loaded here.
        micro_batch_size: most reasonings per forward pass.
        max_logits_elements: cap on ``batch × length × vocab`` logits per forward pass
            (default 2**27, 512 MiB in float32; the float32 log-softmax and, for the
            entropy, its exponential add up to twice that at peak); the micro-batch
            shrinks to respect it.  Raise it on a large GPU.
        prefix_cache: ``"auto"`` (share the prefix cache when the model's cache allows
            it), ``True`` (require it) or ``False`` (plain concatenation).

    Raises:
        ImportError: torch / transformers missing.
        ValueError: a loaded model without its tokenizer.
    """

    kind = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        micro_batch_size: int = 64,
        max_logits_elements: int = 2**27,
        prefix_cache: bool | str = "auto",
        trust_remote_code: bool = False,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, (str, os.PathLike)):
            from ..policies.hf import resolve_model_path

            path = resolve_model_path(str(model))
            self.model_name = "tiny" if str(model) == "tiny" else Path(path).name
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(
                path, trust_remote_code=trust_remote_code
            )
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code
            ).to(device)
            model.eval()
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer together with a loaded model")
            self.model_name = (
                getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
            )
        self.model = model
        self.tokenizer = tokenizer
        self.text_tokenizer = HFTextTokenizer(tokenizer)
        self.micro_batch_size = max(1, int(micro_batch_size))
        self.max_logits_elements = int(max_logits_elements)
        if prefix_cache not in ("auto", True, False):
            raise ValueError("prefix_cache must be 'auto', True or False")
        self.prefix_cache = prefix_cache
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in params
        self.pad_id = (
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else (tokenizer.eos_token_id or 0)
        )

    @classmethod
    def from_policy(cls, policy: Any, **kwargs: Any) -> HFScorer:
        """Share the model and tokenizer of an :class:`~ragen_bench.policies.hf.HFPolicy`."""
        scorer = cls(policy.model, policy.tokenizer, **kwargs)
        scorer.model_name = policy.model_name
        return scorer

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "device": str(self.device),
            "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
        }

    # ------------------------------------------------------------------ API
    def score(
        self,
        xs: Sequence[Sequence[int]],
        zs: Sequence[Sequence[int]],
        *,
        own: Sequence[int] | None = None,
    ) -> CrossScores:
        """See :meth:`ragen_bench.diagnostics.scorer.Scorer.score`; ``own_entropy`` is filled
        (full-distribution entropy at the own input) when ``own`` is given."""
        import torch

        check_pairs(xs, zs, own)
        n, m = len(zs), len(xs)
        lengths = np.array([len(z) for z in zs], dtype=np.int64)
        seq = np.zeros((n, m), dtype=np.float64)
        own_arr = None if own is None else np.asarray(own, dtype=np.int64)
        ent = None if own is None else np.zeros(n, dtype=np.float64)
        order = sorted(range(n), key=lambda i: -len(zs[i]))
        with _inference(self.model), torch.inference_mode():
            columns = (
                self._prefixes(xs)
                if self.prefix_cache is not False
                else ((j, None) for j in range(m))
            )
            for j, prefix in columns:  # prefixes are computed a batch at a time and freed after use
                x = xs[j]
                if prefix is None and self.prefix_cache is True:
                    raise RuntimeError(
                        "this model's cache cannot be shared across a batch; use prefix_cache=False"
                    )
                for chunk in self._chunks(
                    order, lengths, extra=0 if prefix is not None else len(x)
                ):
                    want_ent = (
                        []
                        if own_arr is None
                        else [k for k, i in enumerate(chunk) if own_arr[i] == j]
                    )
                    if prefix is not None:
                        tok_lp, tok_ent = self._score_cached(
                            prefix, [zs[i] for i in chunk], want_ent
                        )
                    else:
                        tok_lp, tok_ent = self._score_plain(
                            list(x), [zs[i] for i in chunk], want_ent
                        )
                    lens = torch.tensor([len(zs[i]) for i in chunk])
                    mask = torch.arange(tok_lp.shape[1])[None, :] < lens[:, None]
                    sums = (tok_lp.double().cpu() * mask).sum(dim=1).numpy()
                    seq[chunk, j] = sums
                    if ent is not None and want_ent:
                        lens_e = lens[want_ent]
                        mask_e = torch.arange(tok_ent.shape[1])[None, :] < lens_e[:, None]
                        ent_mean = (tok_ent.double().cpu() * mask_e).sum(dim=1) / lens_e.double()
                        for k, row in enumerate(want_ent):
                            ent[chunk[row]] = float(ent_mean[k])
        return CrossScores(seq=seq, lengths=lengths, own_entropy=ent)

    def token_logprobs(self, x: Sequence[int], z: Sequence[int]) -> np.ndarray:
        """``(|z|,)`` float64 log p(z[t] | x, z[:t]) for one pair (plain path; for checks)."""
        import torch

        check_pairs([x], [z], None)
        with _inference(self.model), torch.inference_mode():
            tok_lp, _ = self._score_plain(list(x), [z], [])
        return tok_lp[0, : len(z)].double().cpu().numpy()

    # ------------------------------------------------------------- internals
    def _chunks(self, order: list[int], lengths: np.ndarray, *, extra: int) -> Iterator[list[int]]:
        """Micro-batches of row indices (longest first) within the size and logits caps.

        ``extra``: prefix tokens fed with every row (plain path), whose logits count
        unless the model can keep only the last ones (``logits_to_keep``).
        """
        v = int(self.model.get_output_embeddings().weight.shape[0])
        kept_extra = 0 if self._logits_to_keep else extra
        i = 0
        while i < len(order):
            longest = int(lengths[order[i]])  # rows are sorted longest first
            per_row = (longest + 1 + kept_extra) * v
            b = max(1, min(self.micro_batch_size, self.max_logits_elements // max(1, per_row)))
            yield order[i : i + b]
            i += b

    def _prefixes(self, xs: Sequence[Sequence[int]]) -> Iterator[tuple[int, Any]]:
        """Run every prefix once, several per forward pass (right-padded: under the causal
        mask each row's keys/values up to its own length are exact), longest first.

        Yields ``(j, prefix)`` for every input, a forward pass at a time (so only one
        batch of prefix caches is alive), where ``prefix`` is (log-probs of the token
        after ``x_j``, shape ``(V,)``; per-layer ``(keys, values)`` views of shape
        ``(1, heads, |x_j|, dim)``), or ``None`` when the model's cache cannot be shared.
        """
        import torch

        order = sorted(range(len(xs)), key=lambda j: -len(xs[j]))
        v = int(self.model.get_output_embeddings().weight.shape[0])
        i = 0
        while i < len(order):
            longest = len(xs[order[i]])
            if self._logits_to_keep:  # logits only at the rows' last positions: <= b × b × V
                b = max(
                    1,
                    min(
                        self.micro_batch_size,
                        math.isqrt(self.max_logits_elements // v),
                        _PREFIX_TOKENS // max(1, longest),
                    ),
                )
            else:
                b = 1
            start, i = i, i + b
            chunk = order[start:i]
            ids = self._pad([xs[j] for j in chunk], longest)
            last = sorted({len(xs[j]) - 1 for j in chunk})
            kwargs = (
                {"logits_to_keep": torch.tensor(last, device=ids.device)}
                if self._logits_to_keep
                else {}
            )
            res = self.model(input_ids=ids, use_cache=True, **kwargs)
            cache = res["cache"] if "cache" in res else res.get("past_key_values")
            kv = _cache_tensors(cache)
            if kv is None:  # not shareable: every remaining input takes the plain path
                for j in order[start:]:
                    yield j, None
                return
            pos = {p: k for k, p in enumerate(last)} if self._logits_to_keep else None
            group = []
            for r, j in enumerate(chunk):
                n = len(xs[j])
                col = pos[n - 1] if pos is not None else n - 1
                first = torch.log_softmax(res.logits[r, col].float(), dim=-1)
                group.append(
                    (j, (first, [(k[r : r + 1, :, :n], val[r : r + 1, :, :n]) for k, val in kv]))
                )
            del res, cache, kv
            yield from group

    def _new_cache(self, kv: list[tuple[Any, Any]], batch: int) -> Any:
        from transformers import DynamicCache

        try:
            cache = DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            cache = DynamicCache()
        for layer, (k, v) in enumerate(kv):
            cache.update(k.expand(batch, *k.shape[1:]), v.expand(batch, *v.shape[1:]), layer)
        return cache

    def _pad(self, seqs: list[Sequence[int]], width: int) -> Any:
        import torch

        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        return ids.to(self.device)

    def _score_cached(
        self,
        prefix: tuple[Any, list[tuple[Any, Any]]],
        zs: list[Sequence[int]],
        want_ent: list[int],
    ) -> tuple[Any, Any]:
        import torch

        first, kv = prefix
        width = max(len(z) for z in zs)
        ids = self._pad(zs, width)
        logits = self.model(
            input_ids=ids, use_cache=True, **{self._cache_kw: self._new_cache(kv, len(zs))}
        ).logits
        lp_rest = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # predicts ids[:, 1:]
        tok_lp = torch.cat(
            [first[ids[:, 0]][:, None], lp_rest.gather(2, ids[:, 1:, None]).squeeze(2)], dim=1
        )
        tok_ent = None
        if want_ent:
            sel = torch.tensor(want_ent, device=logits.device)
            h0 = -(first.exp() * first).sum().expand(len(want_ent))[:, None]
            lp_sel = lp_rest[sel]
            tok_ent = torch.cat([h0, -(lp_sel.exp() * lp_sel).sum(dim=-1)], dim=1)
        return tok_lp, tok_ent

    def _score_plain(
        self, x: list[int], zs: list[Sequence[int]], want_ent: list[int]
    ) -> tuple[Any, Any]:
        import torch

        width = max(len(z) for z in zs)
        ids = self._pad([x + list(z) for z in zs], len(x) + width)
        kwargs = {"logits_to_keep": width + 1} if self._logits_to_keep else {}
        logits = self.model(input_ids=ids, use_cache=False, **kwargs).logits
        logits = logits[
            :, -(width + 1) : -1
        ]  # positions |x|-1 .. |x|+width-2 predict z[0..width-1]
        lp = torch.log_softmax(logits.float(), dim=-1)
        tok_lp = lp.gather(2, ids[:, len(x) :, None]).squeeze(2)
        tok_ent = None
        if want_ent:
            lp_sel = lp[torch.tensor(want_ent, device=lp.device)]
            tok_ent = -(lp_sel.exp() * lp_sel).sum(dim=-1)
        return tok_lp, tok_ent


def _cache_tensors(cache: Any) -> list[tuple[Any, Any]] | None:
    """Per-layer (keys, values) of a standard full-attention cache, else ``None``."""
    if cache is None or type(cache).__name__ != "DynamicCache":
        return None
    if any(getattr(cache, "is_sliding", None) or []):
        return None
    layers = getattr(cache, "layers", None)
    if layers is not None:
        try:
            return [(layer.keys, layer.values) for layer in layers]
        except AttributeError:
            return None
    keys, values = getattr(cache, "key_cache", None), getattr(cache, "value_cache", None)
    if keys is None or values is None:
        return None
    return list(zip(keys, values))


@contextlib.contextmanager
def _inference(model: Any) -> Iterator[None]:
    """Evaluation mode for the duration (dropout off), restoring the caller's mode."""
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()
