"""Secrets never written: the configured API key and ``Authorization`` values (issue 28).

A hostile or careless server can echo the request's ``Authorization`` header into an
error message *or into the completion itself*; the text then flows into
``episodes.jsonl``, ``run.json``, reports, the published site and the console.  The
endpoint policy registers its key here when it is built (:func:`register_secret`), and
every writer of this package passes its text through :func:`redact` just before it
writes: :class:`~ragen_bench.results.RunDir` (episode lines),
:func:`~ragen_bench.fileio.atomic_write_text` (``run.json``, ``summary.json``,
leaderboards), :func:`~ragen_bench.site.page.write_page` (reports, site pages) and
:func:`~ragen_bench.console.print_error` (messages).

A registered secret is replaced by ``***`` wherever it occurs, also in its JSON-escaped
spelling; values shorter than :data:`MIN_SECRET_CHARS` are not registered (redacting a
2-letter key would rewrite ordinary text).  Independently of registration, the value
after ``Authorization:`` / ``"authorization": "...`` (with an optional scheme such as
``Bearer``) is replaced by ``***``.  What it cannot do: a secret that the server splits,
encodes (base64, reversed) or spreads over token ids is not recognised.
"""

from __future__ import annotations

import json
import re
import threading

#: Shortest value :func:`register_secret` accepts.
MIN_SECRET_CHARS = 8
#: Placeholder written instead of a secret.
MASK = "***"

_LOCK = threading.Lock()
_SECRETS: tuple[str, ...] = ()
_AUTH = re.compile(
    r"""(?ix)
    (\bauthorization\b\\?["']?\s*[:=]\s*\\?["']?)  # the header name and separator
    ((?:bearer|basic|token|apikey)\s+)?               # an optional scheme
    (?!\*\*\*|(?:bearer|basic|token|apikey)\s)        # not masked yet, not a scheme
    [^\s"'\\,;}]+                                    # the value
    """
)


def register_secret(value: str | None) -> bool:
    """Redact ``value`` from everything written by this process from now on.

    Returns whether it was registered (``None``, ``"EMPTY"`` and values shorter than
    :data:`MIN_SECRET_CHARS` are not).
    """
    global _SECRETS
    if not value or value == "EMPTY" or len(value) < MIN_SECRET_CHARS:
        return False
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}
    with _LOCK:
        # longest first, so that a secret containing another is replaced whole
        _SECRETS = tuple(sorted(set(_SECRETS) | forms, key=len, reverse=True))
    return True


def forget_secrets() -> None:
    """Drop every registered secret (tests)."""
    global _SECRETS
    with _LOCK:
        _SECRETS = ()


def redact(text: str) -> str:
    """``text`` with every registered secret and every ``Authorization`` value masked."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, MASK)
    if "authorization" not in text.lower():  # ~1 ms per MiB; the regex scan costs ~80
        return text
    return _AUTH.sub(lambda m: m.group(1) + (m.group(2) or "") + MASK, text)
