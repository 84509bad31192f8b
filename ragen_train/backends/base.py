"""The trainer back-end interface: what a back-end receives and what it must report.

A back-end trains a policy on a ragen environment.  It receives one
:class:`~ragen_train.config.StarPOConfig` — which holds everything the back-ends share:

* the environment (``env.id``, ``env.config``) and its splits (``env.train_split``,
  ``env.val_split``);
* the seeds: group ``g`` of rollout step ``k`` plays env seed ``k · env_groups + g`` on
  the train split, all ``group_size`` members of a group share it; validation plays the
  fixed seeds ``0 .. val_episodes-1`` of the validation split
  (:func:`ragen_train.backends.common.train_specs` / ``val_specs``);
* the agent-loop protocol (prompts, parser, format penalty, turn and action budgets:
  :func:`ragen_bench.rollout.rollout_config` of ``cfg.env.id`` and ``cfg.rollout``), so the prompt text, the parsing and the
  reward of a response are the same under every back-end;
* the model (``model.path``, dtype, device, LoRA) and the algorithm settings
  (``algorithm.*``, ``optim.*``), which a back-end maps onto its own options as far as
  they map (``docs/backends.md`` has the table).

It reports a :class:`BackendResult`: the ``metrics.jsonl`` it wrote (the schema of
``schemas/metrics.schema.json``, with the native trainer's names for the shared
quantities — ``train/success``, ``train/return``, ``train/format_valid_rate``, ...,
``val/*`` from the benchmark harness) and a Hugging Face model directory that
``ragen-bench run --policy hf --model DIR`` evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # the config imports torch; naming a back-end must not
    from ..config import StarPOConfig


@dataclass
class BackendResult:
    """What a finished back-end run hands back.

    Attributes:
        backend: the back-end's name.
        out_dir: the run directory (``trainer.out_dir``).
        metrics_path: its ``metrics.jsonl``.
        checkpoint_dir: the final policy as a Hugging Face directory (``None`` when the
            back-end could not produce one, e.g. verl launched elsewhere).
        last_val: the last validation metrics (``val/*``), possibly empty.
        extra: back-end specific details (launch command, mapping notes, timings).
    """

    backend: str
    out_dir: Path
    metrics_path: Path
    checkpoint_dir: Path | None
    last_val: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class TrainerBackend(Protocol):
    """A trainer back-end (``ragen-train starpo --trainer NAME``)."""

    name: str

    def train(
        self, cfg: StarPOConfig, *, model: Any = None, tokenizer: Any = None
    ) -> BackendResult:
        """Train with ``cfg`` (an already loaded ``model`` / ``tokenizer`` may be passed, e.g. after SFT).

        Raises:
            ImportError: the back-end's library is not installed (the message names it).
            TrainConfigError: a setting of ``cfg`` that this back-end cannot express.
        """
        ...
