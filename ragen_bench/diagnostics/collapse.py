"""Entry point: collapse metrics of a batch of episodes (or samples) under a scorer.

    report = collapse_report(records, scorer, num_samples=64, sampler="first_turn", seed=step)
    metrics = collapse_metrics(records, scorer, ...)     # report.metrics: dict[str, float]

Keys (all floats, JSON-safe: a metric that is undefined is left out, never NaN):

* ``collapse/valid_thinking_rate``: turns with a non-empty reasoning / all turns;
  ``collapse/first_turn_num_total|num_valid|valid_rate`` (RAGEN's global keys).
* ``collapse/degenerate_rate`` (:func:`~.text_stats.is_degenerate` over every response),
  ``collapse/token_entropy_sampled`` (:func:`~.text_stats.sampled_token_entropy` over
  every recorded completion), ``collapse/timing_s`` (wall time of the whole call).
* per sampler ``S`` in ``first_turn`` | ``trajectory``, under ``collapse/S/``:
  ``num_rows``, ``num_columns``, ``mi_estimate`` / ``mi_seq_estimate`` (per-token /
  per-sequence), ``mi_upper_bound`` (log M), ``mi_normalized`` / ``mi_seq_normalized``
  (÷ log M), ``conditional_entropy_est`` / ``_seq_est``, ``reasoning_entropy_est`` /
  ``_seq_est``, ``matched_log_prob_mean`` / ``marginal_log_prob_mean`` (+ ``_seq``),
  ``retrieval_accuracy``, ``retrieval_chance_level``, ``retrieval_above_chance`` and their
  ``@2``/``@4``/``@8`` variants, ``marginal_std`` / ``marginal_std_seq``, ``mi_zscore`` /
  ``mi_zscore_seq``, ``reasoning_tokens_mean``, ``token_entropy_full`` (when the scorer
  returns full distributions), ``answer_distinct_ratio``, ``answer_entropy``,
  ``regime_code`` (:attr:`~.regimes.Regime.code`), ``scored_pairs``, ``scoring_s``; with a
  :class:`CollapseTracker` also ``marginal_std_ema`` / ``_ema_seq``, ``mi_zscore_ema`` /
  ``_ema_seq``, ``mi_normalized_ema`` and ``template_collapse_warning`` (0 or 1).

Names follow RAGEN's (RAGEN-2, arXiv 2604.06268) where the quantity is the same, so curves can be
compared; RAGEN prefixes them ``collapse_first_turn_sample/`` and
``collapse_trajectory_sample/``.  RAGEN computes them on the unfiltered batch at step 1
and then every ``compute_freq`` = 5 steps (RAGEN's `config/base.yaml`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .estimators import (
    DEFAULT_KS,
    DEFAULT_STD_FLOOR,
    MIEstimate,
    Retrieval,
    mi_estimate,
    retrieval,
    zscore,
)
from .regimes import Regime, RegimeThresholds, classify_regime
from .samplers import SAMPLERS, ScoringProblem, make_problem
from .samples import ReasoningSample, samples_from_records
from .scorer import CrossScores, Scorer
from .text_stats import answer_diversity, degenerate_rate, sampled_token_entropy

#: RAGEN's defaults (RAGEN's `config/base.yaml`, ``collapse_detection``).
DEFAULT_NUM_SAMPLES = 64
DEFAULT_COMPUTE_FREQ = 5
DEFAULT_EMA_DECAY = 0.9


class TemplateCollapseWarning(UserWarning):
    """Input dependence (MI) fell while the conditional entropy stayed high."""


@dataclass
class SamplerResult:
    """Everything computed for one sampler (for inspection and tests).

    ``scores``/``seq``/``tok``/``retrieval`` are ``None`` when there was too little data
    to score (fewer than ``thresholds.min_rows`` rows or ``min_columns`` columns).
    ``ell_seq``/``ell_tok`` are the ``(N, M)`` per-sequence / per-token matrices.
    """

    sampler: str
    problem: ScoringProblem
    regime: Regime
    scores: CrossScores | None = None
    ell_seq: np.ndarray | None = None
    ell_tok: np.ndarray | None = None
    seq: MIEstimate | None = None
    tok: MIEstimate | None = None
    retrieval: dict[int, Retrieval] | None = None


@dataclass
class CollapseReport:
    """Result of :func:`collapse_report`.

    Attributes:
        metrics: flat float metrics (module docstring).
        regimes: sampler -> :class:`~.regimes.Regime`.
        results: sampler -> :class:`SamplerResult`.
        warnings: messages of :class:`TemplateCollapseWarning` raised in this call.
        seconds: wall time of the call.
    """

    metrics: dict[str, float]
    regimes: dict[str, Regime]
    results: dict[str, SamplerResult]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


class CollapseTracker:
    """State kept across training steps: RAGEN's EMA of the marginal std, and a warning
    when MI falls while entropy stays high (template collapse in progress).

    The warning fires for a sampler when, against the EMAs *before* this update,
    ``ema(MI/log M) − MI/log M >= mi_drop`` and ``Ĥ(Z|X) >= entropy_keep · ema(Ĥ(Z|X))``
    and Ĥ(Z|X) is still "high" for the regime thresholds.  It is raised as a
    :class:`TemplateCollapseWarning` (Python ``warnings``) and reported in the metrics as
    ``template_collapse_warning = 1``.  MI/log M uses ``thresholds.mi_basis``.

    Args:
        ema_decay: decay of every EMA (RAGEN: 0.9); the first value initialises it.
        mi_drop: drop of MI/log M (a fraction of the upper bound) that counts as a fall.
        entropy_keep: share of its EMA the entropy must keep to count as "staying high".
        thresholds: regime thresholds (for the absolute entropy floor and the MI basis).
    """

    def __init__(
        self,
        *,
        ema_decay: float = DEFAULT_EMA_DECAY,
        mi_drop: float = 0.2,
        entropy_keep: float = 0.8,
        thresholds: RegimeThresholds | None = None,
    ):
        if not 0 <= ema_decay < 1:
            raise ValueError("ema_decay must be in [0, 1)")
        self.ema_decay = ema_decay
        self.mi_drop = mi_drop
        self.entropy_keep = entropy_keep
        self.thresholds = thresholds or RegimeThresholds()
        self._ema: dict[str, float] = {}

    def ema(self, key: str, value: float) -> float:
        """Update and return the EMA named ``key`` (first value initialises it)."""
        old = self._ema.get(key)
        new = value if old is None else self.ema_decay * old + (1.0 - self.ema_decay) * value
        self._ema[key] = new
        return new

    def peek(self, key: str) -> float | None:
        """The EMA named ``key`` without updating it."""
        return self._ema.get(key)

    def observe(
        self, sampler: str, *, mi_fraction: float, entropy_per_token: float, step: int | None = None
    ) -> str | None:
        """Record one measurement; return (and warn with) a message on a fall of MI at
        steady entropy, else ``None``."""
        prev_m = self.peek(f"{sampler}/mi_fraction")
        prev_h = self.peek(f"{sampler}/entropy")
        msg = None
        if (
            prev_m is not None
            and prev_h is not None
            and prev_m - mi_fraction >= self.mi_drop
            and entropy_per_token >= self.entropy_keep * prev_h
            and entropy_per_token >= self.thresholds.entropy_per_token
        ):
            where = f" at step {step}" if step is not None else ""
            msg = (
                f"possible template collapse{where} ({sampler} sampler): MI/log M fell to {mi_fraction:.3f} "
                f"from an average of {prev_m:.3f} while H(Z|X) stayed at {entropy_per_token:.3f} nats/token "
                f"(average {prev_h:.3f}); reasoning is losing its dependence on the input"
            )
            warnings.warn(msg, TemplateCollapseWarning, stacklevel=3)
        self.ema(f"{sampler}/mi_fraction", mi_fraction)
        self.ema(f"{sampler}/entropy", entropy_per_token)
        return msg

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state (for trainer checkpoints)."""
        return {"ema": dict(self._ema)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._ema = {str(k): float(v) for k, v in state.get("ema", {}).items()}


def _as_samples(data: Iterable[Any], scorer: Scorer, use_token_ids: bool) -> list[ReasoningSample]:
    items = list(data)
    if items and all(isinstance(s, ReasoningSample) for s in items):
        return items
    return samples_from_records(items, scorer.text_tokenizer, use_token_ids=use_token_ids)


def _global_metrics(samples: Sequence[ReasoningSample]) -> dict[str, float]:
    m: dict[str, float] = {}
    if samples:
        m["collapse/valid_thinking_rate"] = sum(s.valid for s in samples) / len(samples)
    first = [s for s in samples if s.turn == 1]
    m["collapse/first_turn_num_total"] = float(len(first))
    m["collapse/first_turn_num_valid"] = float(sum(s.valid for s in first))
    if first:
        m["collapse/first_turn_valid_rate"] = m["collapse/first_turn_num_valid"] / len(first)
    deg = degenerate_rate(s.response for s in samples)
    if deg is not None:
        m["collapse/degenerate_rate"] = deg
    ent = sampled_token_entropy(s.logprobs for s in samples)
    if ent is not None:
        m["collapse/token_entropy_sampled"] = ent
    return m


def _estimate_metrics(
    p: str, seq: MIEstimate, tok: MIEstimate, ret: dict[int, Retrieval]
) -> dict[str, float]:
    ub = tok.upper_bound
    m = {
        f"{p}mi_estimate": tok.mi,
        f"{p}mi_seq_estimate": seq.mi,
        f"{p}mi_upper_bound": ub,
        f"{p}mi_normalized": tok.mi / ub,
        f"{p}mi_seq_normalized": seq.mi / ub,
        f"{p}conditional_entropy_est": tok.conditional_entropy,
        f"{p}conditional_entropy_seq_est": seq.conditional_entropy,
        f"{p}reasoning_entropy_est": tok.marginal_entropy,
        f"{p}reasoning_entropy_seq_est": seq.marginal_entropy,
        f"{p}matched_log_prob_mean": -tok.conditional_entropy,
        f"{p}matched_log_prob_mean_seq": -seq.conditional_entropy,
        f"{p}marginal_log_prob_mean": -tok.marginal_entropy,
        f"{p}marginal_log_prob_mean_seq": -seq.marginal_entropy,
        f"{p}marginal_std": tok.marginal_std,
        f"{p}marginal_std_seq": seq.marginal_std,
        f"{p}mi_zscore": tok.zscore,
        f"{p}mi_zscore_seq": seq.zscore,
    }
    for k, r in ret.items():
        suffix = "" if k == 1 else f"@{k}"
        m[f"{p}retrieval_accuracy{suffix}"] = r.accuracy
        m[f"{p}retrieval_chance_level{suffix}"] = r.chance
        m[f"{p}retrieval_above_chance{suffix}"] = r.above_chance
    return m


def _run_sampler(
    name: str,
    samples: Sequence[ReasoningSample],
    scorer: Scorer,
    *,
    num_samples: int | None,
    seed: int,
    thresholds: RegimeThresholds,
    tracker: CollapseTracker | None,
    ks: Sequence[int],
    std_floor: float,
    step: int | None,
    metrics: dict[str, float],
    warned: list[str],
) -> SamplerResult:
    p = f"collapse/{name}/"
    rng = np.random.default_rng([int(seed), SAMPLERS.index(name)])
    problem = make_problem(name, samples, num_samples, rng)
    metrics[f"{p}num_rows"] = float(problem.n_rows)
    metrics[f"{p}num_columns"] = float(problem.n_columns)
    div = answer_diversity([r.answer for r in problem.rows])
    if div is not None:
        metrics[f"{p}answer_distinct_ratio"], metrics[f"{p}answer_entropy"] = div
    if problem.n_rows < thresholds.min_rows or problem.n_columns < thresholds.min_columns:
        metrics[f"{p}regime_code"] = Regime.INSUFFICIENT_DATA.code
        return SamplerResult(name, problem, Regime.INSUFFICIENT_DATA)
    t0 = time.perf_counter()
    scores = scorer.score(problem.xs, [r.z for r in problem.rows], own=problem.own_x())
    metrics[f"{p}scoring_s"] = time.perf_counter() - t0
    metrics[f"{p}scored_pairs"] = float(problem.n_rows * len(problem.xs))
    ell_seq = scores.seq[:, problem.column_x]
    ell_tok = scores.mean[:, problem.column_x]
    seq = mi_estimate(ell_seq, problem.own, std_floor=std_floor)
    tok = mi_estimate(ell_tok, problem.own, std_floor=std_floor)
    ret = retrieval(ell_tok, problem.own, signatures=list(problem.column_x), ks=ks)
    metrics.update(_estimate_metrics(p, seq, tok, ret))
    metrics[f"{p}reasoning_tokens_mean"] = float(np.mean(scores.lengths))
    if scores.own_entropy is not None:
        metrics[f"{p}token_entropy_full"] = float(
            np.sum(scores.own_entropy * scores.lengths) / np.sum(scores.lengths)
        )
    basis = seq if thresholds.mi_basis == "seq" else tok
    regime = classify_regime(
        mi=basis.mi,
        upper_bound=basis.upper_bound,
        conditional_entropy_per_token=tok.conditional_entropy,
        n_rows=problem.n_rows,
        n_columns=problem.n_columns,
        thresholds=thresholds,
    )
    metrics[f"{p}regime_code"] = regime.code
    if tracker is not None:
        std_tok = tracker.ema(f"{name}/marginal_std", tok.marginal_std)
        std_seq = tracker.ema(f"{name}/marginal_std_seq", seq.marginal_std)
        metrics[f"{p}marginal_std_ema"] = std_tok
        metrics[f"{p}marginal_std_ema_seq"] = std_seq
        metrics[f"{p}mi_zscore_ema"] = zscore(tok.matched, tok.marginal, std_tok, std_floor)
        metrics[f"{p}mi_zscore_ema_seq"] = zscore(seq.matched, seq.marginal, std_seq, std_floor)
        frac = basis.mi / basis.upper_bound
        msg = tracker.observe(
            name, mi_fraction=frac, entropy_per_token=tok.conditional_entropy, step=step
        )
        metrics[f"{p}mi_normalized_ema"] = tracker.peek(f"{name}/mi_fraction") or 0.0
        metrics[f"{p}template_collapse_warning"] = 1.0 if msg else 0.0
        if msg:
            warned.append(msg)
    return SamplerResult(name, problem, regime, scores, ell_seq, ell_tok, seq, tok, ret)


def collapse_report(
    data: Iterable[Any],
    scorer: Scorer,
    *,
    num_samples: int | None = DEFAULT_NUM_SAMPLES,
    sampler: str | Sequence[str] = "first_turn",
    seed: int = 0,
    thresholds: RegimeThresholds | None = None,
    tracker: CollapseTracker | None = None,
    use_token_ids: bool = False,
    ks: Sequence[int] = DEFAULT_KS,
    std_floor: float = DEFAULT_STD_FLOOR,
    step: int | None = None,
) -> CollapseReport:
    """Collapse diagnostics of one batch.

    Args:
        data: episode records (:class:`~ragen_bench.records.EpisodeRecord` or
            ``episodes.jsonl`` dicts) or :class:`~.samples.ReasoningSample` objects.  The
            trainer passes the *unfiltered* batch (RAGEN computes before filtering).
        scorer: a :class:`~.scorer.Scorer` (usually the policy being trained or evaluated).
        num_samples: rows per sampler (RAGEN default 64); ``None`` for all.
        sampler: ``"first_turn"``, ``"trajectory"``, or several.
        seed: seed of the samplers' generator (the trainer passes e.g. the step).
        thresholds: regime cut points.
        tracker: state across calls (EMAs, collapse warning); ``None`` for a one-off.
        use_token_ids: build X/Z from the records' token ids (only when the records were
            generated by the scorer's own model; see :mod:`.samples`).
        ks: retrieval cut-offs.
        std_floor: z-score std floor.
        step: training step, quoted in warnings.

    Returns:
        A :class:`CollapseReport`.  Cost: per sampler, one prefix pass per distinct input
        plus N × (distinct inputs) teacher-forced passes over reasoning tokens; see
        ``collapse/timing_s`` and ``benchmarks/diagnostics_cost.py``.

    Raises:
        ValueError: unknown sampler; records without prompt messages on the text path.
        ScoringNotSupported: the scorer cannot score text.
    """
    t0 = time.perf_counter()
    names = [sampler] if isinstance(sampler, str) else list(sampler)
    for name in names:
        if name not in SAMPLERS:
            raise ValueError(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")
    thresholds = thresholds or (tracker.thresholds if tracker is not None else RegimeThresholds())
    samples = _as_samples(data, scorer, use_token_ids)
    metrics = _global_metrics(samples)
    results: dict[str, SamplerResult] = {}
    warned: list[str] = []
    for name in dict.fromkeys(names):
        results[name] = _run_sampler(
            name,
            samples,
            scorer,
            num_samples=num_samples,
            seed=seed,
            thresholds=thresholds,
            tracker=tracker,
            ks=ks,
            std_floor=std_floor,
            step=step,
            metrics=metrics,
            warned=warned,
        )
    seconds = time.perf_counter() - t0
    metrics["collapse/timing_s"] = seconds
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    for k in bad:  # never emit NaN/inf (JSON); an infinite value means an undefined metric
        del metrics[k]
    return CollapseReport(
        metrics, {k: r.regime for k, r in results.items()}, results, warned, seconds
    )


def collapse_metrics(data: Iterable[Any], scorer: Scorer, **kwargs: Any) -> dict[str, float]:
    """:func:`collapse_report` reduced to its flat ``dict[str, float]`` (the trainer's hook).

    Example (trainer, every ``compute_freq`` steps and at step 1, before filtering)::

        tracker = CollapseTracker()
        if step == 1 or step % 5 == 0:
            logs.update(collapse_metrics(batch_records, HFScorer(actor, tokenizer), seed=step,
                                         sampler=("first_turn", "trajectory"), tracker=tracker,
                                         use_token_ids=True, step=step))
    """
    return collapse_report(data, scorer, **kwargs).metrics
