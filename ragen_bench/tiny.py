"""The tiny model preset: a small Qwen2-architecture causal LM built offline.

``build_tiny_model(path)`` writes an ordinary Hugging Face model directory
(``config.json``, ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``
with a ChatML chat template, ``generation_config.json``), so every code path loads it
exactly like a downloaded model.  It is deterministic: the same arguments give
bit-identical files on any machine with the same torch version.

Tokenizer: byte-level BPE like GPT-2 / Qwen2 (the 256 byte symbols plus merges learned
by the ``tokenizers`` BPE trainer, at most 2048 entries, from the checked-in corpus
``ragen_bench/data/tiny_corpus.txt`` of agent-loop conversations; punctuation is isolated
first, so grids are one token per cell; about 2.6 characters per token on the corpus), plus the ChatML special tokens ``<|endoftext|>``, ``<|im_start|>``,
``<|im_end|>`` and the four protocol tags ``<think>``, ``</think>``, ``<answer>``,
``</answer>`` as single (non-special) tokens.  Any text round-trips exactly.

``--model tiny`` in the CLIs resolves to :func:`tiny_model_path` (built on first use in
``$RAGEN_CACHE_DIR`` or ``~/.cache/ragen``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ragen_envs import jsonutil

#: ChatML, the format of Qwen2 chat models: ``<|im_start|>role\ncontent<|im_end|>\n``.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CORPUS = Path(__file__).resolve().parent / "data" / "tiny_corpus.txt"
VOCAB_SIZE = 2048
#: Bump when build_tokenizer changes, so cached tiny models are rebuilt.
TOKENIZER_RECIPE = "bpe-punct-isolated-v1"
TAG_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")


@dataclass(frozen=True)
class TinyConfig:
    """Architecture of the tiny model (a Qwen2 decoder).

    Defaults give about 0.5 M parameters: small enough to train on a laptop CPU.
    """

    vocab_size: int = VOCAB_SIZE
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0
    seed: int = 0

    def key(self) -> str:
        """Short hash of the config, the tokenizer recipe and the corpus (names the cache directory)."""
        corpus = hashlib.sha256(CORPUS.read_bytes()).hexdigest()
        blob = json.dumps(
            {**asdict(self), "tokenizer": TOKENIZER_RECIPE, "corpus": corpus}, sort_keys=True
        ).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def build_tokenizer(vocab_size: int = VOCAB_SIZE):
    """Build the byte-level BPE ChatML tokenizer (a ``PreTrainedTokenizerFast``).

    Deterministic: the BPE trainer sees the same checked-in corpus every time.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE())
    # Punctuation is isolated before the byte-level split, so a grid such as "#_P_#" is one
    # token per cell and every row has the same token layout.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Punctuation(behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        initial_alphabet=alphabet,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train([str(CORPUS)], trainer)
    tok.add_tokens(list(TAG_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        chat_template=CHATML_TEMPLATE,
        model_max_length=8192,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    return fast


def build_tiny_model(path: str | os.PathLike[str], config: TinyConfig | None = None) -> Path:
    """Write the tiny model directory to ``path`` (atomically) and return it.

    Args:
        path: target directory; replaced if it exists.
        config: architecture; default :class:`TinyConfig`.

    The weights are initialised under ``torch.manual_seed(config.seed)`` inside a
    forked RNG, so the caller's random state is untouched.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = config or TinyConfig()
    path = Path(path)
    tokenizer = build_tokenizer(config.vocab_size)
    model_cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        rope_theta=config.rope_theta,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = Qwen2ForCausalLM(model_cfg)
    # Like Qwen2 chat models: both <|im_end|> and <|endoftext|> end a turn.
    model.generation_config = GenerationConfig(
        eos_token_id=[model_cfg.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=model_cfg.pad_token_id,
        do_sample=False,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-", dir=path.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "ragen_tiny.json").write_text(
            jsonutil.dumps({"tiny_config": asdict(config)}, indent=2) + "\n"
        )
        os.chmod(tmp, 0o755)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def cache_dir() -> Path:
    """``$RAGEN_CACHE_DIR`` or ``~/.cache/ragen``."""
    return Path(os.environ.get("RAGEN_CACHE_DIR", Path.home() / ".cache" / "ragen"))


def tiny_model_path(config: TinyConfig | None = None) -> Path:
    """Path of the tiny model for ``config``, building it on first use."""
    config = config or TinyConfig()
    path = cache_dir() / "models" / f"tiny-{config.key()}"
    if not (path / "ragen_tiny.json").is_file():
        build_tiny_model(path, config)
    return path
