"""Inline SVG charts for result pages: a histogram and a line chart with a legend.

Each function returns :class:`markupsafe.Markup` (safe to insert into a template): every
label that comes from data is escaped here.  Points and bars carry an SVG ``<title>``, so
hovering shows the exact value without any script; the line chart's legend checkboxes
show and hide series (``page.js``).  Coordinates are rounded to 0.1 px, so output is
deterministic.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

try:
    from markupsafe import Markup, escape
except ImportError as exc:  # pragma: no cover - markupsafe comes with jinja2 (the site extra)
    raise ImportError("result pages need jinja2: pip install 'ragen[site]'") from exc

#: Series colours (colour-blind-safe Okabe–Ito palette, skipping yellow).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")


def _r(x: float) -> str:
    return f"{x:.1f}"


def _label(x: float) -> str:
    """A short label: integers without decimals, others with up to 3 significant digits."""
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.3g}"


def _tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels for axis ticks, each equal to its tick value: the fewest decimals (up to 12,
    the same for every tick) at which every label reads back as its tick (0.14 and 0.16
    are "0.14" and "0.16", 0.0 and 0.05 "0.00" and "0.05"), else ``%.12g``."""
    if all(t == int(t) and abs(t) < 1e6 for t in ticks):
        return [str(int(t)) for t in ticks]
    gaps = [abs(b - a) for a, b in zip(ticks, ticks[1:]) if b != a]
    tol = max(min(gaps, default=abs(ticks[0]) if ticks else 1.0) * 1e-6, 1e-12)
    for digits in range(1, 13):
        labels = [f"{t:.{digits}f}" for t in ticks]
        if all(abs(float(s) - t) <= tol for s, t in zip(labels, ticks)):
            return [s if s.strip("-0.") else s.lstrip("-") for s in labels]  # never "-0.00"
    return [f"{t:.12g}" for t in ticks]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (1-2-5 steps; at most ``2n + 1``).

    A range too narrow for the float resolution at its magnitude gets just its ends.
    """
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if step <= 1e-12 * max(abs(lo), abs(hi)):
        return [lo, hi]
    first = math.ceil(lo / step - 1e-9)
    count = min(int(math.floor(hi / step + 1e-9)) - first + 1, 2 * n + 1)
    return [round((first + i) * step, 12) for i in range(max(count, 0))]


def _open_svg(kind: str, title: str, width: int, height: int, left: int) -> list[str]:
    """The opening ``<svg>`` tag and the title of a chart of class ``chart KIND``."""
    return [
        f'<svg class="chart {kind}" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<text class="title" x="{left}" y="16">{escape(title)}</text>',
    ]


#: Width of one tick-label character in pixels (11 px system-ui digits, page.css), with room.
_CHAR_PX = 6.5


def _left_margin(ticks: Sequence[float], least: int = 48) -> int:
    """The left margin (pixels) that holds the widest y tick label and its 6 px gap, at least
    ``least``: a fixed 48 px cut learning rates such as ``0.00022`` to ``.00022``."""
    widest = max((len(t) for t in _tick_labels(ticks)), default=0)
    return max(least, math.ceil(12 + _CHAR_PX * widest))


def _y_grid(ticks: list[float], to_y, left: int, plot_width: int) -> list[str]:
    """Horizontal grid lines with labels at the y ``ticks`` (``to_y`` maps a value to pixels)."""
    return [
        f'<line class="grid" x1="{left}" x2="{left + plot_width}" y1="{_r(to_y(t))}" y2="{_r(to_y(t))}"/>'
        f'<text x="{left - 6}" y="{_r(to_y(t) + 4)}" text-anchor="end">{text}</text>'
        for t, text in zip(ticks, _tick_labels(ticks))
    ]


def histogram_bins(values: Sequence[float], max_bins: int = 20) -> list[tuple[float, float, int]]:
    """``(left, right, count)`` per bin.

    Few distinct values (≤ ``max_bins``, typical of episode returns): one bar per value
    (``left == right``).  Otherwise ``max_bins`` equal-width bins over [min, max], the last
    one closed.
    """
    if not values:
        return []
    distinct = sorted(set(values))
    if len(distinct) <= max_bins:
        counts = Counter(values)
        return [(v, v, counts[v]) for v in distinct]
    lo, hi = distinct[0], distinct[-1]
    width = (hi - lo) / max_bins
    bins = [0] * max_bins
    for v in values:
        bins[min(int((v - lo) / width), max_bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(bins)]


def histogram(
    values: Sequence[float],
    *,
    title: str,
    xlabel: str,
    unit: str = "episodes",
    width: int = 520,
    height: int = 220,
) -> Markup:
    """An SVG bar chart of ``values`` (see :func:`histogram_bins`); each bar's tooltip gives
    its range and count."""
    bins = histogram_bins(list(values))
    left, right, top, bottom = 44, 12, 26, 36
    pw, ph = width - left - right, height - top - bottom
    parts = _open_svg("histogram", title, width, height, left)
    if not bins:
        parts.append(f'<text x="{left}" y="{top + ph / 2:.0f}">no data</text></svg>')
        return Markup("".join(parts))
    ymax = max(c for _, _, c in bins)
    parts += _y_grid(_ticks(0, ymax, 4), lambda t: top + ph - ph * t / ymax, left, pw)
    n = len(bins)
    slot = pw / n
    for i, (a, b, c) in enumerate(bins):
        h = ph * c / ymax
        bar = min(slot * 0.8, 56.0)
        x = left + i * slot + (slot - bar) / 2
        what = f"{a:.6g}" if a == b else f"[{a:.6g}, {b:.6g}{']' if i == n - 1 else ')'}"
        parts.append(
            f'<rect class="bar" x="{_r(x)}" y="{_r(top + ph - h)}" width="{_r(bar)}" height="{_r(h)}">'
            f"<title>{escape(xlabel)} {escape(what)}: {c} {escape(unit)}</title></rect>"
        )
        if n <= 12 or i in (0, n - 1):
            parts.append(
                f'<text x="{_r(x + bar / 2)}" y="{top + ph + 14}" text-anchor="middle">'
                f"{escape(_label(a) if a == b else _label(a))}</text>"
            )
    parts.append(
        f'<line class="axis" x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}"/>'
        f'<text x="{left + pw / 2:.0f}" y="{height - 4}" text-anchor="middle">{escape(xlabel)}</text></svg>'
    )
    return Markup("".join(parts))


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average with TensorBoard's debiasing: ``m_t = w m_{t-1} + (1-w) y_t``,
    shown as ``m_t / (1 - w^t)`` (so the first value is ``y_1``, not pulled towards 0).

    Raises:
        ValueError: ``weight`` outside ``[0, 1)``.
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    out, m = [], 0.0
    for t, y in enumerate(values, start=1):
        m = weight * m + (1 - weight) * y
        out.append(m / (1 - weight**t))
    return out


#: Series with fewer points than this are drawn unsmoothed (a smoothed line of 3 points hides them).
MIN_SMOOTH_POINTS = 5


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    title: str,
    chart_id: str,
    xlabel: str = "step",
    width: int = 430,
    height: int = 250,
    smooth: float = 0.0,
    dashed: Sequence[str] = (),
) -> Markup:
    """An SVG line chart, one polyline (and hoverable points) per ``(label, [(x, y), ...])``,
    with a legend of checkboxes that show and hide each series.

    Args:
        series: labels and points; points with a non-finite y are skipped.
        title: the chart title.
        chart_id: a page-unique id prefix (``[A-Za-z0-9_-]``) for the series groups.
        smooth: EMA weight in ``[0, 1)`` (:func:`ema`); ``> 0``: a series of at least
            :data:`MIN_SMOOTH_POINTS` points is drawn as its smoothed line over the raw one
            (faint); hovering a point still gives the raw value.
        dashed: labels of series drawn dashed (e.g. a second run overlaid).
    """
    clean = [
        (label, [(float(x), float(y)) for x, y in pts if y is not None and math.isfinite(float(y))])
        for label, pts in series
    ]
    clean = [(label, pts) for label, pts in clean if pts]
    left, right, top, bottom = 48, 12, 26, 34
    pw, ph = width - left - right, height - top - bottom
    parts = ['<figure class="card chart-card">', *_open_svg("line", title, width, height, left)]
    if not clean:
        parts.append(f'<text x="{left}" y="{top + ph / 2:.0f}">no data</text></svg></figure>')
        return Markup("".join(parts))
    xs = [x for _, pts in clean for x, _ in pts]
    ys = [y for _, pts in clean for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    yt = _ticks(y0, y1, 4)
    left = _left_margin(yt, least=left)  # the title stays; the plot moves right for long labels
    pw = width - left - right

    def px(x: float) -> float:
        return left + pw * (x - x0) / (x1 - x0)

    def py(y: float) -> float:
        return top + ph - ph * (y - y0) / (y1 - y0)

    parts += _y_grid(yt, py, left, pw)
    xt = _ticks(x0, x1, 5)
    for t, text in zip(xt, _tick_labels(xt)):
        parts.append(
            f'<text x="{_r(px(t))}" y="{top + ph + 14}" text-anchor="middle">{text}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}"/>'
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}"/>'
        f'<text x="{left + pw / 2:.0f}" y="{height - 4}" text-anchor="middle">{escape(xlabel)}</text>'
    )
    legend = []
    for i, (label, pts) in enumerate(clean):
        colour = PALETTE[i % len(PALETTE)]
        gid = f"{chart_id}-s{i}"
        path = " ".join(f"{_r(px(x))},{_r(py(y))}" for x, y in pts)
        dash = ' stroke-dasharray="5 3"' if label in dashed else ""
        parts.append(f'<g id="{gid}" data-series="{escape(label)}">')
        if smooth > 0 and len(pts) >= MIN_SMOOTH_POINTS:
            smoothed = ema([y for _, y in pts], smooth)
            line = " ".join(f"{_r(px(x))},{_r(py(y))}" for (x, _), y in zip(pts, smoothed))
            parts.append(
                f'<polyline class="raw" fill="none" stroke="{colour}" stroke-opacity="0.3" '
                f'stroke-width="1" points="{path}"/><polyline class="smoothed" fill="none" '
                f'stroke="{colour}" stroke-width="2"{dash} points="{line}"/>'
            )
        else:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.8"{dash} points="{path}"/>'
            )
        radius = 2.6 if len(pts) <= 60 else 1.6
        for x, y in pts:
            parts.append(
                f'<circle cx="{_r(px(x))}" cy="{_r(py(y))}" r="{radius}" fill="{colour}">'
                f"<title>{escape(label)} at {escape(xlabel)} {_label(x)}: {y:.4g}</title></circle>"
            )
        parts.append("</g>")
        legend.append(
            f'<label><input type="checkbox" checked data-series-toggle="{gid}">'
            f'<span class="swatch" style="background:{colour}"></span>{escape(label)}</label>'
        )
    parts.append(f'</svg><figcaption class="legend">{"".join(legend)}</figcaption></figure>')
    return Markup("".join(parts))
