"""Models: the policy, the reference policy, the critic; token log-probs and entropies.

The critic is a copy of the policy's architecture with a scalar head
(``AutoModelForTokenClassification`` with one label), initialised from the same
weights, as in verl / RAGEN.  The reference policy is loaded only when a KL coefficient
is non-zero (RAGEN computes it even with KL off — RAGEN-AI/RAGEN
``ragen/trainer/agent_trainer.py``).

Position convention: for a right-padded batch ``input_ids (B, L)``, per-token tensors
have shape ``(B, L-1)`` and position ``j`` refers to the target token ``input_ids[:, j+1]``:
its log-prob comes from the logits at ``j``, and its value ``V`` from the critic's output
at ``j`` (the state from which that token was generated).
"""

from __future__ import annotations

from typing import Any

import torch

from ragen_bench.policies.hf import resolve_model_path

from .config import LoraConfig, ModelConfig, TrainConfigError


def check_device(device: str, field: str = "model.device") -> None:
    """Fail early, naming ``field``, when ``device`` is not usable on this machine.

    Without this, ``model.device=cuda`` on a machine without CUDA fails deep inside
    torch (``AssertionError: Torch not compiled with CUDA enabled``).

    Raises:
        TrainConfigError: not a torch device string, CUDA (or MPS) not available, or a
            CUDA index beyond the visible GPUs.
    """
    use_cpu = "--device cpu" if field.startswith("--") else f"{field}=cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise TrainConfigError(
            field, f"{device!r} is not a torch device ({exc}); use e.g. cpu, cuda, cuda:1"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise TrainConfigError(
                field,
                f"{device!r} requested but CUDA is not available on this machine "
                f"(torch.cuda.is_available() is False); use {use_cpu}",
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise TrainConfigError(
                field,
                f"{device!r} requested but only {torch.cuda.device_count()} CUDA "
                "device(s) are visible",
            )
    elif dev.type == "mps" and not (
        hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    ):
        raise TrainConfigError(
            field, f"{device!r} requested but MPS is not available on this machine; use {use_cpu}"
        )


def load_tokenizer(path: str) -> Any:
    """The tokenizer of ``model.path`` (``"tiny"``, a local directory or a hub id).

    Raises:
        TrainConfigError: (field ``model.path``) the path is neither a model directory nor a hub
            id, or it cannot be loaded (e.g. a hub id while offline) — one line, no traceback.
    """
    from transformers import AutoTokenizer

    from ragen_bench.policies.hf import check_model_ref

    try:
        check_model_ref(path)
        tok = AutoTokenizer.from_pretrained(resolve_model_path(path))
    except ValueError as exc:
        raise TrainConfigError("model.path", str(exc)) from None
    except OSError as exc:
        first = next(
            (line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__
        )
        raise TrainConfigError("model.path", f"cannot load {path!r}: {first}") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_policy(cfg: ModelConfig, *, trainable: bool = True) -> Any:
    """Load the causal LM (with LoRA adapters when ``cfg.lora.rank > 0``).

    Raises:
        TrainConfigError: ``cfg.device`` is not usable here (:func:`check_device`).
    """
    check_device(cfg.device)
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path(cfg.path), dtype=getattr(torch, cfg.dtype)
    )
    if cfg.gradient_checkpointing and trainable:
        model.gradient_checkpointing_enable()
    if cfg.lora.rank > 0 and trainable:
        model = apply_lora(model, cfg.lora)
    model.to(cfg.device)
    if not trainable:
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
    return model


def apply_lora(model: Any, cfg: LoraConfig) -> Any:
    """Wrap ``model`` with peft LoRA adapters.

    Raises:
        ImportError: peft is missing (``pip install 'ragen[train]'``).
    """
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as exc:  # pragma: no cover
        raise ImportError("LoRA needs peft: pip install 'ragen[train]'") from exc
    target: Any = cfg.target_modules
    if target != "all-linear" and isinstance(target, str):
        target = [t.strip() for t in target.split(",") if t.strip()]
    pcfg = PeftLoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=target,
        task_type="CAUSAL_LM",
    )
    from ragen_bench.model_dirs import peft_quietly

    with peft_quietly():
        return get_peft_model(model, pcfg)


def load_critic(cfg: ModelConfig) -> Any:
    """A value model ``(B, L) -> (B, L)`` initialised from the policy weights, without
    dropout on its value head (so the critic's update is the same on any process count).

    Raises:
        TrainConfigError: ``cfg.device`` is not usable here (:func:`check_device`).
    """
    check_device(cfg.device)
    from transformers import AutoConfig, AutoModelForTokenClassification
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # "some weights newly initialised" is expected for the value head
    # classifier_dropout=0: no dropout on the value head (verl's critic sets the same,
    # verl/workers/fsdp_workers.py).  Its masks would come from each rank's RNG stream, so
    # 1 and 2 processes would train different critics from the same batch.
    path = resolve_model_path(cfg.path)
    config = AutoConfig.from_pretrained(path, num_labels=1)
    config.classifier_dropout = 0.0
    critic = AutoModelForTokenClassification.from_pretrained(
        path, config=config, dtype=torch.float32
    )
    hf_logging.set_verbosity_warning()
    if critic.config.pad_token_id is None:
        critic.config.pad_token_id = (
            critic.config.eos_token_id if isinstance(critic.config.eos_token_id, int) else 0
        )
    # The value head keeps transformers' default small random init (std = initializer_range):
    # a zero head would block every gradient below it on the first update.
    return critic.to(cfg.device)


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    loss_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of the target tokens (and entropies) under ``model``.

    Args:
        input_ids, attention_mask: ``(B, L)`` right-padded.
        temperature: logits are divided by it (the rollout sampling temperature), so
            log-probs are those of the distribution that was sampled before top-p.
        with_entropy: also return the entropy of each predictive distribution.
        loss_mask: ``(B, L-1)``; when given, logits are computed only from the first
            position any row trains on (``logits_to_keep``), which skips the language-model
            head over the shared prompt — with a 150k vocabulary that head dominates memory.
            Positions before it get log-prob and entropy 0.

    Returns:
        ``logp (B, L-1)`` and ``entropy (B, L-1)`` (or ``None``), float32.
    """
    length = input_ids.shape[1]
    start = 0
    if loss_mask is not None and loss_mask.numel() and bool(loss_mask.any()):
        cols = torch.nonzero(loss_mask.any(0), as_tuple=False)
        start = int(cols.min())
    kwargs: dict[str, Any] = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "use_cache": False,
    }
    if start > 0:
        kwargs["logits_to_keep"] = length - start  # logits of positions start .. L-1
    out = model(**kwargs)
    logits = (
        out.logits[:, :-1, :].float()
        if start == 0
        else out.logits[:, : length - 1 - start, :].float()
    )
    if temperature != 1.0:
        logits = logits / temperature
    logz = torch.logsumexp(logits, dim=-1)
    target = input_ids[:, start + 1 :].unsqueeze(-1)
    part = logits.gather(-1, target).squeeze(-1) - logz
    ent_part = None
    if with_entropy:
        p = torch.softmax(logits, dim=-1)
        ent_part = logz - (p * logits).sum(-1)
    if start == 0:
        return part, ent_part
    logp = torch.zeros((input_ids.shape[0], length - 1), dtype=part.dtype, device=part.device)
    logp[:, start:] = part
    ent = None
    if ent_part is not None:
        ent = torch.zeros_like(logp)
        ent[:, start:] = ent_part
    return logp, ent


def token_values(
    critic: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Critic values ``(B, L-1)`` aligned with the target tokens (see module docstring)."""
    out = critic(input_ids=input_ids, attention_mask=attention_mask)
    return out.logits[:, :-1, 0].float()


def unwrap(model: Any) -> Any:
    """The underlying module of a DDP-wrapped model."""
    return getattr(model, "module", model)
