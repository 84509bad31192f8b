"""Log-probabilities, entropies and values computed only where the update trains.

The plain path (:func:`ragen_train.modeling.token_logprobs` on a batch padded to the
longest sample of the step) runs every sample's whole prompt through the model and the
language-model head over every position.  In a StarPO step most of that is waste: the
members of a group share their prompt (same env seed, same first observation), a
micro-batch pads to the longest sample of the *step*, and only the response tokens
(``loss_mask == 1``) are trained.  This module removes the three wastes, exactly:

1. **Shared prefix** (``update_path="shared_prefix"``).  The samples of a micro-batch are
   split into *units* (same group and turn); a unit's common prefix ``ids[:P]`` runs once
   (one row of a prefix pass, ``use_cache=True``), its key/value cache is indexed out to
   the unit's members (``index_select``, whose backward sums the members' gradients) and
   each member's suffix ``ids[P:]`` runs against it with its true positions
   ``P, P+1, ...``.  The gradient flows through the cached keys and values into the
   prefix pass, so the result equals running every sample in full — also with LoRA on
   the attention projections (tested to fp32 tolerance in ``tests/train/test_logprobs.py``).
   ``P`` never exceeds a member's first trained token, so every trained position's
   hidden state exists in the prefix pass (the last prefix position) or the suffix pass.
   Under gradient checkpointing (recomputed layers cannot hand a cache with gradient to a
   second call) the unit is *packed* instead: one row ``prefix | suffix_1 | suffix_2 ...``
   with a block-causal mask (a suffix sees the prefix and its own earlier tokens) and each
   suffix's positions restarting at ``P`` — the same tokens computed, in one model call
   (built on HF's 4-D additive ``attention_mask``).
2. **Padding per micro-batch**, never per step, and optional token-budget micro-batching
   (:func:`plan_micro_batches`, ``trainer.max_tokens_per_microbatch``; like verl's
   dynamic batch size, ``use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``).
3. **LM head only at trained positions**, chunked over the vocabulary
   (:func:`linear_logprob_entropy`): the final hidden states of the trained positions
   (captured at the decoder's final norm) go through a custom autograd function that
   keeps a running log-sum-exp over vocabulary chunks and recomputes each chunk in the
   backward pass, so no ``(positions, vocab)`` tensor is ever stored (the idea of
   Liger-Kernel's fused linear cross-entropy, Hsu et al. 2024, arXiv 2410.10989).

Every micro-batch makes the same number of model calls on every rank (two for
``shared_prefix``, one for ``shared_prefix`` packed and for ``padded``; whether a unit is
packed depends on the model only, :func:`packs_prefix`), so DDP's per-forward collectives
stay in step.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

UPDATE_PATHS = ("shared_prefix", "padded", "plain")

#: Largest ``positions × chunk`` block of logits held at once by the chunked LM head.
CHUNK_ELEMENTS = 1 << 24


# ------------------------------------------------------------------ LM head
class _LinearLogprobEntropy(torch.autograd.Function):
    """``(hidden (N,H), weight (V,H), bias (V,)|None, targets (N,))`` -> ``logp, entropy (N,)``.

    ``z = (hidden @ weight.T + bias).float() / temperature``; ``logp = z[target] - logZ``;
    ``entropy = logZ - Σ_v p_v z_v``.  Backward (``p = softmax(z)``, ``E = Σ p z``):
    ``∂logp/∂z_v = 1[v = target] - p_v``, ``∂H/∂z_v = -p_v (z_v - E)``.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk):  # type: ignore[override]
        n, vocab = hidden.shape[0], weight.shape[0]
        dev = hidden.device
        m = torch.full((n,), float("-inf"), device=dev)
        s = torch.zeros(n, device=dev)
        t = torch.zeros(n, device=dev)
        tgt = torch.zeros(n, device=dev)
        for v0 in range(0, vocab, chunk):
            z = _chunk_logits(hidden, weight, bias, v0, v0 + chunk, temperature)
            width = z.shape[1]
            inside = (targets >= v0) & (targets < v0 + width)
            got = z.gather(1, (targets - v0).clamp(0, width - 1)[:, None])[:, 0]
            tgt = torch.where(inside, got, tgt)
            new_m = torch.maximum(m, z.max(-1).values) if n else m
            scale = torch.exp(m - new_m) if v0 else torch.zeros_like(m)
            e = torch.exp(z - new_m[:, None])
            s = s * scale + e.sum(-1)
            t = t * scale + (e * z).sum(-1)
            m = new_m
        logz = m + torch.log(s)
        mean_z = t / s
        ctx.save_for_backward(hidden, weight, bias, targets, logz, mean_z)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.set_materialize_grads(False)
        return tgt - logz, logz - mean_z

    @staticmethod
    def backward(ctx, g_lp, g_ent):  # type: ignore[override]
        hidden, weight, bias, targets, logz, mean_z = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.zeros_like(hidden) if need_h else None
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_b = torch.zeros_like(bias) if need_b and bias is not None else None
        if g_lp is None and g_ent is None:
            return grad_h, grad_w, grad_b, None, None, None
        vocab = weight.shape[0]
        for v0 in range(0, vocab, ctx.chunk):
            z = _chunk_logits(hidden, weight, bias, v0, v0 + ctx.chunk, ctx.temperature)
            width = z.shape[1]
            p = torch.exp(z - logz[:, None])
            gz = torch.zeros_like(z)
            if g_lp is not None:
                gz -= g_lp[:, None] * p
                inside = (targets >= v0) & (targets < v0 + width)
                rows = torch.nonzero(inside, as_tuple=True)[0]
                gz[rows, targets[rows] - v0] += g_lp[rows]
            if g_ent is not None:
                gz -= g_ent[:, None] * p * (z - mean_z[:, None])
            gz = (gz / ctx.temperature).to(hidden.dtype)
            w = weight[v0 : v0 + width]
            if grad_h is not None:
                grad_h += gz @ w
            if grad_w is not None:
                grad_w[v0 : v0 + width] += gz.t() @ hidden
            if grad_b is not None:
                grad_b[v0 : v0 + width] += gz.sum(0)
        return grad_h, grad_w, grad_b, None, None, None


def _chunk_logits(hidden, weight, bias, v0, v1, temperature) -> torch.Tensor:
    z = hidden @ weight[v0:v1].t()
    if bias is not None:
        z = z + bias[v0:v1]
    z = z.float()
    return z / temperature if temperature != 1.0 else z


def linear_logprob_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of ``targets`` and entropy under ``softmax((hidden Wᵀ + b) / T)``,
    without materialising the ``(N, V)`` logits (forward or backward).

    Args:
        hidden: ``(N, H)`` final hidden states (model dtype).
        weight: ``(V, H)`` LM-head weight; ``bias``: ``(V,)`` or ``None``.
        targets: ``(N,)`` token ids.
        temperature: logits are divided by it (as in :func:`~ragen_train.modeling.token_logprobs`).
        chunk: vocabulary rows per block; default ``CHUNK_ELEMENTS // N`` (at least 1024).

    Returns:
        ``logp (N,)`` and ``entropy (N,)`` in float32, both differentiable.
    """
    n = int(hidden.shape[0])
    if chunk is None:
        chunk = max(1024, CHUNK_ELEMENTS // max(n, 1))
    chunk = max(1, min(int(chunk), int(weight.shape[0])))
    return _LinearLogprobEntropy.apply(hidden, weight, bias, targets, float(temperature), chunk)


def logits_logprob_entropy(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as :func:`linear_logprob_entropy` from already computed ``(N, V)`` logits
    (the fallback for heads that are not a plain linear layer)."""
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    logz = torch.logsumexp(z, dim=-1)
    logp = z.gather(-1, targets[:, None])[:, 0] - logz
    ent = logz - (torch.softmax(z, dim=-1) * z).sum(-1)
    return logp, ent


# ------------------------------------------------------------------ planning
@dataclass(frozen=True)
class Unit:
    """Samples of one micro-batch that share a prefix.

    Attributes:
        rows: indices into the step's sample list.
        prefix: shared prefix length ``P`` in tokens (``0``: no prefix pass; padded path).
    """

    rows: tuple[int, ...]
    prefix: int


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch: its units (``rows`` lists them in forward order)."""

    units: tuple[Unit, ...]

    @property
    def rows(self) -> list[int]:
        return [r for u in self.units for r in u.rows]


def first_trained(sample: Any) -> int:
    """Token index of the first trained token (``loss_mask`` 1), or the length if none."""
    mask = sample.loss_mask
    for i, v in enumerate(mask):
        if v:
            return i
    return len(mask)


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token sequences."""
    if not seqs:
        return 0
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return n


def _units(samples: Sequence[Any], rows: Sequence[int], share: bool) -> list[Unit]:
    if not share:
        return [Unit((r,), 0) for r in rows]
    by_key: dict[tuple[int, int], list[int]] = {}
    for r in rows:
        s = samples[r]
        by_key.setdefault((s.group, -1 if s.turn is None else s.turn), []).append(r)
    out: list[Unit] = []
    for key in sorted(by_key):
        members = by_key[key]
        p = min(
            common_prefix([samples[r].input_ids for r in members]),
            min(first_trained(samples[r]) for r in members),
        )
        if p >= 1:
            out.append(Unit(tuple(members), p))
        else:  # nothing shared: each sample alone, its prompt as its prefix
            out.extend(
                Unit((r,), max(1, min(len(samples[r].input_ids), first_trained(samples[r]))))
                for r in members
            )
    return out


def micro_batch_cost(samples: Sequence[Any], units: Sequence[Unit], packed: bool = False) -> int:
    """Tokens a micro-batch's forward computes, padding included: ``U · max P + n · max S``
    with a prefix pass, ``U · max (P + Σ S)`` packed (one row per unit), ``n · max L``
    without a prefix (``U`` units, ``n`` samples, ``S = L - P``)."""
    if not units:
        return 0
    n = sum(len(u.rows) for u in units)
    if all(u.prefix == 0 for u in units):
        return n * max(len(samples[r].input_ids) for u in units for r in u.rows)
    if packed:
        return len(units) * max(_packed_len(samples, u) for u in units)
    pmax = max(u.prefix for u in units)
    smax = max(1, max(len(samples[r].input_ids) - u.prefix for u in units for r in u.rows))
    return len(units) * pmax + n * smax


def _packed_len(samples: Sequence[Any], unit: Unit) -> int:
    """Length of a unit's packed row: its prefix once, then every member's suffix."""
    return unit.prefix + sum(len(samples[r].input_ids) - unit.prefix for r in unit.rows)


def plan_micro_batches(
    samples: Sequence[Any],
    rows: Sequence[int],
    *,
    share_prefix: bool,
    max_samples: int,
    max_tokens: int = 0,
    packed: bool = False,
) -> list[MicroBatch]:
    """Split a mini-batch into micro-batches.

    Units (:class:`Unit`) are taken in order, members sorted by length; a micro-batch is
    closed before it would exceed ``max_tokens`` computed tokens (:func:`micro_batch_cost`)
    when ``max_tokens > 0``, else before it would exceed ``max_samples`` samples.  A unit
    may span micro-batches (each part keeps the unit's prefix).  A single sample above the
    budget gets a micro-batch of its own.

    Args:
        samples: the step's samples (``input_ids``, ``loss_mask``, ``group``, ``turn``).
        rows: the mini-batch's indices into ``samples``.
        packed: cost the micro-batches as packed units (:func:`packs_prefix`).

    Returns:
        micro-batches covering ``rows`` exactly once.

    Raises:
        ValueError: ``max_samples < 1`` or ``max_tokens < 0``.
    """
    if max_samples < 1 or max_tokens < 0:
        raise ValueError(
            f"max_samples must be >= 1 and max_tokens >= 0, got {max_samples}, {max_tokens}"
        )
    out: list[MicroBatch] = []
    cur: list[Unit] = []

    def close() -> None:
        if cur:
            out.append(MicroBatch(tuple(cur)))
            cur.clear()

    for unit in _units(samples, rows, share_prefix):
        members = sorted(unit.rows, key=lambda r: (len(samples[r].input_ids), r))
        for r in members:
            trial = list(cur)
            if trial and trial[-1].rows[0] in unit.rows and trial[-1].prefix == unit.prefix:
                trial[-1] = Unit(trial[-1].rows + (r,), unit.prefix)
            else:
                trial.append(Unit((r,), unit.prefix))
            n = sum(len(u.rows) for u in trial)
            over = (
                micro_batch_cost(samples, trial, packed) > max_tokens
                if max_tokens
                else n > max_samples
            )
            if over and cur:
                close()
                cur.append(Unit((r,), unit.prefix))
            else:
                cur[:] = trial
    close()
    return out


# ------------------------------------------------------------------ forward
def _parts(model: Any) -> tuple[Any, Any, Any]:
    """``(base causal LM, final norm module, output head)`` of a plain / peft / DDP model."""
    from .modeling import unwrap

    m = unwrap(model)
    base = m.get_base_model() if hasattr(m, "get_base_model") else m
    decoder = getattr(base, getattr(base, "base_model_prefix", "model"), None)
    norm = getattr(decoder, "norm", None)
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    return base, norm, head


def packs_prefix(model: Any) -> bool:
    """Whether ``shared_prefix`` packs each unit into one row (one model call) rather than
    running a prefix pass whose key/value cache serves a suffix pass: under gradient
    checkpointing, whose recomputed layers keep no cache with gradient."""
    base, _, _ = _parts(model)
    return any(getattr(m, "gradient_checkpointing", False) for m in base.modules())


def fast_path_problem(model: Any) -> str | None:
    """Why the fast paths (``shared_prefix``, ``padded``) cannot run on ``model`` (``None``
    when they can); both need the same."""
    base, norm, head = _parts(model)
    if norm is None:
        return "the decoder has no final `norm` module to read hidden states from"
    if head is None:
        return "the model has no output embeddings"
    if getattr(base.config, "final_logit_softcapping", None):
        return "logit soft-capping is not supported"
    w = getattr(head, "weight", None)
    if (w is not None and type(w).__name__ == "DTensor") or _fsdp2_wrapped(base):
        # Checked by wrapping, not only by the head's weight: inside ``distributed.unsharded``
        # the weights are plain tensors, but the training forward runs sharded.
        return "FSDP2-sharded parameters"
    return None


def _fsdp2_wrapped(model: Any) -> bool:
    """Whether any module of ``model`` is sharded by FSDP2 (``fully_shard``)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch build without torch.distributed
        return False
    return any(isinstance(m, FSDPModule) for m in model.modules())


@contextlib.contextmanager
def _capture(norm: Any) -> Iterator[list[torch.Tensor]]:
    got: list[torch.Tensor] = []
    handle = norm.register_forward_hook(lambda _m, _i, out: got.append(out))
    try:
        yield got
    finally:
        handle.remove()


def _no_logits(device: Any) -> torch.Tensor:
    """``logits_to_keep`` that keeps no position: the model's own LM head computes nothing
    (``1`` would still project one position per row onto the whole vocabulary)."""
    return torch.zeros(0, dtype=torch.long, device=device)


def _cache_kw(base: Any) -> str:
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean ``(B, q, k)`` -> additive ``(B, 1, q, k)`` mask (0 allowed, dtype min elsewhere)."""
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    out.masked_fill_(~allowed, torch.finfo(dtype).min)
    return out[:, None]


def _pad(seqs: Sequence[Sequence[int]], width: int, pad_id: int) -> torch.Tensor:
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
    return out


@dataclass
class _Positions:
    """Where the trained positions' hidden states come from: ``hidden_index`` into the
    concatenation of the flattened passes; ``row``/``col`` where the result goes in the
    ``(b, width)`` output; ``targets`` the token ids."""

    hidden_index: torch.Tensor
    row: torch.Tensor
    col: torch.Tensor
    targets: torch.Tensor


def _final_hidden(
    model: Any, samples: Sequence[Any], mb: MicroBatch, pad_id: int, device: Any
) -> tuple[torch.Tensor, _Positions]:
    """Run the micro-batch; flattened final hidden states and the trained positions."""
    base, norm, _ = _parts(model)
    rows = mb.rows
    ids = [samples[r].input_ids for r in rows]
    masks = [samples[r].loss_mask for r in rows]
    hidden_index: list[int] = []
    out_row: list[int] = []
    out_col: list[int] = []
    targets: list[int] = []
    if all(u.prefix == 0 for u in mb.units):  # padded path: one pass, right padding
        width = max(len(s) for s in ids)
        x = _pad(ids, width, pad_id).to(device)
        att = torch.zeros_like(x)
        for i, s in enumerate(ids):
            att[i, : len(s)] = 1
        with _capture(norm) as got:
            model(
                input_ids=x, attention_mask=att, use_cache=False, logits_to_keep=_no_logits(device)
            )
        flat = got[-1].reshape(-1, got[-1].shape[-1])
        for i, (s, m) in enumerate(zip(ids, masks)):
            for t in range(1, len(s)):
                if m[t]:
                    hidden_index.append(i * width + t - 1)
                    out_row.append(i)
                    out_col.append(t - 1)
                    targets.append(s[t])
    else:
        if packs_prefix(model):
            flat, starts = _packed_pass(model, norm, samples, mb, pad_id, device)
        else:
            flat, starts = _shared_prefix_pass(model, base, norm, samples, mb, pad_id, device)
        i = 0
        for unit in mb.units:
            p = unit.prefix
            for _r in unit.rows:
                s, m = ids[i], masks[i]
                pre, suf = starts[i]
                for t in range(1, len(s)):
                    if m[t]:
                        j = t - 1  # hidden state that predicts token t
                        hidden_index.append(pre + j if j < p else suf + (j - p))
                        out_row.append(i)
                        out_col.append(t - 1)
                        targets.append(s[t])
                i += 1
    pos = _Positions(
        hidden_index=torch.tensor(hidden_index, dtype=torch.long, device=flat.device),
        row=torch.tensor(out_row, dtype=torch.long),
        col=torch.tensor(out_col, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long, device=flat.device),
    )
    return flat, pos


def _packed_pass(
    model: Any, norm: Any, samples: Sequence[Any], mb: MicroBatch, pad_id: int, device
) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """One model call, one row per unit: ``prefix | suffix_1 | suffix_2 | ...``.

    A token of suffix ``i`` attends to the whole prefix and to suffix ``i`` up to itself;
    its position id is its position in the member's own sequence (``P + offset``), so each
    member computes exactly what it computes alone.  Padding tokens attend to earlier padding
    and the prefix (no fully masked row) and are never read.

    Returns ``(flat hidden (U·W, H), starts)``: per member, in ``mb.rows`` order, the flat
    index of its row's position 0 and of its suffix's first token (``W`` the longest row).
    """
    units = mb.units
    rows_ids: list[list[int]] = []
    rows_pos: list[list[int]] = []
    rows_seg: list[list[int]] = []
    member_off: list[tuple[int, int]] = []
    for k, u in enumerate(units):
        p = u.prefix
        ids = list(samples[u.rows[0]].input_ids[:p])
        pos, seg = list(range(p)), [0] * p
        for m, r in enumerate(u.rows, start=1):
            suffix = samples[r].input_ids[p:]
            member_off.append((k, len(ids)))
            ids += suffix
            pos += range(p, p + len(suffix))
            seg += [m] * len(suffix)
        rows_ids.append(ids)
        rows_pos.append(pos)
        rows_seg.append(seg)
    width = max(len(r) for r in rows_ids)
    seg = _pad(rows_seg, width, -1).to(device)
    pos = _pad(rows_pos, width, 0).to(device)
    q = torch.arange(width, device=device)
    causal = q[None, :, None] >= q[None, None, :]
    key_seg = seg[:, None, :]
    allowed = causal & ((key_seg == 0) | (key_seg == seg[:, :, None]))
    dtype = next(p for p in model.parameters()).dtype
    with _capture(norm) as got:
        model(
            input_ids=_pad(rows_ids, width, pad_id).to(device),
            attention_mask=_additive(allowed, dtype),
            position_ids=pos,
            use_cache=False,
            logits_to_keep=_no_logits(device),
        )
    h = got[-1]
    starts = [(k * width, k * width + off) for k, off in member_off]
    return h.reshape(-1, h.shape[-1]), starts


def _shared_prefix_pass(
    model: Any, base: Any, norm: Any, samples: Sequence[Any], mb: MicroBatch, pad_id: int, device
) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """Prefix pass (one row per unit) then suffix pass against the indexed-out cache.

    Returns ``(flat hidden, starts)``: per member, in ``mb.rows`` order, the flat index of
    its unit's prefix row and of its own suffix row.
    """
    units = mb.units
    dtype = next(p for p in base.parameters()).dtype
    pmax = max(u.prefix for u in units)
    prefix_ids = [samples[u.rows[0]].input_ids[: u.prefix] for u in units]
    plen = torch.tensor([u.prefix for u in units], device=device)
    q = torch.arange(pmax, device=device)
    allowed = (q[None, :, None] >= q[None, None, :]) & (q[None, None, :] < plen[:, None, None])
    kw = _cache_kw(base)
    with _capture(norm) as got:
        out = model(
            input_ids=_pad(prefix_ids, pmax, pad_id).to(device),
            attention_mask=_additive(allowed, dtype),
            position_ids=q[None].expand(len(units), -1),
            use_cache=True,
            logits_to_keep=_no_logits(device),
        )
    h_pre = got[-1]
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None:
        raise RuntimeError("the model returned no key/value cache for the shared prefix")
    unit_of: list[int] = []
    suffixes: list[Sequence[int]] = []
    for k, u in enumerate(units):
        for r in u.rows:
            unit_of.append(k)
            suffixes.append(samples[r].input_ids[u.prefix :])
    smax = max(1, max(len(s) for s in suffixes))
    idx = torch.tensor(unit_of, dtype=torch.long, device=device)
    cache.reorder_cache(idx)  # index_select on the batch dim: members share (and sum) grads
    p_of = plen[idx]
    slen = torch.tensor([len(s) for s in suffixes], device=device)
    qs = torch.arange(smax, device=device)
    kpre = torch.arange(pmax, device=device)
    pre_ok = (kpre[None, None, :] < p_of[:, None, None]).expand(-1, smax, -1)
    suf_ok = (qs[None, :, None] >= qs[None, None, :]) & (qs[None, None, :] < slen[:, None, None])
    allowed = torch.cat([pre_ok, suf_ok], dim=-1)
    with _capture(norm) as got:
        model(
            input_ids=_pad(suffixes, smax, pad_id).to(device),
            attention_mask=_additive(allowed, dtype),
            position_ids=p_of[:, None] + qs[None, :],
            use_cache=True,
            logits_to_keep=_no_logits(device),
            **{kw: cache},
        )
    h_suf = got[-1]
    hdim = h_pre.shape[-1]
    flat = torch.cat([h_pre.reshape(-1, hdim), h_suf.reshape(-1, hdim)])
    suf_off = len(units) * pmax
    starts = [(k * pmax, suf_off + i * smax) for i, k in enumerate(unit_of)]
    return flat, starts


def micro_logprobs(
    model: Any,
    samples: Sequence[Any],
    mb: MicroBatch,
    *,
    width: int,
    pad_id: int,
    device: Any = "cpu",
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropies) of one micro-batch at its trained positions.

    Args:
        model: a causal LM (plain, peft or DDP-wrapped) that :func:`fast_path_problem` accepts.
        samples: the step's samples; ``mb`` picks rows of it.
        width: the step batch's ``L - 1`` (output columns, aligned with the targets as in
            :class:`~ragen_train.batch.TensorBatch`).

    Returns:
        ``logp (b, width)`` and ``entropy (b, width)`` (or ``None``), float32, zero outside
        the trained positions; rows in ``mb.rows`` order.  Differentiable when grad is on.
    """
    _, _, head = _parts(model)
    flat, pos = _final_hidden(model, samples, mb, pad_id, device)
    h = flat.index_select(0, pos.hidden_index)
    if type(head) is torch.nn.Linear:
        lp, ent = linear_logprob_entropy(
            h, head.weight, pos.targets, bias=head.bias, temperature=temperature
        )
    else:  # e.g. a LoRA-wrapped head: its own forward, still only at the trained positions
        lp, ent = logits_logprob_entropy(head(h), pos.targets, temperature)
    b = len(mb.rows)
    logp = torch.zeros((b, width), dtype=torch.float32, device=lp.device)
    logp = logp.index_put((pos.row.to(lp.device), pos.col.to(lp.device)), lp)
    if not with_entropy:
        return logp, None
    entropy = torch.zeros((b, width), dtype=torch.float32, device=lp.device)
    entropy = entropy.index_put((pos.row.to(lp.device), pos.col.to(lp.device)), ent)
    return logp, entropy


__all__ = [
    "UPDATE_PATHS",
    "MicroBatch",
    "Unit",
    "common_prefix",
    "fast_path_problem",
    "first_trained",
    "linear_logprob_entropy",
    "logits_logprob_entropy",
    "micro_batch_cost",
    "micro_logprobs",
    "packs_prefix",
    "plan_micro_batches",
]
