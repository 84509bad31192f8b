"""Countdown: combine the given numbers with + - * / to reach a target (spec: ``docs/envs/countdown.md``).

One well-formed answer ends the episode: a correct expression scores ``success_reward`` (1), a
well-formed expression that uses exactly the given numbers but misses the target scores
``format_reward`` (0.1, RAGEN's value for "numbers right, value wrong",
RAGEN-AI/RAGEN ``ragen/env/countdown/``).  Anything else (unparseable text, a disallowed
operator, missing or foreign numbers, a division by zero) is an invalid action:
``invalid_action_reward``, state and observation unchanged (the reason is
``info["invalid_reason"]``), and the agent may answer again until ``max_steps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...config import ConfigError
from ...core import TextEnv, Transition, join_lines
from ...seeding import sample_instance
from .checker import AnswerStatus, CheckResult, check_answer, format_value
from .instances import DataError, Instance, SplitData, generate_attempt, load_split, random_tree
from .solver import MAX_SOLVER_NUMBERS, Tree, render, solve

#: Generation attempts before :class:`~ragen_envs.seeding.GenerationError` (a config
#: whose ranges admit almost no instance); see the spec page for the measured rate.
MAX_ATTEMPTS = 1000


class CountdownEnv(TextEnv):
    """Countdown arithmetic puzzle; the action is one arithmetic expression.

    Config (``ragen_envs/envs/countdown/config.schema.json``): ``split``, ``max_steps``
    (3), ``invalid_action_reward`` (-0.1), ``count_range`` ([3, 4]),
    ``number_range`` ([1, 100]), ``target_range`` ([1, 100]), ``success_reward`` (1.0),
    ``format_reward`` (0.1), ``max_answer_chars`` (200), ``data_path`` (``None``:
    generate instances; a JSONL path: play its items).

    Reset options: ``{"nums": [...], "target": t}`` plays that instance (for tests
    and demos; it bypasses generation and the split); other keys are ignored.

    ``info`` after reset: ``numbers``, ``target`` and ``generation_attempts``
    (generated) or ``data_index`` (data).  After a well-formed answer: ``expression``
    (canonical text) and ``value`` (exact, ``"7/2"``).

    Raises:
        ConfigError: a range has min > max, or ``data_path`` cannot be used (the
            message names the field).
    """

    env_key = "countdown"

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        for name in ("count_range", "number_range", "target_range"):
            lo, hi = self.config[name]
            if lo > hi:
                raise ConfigError(self.env_key, name, f"minimum {lo} is greater than maximum {hi}")
        self._data: SplitData | None = None
        c = self.config  # read once: the config is fixed for the env's lifetime
        self._max_chars = int(c["max_answer_chars"])
        self._success_reward, self._format_reward = (
            float(c["success_reward"]),
            float(c["format_reward"]),
        )
        self._head_of: object = None  # the instance self._head was rendered for
        self._head = ""
        if self.config["data_path"] is not None:
            try:
                self._data = load_split(self.config["data_path"], self.config["split"])
            except DataError as exc:
                raise ConfigError(self.env_key, "data_path", str(exc)) from None
        self._seed: int | None = None
        self._instance = Instance((), 0)
        self._attempts: int | None = None
        self._known_solvable = True
        self._solution: str | None = None
        self._result: CheckResult | None = None

    # ------------------------------------------------------------------ reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # noqa: D102
        self._seed = seed  # data mode maps seed i to item i mod N
        return super().reset(seed=seed, options=options)

    def _reset(self, options: Mapping[str, Any]) -> None:
        self._result = None
        self._solution = None
        self._attempts = None
        self._known_solvable = True
        if "nums" in options or "target" in options:
            self._instance = _instance_from_options(options)
            self._solution = solve(self._instance.numbers, self._instance.target)
            self._known_solvable = self._solution is not None
        elif self._data is not None:
            n = len(self._data.items)
            index = self._seed % n if self._seed is not None else int(self.np_random.integers(n))
            self._instance = self._data.items[index]
        else:
            c = self.config
            self._instance, self._attempts = sample_instance(
                self.np_random,
                lambda rng: generate_attempt(
                    rng,
                    count_range=c["count_range"],
                    number_range=c["number_range"],
                    target_range=c["target_range"],
                    split=c["split"],
                ),
                max_attempts=MAX_ATTEMPTS,
            )

    def _reset_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "numbers": list(self._instance.numbers),
            "target": self._instance.target,
        }
        if self._attempts is not None:
            info["generation_attempts"] = self._attempts
        if self._instance.data_index is not None:
            info["data_index"] = self._instance.data_index
        return info

    # ------------------------------------------------------------------- step
    def _step(self, action: str) -> Transition:
        inst = self._instance
        result = check_answer(action, inst.numbers, inst.target, max_chars=self._max_chars)
        if result.status is AnswerStatus.INVALID:
            # The observation stays as it was (core contract); the reason is in info.
            return self.invalid(result.reason or "invalid answer")
        self._result = result
        assert result.value is not None and result.expression is not None
        value = format_value(result.value)
        info = {"expression": result.expression, "value": value}
        # The observation after the answer (what _observation() renders), built here with
        # the value text already at hand; TextEnv.step then needs no _observation() call.
        obs = self._answer_text(result, value)
        if result.status is AnswerStatus.CORRECT:
            return Transition(self._success_reward, True, success=True, info=info, observation=obs)
        return Transition(self._format_reward, True, success=False, info=info, observation=obs)

    def _answer_text(self, r: CheckResult, value: str) -> str:
        """The observation once answer ``r`` (value text ``value``) has been scored."""
        inst = self._instance
        if self._head_of is not inst:
            self._render_head()
        if r.status is AnswerStatus.CORRECT:
            return f"{self._head}\nCorrect: {r.expression} = {inst.target}."
        return f"{self._head}\nWrong: {r.expression} = {value}, not {inst.target}."

    def _render_head(self) -> None:
        inst = self._head_of = self._instance  # rendered once per instance
        self._head = f"Target: {inst.target} | Numbers: [{', '.join(str(n) for n in inst.numbers)}]"

    def _observation(self) -> str:
        if self._head_of is not self._instance:
            self._render_head()
        r = self._result
        if r is None:
            return self._head
        assert r.value is not None
        return self._answer_text(r, format_value(r.value))

    @property
    def instruction(self) -> str:
        c = self.config
        return join_lines(
            [
                "You are playing Countdown: combine the given numbers with +, -, * and / so that"
                " the result equals the target.",
                "Rules: use every given number exactly once (a number listed twice must be used twice);"
                " use only the binary operators + - * / and parentheses; write whole numbers only"
                " (no other numbers, no decimals, no unary minus, no ** or //). Division is exact:"
                " 7/2 is 3.5, not 3.",
                "Answer with one expression, optionally followed by '= <target>'. Multiplication may"
                " also be written × and division ÷.",
                f"A correct expression scores {c['success_reward']:g}. An expression that uses exactly"
                f" the given numbers but misses the target scores {c['format_reward']:g} and ends the"
                f" game. A malformed answer scores {c['invalid_action_reward']:g} and you may answer"
                f" again (at most {c['max_steps']} answers in all).",
                "Example: for 'Target: 24 | Numbers: [3, 8, 1, 2]' answer <answer>(8 - 2) * (3 + 1)</answer>.",
            ]
        )

    # ---------------------------------------------------------- baselines
    def oracle_actions(self) -> list[str]:
        """The exhaustive solver's expression (:func:`.solver.solve`).

        On an unsolvable instance (only possible through reset options) it returns a
        well-formed wrong expression, which earns the best return available there.
        """
        if self.status.is_terminal:
            return []
        if self._solution is None:
            self._solution = solve(self._instance.numbers, self._instance.target)
        if self._solution is None:
            return [render(_left_fold(self._instance.numbers))]
        return [self._solution]

    def optimal_return(self) -> float:
        """``success_reward`` when the instance is solvable, else ``format_reward``.

        Solvability of generated instances holds by construction (the generator's
        witness) and of data items by the check at load, independently of the oracle;
        only an instance given through reset options is decided by the solver.
        """
        c = self.config
        return float(c["success_reward"] if self._known_solvable else c["format_reward"])

    def sample_action(self, rng: np.random.Generator) -> str:
        """A uniformly random expression tree over all the numbers (the random baseline).

        Pairs and operators are drawn as in generation, so the answer is always
        well-formed; it is invalid only when it divides by zero.
        """
        numbers = self._instance.numbers
        if not numbers:
            return "0"
        _, tree = random_tree(numbers, rng.random(3 * (len(numbers) - 1)))
        return render(tree)

    # ------------------------------------------------------------- read-only
    @property
    def numbers(self) -> tuple[int, ...]:
        """The current instance's numbers (observation order)."""
        return self._instance.numbers

    @property
    def target(self) -> int:
        """The current instance's target."""
        return self._instance.target

    @property
    def witness(self) -> str | None:
        """An expression known to solve the instance (generator tree or load-time solver), if any."""
        return self._instance.witness


def _left_fold(numbers: tuple[int, ...]) -> Tree:
    tree: Tree = numbers[0]
    for n in numbers[1:]:
        tree = ("+", tree, n)
    return tree


def _instance_from_options(options: Mapping[str, Any]) -> Instance:
    nums, target = options.get("nums"), options.get("target")
    if not (
        isinstance(nums, (list, tuple))
        and 1 <= len(nums) <= MAX_SOLVER_NUMBERS
        and all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and 0 <= n <= 10**9
            for n in nums
        )
    ):
        raise ValueError(
            f"options['nums'] must be 1 to {MAX_SOLVER_NUMBERS} integers in [0, 1e9], got {nums!r}"
        )
    if (
        not isinstance(target, (int, np.integer))
        or isinstance(target, bool)
        or not 0 <= target <= 10**9
    ):
        raise ValueError(f"options['target'] must be an integer in [0, 1e9], got {target!r}")
    return Instance(tuple(int(n) for n in nums), int(target))
