"""Local Hugging Face transformers policy (back-end ``hf``).

Batched generation with left padding; returns prompt and completion token ids and the
per-token log-probabilities of the sampled completion under the model at temperature 1
(recorded during generation by a logits processor that sees the logits before
temperature / top-p warping; memory ``O(batch × vocab)``).

torch and transformers are imported only when this back-end is constructed, so an
endpoint-only evaluation never loads them.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from ..model_dirs import (  # noqa: F401 - re-exported: ragen_train and vllm import them here
    check_model_ref,
    load_hf_model,
    model_source,
    resolve_model_path,
    tokenizer_path,
)
from ..types import Generation, PolicyRequest, SamplingParams
from .base import Policy


def _load_error(model: str, exc: OSError) -> ValueError:
    """One clear line for a model ``from_pretrained`` could not load."""
    said = next(
        (line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__
    )
    if Path(model).expanduser().exists():
        return ValueError(f"cannot load the model directory {model!r}: {said}")
    return ValueError(
        f"cannot load model {model!r}: it is not a local directory, and as a hub id it is not in the "
        f"local cache and could not be downloaded (offline, unknown or gated repo); transformers: {said}"
    )


class _LogprobRecorder:
    """Logits processor that records log p(sampled token) at temperature 1.

    HF merges custom processors before the sampling warpers (temperature, top-p), so
    ``scores`` here are the model's logits.  At call ``k`` the ids of the token sampled
    at step ``k-1`` are the last column of ``input_ids``.
    """

    def __init__(self) -> None:
        self.prev: Any = None
        self.columns: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.prev is not None:
            self.columns.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_ids: Any) -> Any:
        """Gather the final step and return a ``(batch, steps)`` tensor."""
        import torch

        if self.prev is not None:
            self.columns.append(self.prev.gather(1, last_ids[:, None]).squeeze(1))
        return torch.stack(self.columns, dim=1) if self.columns else None


class _Cancelled:
    """A transformers stopping criterion: stop every row once ``event`` is set."""

    def __init__(self, event: threading.Event):
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full(
            (input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device
        )


class HFPolicy(Policy):
    """A local transformers causal LM as a policy.

    Args:
        model: a model directory, a hub id, ``"tiny"``, or an already loaded
            ``PreTrainedModel`` (then ``tokenizer`` is required).
        tokenizer: tokenizer with a chat template (default: loaded from ``model``).
        device: torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``...).
        dtype: ``"float32"`` (default; fastest on CPU), ``"bfloat16"`` or ``"float16"``.
        max_batch_size: largest generation batch.
        trust_remote_code: forwarded to ``from_pretrained``.
        base: base model of a LoRA adapter folder (default: found from the adapter and the
            training run, :func:`ragen_bench.model_dirs.adapter_base`).

    Raises:
        ImportError: torch/transformers are missing (install ``ragen[hf]``).
        ValueError: the model path does not exist or is not a model directory, a hub
            id cannot be loaded (offline / unknown), an unknown ``dtype``, or
            ``max_batch_size < 1``, an adapter whose base model is not found.
    """

    name = "hf"
    max_concurrency = 1

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 32,
        trust_remote_code: bool = False,
        base: str | None = None,
    ):
        try:
            import torch
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the hf back-end needs torch and transformers: pip install 'ragen[hf]'"
            ) from exc
        self.max_batch_size = int(max_batch_size)
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch_dtype = getattr(torch, str(dtype), None)
        if not isinstance(torch_dtype, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        if isinstance(model, (str, os.PathLike)):
            source = model_source(str(model), base)
            self._model_name = Path(source.path).name if str(model) != "tiny" else "tiny"
            self.base = source.base
            self._source_info = source.describe()
            try:
                self._tokenizer = tokenizer or AutoTokenizer.from_pretrained(
                    tokenizer_path(source), trust_remote_code=trust_remote_code
                )
                self.model = load_hf_model(source, torch_dtype, trust_remote_code=trust_remote_code)
            except OSError as exc:
                raise _load_error(str(model), exc) from exc
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer together with a loaded model")
            self.model, self._tokenizer = model, tokenizer
            self.base = None
            self._source_info = {}
            self._model_name = (
                getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
            )
        self.model.to(device)
        self.model.eval()
        self.device = device
        if self._tokenizer.pad_token_id is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._lock = threading.Lock()
        from ..chat import ChatTokens

        self.chat = ChatTokens(self._tokenizer)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self._model_name

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_name,
            "device": self.device,
            "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
            **self._source_info,
        }

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        """:meth:`generate_sync` in a worker thread.  Cancelled (Ctrl-C: ``asyncio.run``
        cancels its task), it stops the generation at the next token, so the interpreter,
        which waits for the thread before it exits, exits within one decoding step instead
        of after the whole batch (minutes for a large CPU batch)."""
        cancel = threading.Event()  # this call's own: a later call is never stopped by it
        try:
            return await asyncio.to_thread(self.generate_sync, requests, params, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def generate_sync(
        self,
        requests: list[PolicyRequest],
        params: SamplingParams,
        cancel: threading.Event | None = None,
    ) -> list[Generation]:
        """Blocking batched generation (see :meth:`Policy.generate`); once ``cancel`` is set
        every row stops at the next token."""
        import torch

        prompts = [
            r.prompt_token_ids
            if r.prompt_token_ids is not None
            else self.chat.prompt_ids(r.messages)
            for r in requests
        ]
        pad = self._tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
                attention[i, width - len(p) :] = 1
        eos = self._eos_ids()
        recorder = _LogprobRecorder()
        kwargs: dict[str, Any] = dict(
            max_new_tokens=params.max_new_tokens,
            do_sample=params.temperature > 0,
            eos_token_id=eos,
            pad_token_id=pad,
            logits_processor=[recorder],
            return_dict_in_generate=True,
            # Each process generates on its own: transformers would otherwise sync every decode
            # step across ranks for an FSDP-managed model, and ranks sample different amounts
            # (ragen_train.distributed.unsharded makes such forwards collective-free).
            synced_gpus=False,
        )
        if params.temperature > 0:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self._tokenizer)
        if cancel is not None:
            kwargs["stopping_criteria"] = [_Cancelled(cancel)]
        with self._lock, torch.no_grad():
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                **kwargs,
            )
        seqs = out.sequences[:, width:].cpu()
        logprobs = recorder.finish(out.sequences[:, -1])
        results = []
        for i, prompt in enumerate(prompts):
            ids = seqs[i].tolist()
            lp = logprobs[i].tolist() if logprobs is not None else [0.0] * len(ids)
            n, finish = self._cut(ids, eos, params)
            completion = ids[:n]
            text = self._tokenizer.decode(completion, skip_special_tokens=True)
            results.append(
                Generation(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=len(prompt),
                    completion_tokens=len(completion),
                    prompt_token_ids=list(prompt),
                    completion_token_ids=completion,
                    completion_logprobs=[float(x) for x in lp[:n]],
                )
            )
        return results

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        if self._tokenizer.eos_token_id is not None and self._tokenizer.eos_token_id not in ids:
            ids.append(self._tokenizer.eos_token_id)
        return ids

    def _cut(self, ids: list[int], eos: list[int], params: SamplingParams) -> tuple[int, str]:
        """Length of the completion (through the first EOS) and its finish reason."""
        for j, tok in enumerate(ids):
            if tok in eos:
                return j + 1, "stop"
        n = len(ids)
        pad = self._tokenizer.pad_token_id
        while n > 0 and ids[n - 1] == pad and pad not in eos:
            n -= 1  # rows finished by a stop string are padded afterwards
        if params.stop:
            text = self._tokenizer.decode(ids[:n], skip_special_tokens=True)
            if any(s in text for s in params.stop):
                return n, "stop"
        return n, ("length" if n >= params.max_new_tokens else "stop")
