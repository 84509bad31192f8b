"""Text safe to write: no API key, no ``Authorization`` value, no URL credential, no lone surrogate.

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

**URL credentials.** A base URL may carry credentials (``http://user:KEY@host/v1?api_key=KEY2``).
:func:`redact` masks the user info of every URL (``http://***@host/v1``) and the value of
every credential-like query parameter (:data:`SECRET_QUERY_PARAMS`: ``?api_key=***``),
whether or not the URL was registered; :func:`redact_options` applies this to the
``base_url`` of the policy options that ``run.json`` records, and the endpoint policy
registers each credential it finds in its base URLs (:func:`url_secrets`), so that an
echo of one is masked too.  :func:`redact_url` is the stricter form for descriptions:
the URL without user info, query or fragment.

**Lone surrogates.** A string holding half of a UTF-16 surrogate pair (from a JSON
``"\\ud83d"`` escape) cannot be encoded as UTF-8, so writing it fails.  :func:`redact`
passes text through :func:`repair_surrogates` (pairs joined, lone halves replaced by
U+FFFD), so no writer of this package can fail on one; the endpoint policy repairs and
counts them earlier, when it reads an answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

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


#: Query parameters whose value is a credential (compared case-insensitively, ``-`` as ``_``).
SECRET_QUERY_PARAMS = (
    "api_key",
    "apikey",
    "key",
    "token",
    "access_token",
    "auth",
    "auth_token",
    "password",
    "passwd",
    "secret",
    "client_secret",
    "sig",
    "signature",
    "x_api_key",
    "code",
)
_PARAM_NAMES = "|".join(n.replace("_", "[_-]?") for n in sorted(SECRET_QUERY_PARAMS, key=len)[::-1])
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s\"'<>\\]+")
_URL_USERINFO = re.compile(r"^([^:]+://)(?!\*\*\*@)[^/@?#]+@")
_QUERY_SECRET = re.compile(rf"(?i)([?&](?:{_PARAM_NAMES})=)(?!\*\*\*(?:[&#]|$))[^&#]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def repair_surrogates(text: str) -> tuple[str, int, int]:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD.

    Returns:
        ``(text, joined, replaced)``: the repaired text, the number of high/low pairs
        joined into one character, the number of lone surrogates replaced.  Text without
        surrogates comes back unchanged (one regex scan).
    """
    if _SURROGATE.search(text) is None:
        return text, 0, 0
    joined = len(_PAIR.findall(text))
    replaced = len(_SURROGATE.findall(text)) - 2 * joined
    # UTF-16 carries a pair as its two halves, so a round trip joins them; a lone half is
    # an invalid UTF-16 unit, which "replace" turns into one U+FFFD.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, joined, replaced


def mask_url_credentials(text: str) -> str:
    """``text`` with the user info of every URL and every credential-like query value
    (:data:`SECRET_QUERY_PARAMS`) replaced by ``***`` (only inside ``scheme://...`` URLs, so
    code such as ``a&&key==b`` is left alone)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: _mask_url(m.group(0)), text)


def _mask_url(url: str) -> str:
    url = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", url)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, url)


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its user name and password, and the values of its
    credential-like query parameters (empty for a URL without any)."""
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        names = {n.replace("-", "_") for n in SECRET_QUERY_PARAMS}
        found += [v for k, v in parse_qsl(parts.query) if k.lower().replace("-", "_") in names]
    except ValueError:  # an unparsable URL: the text masks still apply
        return []
    return [s for s in found if s]


def has_masked_credentials(url: str) -> bool:
    """Whether ``url`` holds a credential already replaced by ``***`` (read back from a file)."""
    return MASK in url_secrets(url)


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (safe to write to results)."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of back-end ``options`` (``run.json``'s ``policy_options``) whose ``base_url``
    (one URL or a list) has its credentials masked (:func:`mask_url_credentials`)."""
    out = dict(options)
    url = out.get("base_url")
    if isinstance(url, str):
        out["base_url"] = mask_url_credentials(url)
    elif isinstance(url, (list, tuple)):
        out["base_url"] = [mask_url_credentials(u) if isinstance(u, str) else u for u in url]
    return out


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
    """``text`` with every registered secret, URL credential and ``Authorization`` value
    masked, and lone surrogates repaired (module docstring)."""
    text = repair_surrogates(text)[0]
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, MASK)
    text = mask_url_credentials(text)
    if "authorization" not in text.lower():  # ~1 ms per MiB; the regex scan costs ~80
        return text
    return _AUTH.sub(lambda m: m.group(1) + (m.group(2) or "") + MASK, text)
