"""Chat templates at the token level (token-in / token-out).

Re-tokenising a conversation's text does not, in general, give back the tokens the
model sampled (BPE can merge differently; templates may rewrite assistant turns).
RAGEN trains on such re-tokenised text.  We never do: in full-history mode the prompt
of turn t+1 is built as

    prompt_ids(t+1) = prompt_ids(t) + completion_ids(t) + delta(t)

where ``completion_ids(t)`` are the sampled ids (ending with the end-of-turn token when
the model emitted it) and ``delta(t)`` is the template text that closes the assistant
turn (if the model did not), opens the next user turn and adds the generation prompt,
tokenised on its own.  :class:`ChatTokens` computes ``delta`` for any Hugging Face chat
template by rendering a conversation whose last assistant message is a sentinel and
taking the text after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .types import Message

_SENTINEL = "\u2063RAGEN_SENTINEL\u2063"


class ChatTokens:
    """Token-level helpers around a tokenizer's chat template.

    Args:
        tokenizer: a Hugging Face tokenizer with ``chat_template`` and an EOS token.

    Raises:
        ValueError: the tokenizer has no chat template.
    """

    def __init__(self, tokenizer: Any):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template; pass one or use a chat model")
        self.tokenizer = tokenizer
        self.eos_token_id: int | None = tokenizer.eos_token_id

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """The template's text for ``messages``."""
        return self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def encode(self, text: str) -> list[int]:
        """Tokenise template text (special tokens in it are recognised; no BOS added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of ``messages`` with the generation prompt appended."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def continuation_ids(
        self,
        history: Sequence[Message],
        new_messages: Sequence[Message],
        completion_ended_with_eos: bool,
    ) -> list[int]:
        """Token ids that follow the sampled completion of the last assistant turn.

        Args:
            history: the conversation up to and including the last assistant message.
            new_messages: the messages added after it (usually one user message).
            completion_ended_with_eos: whether the sampled completion already ends with
                the end-of-turn token (then that token is not repeated).

        Returns:
            ``delta`` ids: the rest of the assistant turn's closing text, the new
            messages and the generation prompt.

        Raises:
            ValueError: the template does not place the assistant content verbatim (the
                sentinel is not found), so token-level continuation is impossible.
        """
        if not history or history[-1]["role"] != "assistant":
            raise ValueError("history must end with an assistant message")
        msgs = (
            list(history[:-1]) + [{"role": "assistant", "content": _SENTINEL}] + list(new_messages)
        )
        text = self.render(msgs, add_generation_prompt=True)
        idx = text.rfind(_SENTINEL)
        if idx < 0:
            raise ValueError(
                "the chat template rewrites assistant messages; token-level continuation impossible"
            )
        tail = text[idx + len(_SENTINEL) :]
        if completion_ended_with_eos:
            eos_text = (
                self.tokenizer.convert_ids_to_tokens(self.eos_token_id)
                if self.eos_token_id is not None
                else ""
            )
            if eos_text and tail.startswith(eos_text):
                tail = tail[len(eos_text) :]
        return self.encode(tail)
