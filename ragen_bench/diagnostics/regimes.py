"""The four reasoning regimes of RAGEN-2 as a classification with explicit thresholds.

RAGEN-2 (arXiv 2604.06268, teaser figure) places a policy on two axes:
within-input diversity H(Z|X) and input dependence I(X;Z).

| regime                | H(Z|X) | I(X;Z) | reading |
|-----------------------|--------|--------|---------|
| diverse               | high   | high   | healthy: varied reasoning that is about the input |
| template_collapse     | high   | low    | varied-looking reasoning that ignores the input; entropy cannot see it |
| compressed            | low    | high   | short/deterministic but input-specific reasoning |
| low_entropy_collapse  | low    | low    | the same reasoning for every input |

The paper gives the regimes qualitatively; the cut points below are ours.

* **MI axis**: the per-sequence MI estimate divided by its upper bound log M (M
  columns), ``r = Î_seq / log M``; "high" means ``r >= mi_fraction`` (default 0.5).
  Reading: exp(log M − Î) is the effective number of inputs the reasoning still fits,
  so r = 0.5 means the reasoning narrows M inputs down to about √M; below that it
  identifies less than half of the available log M nats of input.  The per-sequence
  estimate is used by default because it is the quantity bounded by log M in a
  meaningful way (the per-token matrix divides each row by its length, which shrinks
  differences between inputs and so the MI); ``mi_basis="token"`` switches.
* **Entropy axis**: the per-token conditional entropy estimate Ĥ(Z|X) = −mean matched
  per-token log-probability, in nats/token; "high" means ``>= entropy_per_token``
  (default 0.1).  Reading: at 0.1 nats/token the geometric-mean probability of a
  sampled reasoning token is e^−0.1 ≈ 0.905, i.e. decoding is close to greedy at
  almost every position.  Per-token (not per-sequence) so that long and short
  reasonings are comparable.  Models differ in their natural entropy level: calibrate
  ``entropy_per_token`` on the policy you start from (e.g. a third of its value at
  step 0) and use :class:`~ragen_bench.diagnostics.collapse.CollapseTracker` for
  changes over training.
* Fewer than ``min_columns`` distinct inputs or ``min_rows`` samples: ``insufficient_data``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


class Regime(str, Enum):
    DIVERSE = "diverse"
    TEMPLATE_COLLAPSE = "template_collapse"
    COMPRESSED = "compressed"
    LOW_ENTROPY_COLLAPSE = "low_entropy_collapse"
    INSUFFICIENT_DATA = "insufficient_data"

    @property
    def code(self) -> float:
        """Numeric code for float-only metric logs: 0 diverse, 1 template collapse,
        2 compressed, 3 low-entropy collapse, −1 insufficient data."""
        return _CODES[self]


_CODES = {
    Regime.DIVERSE: 0.0,
    Regime.TEMPLATE_COLLAPSE: 1.0,
    Regime.COMPRESSED: 2.0,
    Regime.LOW_ENTROPY_COLLAPSE: 3.0,
    Regime.INSUFFICIENT_DATA: -1.0,
}


@dataclass(frozen=True)
class RegimeThresholds:
    """Cut points of :func:`classify_regime` (see the module docstring for the reasons).

    Attributes:
        mi_fraction: MI / log M at or above which input dependence counts as high.
        entropy_per_token: Ĥ(Z|X) in nats/token at or above which diversity counts as high.
        mi_basis: ``"seq"`` (per-sequence MI, default) or ``"token"`` (per-token MI).
        min_columns: fewest distinct inputs (columns) for a verdict.
        min_rows: fewest reasoning samples (rows) for a verdict.
    """

    mi_fraction: float = 0.5
    entropy_per_token: float = 0.1
    mi_basis: str = "seq"
    min_columns: int = 2
    min_rows: int = 2

    def __post_init__(self) -> None:
        if self.mi_basis not in ("seq", "token"):
            raise ValueError(f"mi_basis must be 'seq' or 'token', got {self.mi_basis!r}")
        if not 0 < self.mi_fraction <= 1:
            raise ValueError("mi_fraction must be in (0, 1]")
        if self.entropy_per_token < 0:
            raise ValueError("entropy_per_token must be >= 0")
        if self.min_columns < 2 or self.min_rows < 1:
            raise ValueError("min_columns must be >= 2 and min_rows >= 1")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify_regime(
    *,
    mi: float,
    upper_bound: float,
    conditional_entropy_per_token: float,
    n_rows: int,
    n_columns: int,
    thresholds: RegimeThresholds | None = None,
) -> Regime:
    """Place one measurement in a regime.

    Args:
        mi: the MI estimate on the basis ``thresholds.mi_basis`` (nats).
        upper_bound: log M for the same matrix.
        conditional_entropy_per_token: Ĥ(Z|X) per token (nats/token).
        n_rows / n_columns: the matrix shape.
        thresholds: cut points (default :class:`RegimeThresholds`).
    """
    t = thresholds or RegimeThresholds()
    if n_columns < t.min_columns or n_rows < t.min_rows or upper_bound <= 0:
        return Regime.INSUFFICIENT_DATA
    high_mi = mi / upper_bound >= t.mi_fraction
    high_h = conditional_entropy_per_token >= t.entropy_per_token
    if high_h:
        return Regime.DIVERSE if high_mi else Regime.TEMPLATE_COLLAPSE
    return Regime.COMPRESSED if high_mi else Regime.LOW_ENTROPY_COLLAPSE
