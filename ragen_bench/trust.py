"""Commands, executables, endpoints and key variables come from the user, not from a file.

A run folder (``run.json``), a model folder (the ``config.json`` beside ``final_model``) or a
run's ``config.json`` may have been written by someone else.  Some of their fields make ragen
run a program or send the user's API key somewhere:

* a **command**: the Lean env's ``verifier: "repl:<command>"`` (run as a subprocess);
* an **endpoint**: the Lean env's ``verifier: "http(s)://..."`` (it gets ``$LEAN_SERVER_API_KEY``),
  SearchQA's ``retriever_url``, the ``openai`` policy's ``base_url`` (it gets
  ``$OPENAI_API_KEY`` or the variable ``api_key_env`` names);
* a **key variable**: ``api_key_env`` (which of the user's secrets is sent);
* an **executable**: the ``vllm-server`` policy's ``python`` (``--vllm-python``), and the
  ``server_args`` and ``server_env`` it starts the server with (``LD_PRELOAD`` runs code);
* **remote code**: ``trust_remote_code`` true (the model folder's own Python is imported).

:func:`directing_fields` lists those fields of an env config and policy options;
:func:`check_folder_values` refuses any of them read from a folder unless the user gave the
same value on the command line or passed :data:`TRUST_FLAG` (one line naming the file, the
field, the value and both ways to go on).  A value equal to the project's default is not a
choice of the folder and passes.  :func:`origins` gives the ``scheme://host:port`` of each
endpoint, which a resume prints before it calls one.  The rules are stated in
``docs/security.md`` ("Files from others").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "TRUST_FLAG",
    "DirectingField",
    "UntrustedValueError",
    "check_folder_values",
    "directing_fields",
    "origins",
]

#: The flag that accepts a folder's commands, endpoints and key variables as they are.
TRUST_FLAG = "--trust-folder"

#: Env-config fields that direct ragen, with the value that is the project default (passes).
_ENV_FIELDS: dict[str, Any] = {
    "verifier": None,  # Lean: repl:<command> | http(s)://... | replay:<file>
    "api_key_env": "LEAN_SERVER_API_KEY",  # Lean: the key sent to the verifier
    "retriever_url": "http://127.0.0.1:8000/retrieve",  # SearchQA
}
#: Policy options that direct ragen (no default passes).
_POLICY_FIELDS = (
    "base_url",
    "base_urls",
    "api_key_env",
    "python",
    "server_args",
    "server_env",
    "trust_remote_code",
)


@dataclass(frozen=True)
class DirectingField:
    """One field of a config that runs a program or chooses where a key goes.

    Attributes:
        section: ``"env_config"`` or ``"policy_options"``.  key: the field name.
        value: its value.  kind: ``command``, ``endpoint``, ``key variable``,
        ``executable`` or ``remote code``.
    """

    section: str
    key: str
    value: Any
    kind: str

    @property
    def name(self) -> str:
        """``section.key``."""
        return f"{self.section}.{self.key}"


class UntrustedValueError(ValueError):
    """A folder's command, endpoint or key variable was not confirmed by the user (one line)."""


def _env_kind(key: str, value: Any) -> str | None:
    if key == "verifier":
        text = str(value).strip()
        if text.startswith("repl:"):
            return "command"
        if text.startswith(("http://", "https://")):
            return "endpoint"
        return None  # replay:<file> only reads recorded answers
    return "key variable" if key == "api_key_env" else "endpoint"


def _policy_kind(key: str, value: Any) -> str | None:
    if key == "trust_remote_code":
        return "remote code" if value is True or str(value).lower() == "true" else None
    return {
        "python": "executable",
        "server_args": "executable",
        "server_env": "executable",
        "api_key_env": "key variable",
    }.get(key, "endpoint")


def directing_fields(
    env_config: Mapping[str, Any] | None, policy_options: Mapping[str, Any] | None
) -> list[DirectingField]:
    """The fields of ``env_config`` and ``policy_options`` that run a program or choose where
    a key goes (module docstring); values equal to the project default and ``None`` are left out."""
    out = []
    for key, default in _ENV_FIELDS.items():
        value = (env_config or {}).get(key)
        if value is None or value == default:
            continue
        kind = _env_kind(key, value)
        if kind:
            out.append(DirectingField("env_config", key, value, kind))
    for key in _POLICY_FIELDS:
        value = (policy_options or {}).get(key)
        if value is None or value == [] or value == {}:
            continue
        kind = _policy_kind(key, value)
        if kind:
            out.append(DirectingField("policy_options", key, value, kind))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as the user would spell them: a one-element list is its element; URLs without a
    trailing slash; strings stripped."""

    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            v = [norm(x) for x in v]
            return v[0] if len(v) == 1 else v
        if isinstance(v, str):
            v = v.strip()
            return v.rstrip("/") if v.startswith(("http://", "https://")) else v
        return v

    return norm(a) == norm(b)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def check_folder_values(
    fields: Iterable[DirectingField],
    *,
    source: str,
    confirmed: Mapping[str, Any] | None = None,
    trust: bool = False,
    how: Mapping[str, str] | None = None,
) -> None:
    """Refuse a folder's directing field that the user did not confirm.

    Args:
        fields: what :func:`directing_fields` found in the folder's file.
        source: the file they were read from (named in the message).
        confirmed: the user's own values by :attr:`DirectingField.name` (the command line);
            a field whose value is the same passes.
        trust: :data:`TRUST_FLAG` was given: everything passes.
        how: per field name, the command-line spelling that confirms it (shown in the message).

    Raises:
        UntrustedValueError: one line naming the file, each unconfirmed field with its kind
            and value, and how to confirm it or :data:`TRUST_FLAG`.
    """
    if trust:
        return
    confirmed = confirmed or {}
    bad = [f for f in fields if not (f.name in confirmed and _same(confirmed[f.name], f.value))]
    if not bad:
        return
    what = "; ".join(f"{f.name} = {f.value!r} ({_article(f.kind)} {f.kind})" for f in bad)
    give = ", ".join(dict.fromkeys(s for f in bad if (s := (how or {}).get(f.name))))
    raise UntrustedValueError(
        f"{source} sets {what}, which this command does not take from a file someone else may "
        "have written; "
        + (f"give the same value on the command line ({give}), or " if give else "")
        + f"pass {TRUST_FLAG} to accept the folder's values (docs/security.md)"
    )


def origins(fields: Iterable[DirectingField]) -> list[str]:
    """``scheme://host:port`` of every endpoint among ``fields`` (the default port filled in),
    in order, without duplicates."""
    out: list[str] = []
    for f in fields:
        if f.kind != "endpoint":
            continue
        values = f.value if isinstance(f.value, (list, tuple)) else [f.value]
        for url in values:
            parts = urlsplit(str(url).strip())
            try:
                port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
            except ValueError:
                port = None
            origin = f"{parts.scheme}://{parts.hostname or ''}" + (f":{port}" if port else "")
            if origin not in out:
                out.append(origin)
    return out
