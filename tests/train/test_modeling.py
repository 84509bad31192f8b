"""``ragen_train.modeling``: loading the policy model."""

from __future__ import annotations

import warnings

from ragen_train.config import load_config


def test_lora_wrapping_leaks_no_gradient_checkpointing_future_warning() -> None:
    from ragen_train.modeling import load_policy

    cfg = load_config("tiny-bandit-grpo", ["model.lora.rank=4"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_policy(cfg.model)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
