"""Lean: prove a miniF2F theorem in Lean 4, one tactic per action (spec: ``docs/envs/lean.md``).

Each action is one tactic (it may span lines).  The verifier (:mod:`.verifier`: a Kimina
Lean Server, a Lean REPL subprocess, or a replay of recorded answers) says whether it
is accepted after the tactics accepted so far and which goals it leaves.  Rewards
(config fields, RAGEN's values; RAGEN-AI/RAGEN ragen/env/): ``step_reward`` -0.1 on
every checked tactic, ``accepted_reward`` +1 when the tactic reaches a proof state not
seen before in the episode (at most ``max_progress_rewards`` times), ``rejected_reward``
-1, ``timeout_reward`` -1, ``success_reward`` +10 for the tactic that completes the
proof, ``step_limit_reward`` -2 when a checked tactic uses the last step.

Difference from RAGEN (its risk note: "comment-only tactics earn +0.9 each"): RAGEN pays
+1 for every accepted tactic, so a comment, ``skip`` or a repeated ``have`` earns +0.9
per step and 100 of them outearn the proof.  Here a tactic that leaves the goals as they
were (up to hypothesis names and order, :func:`~.protocol.state_signature`) is accepted
but earns no +1, is not ``action_is_effective`` and is not added to the proof; +1 needs
a state never seen in the episode (no have/clear cycles) and is capped, so that the +10
of a proof always dominates.  A tactic that uses ``sorry`` / ``admit`` (reported by
Lean's ``sorries``, or spelled in its text) is rejected, so a proof with one can never
be complete.

A verifier failure (not Lean's verdict) ends the episode: truncated, reward 0, status
``env_error``, the one-line reason in ``info["verifier_error"]`` and the observation.
"""

from __future__ import annotations

import textwrap
import unicodedata
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ...config import ConfigError
from ...core import EpisodeStatus, Transition, join_lines
from ...data.loaders import MissingExtraError
from ...data.splits import canonical_key
from ...dataset_env import DatasetEnv
from .guard import refused_token
from .protocol import ACCEPTED, TIMEOUT, LeanMessage, TacticCheck, mentions_sorry, state_signature
from .render import LogEntry, render_observation
from .theorems import Theorem, load_theorems, source_split
from .verifier import Verifier, VerifierError, VerifierSpec, resolve_spec

__all__ = ["AUTOMATION_TACTICS", "LeanEnv", "RANDOM_TACTICS"]

#: The oracle's fallback when no proof is known: Mathlib's closing automation, in turn.
AUTOMATION_TACTICS = (
    "norm_num",
    "simp",
    "linarith",
    "nlinarith",
    "omega",
    "positivity",
    "ring_nf",
    "decide",
    "aesop",
)

#: The random baseline's vocabulary: the automation, plus tactics that split or do nothing.
RANDOM_TACTICS = AUTOMATION_TACTICS + (
    "constructor",
    "intro h",
    "ring",
    "field_simp",
    "skip",
    "rfl",
)


def _clean_tactic(action: str) -> str:
    """Drop leading/trailing blank lines and the common indentation; keep relative indentation."""
    lines = [ln.rstrip() for ln in action.replace("\r\n", "\n").split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return textwrap.dedent("\n".join(lines))


def _bad_character(text: str) -> str | None:
    for ch in text:
        if ch in "\n\t":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs") or ch in "\u2028\u2029":
            return f"U+{ord(ch):04X}"
    return None


def make_verifier(spec: VerifierSpec, config: Mapping[str, Any]) -> Verifier:
    """Build the back-end named by ``spec`` with the env config's timeouts and retries.

    Raises:
        MissingExtraError: the Kimina back-end and ``httpx`` is not installed.
        VerifierError: the replay file cannot be read.
    """
    if spec.kind == "kimina":
        from .kimina import KiminaVerifier

        return KiminaVerifier(spec.url, config)
    if spec.kind == "repl":
        from .repl import ReplVerifier

        return ReplVerifier(spec.command, config)
    from .replay import ReplayVerifier

    return ReplayVerifier(spec.path)


class LeanEnv(DatasetEnv):
    """Theorem proving in Lean 4 (see the module docstring and ``docs/envs/lean.md``).

    Config (``ragen_envs/envs/lean/config.schema.json``): ``split``, ``split_mode``
    (``source``: miniF2F valid -> train/validation, test -> test), ``data_source``,
    ``default_header``, ``verifier``, ``api_key_env``, ``repl_cwd``, ``lean_timeout_s``,
    ``request_timeout_s``, ``start_timeout_s``, ``max_retries``, ``retry_backoff_s``, the
    reward fields, ``max_progress_rewards``, ``max_tactic_chars``, ``max_steps`` (100),
    ``invalid_action_reward`` and the observation sizes.

    Invalid actions (format penalty ``invalid_action_reward``, nothing sent to Lean, the
    observation unchanged): an empty tactic, one longer than ``max_tactic_chars``, one
    with control characters other than newline and tab, or one with a Lean command or
    meta-programming token (:func:`~.guard.refused_token`: ``#print``, ``#exit``,
    ``run_tac``, ``set_option``, ``axiom``, ``Lean.…``, ``native_decide``, …).

    Raises:
        ConfigError: ``verifier`` is not a known spec.
    """

    env_key = "lean"
    #: No oracle proves every theorem; with a replay that records a proof it plays it.
    oracle_is_exact = False
    #: Why ``ragen-bench run --policy oracle`` refuses this env (``ragen_bench.runner.plan_run``):
    #: a run labelled "oracle" is read as the upper bound, and this env has none.
    no_oracle_reason = (
        "theorem proving has no oracle: oracle_actions() only replays a proof the verifier has "
        "recorded, else tries Mathlib's automation tactics (docs/envs/lean.md); for a baseline "
        "run --policy random, or evaluate a model"
    )

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        try:
            self._spec = resolve_spec(self.config["verifier"])
        except ValueError as exc:
            raise ConfigError(self.env_key, "verifier", str(exc)) from None
        self._verifier: Verifier | None = None
        self._log: deque[LogEntry] = deque(maxlen=int(self.config["log_entries_shown"]))

    # ------------------------------------------------------------ data hooks
    def _table_key(self) -> Hashable:
        c = self.config
        return (type(self).__name__, c["data_source"], c["default_header"], c["split_mode"])

    def _load_items(self) -> Sequence[Theorem]:
        return load_theorems(
            self.config["data_source"], default_header=self.config["default_header"]
        )

    def _item_key(self, item: Theorem) -> str:
        return canonical_key(item.name)

    def _item_source_split(self, item: Theorem) -> str | None:
        return source_split(item)

    def _item_id(self, item: Theorem) -> str:
        return item.name

    def _reset(self, options: Mapping[str, Any]) -> None:
        """As :class:`DatasetEnv`, plus ``options={"theorem": name}``: that theorem of the split.

        Raises:
            KeyError: no theorem of that name in the configured split.
        """
        if "theorem" in options:
            names = [t.name for t in self.split_items()]
            if options["theorem"] not in names:
                raise KeyError(
                    f"no theorem {options['theorem']!r} in split {self.config['split']!r}"
                )
            options = {**options, "index": names.index(options["theorem"])}
        super()._reset(options)

    def _start_item(self, item: Theorem, options: Mapping[str, Any]) -> None:
        self._proof: list[str] = []
        self._goals: tuple[str, ...] | None = None
        self._seen: set[Hashable] = set()
        self._checked = 0
        self._accepted = 0
        self._paid = 0
        self._complete = False
        self._messages: tuple[LeanMessage, ...] = ()
        self._error: str | None = None
        self._error_pending = False
        self._log.clear()

    def _reset_info(self) -> dict[str, Any]:
        return {**super()._reset_info(), "verifier": self._spec.describe()}

    # -------------------------------------------------------------- verifier
    def verifier(self) -> Verifier:
        """The back-end (created on first use and kept across episodes).

        Raises:
            VerifierError, MissingExtraError: it cannot be created.
        """
        if self._verifier is None:
            self._verifier = make_verifier(self._spec, self.config)
        return self._verifier

    def check_ready(self) -> None:
        """Ask the verifier for the current theorem's open goals, so that an unreachable
        server or a missing REPL is reported before any episode is played
        (``ragen_bench.preflight``); call after ``reset``.

        Raises:
            ConnectionError: the verifier cannot be reached or started (the message names
                it and says how to point the env at another one).
        """
        try:
            self.verifier().open_goals(self._item)
        except (VerifierError, MissingExtraError) as exc:
            raise ConnectionError(
                f"{' '.join(str(exc).split())}; point the env at a Lean verifier with --env-config "
                "verifier=http://HOST:PORT (Kimina) | repl:COMMAND | replay:FILE (ragen-train: "
                "env.config.verifier=...), or set RAGEN_LEAN_VERIFIER (docs/envs/lean.md)"
            ) from None

    def close(self) -> None:
        """Stop the verifier's connections and processes."""
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        super().close()

    # -------------------------------------------------------------- Gymnasium
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`TextEnv.step`; a verifier failure ends the episode with status ``env_error``
        (``terminated=False``, ``truncated=True``: the MDP did not end, the run did)."""
        obs, reward, terminated, truncated, info = super().step(action)
        if self._error_pending:
            self._error_pending = False
            self._status = EpisodeStatus.ENV_ERROR
            self._live = False
            info["status"] = EpisodeStatus.ENV_ERROR.value
            return obs, reward, False, True, info
        return obs, reward, terminated, truncated, info

    def _step(self, action: str) -> Transition:
        c = self.config
        tactic = _clean_tactic(action)
        if not tactic.strip():
            return self.invalid("empty tactic: answer with one Lean 4 tactic")
        if len(tactic) > int(c["max_tactic_chars"]):
            return self.invalid(
                f"the tactic is {len(tactic)} characters long; the limit is {int(c['max_tactic_chars'])}"
            )
        bad = _bad_character(tactic)
        if bad is not None:
            return self.invalid(f"the tactic contains the control character {bad}")
        token = refused_token(tactic)
        if token is not None:
            return self.invalid(
                f"the tactic contains {token!r}: Lean commands, meta-programming and "
                "native_decide are refused (docs/envs/lean.md)"
            )
        try:
            verifier = self.verifier()
            if self._goals is None:
                self._goals = tuple(verifier.open_goals(self._item))
                self._seen.add(state_signature(self._goals))
            check = verifier.check(self._item, self._proof, tactic)
        except (VerifierError, MissingExtraError) as exc:
            return self._env_error(" ".join(str(exc).split()))
        return self._apply(tactic, check, verifier.attempts)

    def _env_error(self, message: str) -> Transition:
        self._error = message
        self._error_pending = True
        return Transition(
            reward=0.0,
            terminated=False,
            action_is_valid=True,
            action_is_effective=False,
            info={
                "tactic_outcome": "env_error",
                "verifier_error": message,
                "tactics_checked": self._checked,
                "tactics_accepted": self._accepted,
                "proof_complete": False,
                "verifier_attempts": self._verifier.attempts if self._verifier is not None else 1,
            },
        )

    def _apply(self, tactic: str, check: TacticCheck, attempts: int) -> Transition:
        c = self.config
        self._checked += 1
        self._messages = check.messages
        reward = float(c["step_reward"])
        uses_sorry = check.uses_sorry or mentions_sorry(tactic)
        effective = progress = terminated = False
        if check.outcome == TIMEOUT:
            outcome, note = "timeout", "timed out"
            reward += float(c["timeout_reward"])
        elif check.outcome != ACCEPTED or uses_sorry:
            outcome = "rejected"
            note = (
                "rejected: uses sorry/admit"
                if uses_sorry
                else f"rejected: {check.reason or 'Lean error'}"
            )
            reward += float(c["rejected_reward"])
        else:
            self._accepted += 1
            after = state_signature(check.goals)
            if not check.complete and after == state_signature(self._goals or ()):
                outcome, note = "no_progress", "accepted, no change to the goals"
            else:
                outcome, effective = "accepted", True
                self._proof.append(tactic)
                self._goals = check.goals
                cap = c["max_progress_rewards"]
                new = after not in self._seen
                if new and (cap is None or self._paid < int(cap)):
                    self._paid += 1
                    progress = True
                    reward += float(c["accepted_reward"])
                self._seen.add(after)
                note = (
                    "progress"
                    if progress
                    else "accepted, progress reward cap reached"
                    if new
                    else "accepted, back to a state seen before"
                )
                if check.complete:
                    self._complete = terminated = True
                    reward += float(c["success_reward"])
                    note = "proof complete"
        if not terminated and self._steps + 1 >= self._max_steps:
            reward += float(c["step_limit_reward"])
        self._log.append(LogEntry(outcome in ("accepted", "no_progress"), tactic, note))
        return Transition(
            reward=reward,
            terminated=terminated,
            action_is_valid=True,
            action_is_effective=effective,
            success=terminated,
            info={
                "tactic_outcome": outcome,
                "progress": progress,
                "uses_sorry": uses_sorry,
                "goals_open": len(self._goals or ()),
                "tactics_checked": self._checked,
                "tactics_accepted": self._accepted,
                "proof_complete": self._complete,
                "verifier_attempts": int(attempts),
            },
        )

    def _observation(self) -> str:
        c = self.config
        t = self._item
        return render_observation(
            name=t.name,
            informal=t.informal,
            statement=t.statement,
            proof=self._proof,
            checked=self._checked,
            accepted=self._accepted,
            log=list(self._log),
            messages=self._messages[: int(c["messages_shown"])],
            goals=self._goals,
            data_goal=t.goal,
            complete=self._complete,
            error=self._error,
            proof_lines=int(c["proof_lines_shown"]),
            message_chars=int(c["message_chars"]),
            goals_shown=int(c["goals_shown"]),
        )

    @property
    def instruction(self) -> str:
        c = self.config
        cap = c["max_progress_rewards"]
        progress = "a state not seen before" + (
            f" (at most {int(cap)} times)" if cap is not None else ""
        )
        terms = [
            (c["step_reward"], "per tactic"),
            (c["accepted_reward"], f"when it changes the open goals to {progress}"),
            (c["rejected_reward"], "when Lean rejects it"),
            (c["timeout_reward"], "when Lean times out"),
            (c["success_reward"], "when it completes the proof"),
        ]
        rewards = "; ".join(f"{float(v):+g} {what}" for v, what in terms if float(v) != 0.0)
        return join_lines(
            [
                "You are proving a theorem in Lean 4 with Mathlib, one tactic at a time.",
                "Each action is one Lean 4 tactic (it may span several lines); it is checked after the tactics "
                "accepted so far, and a rejected tactic is not kept.",
                "Several tactics in one answer are separated by ||, for example:",
                "<answer>norm_num at h₀ || nlinarith [sq_nonneg (x - 1)]</answer>",
                f"Rewards: {rewards}.",
                "A tactic that leaves the goals unchanged (a comment, skip, a repeated have) earns nothing beyond the "
                "per-tactic cost. sorry and admit are never accepted.",
            ]
        )

    # -------------------------------------------------------------- baselines
    def oracle_actions(self) -> list[str]:
        """The rest of a proof the verifier knows (a replay's recording), else the next
        tactic of :data:`AUTOMATION_TACTICS` (cycling by the number of checked tactics)."""
        if self.status.is_terminal:
            return []
        known = None
        try:
            known = self.verifier().known_proof(self._item)
        except (VerifierError, MissingExtraError):
            known = None
        n = len(self._proof)
        if known is not None and len(known) > n and tuple(self._proof) == known[:n]:
            return list(known[n:])
        return [AUTOMATION_TACTICS[self._checked % len(AUTOMATION_TACTICS)]]

    def sample_action(self, rng: np.random.Generator) -> str:
        """A uniformly random tactic of :data:`RANDOM_TACTICS` (the random baseline)."""
        return RANDOM_TACTICS[int(rng.integers(len(RANDOM_TACTICS)))]

    @property
    def proof(self) -> tuple[str, ...]:
        """The accepted tactics so far."""
        return tuple(self._proof)
