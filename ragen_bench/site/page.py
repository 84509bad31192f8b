"""The page machinery every result page shares: templates, escaping, layout, inlined CSS/JS.

Pages are rendered with jinja2 with autoescaping on, so every value that reaches a
template — model text, observations, data-set items, env ids, file names — is HTML-escaped
(``<script>`` in a transcript is shown as text).  Only markup this package builds itself
(:class:`markupsafe.Markup` from :mod:`ragen_bench.site.charts`, the inlined stylesheet and
script) is inserted unescaped.  As a second line of defence every page carries a
Content-Security-Policy that allows exactly one script, ours, by its SHA-256 hash, and no
network access at all: a page works from ``file://`` and from any static host.

Output is deterministic: the same inputs give byte-identical pages (no build time, no
random ids, sorted keys, fixed number formats).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ..redaction import redact

#: Statuses in the order pages list them (``schemas/episode.schema.json``); others follow, sorted.
STATUS_ORDER = (
    "success",
    "failure",
    "invalid_format_limit",
    "turn_limit",
    "context_limit",
    "env_error",
    "endpoint_error",
    "running",
)

#: Metrics shown as percentages.
PERCENT_METRICS = frozenset({"success", "valid_action_rate", "format_valid_rate"})


def _jinja():
    try:
        import jinja2
    except ImportError as exc:  # pragma: no cover - jinja2 comes with the site extra
        raise ImportError("result pages need jinja2: pip install 'ragen[site]'") from exc
    return jinja2


def _static(name: str) -> str:
    return (
        resources.files("ragen_bench.site")
        .joinpath("static")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )


@functools.lru_cache(maxsize=1)
def environment():
    """The shared jinja2 environment (autoescape on for every template, strict undefined)."""
    jinja2 = _jinja()
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ragen_bench.site", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        est=fmt_estimate,
        ci=fmt_ci,
        num=fmt_num,
        pct=fmt_pct,
        sortval=sort_value,
        status_key=status_key,
        tojson_sorted=lambda v: json.dumps(v, sort_keys=True, indent=1),
    )
    return env


def render_page(
    template: str, *, title: str, nav: list[tuple[str, str]] | None = None, **context: Any
) -> str:
    """Render ``templates/<template>`` inside the common layout; return the whole HTML document.

    Args:
        template: a template name, e.g. ``"board.html"``.
        title: the page title (escaped).
        nav: ``(label, relative href)`` links for the header bar.
        context: the template's variables (escaped wherever they are printed).

    Raises:
        ImportError: jinja2 is missing (``pip install 'ragen[site]'``).
        jinja2.UndefinedError: the template names a variable the caller did not pass.
    """
    _jinja()
    from markupsafe import Markup

    script = _static("page.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    return (
        environment()
        .get_template(template)
        .render(
            title=title,
            nav=nav or [],
            csp=csp,
            style=Markup(_static("page.css")),
            script=Markup(script),
            **context,
        )
    )


def write_page(path: str | Path, html: str) -> Path:
    """Write one page (UTF-8, ``\\n`` line ends), creating its folder; return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(redact(html))
    return p


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A file-name-safe form of ``text`` (runs of other characters become ``_``; never empty,
    never starting with a dot)."""
    s = _UNSAFE.sub("_", text).strip("_").lstrip(".")
    return s or "_"


def provenance_flags(entry: dict[str, Any]) -> list[str]:
    """What a board entry cannot vouch for, as the short marks the pages show beside it:
    ``"dirty"`` when its run was made from a tree with uncommitted changes (its
    ``git_commit`` ends in ``-dirty``), ``"no seeds"`` when it records no ``seeds``.
    Such a row stands until new runs from a clean commit replace it."""
    flags = []
    if str(entry.get("git_commit") or "").endswith("-dirty"):
        flags.append("dirty")
    if not entry.get("seeds"):
        flags.append("no seeds")
    return flags


def report_name(run_id: str) -> str:
    """The file stem of ``run_id``'s report page, unique per run id: :func:`slug` when it
    keeps the id as it is, else the slug and 8 hex digits of the id's SHA-256 (``col a``
    and ``col_a`` have one slug but two pages)."""
    s = slug(run_id)
    if s == run_id:
        return s
    return f"{s}-{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


# ------------------------------------------------------------------- formatting
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(x: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals (``–`` for missing / non-finite)."""
    return f"{x:.{digits}f}" if _finite(x) else "–"


def fmt_pct(x: Any, digits: int = 1) -> str:
    """A fraction in [0, 1] as a percentage (``0.5`` → ``50.0%``)."""
    return f"{100 * x:.{digits}f}%" if _finite(x) else "–"


def fmt_estimate(est: dict[str, Any] | None, pct: bool = False) -> str:
    """The mean of a summary estimate (``{"mean", "stderr", "ci95", "n"}``)."""
    if not est:
        return "–"
    return fmt_pct(est.get("mean")) if pct else fmt_num(est.get("mean"))


def fmt_ci(est: dict[str, Any] | None, pct: bool = False) -> str:
    """The 95% interval of a summary estimate, ``[lo, hi]`` (empty when absent)."""
    ci = (est or {}).get("ci95") or [None, None]
    if not (_finite(ci[0]) and _finite(ci[1])):
        return ""
    f = (lambda v: f"{100 * v:.1f}") if pct else (lambda v: f"{v:.3f}")
    return f"[{f(ci[0])}, {f(ci[1])}]"


def sort_value(est: Any) -> str:
    """What a sortable cell's ``data-value`` holds: the estimate's (or number's) value, ``""`` if none."""
    x = est.get("mean") if isinstance(est, dict) else est
    return repr(float(x)) if _finite(x) else ""


def status_key(status: str) -> tuple[int, str]:
    """Sort key putting statuses in :data:`STATUS_ORDER`."""
    return (STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER), status)
