"""The Kimina Lean Server back-end (project-numina/kimina-lean-server), spoken with httpx.

Protocol facts (from the server's ``server/routers/check.py``, ``health.py``, ``auth.py``):

* ``GET /health`` -> ``{"status": "ok"}``;
* ``POST /api/check`` with ``{"snippets": [{"id", "code"}], "timeout": int, "debug": bool,
  "reuse": bool, "infotree": null}`` -> ``{"results": [{"id", "time", "error"?,
  "response"?}]}``; exactly one of ``error`` / ``response`` is set; ``response`` is the
  REPL's command answer with line numbers counted from the top of ``code``;
* a Lean timeout is ``error`` with ``time`` equal to the request's ``timeout``;
* positions count lines from the top of ``code`` (the server runs the ``import`` lines
  apart and shifts the body's positions back, in an answer that has messages; the
  probe's ``sorry`` always brings its "declaration uses sorry" warning);
* ``Authorization: Bearer <key>`` when the server has a key (401 without it);
  429 "No available REPLs" and 500 (a REPL failed) are transient.

Each check sends the whole proof (header, statement, accepted tactics, the new tactic
and the probe line ``all_goals sorry``; see :func:`~.protocol.command_check`): the server
is stateless towards us.  Transient failures (connection errors, timeouts, 429, 500,
502-504) are retried ``max_retries`` times with exponential back-off
(``retry_backoff_s * 2**k``); then, as for any other failure, a one-line
:class:`~.verifier.VerifierError` names the URL.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...data.loaders import MissingExtraError
from .protocol import (
    TIMEOUT,
    LeanMessage,
    ProtocolError,
    TacticCheck,
    axioms_verdict,
    command_check,
)
from .theorems import Theorem
from .verifier import Verifier, VerifierError, axioms_query, build_proof

__all__ = ["KiminaVerifier"]

#: HTTP statuses worth another try.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class KiminaVerifier(Verifier):
    """Checks proofs on a Kimina Lean Server at ``url`` (see the module docstring).

    Config fields used: ``lean_timeout_s`` (the server's per-check Lean timeout),
    ``request_timeout_s`` (HTTP read timeout; ``null``: ``lean_timeout_s + 30``),
    ``start_timeout_s`` (the health probe), ``max_retries``, ``retry_backoff_s``,
    ``api_key_env`` (the environment variable holding the Bearer key, if set).

    Raises:
        MissingExtraError: ``httpx`` is not installed (``pip install 'ragen-envs[lean]'``).
    """

    kind = "kimina"

    def __init__(self, url: str, config: Mapping[str, Any]):
        try:
            import httpx
        except ImportError:
            raise MissingExtraError(
                "httpx", "lean", "the Lean env's Kimina Lean Server back-end"
            ) from None
        self._httpx = httpx
        self.url = url
        self.lean_timeout = int(math.ceil(float(config["lean_timeout_s"])))
        rt = config.get("request_timeout_s")
        self.request_timeout = float(rt) if rt is not None else self.lean_timeout + 30.0
        self.start_timeout = float(config["start_timeout_s"])
        self.retries = int(config["max_retries"])
        self.backoff = float(config["retry_backoff_s"])
        key_env = config.get("api_key_env")
        key = os.environ.get(key_env) if key_env else None
        self.key_env = key_env
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            base_url=url,
            headers=headers,
            trust_env=False,
            timeout=httpx.Timeout(self.request_timeout, connect=min(10.0, self.request_timeout)),
        )
        self._healthy = False
        self._ids = itertools.count()
        self._attempts = 1

    # ----------------------------------------------------------------- HTTP
    def _request(
        self, method: str, path: str, *, json: Any = None, timeout: float | None = None
    ) -> Any:
        httpx = self._httpx
        where = f"{self.url}{path}"
        tries = 1 + self.retries
        last = ""
        for attempt in range(tries):
            self._attempts = attempt + 1
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                r = self._client.request(
                    method,
                    path,
                    json=json,
                    timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TimeoutException as exc:
                last = (
                    f"no answer within {timeout or self.request_timeout:g} s ({type(exc).__name__})"
                )
                continue
            except httpx.TransportError as exc:
                last = f"cannot connect ({type(exc).__name__}: {exc})"
                continue
            detail = r.text[:200]
            if r.status_code in RETRY_STATUSES:
                last = f"HTTP {r.status_code} {detail}"
                continue
            if r.status_code in (401, 403):
                how = (
                    f"set ${self.key_env} to the server's key"
                    if self.key_env
                    else "set api_key_env"
                )
                raise VerifierError(
                    f"Kimina Lean Server {where} refused the request (HTTP {r.status_code} {detail}); {how}"
                )
            if r.status_code >= 400:
                raise VerifierError(
                    f"Kimina Lean Server {where} answered HTTP {r.status_code} {detail} "
                    "(is this a Kimina Lean Server?)"
                )
            try:
                return r.json()
            except ValueError:
                raise VerifierError(
                    f"Kimina Lean Server {where} answered non-JSON: {detail!r}"
                ) from None
        raise VerifierError(f"Kimina Lean Server {where}: {last} (after {tries} tries)")

    def _ensure_healthy(self) -> None:
        if self._healthy:
            return
        body = self._request("GET", "/health", timeout=self.start_timeout)
        if not (isinstance(body, Mapping) and body.get("status") == "ok"):
            raise VerifierError(
                f"Kimina Lean Server {self.url}/health answered {body!r:.200} instead of "
                '{"status": "ok"}'
            )
        self._healthy = True

    def _run(self, theorem: Theorem, tactics: Sequence[str]) -> TacticCheck:
        code, probe_line = build_proof(theorem, tactics, probe=True)
        result = self._submit(theorem, code)
        if isinstance(result, TacticCheck):
            return result
        where = f"Kimina Lean Server {self.url}/api/check"
        try:
            return command_check(
                result,
                probe_line=probe_line,
                first_line=(theorem.header + theorem.statement).count("\n") + 1,
            )
        except ProtocolError as exc:
            raise VerifierError(f"{where}: {exc}") from None

    def _axioms(self, theorem: Theorem, tactics: Sequence[str], check: TacticCheck) -> TacticCheck:
        """``check`` of a finished proof, or its rejection when ``#print axioms`` lists an
        axiom besides Lean's standard three (module docstring of :mod:`.verifier`)."""
        query = axioms_query(theorem, tactics)
        if query is None:
            return check
        code, name, line = query
        result = self._submit(theorem, code)
        if isinstance(result, TacticCheck):  # a timeout on the axioms query: not proven
            return result
        try:
            return axioms_verdict(result, name=name, line=line) or check
        except ProtocolError as exc:
            raise VerifierError(f"Kimina Lean Server {self.url}/api/check: {exc}") from None

    def _submit(self, theorem: Theorem, code: str) -> Any:
        """Send ``code``; its ``response`` object, or a TIMEOUT check when Lean timed out."""
        self._ensure_healthy()
        sid = f"{theorem.name}#{next(self._ids)}"
        body = self._request(
            "POST",
            "/api/check",
            json={
                "snippets": [{"id": sid, "code": code}],
                "timeout": self.lean_timeout,
                "debug": False,
                "reuse": True,
                "infotree": None,
            },
        )
        where = f"Kimina Lean Server {self.url}/api/check"
        results = body.get("results") if isinstance(body, Mapping) else None
        if not isinstance(results, list) or not results:
            raise VerifierError(f"{where} answered without 'results': {body!r:.200}")
        result = next(
            (r for r in results if isinstance(r, Mapping) and r.get("id") == sid), results[0]
        )
        if not isinstance(result, Mapping):
            raise VerifierError(f"{where} answered a result that is not an object: {result!r:.200}")
        error = result.get("error")
        if error is not None:
            spent = result.get("time")
            if isinstance(spent, (int, float)) and spent >= self.lean_timeout - 1e-6:
                return TacticCheck(
                    TIMEOUT,
                    reason=f"Lean timed out after {self.lean_timeout} s",
                    messages=(LeanMessage("error", str(error)),),
                )
            raise VerifierError(f"{where}: {error}")
        return result.get("response")

    # ------------------------------------------------------------ interface
    def open_goals(self, theorem: Theorem) -> tuple[str, ...]:
        check = self._run(theorem, ())
        if check.outcome != "accepted" or check.complete:
            first = check.messages[0].text if check.messages else check.reason
            raise VerifierError(
                f"the statement of {theorem.name} does not check on {self.url}: "
                f"{check.outcome} ({first[:200]})"
            )
        return check.goals

    def check(self, theorem: Theorem, proof: Sequence[str], tactic: str) -> TacticCheck:
        tactics = (*proof, tactic)
        check = self._run(theorem, tactics)
        return self._axioms(theorem, tactics, check) if check.complete else check

    def close(self) -> None:
        self._client.close()
