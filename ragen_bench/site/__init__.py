"""Static result pages: a leaderboard site, run reports and training reports.

* :mod:`ragen_bench.site.page` — the shared machinery (jinja2 templates with autoescape,
  layout, inlined stylesheet and script, Content-Security-Policy, number formats);
* :mod:`ragen_bench.site.charts` — inline SVG histogram and line charts;
* :mod:`ragen_bench.site.boards` — ``ragen-bench site BOARDS... --out DIR``.

Run reports live in :mod:`ragen_bench.report`, training reports in :mod:`ragen_train.report`.
Every page is one HTML file with no external resources: it opens from ``file://``.
"""

from __future__ import annotations

from .boards import SiteError, build_site

__all__ = ["SiteError", "build_site"]
