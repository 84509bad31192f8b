"""Diagnostics for run directories: scorer specs, the ``summary.json`` block.

``ragen-bench diagnose RUN --scorer SPEC`` and ``ragen-bench run --diagnostics`` call
:func:`diagnose_run`, which reads ``episodes.jsonl``, computes
:func:`~.collapse.collapse_report` and writes the result as ``summary["diagnostics"]``
(schema: ``schemas/summary.schema.json`` ``$defs/diagnostics``).  Leaderboard entries copy
that block (:mod:`ragen_bench.leaderboard`).

Scorer specs: ``hf:<model>`` (a directory, a hub id or ``tiny``) or
``openai:<base_url>:<model>`` (e.g. ``openai:http://127.0.0.1:8000/v1:qwen2.5-coder``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import RETRY_STATUSES, RunDir, now_iso
from .collapse import DEFAULT_NUM_SAMPLES, collapse_report
from .regimes import RegimeThresholds
from .samplers import SAMPLERS
from .scorer import Scorer

BLOCK_VERSION = 1
_OPENAI_SPEC = re.compile(r"^openai:(https?://[^/\s]+(?:/[^:\s]*)?):(.+)$")


def parse_scorer_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"hf:<model>"`` -> ``("hf", {"model": ...})``; ``"openai:<url>:<model>"`` ->
    ``("openai", {"base_url": ..., "model": ...})``.

    Raises:
        ValueError: anything else.
    """
    if spec.startswith("hf:") and len(spec) > 3:
        return "hf", {"model": spec[3:]}
    m = _OPENAI_SPEC.match(spec)
    if m:
        return "openai", {"base_url": m.group(1), "model": m.group(2)}
    raise ValueError(
        f"bad scorer {spec!r}: use hf:<model> or openai:<base_url>:<model> "
        "(e.g. openai:http://127.0.0.1:8000/v1:my-model)"
    )


def make_scorer(
    spec: str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    tokenizer: str | None = None,
    api_key_env: str | None = None,
) -> Scorer:
    """Build a scorer from a spec (see :func:`parse_scorer_spec`).

    Args:
        device / dtype: for ``hf``.
        tokenizer: for ``openai``: a local tokenizer directory of the served model
            (default: the server's ``/tokenize``).
        api_key_env: for ``openai``: NAME of the environment variable holding the key.
    """
    kind, args = parse_scorer_spec(spec)
    if kind == "hf":
        from .hf_scorer import HFScorer

        return HFScorer(args["model"], device=device, dtype=dtype)
    from .openai_scorer import OpenAICompletionsScorer

    key = os.environ.get(api_key_env, "") if api_key_env else "EMPTY"
    return OpenAICompletionsScorer(
        args["base_url"], args["model"], api_key=key or "EMPTY", tokenizer=tokenizer
    )


def parse_samplers(text: str | Sequence[str]) -> list[str]:
    """``"first_turn,trajectory"`` (or ``"both"``) -> list of sampler names.

    Raises:
        ValueError: an unknown name.
    """
    names = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    if names == ["both"]:
        names = list(SAMPLERS)
    for n in names:
        if n not in SAMPLERS:
            raise ValueError(
                f"unknown sampler {n!r}; choose from {', '.join(SAMPLERS)} (comma-separated) or both"
            )
    return list(dict.fromkeys(names))


def diagnostics_block(
    episodes: Sequence[dict[str, Any]],
    scorer: Scorer,
    *,
    num_samples: int | None = DEFAULT_NUM_SAMPLES,
    samplers: Sequence[str] = SAMPLERS,
    seed: int = 0,
    thresholds: RegimeThresholds | None = None,
) -> dict[str, Any]:
    """The ``diagnostics`` object of ``summary.json`` for scored episodes (dicts)."""
    thresholds = thresholds or RegimeThresholds()
    t0 = time.perf_counter()
    report = collapse_report(
        episodes,
        scorer,
        num_samples=num_samples,
        sampler=list(samplers),
        seed=seed,
        thresholds=thresholds,
    )
    return {
        "schema_version": BLOCK_VERSION,
        "created": now_iso(),
        "scorer": scorer.describe(),
        "settings": {
            "num_samples": num_samples,
            "samplers": list(samplers),
            "seed": seed,
            "thresholds": thresholds.as_dict(),
            "use_token_ids": False,
        },
        "metrics": report.metrics,
        "regimes": {k: v.value for k, v in report.regimes.items()},
        "timing_s": round(time.perf_counter() - t0, 6),
    }


def diagnose_run(run_dir: str | Path, scorer: Scorer, **kwargs: Any) -> dict[str, Any]:
    """Compute the diagnostics of a finished run and store them in its ``summary.json``.

    Episodes recorded as ``endpoint_error`` (retried by ``--resume``) are left out, as in
    the summary's metrics.  ``kwargs`` go to :func:`diagnostics_block`.

    Returns:
        The block written.

    Raises:
        FileNotFoundError: no ``summary.json`` (the run has not finished).
    """
    rd = RunDir(run_dir)
    if not (rd.path / "summary.json").is_file():
        raise FileNotFoundError(f"{rd.path} has no summary.json; finish the run first")
    episodes = [
        e for _, e in sorted(rd.read_episodes().items()) if e["status"] not in RETRY_STATUSES
    ]
    block = diagnostics_block(episodes, scorer, **kwargs)
    summary = rd.read_summary()
    summary["diagnostics"] = block
    rd.write_summary(summary)
    return block
