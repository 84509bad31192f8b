"""Reasoning-collapse diagnostics: conditional entropy and mutual information of reasoning.

RAGEN-2 (arXiv 2604.06268) shows that entropy cannot see *template collapse*: reasoning
that looks diverse for each input but no longer depends on it.  It is detected from the
cross log-likelihoods ℓ_ij = log p(z_i | x_j) of reasonings z_i under inputs x_j.

Modules (one job each):

* :mod:`.samples` — turns -> (X, Z) token ids (definitions of X and Z);
* :mod:`.samplers` — first-turn and trajectory-uniform samplers -> a scoring problem;
* :mod:`.scorer` — the scorer protocol; :mod:`.hf_scorer` (local transformers) and
  :mod:`.openai_scorer` (OpenAI-compatible completions with echo + logprobs);
* :mod:`.estimators` — MI, entropies, retrieval, z-score on the ℓ matrix (pure numpy);
* :mod:`.text_stats` — token entropy, degenerate outputs, answer diversity;
* :mod:`.regimes` — the four regimes with documented thresholds;
* :mod:`.collapse` — the entry point :func:`collapse_metrics` and :class:`CollapseTracker`;
* :mod:`.harness` / :mod:`.cli` — ``summary.json`` block, ``ragen-bench diagnose``.

See ``docs/diagnostics.md``.  Heavy dependencies (torch, transformers, openai) load only
inside the scorers.
"""

from .collapse import (
    DEFAULT_COMPUTE_FREQ,
    DEFAULT_NUM_SAMPLES,
    CollapseReport,
    CollapseTracker,
    TemplateCollapseWarning,
    collapse_metrics,
    collapse_report,
)
from .estimators import MIEstimate, Retrieval, log_mean_exp, mi_estimate, retrieval, zscore
from .hf_scorer import HFScorer
from .openai_scorer import OpenAICompletionsScorer
from .regimes import Regime, RegimeThresholds, classify_regime
from .samplers import SAMPLERS, ScoringProblem, first_turn_problem, trajectory_problem
from .samples import HFTextTokenizer, ReasoningSample, TextTokenizer, samples_from_records
from .scorer import CrossScores, Scorer, ScoringNotSupported
from .text_stats import (
    DegenerateOutputWarning,
    DegenerateWatch,
    answer_diversity,
    degenerate_rate,
    is_degenerate,
    record_responses,
    sampled_token_entropy,
)

__all__ = [
    "DEFAULT_COMPUTE_FREQ",
    "DEFAULT_NUM_SAMPLES",
    "SAMPLERS",
    "CollapseReport",
    "CollapseTracker",
    "CrossScores",
    "HFScorer",
    "HFTextTokenizer",
    "MIEstimate",
    "DegenerateOutputWarning",
    "DegenerateWatch",
    "OpenAICompletionsScorer",
    "ReasoningSample",
    "Regime",
    "RegimeThresholds",
    "Retrieval",
    "Scorer",
    "ScoringNotSupported",
    "ScoringProblem",
    "TemplateCollapseWarning",
    "TextTokenizer",
    "answer_diversity",
    "classify_regime",
    "collapse_metrics",
    "collapse_report",
    "degenerate_rate",
    "first_turn_problem",
    "is_degenerate",
    "log_mean_exp",
    "mi_estimate",
    "record_responses",
    "retrieval",
    "sampled_token_entropy",
    "samples_from_records",
    "trajectory_problem",
    "zscore",
]
