"""Stand-ins for Lean built from Lean's recorded answers (no Lean toolchain can run here).

* :class:`RecordedLean` — the REPL's recorded transcripts (``tests/data/lean/repl-transcripts``,
  leanprover-community/repl's own tests) plus our written ones (``written/``, same shapes)
  as a state machine: a command or tactic gets the answer Lean recorded for it, with the
  ``env`` / ``proofState`` numbers renumbered as a live REPL would number them.  A request
  it has no recording for raises :class:`Unrecorded` (the fakes then fail loudly).
* :class:`KiminaServer` — a real HTTP server on 127.0.0.1 (port 0) speaking the Kimina Lean
  Server API (``GET /health``, ``POST /api/check``, Bearer key).  Each whole proof is
  answered from ``kimina-written.jsonl`` when we wrote that case, else by running its
  tactics through :class:`RecordedLean` and placing the recorded messages, sorries and
  goals where Lean reports them in command mode (an error or sorry on the tactic's line,
  one ``sorry`` per open goal on the probe line).  Fault knobs: HTTP statuses to return
  first, a delay, tactics on which Lean "times out", a required key.

Both answer ``#print axioms`` after a finished proof (sent by the live back-ends since issue
28) with Lean's "does not depend on any axioms" unless a written case says otherwise
(:func:`axioms_answer`).

Used by ``tests/envs/test_lean_*.py`` and by ``lean_fake_repl.py`` (the REPL executable).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "lean"
TRANSCRIPT_DIRS = (DATA / "repl-transcripts", DATA / "written")
THEOREMS = DATA / "theorems.jsonl"
PROBE = "all_goals sorry"


class Unrecorded(KeyError):
    """No recorded answer for a request."""


AXIOMS_LINE = "\n#print axioms "


def axioms_answer(code: str) -> dict:
    """The answer to a finished proof followed by ``#print axioms NAME`` when no written case
    covers it: the recorded proofs use no axiom, so Lean 4 says so (its wording) on the
    ``#print`` line.  Written cases (``written/``, ``kimina-written.jsonl``) take precedence."""
    head, _, name = code.rstrip("\n").rpartition(AXIOMS_LINE)
    where = {"line": head.count("\n") + 2, "column": 0}
    return {
        "env": 0,
        "messages": [
            {
                "severity": "info",
                "pos": where,
                "endPos": where,
                "data": f"'{name.strip()}' does not depend on any axioms",
            }
        ],
    }


def read_blocks(path: Path) -> list[Any]:
    """The JSON values of a file whose values are separated by blank lines (the REPL's framing)."""
    blocks, cur = [], []
    for line in path.read_text(encoding="utf-8").split("\n") + [""]:
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append(json.loads("\n".join(cur)))
            cur = []
    return blocks


def load_transcripts(dirs: Iterable[Path] = TRANSCRIPT_DIRS) -> list[list[tuple[dict, dict]]]:
    """Every ``X.in`` / ``X.expected.out`` pair as a list of (request, answer)."""
    out = []
    for d in dirs:
        for inp in sorted(Path(d).glob("*.in")):
            answers = inp.with_name(inp.name[:-3] + ".expected.out")
            if answers.is_file():
                out.append(list(zip(read_blocks(inp), read_blocks(answers), strict=True)))
    return out


class RecordedLean:
    """Lean's recorded behaviour as a REPL state machine (module docstring)."""

    def __init__(self, transcripts: list[list[tuple[dict, dict]]] | None = None):
        self.transcripts = load_transcripts() if transcripts is None else transcripts
        self.next_env = 0
        self.next_ps = 0
        #: live proofState -> [(transcript index, recorded proofState)]
        self.states: dict[int, list[tuple[int, int]]] = {}

    def _live_ps(self, candidates: list[tuple[int, int]]) -> int:
        ps = self.next_ps
        self.next_ps += 1
        self.states[ps] = candidates
        return ps

    def command(self, request: dict) -> dict:
        """Answer ``{"cmd": ...}`` (the ``env`` field is accepted and ignored)."""
        text = request.get("cmd")
        hits = [
            (t, ans)
            for t, tr in enumerate(self.transcripts)
            for req, ans in tr
            if req.get("cmd") == text and set(req) <= {"cmd", "env"}
        ]
        if not hits and isinstance(text, str) and AXIOMS_LINE in text:
            answer = axioms_answer(text)
            answer["env"] = self.next_env
            self.next_env += 1
            return answer
        if not hits:
            raise Unrecorded(f"no recorded answer for command {text!r}")
        answer = json.loads(json.dumps(hits[0][1]))
        answer["env"] = self.next_env
        self.next_env += 1
        for k, s in enumerate(answer.get("sorries") or []):
            s["proofState"] = self._live_ps(
                [
                    (t, a["sorries"][k]["proofState"])
                    for t, a in hits
                    if len(a.get("sorries") or []) > k
                ]
            )
        return answer

    def tactic(self, request: dict) -> dict:
        """Answer ``{"tactic": ..., "proofState": n}``."""
        live, tactic = request.get("proofState"), request.get("tactic")
        if live not in self.states:
            return {"message": "Unknown proof state."}  # as recorded in unknown_proof_state
        for t, rec in self.states[live]:
            for req, ans in self.transcripts[t]:
                if req.get("tactic") == tactic and req.get("proofState") == rec:
                    answer = json.loads(json.dumps(ans))
                    if "proofState" in answer:
                        answer["proofState"] = self._live_ps([(t, ans["proofState"])])
                    for s in answer.get("sorries") or []:
                        s["proofState"] = self._live_ps([(t, s["proofState"])])
                    return answer
        raise Unrecorded(f"no recorded answer for tactic {tactic!r} at proof state {live}")

    def answer(self, request: dict) -> dict:
        """Answer any request (a command or a tactic)."""
        return self.tactic(request) if "tactic" in request else self.command(request)


def _theorem_statements() -> list[str]:
    return [
        json.loads(line)["formal_statement"]
        for line in THEOREMS.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _split_code(code: str) -> tuple[str, list[str], int]:
    """(statement, tactics, probe line) of a whole proof as the env builds it (no header here)."""
    for statement in _theorem_statements():
        if code.startswith(statement):
            lines = code[len(statement) :].rstrip("\n").split("\n")
            if lines[-1].strip() != PROBE:
                raise Unrecorded("the code does not end with the probe line")
            tactics: list[str] = []
            for line in lines[:-1]:
                if line.startswith("   ") and tactics:  # a continuation of a multi-line tactic
                    tactics[-1] += "\n" + line[2:]
                else:
                    tactics.append(line[2:])
            return statement, tactics, statement.count("\n") + len(lines)
    raise Unrecorded("the code starts with no known statement")


def whole_proof_answer(lean: RecordedLean, code: str) -> dict:
    """The command-mode answer for a whole proof, from tactic-mode recordings (module docstring)."""
    statement, tactics, probe_line = _split_code(code)
    first_tactic_line = statement.count("\n") + 1
    root = lean.command({"cmd": statement.rstrip() + " sorry"})
    warning = [m for m in root.get("messages", []) if m.get("severity") == "warning"]
    ps, goals = root["sorries"][0]["proofState"], [root["sorries"][0]["goal"]]
    line = first_tactic_line
    for tactic in tactics:
        ans = lean.tactic({"tactic": tactic, "proofState": ps})
        where = {"line": line, "column": 2}
        if "proofState" not in ans:
            return {
                "env": 0,
                "messages": [
                    {"severity": "error", "pos": where, "endPos": where, "data": ans["message"]}
                ],
            }
        errors = [
            dict(m, pos=where, endPos=where)
            for m in ans.get("messages", [])
            if m["severity"] == "error"
        ]
        if errors:
            return {"env": 0, "messages": errors}
        if ans.get("sorries"):
            return {
                "env": 0,
                "messages": warning,
                "sorries": [
                    {"proofState": 0, "pos": where, "endPos": where, "goal": s["goal"]}
                    for s in ans["sorries"]
                ],
            }
        ps, goals = ans["proofState"], ans["goals"]
        line += tactic.count("\n") + 1
    if not goals:
        return {"env": 0}
    probe = {"line": probe_line, "column": 12}
    return {
        "env": 0,
        "messages": warning,
        "sorries": [
            {"proofState": i, "pos": probe, "endPos": probe, "goal": g} for i, g in enumerate(goals)
        ],
    }


class KiminaServer:
    """A Kimina Lean Server stand-in on 127.0.0.1 (module docstring).  Use as a context manager.

    Attributes (set them in a test): ``fail_first`` HTTP statuses answered before the
    real answer (one per request, in order); ``delay_s`` sleep before each check answer;
    ``timeout_tactics`` tactics on which the answer is Kimina's timeout result;
    ``api_key`` the required Bearer key (``None``: none); ``requests`` (path, body) seen.
    """

    def __init__(self) -> None:
        self.fail_first: list[int] = []
        self.delay_s = 0.0
        self.timeout_tactics: set[str] = set()
        self.api_key: str | None = None
        self.requests: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        self.transcripts = load_transcripts()  # read once; each check gets a fresh state machine
        self.written = {}
        for line in (DATA / "kimina-written.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                self.written[row["code"]] = row["result"]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _gate(self, body: Any) -> bool:
                with server.lock:
                    server.requests.append((self.path, body))
                    status = server.fail_first.pop(0) if server.fail_first else None
                if status is not None:
                    self._send(
                        status,
                        {"detail": "No available REPLs" if status == 429 else "REPL failure"},
                    )
                    return False
                if server.api_key is not None:
                    auth = self.headers.get("Authorization", "")
                    if not auth:
                        self._send(401, {"detail": "Missing API key"})
                        return False
                    if auth.removeprefix("Bearer ").strip() != server.api_key:
                        self._send(401, {"detail": "Invalid API key"})
                        return False
                return True

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/health", ""):
                    if self._gate(None):
                        self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/api/check":
                    self._send(404, {"detail": "Not Found"})
                    return
                if not self._gate(body):
                    return
                if server.delay_s:
                    time.sleep(server.delay_s)
                try:
                    results = [
                        server.check(s["id"], s["code"], float(body.get("timeout", 60)))
                        for s in body["snippets"]
                    ]
                except (
                    Unrecorded
                ) as exc:  # a test asked for something nobody recorded: say so loudly
                    self._send(500, {"detail": f"lean_fakes: {exc.args[0]}"})
                    return
                self._send(200, {"results": results})

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (the timeout tests) is expected; failures show in the tests

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def check(self, sid: str, code: str, timeout: float) -> dict:
        """One result of ``/api/check``."""
        if code in self.written:
            return {"id": sid, **self.written[code]}
        if AXIOMS_LINE in code:
            return {"id": sid, "time": 0.05, "response": axioms_answer(code)}
        _, tactics, _ = _split_code(code)
        if set(tactics) & self.timeout_tactics:
            return {
                "id": sid,
                "time": timeout,
                "error": f"Lean REPL command timed out in {timeout} seconds",
                "diagnostics": {"repl_uuid": "0"},
            }
        return {
            "id": sid,
            "time": 0.05,
            "response": whole_proof_answer(RecordedLean(self.transcripts), code),
        }

    def __enter__(self) -> KiminaServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
