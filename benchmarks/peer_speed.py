"""Our environments against their peers, measured in the same run (issue 21's rows).

Run::

    python benchmarks/peer_speed.py                 # every row, 5 repetitions, medians
    python benchmarks/peer_speed.py --rows bandit_step sudoku_reset --reps 7
    python benchmarks/peer_speed.py --markdown      # the table of benchmarks/README.md

Each row times one operation (an env step or reset) of ours and of each reference.
Repetition ``r`` starts a fresh subprocess per side (so no side warms the other's
caches) and, once all are set up, has them time ``--batches`` batches in lockstep:
batch ``b`` of every side in turn (ABBA order), so a change of the shared machine's load
weighs on every side alike (:func:`compare`).  A batch is ``n`` operations
(:data:`N_STEP` steps or :data:`N_RESET` resets) with ``time.perf_counter`` (or, with
``--clock cpu``, the worker's ``time.thread_time``) around the whole batch (per-call
timer overhead is amortised; setting a batch up — resets, action plans — is outside the
timed region).  A side's figure per repetition is the median of
its batches; the table gives the median over repetitions and the ratio
``peer time / our time`` (higher is better for us; 2.0 = twice as fast) with the range
of the per-repetition ratios.  ``--before DIR`` adds ours from checkout ``DIR`` as one
more reference (the speed-up of a change, in the same run).

References (never copied code; see ``benchmarks/README.md`` for the full list):

* **installed peers** — reasoning-gym (``reasoning_gym.games.mini_sudoku``), GEM
  (``gem-llm``: ``gem.envs.game_env.sudoku`` / ``.sokoban``) and gym-sokoban (the
  physics RAGEN's Sokoban inherits), imported at run time from the interpreter given by
  ``--peer-python`` (default: ``$RAGEN_PEER_PYTHON``, else ``.peer-venv/bin/python``
  when it exists, else this interpreter).  A peer that does not import there is skipped
  with the reason printed.  Set one up with
  ``python -m venv .peer-venv && .peer-venv/bin/pip install reasoning-gym==0.1.25 numpy gym-sokoban==0.0.6 && .peer-venv/bin/pip install --no-deps gem-llm==0.1.0``.
* **RAGEN, its own source** (issue 31): RAGEN is not on PyPI; the env files the rows
  need (:data:`RAGEN_FILES`) are taken from a RAGEN checkout at :data:`RAGEN_COMMIT`
  into the git-ignored ``.peer-ragen/`` (``python benchmarks/peer_speed.py
  --vendor-ragen PATH_TO_RAGEN_CHECKOUT``) and imported from there, unchanged, by the
  peer interpreter (they need ``gymnasium``, ``omegaconf``, ``gym-sokoban``, ``datasets``
  there).  No RAGEN code is in this repository; a row is skipped with the reason when
  ``.peer-ragen`` is missing or holds another commit.
* **RAGEN, re-stated** (the older rows, kept as their own rows): *re-statements of its
  per-call work* written here from reading RAGEN at commit 5eb79b8 (RAGEN-AI/RAGEN),
  each described at its function below.

``RAGEN_OURS_ROOT=/path/to/other/checkout`` measures that checkout's ``ragen_envs`` as
"ours" (e.g. the commit before a speed-up, ``git archive <commit> | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: One operation's batch: ``prepare(n)`` builds the state for ``n`` operations (not
#: timed) and returns ``(run, count)``; ``run()`` performs ``count`` operations (timed).
Prepare = Callable[[int], tuple[Callable[[], Any], int]]


class PeerMissing(RuntimeError):
    """A peer package does not import in this interpreter (the row is skipped)."""


# ============================================================== ours (ragen_envs)
def _our_env(env_id: str) -> Any:
    root = os.environ.get("RAGEN_OURS_ROOT") or str(ROOT)  # another checkout: before/after a change
    if sys.path[0] != root:
        sys.path.insert(0, root)
    import ragen_envs

    return ragen_envs.make(env_id).unwrapped


def _replay(runs: list[tuple[Callable[[Any], Any], list[Any]]]) -> Callable[[], None]:
    """The timed part of a step batch: every episode's ``step`` over its fixed actions.

    Flattened to one ``(step, action)`` pair per call, in episode order, so every side
    of every step row pays the same loop per call: one iteration, one call (RAGEN's
    Bandit, whose episodes are one step, is timed through this too).
    """
    pairs = [(step, a) for step, actions in runs for a in actions]

    def run() -> None:
        for step, a in pairs:
            step(a)

    return run


def _per_seed(call: Callable[[int], Any], *, scattered: bool = False) -> Prepare:
    """A batch of ``call(k)`` over fresh seeds ``k`` (a reset, a data-set item, ...):
    ``0, 1, 2, ...``, or with ``scattered`` seeds out of sequence (even numbers below
    ``2**32`` from ``random.Random(0)``, the same list on every side)."""
    if scattered:
        import random

        rnd = random.Random(0)
        seeds = iter(lambda: 2 * rnd.randrange(2**31), None)
    else:
        seeds = iter(range(10**9))

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        ks = [next(seeds) for _ in range(n)]

        def run() -> None:
            for k in ks:
                call(k)

        return run, n

    return prepare


def ours_reset(env_id: str, *, scattered: bool = False) -> Prepare:
    """``env.reset(seed=k)`` with a new seed every call (instance generation included);
    ``scattered``: seeds out of sequence (:func:`_per_seed`)."""
    reset = _our_env(env_id).reset
    return _per_seed(lambda k: reset(seed=k), scattered=scattered)


def ours_steps(env_id: str, *, per_episode: int, policy: str = "oracle") -> Prepare:
    """``env.step(action)`` with valid actions, episodes of at most ``per_episode`` steps.

    ``prepare`` resets envs (a pool of copies, kept across batches) with fresh seeds and
    plays each episode once to fix its actions (the oracle's plan, or uniform random
    action names), then resets each env again with the same seed; the timed run replays
    those actions, so every timed call is a legal step of a live episode.
    """
    import numpy as np

    pool: list[Any] = []
    seeds = iter(range(10**9))
    rng = np.random.default_rng(0)

    def episode(env: Any) -> list[str]:
        seed = next(seeds)
        env.reset(seed=seed)
        if (
            per_episode == 1 and policy == "oracle"
        ):  # one step from the start: no need to play it first
            return list(env.oracle_actions())[:1]
        actions: list[str] = []
        plan: list[str] = []
        while len(actions) < per_episode:
            if policy == "oracle" and not plan:
                plan = list(env.oracle_actions())
            a = plan.pop(0) if plan else env.sample_action(rng)
            _, _, te, tr, info = env.step(a)
            assert info["action_is_valid"], (env_id, a, info)
            actions.append(a)
            if te or tr:
                break
        env.reset(seed=seed)
        return actions

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        runs: list[tuple[Callable[[str], Any], list[str]]] = []
        total = 0
        while total < n:
            if len(runs) == len(pool):
                pool.append(
                    _our_env(env_id)
                )  # made as users make them (deepcopies are slower to step)
            env = pool[len(runs)]
            actions = episode(env)
            runs.append((env.step, actions))
            total += len(actions)

        return _replay(runs), total

    return prepare


# ================================================================ installed peers
def _peer_import(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerMissing(f"{module} does not import here ({exc})") from None


def _cache_rooms(module: Any, keep: int = 8) -> None:
    """Make ``module.generate_room`` (a peer's Sokoban room generator) return copies of
    its first ``keep`` rooms in turn.

    Only the *step* of these peers is timed; their generators take from milliseconds to
    minutes per 8x8 room, which would make setting a batch up take longer than the
    measurement.  The env objects are still built by their own constructors.
    """
    original = module.generate_room
    rooms: list[Any] = []
    turn = iter(range(10**12))

    def cached(*args: Any, **kwargs: Any) -> Any:
        if len(rooms) < keep:
            rooms.append(original(*args, **kwargs))
            return copy.deepcopy(rooms[-1])
        return copy.deepcopy(rooms[next(turn) % keep])

    module.generate_room = cached


def rg_mini_sudoku_reset(empty: int) -> Prepare:
    """reasoning-gym ``MiniSudokuDataset[k]`` with ``min_empty = max_empty = empty``
    (one puzzle: solved board, uniqueness-checked removals, question text)."""
    mod = _peer_import("reasoning_gym.games.mini_sudoku")
    ds = mod.MiniSudokuDataset(
        mod.MiniSudokuConfig(min_empty=empty, max_empty=empty, seed=0, size=10**9)
    )
    return _per_seed(ds.__getitem__)


def gem_sudoku_reset(clues: int, scale: int) -> Prepare:
    """GEM ``SudokuEnv(clues, scale).reset(seed=k)`` (``game:Sudoku-v0-easy`` is 4x4, 10 clues)."""
    mod = _peer_import("gem.envs.game_env.sudoku")
    reset = mod.SudokuEnv(clues=clues, max_turns=15, scale=scale).reset
    return _per_seed(lambda k: reset(seed=k))


def gem_sokoban_steps(dim: int, boxes: int, max_turns: int) -> Prepare:
    """GEM ``SokobanEnv.step("\\\\boxed{dir}")`` with uniform random directions, fewer
    steps per episode than ``max_turns`` (GEM's easy: 6x6, 2 boxes, 20 turns; hard: 8x8,
    4 boxes, 50 turns).  Each step renders the board into ``info["suffix"]``."""
    mod = _peer_import("gem.envs.game_env.sokoban")
    import random

    _cache_rooms(_peer_import("gem.envs.game_env.sokoban.sokoban"))

    rnd = random.Random(0)

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        runs = []
        total = 0
        while total < n:
            env = mod.SokobanEnv(dim_room=(dim, dim), num_boxes=boxes, max_turns=max_turns)
            k = max_turns - 1
            runs.append(
                (
                    env.step,
                    [f"\\boxed{{{rnd.choice(['up', 'down', 'left', 'right'])}}}" for _ in range(k)],
                )
            )
            total += k

        return _replay(runs), total

    return prepare


def ragen_sokoban_steps(dim: int, boxes: int, per_episode: int) -> Prepare:
    """RAGEN's ``SokobanEnv.step`` (``ragen/env/sokoban/env.py``) on the real gym-sokoban
    physics it inherits, with the RGB frame stubbed out.

    Per step, as RAGEN does: keep the previous player position; call gym-sokoban's
    ``SokobanEnv.step(action)`` (push/move on the numpy room, reward, done check; its
    ``render(mode="rgb_array")`` returns ``None`` here instead of drawing the frame);
    render the text grid (``np.where`` marking the player on a target, then one
    ``GRID_LOOKUP`` symbol per cell joined by rows); compare positions with
    ``np.array_equal``; build the 3-key info dict.  Actions are uniform over 1..4.
    """
    mod = _peer_import("gym_sokoban.envs.sokoban_env")
    import numpy as np

    _cache_rooms(mod)

    lookup = {0: "#", 1: "_", 2: "O", 3: "\u221a", 4: "X", 5: "P", 6: "S"}

    class Stubbed(mod.SokobanEnv):
        def render(self, mode: str = "text", close: Any = None, scale: int = 1) -> Any:
            if mode != "text":
                return None  # the RGB frame, stubbed out
            room = np.where((self.room_state == 5) & (self.room_fixed == 2), 6, self.room_state)
            return "\n".join("".join(lookup.get(c, "?") for c in row) for row in room.tolist())

        def text_step(self, action: int) -> Any:
            previous = self.player_position
            _, reward, done, _ = mod.SokobanEnv.step(self, action)
            obs = self.render()
            info = {
                "action_is_effective": not np.array_equal(previous, self.player_position),
                "action_is_valid": True,
                "success": self.boxes_on_target == self.num_boxes,
            }
            return obs, reward, done, info

    rng = np.random.default_rng(0)

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        runs = []
        total = 0
        while total < n:
            while True:
                try:
                    env = Stubbed(dim_room=(dim, dim), max_steps=100, num_boxes=boxes)
                    break
                except (
                    RuntimeError,
                    RuntimeWarning,
                ):  # gym-sokoban's generator gives up; RAGEN retries
                    continue
            runs.append((env.text_step, [int(a) for a in rng.integers(1, 5, size=per_episode)]))
            total += per_episode

        return _replay(runs), total

    return prepare


# ================================================================ RAGEN's source
#: The RAGEN-AI/RAGEN commit whose env code the "RAGEN (source)" sides run (its tree on
#: 2026-12-04; the re-statements below were written from the same commit).
RAGEN_COMMIT = "5eb79b82cecc31db5662ba3c96b752405692410b"
#: The files taken from that commit (MIT licence, kept with them): the env base class,
#: ``all_seed`` and the four envs the rows use.
RAGEN_FILES = (
    "LICENSE",
    "ragen/utils.py",
    "ragen/env/base.py",
    *(
        f"ragen/env/{env}/{f}"
        for env in ("bandit", "frozen_lake", "sokoban", "countdown")
        for f in ("__init__.py", "config.py", "env.py")
    ),
    "ragen/env/frozen_lake/utils.py",
    "ragen/env/sokoban/utils.py",
)
RAGEN_DIR = ROOT / ".peer-ragen"


def vendor_ragen(checkout: str, dest: Path = RAGEN_DIR) -> Path:
    """Copy :data:`RAGEN_FILES` at :data:`RAGEN_COMMIT` from the RAGEN git repository
    ``checkout`` (a clone of https://github.com/RAGEN-AI/RAGEN, or its bare mirror) into
    ``dest``, recording the commit in ``dest/COMMIT``.

    Raises:
        SystemExit: ``checkout`` is not a git repository holding the commit.
    """
    import io
    import shutil
    import tarfile

    try:
        blob = subprocess.run(
            ["git", "-C", checkout, "archive", "--format=tar", RAGEN_COMMIT, *RAGEN_FILES],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        raise SystemExit(
            f"--vendor-ragen: cannot read {RAGEN_COMMIT[:7]} from {checkout}: "
            f"{err.decode(errors='replace').strip() or exc}"
        ) from None
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    (dest / "COMMIT").write_text(RAGEN_COMMIT + "\n")
    return dest


def _ragen_source(module: str) -> Any:
    """Import ``module`` (e.g. ``"ragen.env.bandit.env"``) from ``.peer-ragen``.

    ``ragen`` and ``ragen.env`` are registered as bare packages over the vendored
    directories, so ``ragen/env/__init__.py`` (which imports every RAGEN env, WebShop
    and MetaMathQA included) is not needed; the env modules themselves run unchanged.

    Raises:
        PeerMissing: ``.peer-ragen`` is absent or holds another commit, or a module the
            env needs does not import in this interpreter.
    """
    import importlib
    import types

    root = Path(os.environ.get("RAGEN_PEER_SOURCE") or RAGEN_DIR)
    stamp = root / "COMMIT"
    got = stamp.read_text().strip() if stamp.exists() else None
    if got != RAGEN_COMMIT:
        raise PeerMissing(
            f"RAGEN's source is not in {root} at {RAGEN_COMMIT[:7]} (found {got}); run "
            "`python benchmarks/peer_speed.py --vendor-ragen PATH_TO_RAGEN_CHECKOUT`"
        )
    for name in ("ragen", "ragen.env"):
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root.joinpath(*name.split(".")))]
            sys.modules[name] = pkg
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerMissing(f"RAGEN's {module} does not import here ({exc})") from None


def ragen_src_bandit_reset(*, scattered: bool = False) -> Prepare:
    """RAGEN's own ``BanditEnv.reset(seed)`` (``ragen/env/bandit/env.py``, default
    config): ``gym.Env.reset(seed)``, ``_randomize_arms`` (one ``np_random.random()``,
    three dicts), the ``INIT_PROMPT`` format; ``scattered`` as :func:`_per_seed`."""
    env = _ragen_source("ragen.env.bandit.env").BanditEnv()
    return _per_seed(lambda k: env.reset(seed=k), scattered=scattered)


def ragen_src_bandit_steps() -> Prepare:
    """RAGEN's own ``BanditEnv.step(int)``, one step per freshly seeded env, always the
    high arm (as :func:`ragen_bandit_steps` with ``from_text=False``)."""
    cls = _ragen_source("ragen.env.bandit.env").BanditEnv
    seeds = iter(range(10**9))
    pool: list[Any] = []

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        while len(pool) < n:
            pool.append(cls())
        runs = []
        for e in pool[:n]:
            e.reset(seed=next(seeds))
            runs.append((e.step, [e.NAME_TO_ARM_IDX[e.hi_arm_name]]))
        return _replay(runs), n

    return prepare


def ragen_src_frozenlake_reset(size: int, p: float) -> Prepare:
    """RAGEN's own ``FrozenLakeEnv.reset(seed)`` (``ragen/env/frozen_lake/env.py``) with
    ``FrozenLakeEnvConfig(size=size, p=p)``: ``all_seed``, ``generate_random_map``,
    re-running ``__init__`` (Gymnasium's ``FrozenLakeEnv`` tables), the text render."""
    mod = _ragen_source("ragen.env.frozen_lake.env")
    env = mod.FrozenLakeEnv(mod.FrozenLakeEnvConfig(size=size, p=p))
    return _per_seed(lambda k: env.reset(seed=k))


def ragen_src_sokoban_steps(dim: int, boxes: int, per_episode: int) -> Prepare:
    """RAGEN's own ``SokobanEnv.step(int)`` (``ragen/env/sokoban/env.py``) on gym-sokoban,
    with the RGB frame stubbed out as in :func:`ragen_sokoban_steps` (gym-sokoban's step
    draws the frame through RAGEN's ``render("rgb_array")`` -> ``get_image``, which
    returns ``None`` here).  Rooms come from RAGEN's own ``reset(seed)`` (not timed);
    actions uniform over 1..4."""
    mod = _ragen_source("ragen.env.sokoban.env")
    import numpy as np

    class Stubbed(mod.SokobanEnv):
        def get_image(self, mode: str, scale: int = 1) -> Any:
            return None

    config = mod.SokobanEnvConfig(dim_room=(dim, dim), num_boxes=boxes, max_steps=100)
    rng = np.random.default_rng(0)
    seeds = iter(range(10**9))
    pool: list[Any] = []

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        runs = []
        total = 0
        while total < n:
            if len(runs) == len(pool):
                pool.append(Stubbed(config))
            env = pool[len(runs)]
            env.reset(seed=next(seeds))
            runs.append((env.step, [int(a) for a in rng.integers(1, 5, size=per_episode)]))
            total += per_episode
        return _replay(runs), total

    return prepare


def ragen_src_countdown_steps() -> Prepare:
    """RAGEN's own ``CountdownEnv.step(str)`` (``ragen/env/countdown/env.py``) over a
    real ``datasets`` table of our Countdown-v0 instances (RAGEN reads its parquet the
    same way; the env is built without its file, ``data`` set to the table), each env
    reset with its seed (index = seed) and scoring our oracle's answer."""
    mod = _ragen_source("ragen.env.countdown.env")
    datasets = _peer_import("datasets")
    proto = _our_env("ragen/Countdown-v0")
    rows, answers = [], []
    for k in range(4096):
        proto.reset(seed=k)
        rows.append({"target": proto._instance.target, "nums": list(proto._instance.numbers)})
        answers.append(proto.oracle_actions()[0])
    table = datasets.Dataset.from_list(rows)
    seeds = iter(range(10**9))
    pool: list[Any] = []

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        while len(pool) < n:
            env = mod.CountdownEnv.__new__(mod.CountdownEnv)
            env.config, env.data, env.index = mod.CountdownEnvConfig(), table, None
            env.render_cache, env.render_mode = None, "text"
            pool.append(env)
        runs = []
        for env in pool[:n]:
            k = next(seeds) % len(rows)
            env.reset(seed=k)
            runs.append((env.step, [answers[k]]))
        return _replay(runs), n

    return prepare


# ============================================================ RAGEN re-statements
def _ragen_bandit_class(*, inlined: bool) -> type:
    """RAGEN's ``BanditEnv`` (``ragen/env/bandit/env.py``, ``config.py``) re-stated.

    As RAGEN has it: a ``BanditEnvConfig`` dataclass (lo "phoenix" 0.1, hi "dragon" 1.0
    with probability 0.25 else 0.0, actions start at 1, ``action_lookup``) held by the
    env, which subclasses an abstract ``BaseDiscreteActionEnv`` and ``gym.Env``.  ``reset``
    seeds ``gym.Env``, draws ``np_random.random() < 0.5`` for which of actions 1 and 2 is
    the high arm, builds ``ACTION_LOOKUP`` / ``ARM_IDX_TO_NAME`` / ``NAME_TO_ARM_IDX`` and
    formats the prompt.  ``step(action: int)``: ``assert`` the action is in
    ``ACTION_LOOKUP``; ``compute_reward`` looks the arm up and calls ``_lo_arm_reward``
    (the config's score) or ``_hi_arm_reward`` (``np_random.random()`` against the
    config's probability, then its high or low score); look the arm up again; format
    ``f"{name}: {reward} points"``, store it as the render cache; return
    ``(obs, reward, True, info)`` with a 3-key info dict.

    ``inlined=True`` folds ``compute_reward`` / ``_hi_arm_reward`` and the config reads
    into ``step`` (names and payoffs as env attributes): the same draws and results with
    less work per call than RAGEN's code, a stricter reference.
    """
    import abc
    from dataclasses import dataclass as _dataclass

    import gymnasium as gym

    @_dataclass
    class BanditEnvConfig:
        lo_arm_name: str = "phoenix"
        hi_arm_name: str = "dragon"
        action_space_start: int = 1
        lo_arm_score: float = 0.1
        hi_arm_loscore: float = 0.0
        hi_arm_hiscore: float = 1.0
        hi_arm_hiscore_prob: float = 0.25
        render_mode: str = "text"
        action_lookup: dict[int, str] | None = None

    class BaseEnv(abc.ABC):
        def __init__(self) -> None:
            pass

    class BaseDiscreteActionEnv(BaseEnv, abc.ABC):
        pass

    class Bandit(BaseDiscreteActionEnv, gym.Env):
        def __init__(self) -> None:
            BaseDiscreteActionEnv.__init__(self)
            self.config = BanditEnvConfig()
            self.ACTION_SPACE = gym.spaces.Discrete(2, start=self.config.action_space_start)
            self.lo_arm_name = self.config.lo_arm_name
            self.hi_arm_name = self.config.hi_arm_name
            self.render_cache: str | None = None
            self.render_mode = self.config.render_mode

        def reset(self, seed: int | None = None, mode: Any = None) -> str:  # type: ignore[override]
            gym.Env.reset(self, seed=seed)
            start = self.config.action_space_start
            lo, hi = self.lo_arm_name, self.hi_arm_name
            names = (lo, hi) if self.np_random.random() < 0.5 else (hi, lo)
            self.ACTION_LOOKUP = {start: names[0], start + 1: names[1]}
            self.config.action_lookup = self.ACTION_LOOKUP
            self.ARM_IDX_TO_NAME = self.ACTION_LOOKUP
            self.NAME_TO_ARM_IDX = {name: idx for idx, name in self.ACTION_LOOKUP.items()}
            self.render_cache = f"Two arms: {names[0]}, {names[1]}. Which do you pull?"
            return self.render_cache

        def _lo_arm_reward(self) -> float:
            return self.config.lo_arm_score

        def _hi_arm_reward(self) -> float:
            if self.np_random.random() < self.config.hi_arm_hiscore_prob:
                return self.config.hi_arm_hiscore
            return self.config.hi_arm_loscore

        def compute_reward(self, action: int) -> float:
            if self.ARM_IDX_TO_NAME[action] == self.lo_arm_name:
                return self._lo_arm_reward()
            return self._hi_arm_reward()

        def step(self, action: int) -> Any:  # type: ignore[override]
            assert action in self.ACTION_LOOKUP, f"Invalid action: {action}"
            reward = self.compute_reward(action)
            name = self.ARM_IDX_TO_NAME[action]
            obs = f"{name}: {reward} points"
            self.render_cache = obs
            return (
                obs,
                reward,
                True,
                {
                    "action_is_effective": True,
                    "action_is_valid": True,
                    "success": name == self.hi_arm_name,
                },
            )

        def get_all_actions(self) -> list[int]:
            return [self.ACTION_SPACE.start, self.ACTION_SPACE.start + 1]

    if not inlined:
        return Bandit

    class Inlined(Bandit):
        def reset(self, seed: int | None = None, mode: Any = None) -> str:  # type: ignore[override]
            out = super().reset(seed=seed)
            c = self.config
            self.lo_score, self.hi_prob, self.hi_score, self.lo_hi_score = (
                c.lo_arm_score,
                c.hi_arm_hiscore_prob,
                c.hi_arm_hiscore,
                c.hi_arm_loscore,
            )
            return out

        def step(self, action: int) -> Any:  # type: ignore[override]
            assert action in self.ACTION_LOOKUP, f"Invalid action: {action}"
            name = self.ARM_IDX_TO_NAME[action]
            if name == self.lo_arm_name:
                reward = self.lo_score
            else:
                reward = (
                    self.hi_score if self.np_random.random() < self.hi_prob else self.lo_hi_score
                )
            obs = f"{name}: {reward} points"
            self.render_cache = obs
            return (
                obs,
                reward,
                True,
                {
                    "action_is_effective": True,
                    "action_is_valid": True,
                    "success": name == self.hi_arm_name,
                },
            )

    return Inlined


def ragen_bandit_steps(*, from_text: bool, inlined: bool = False) -> Prepare:
    """Steps of RAGEN's Bandit (:func:`_ragen_bandit_class`), one per freshly seeded env.

    ``from_text=False``: ``env.step(int)`` alone.  ``from_text=True`` adds what RAGEN's
    env manager does per step to get that int from the model's text
    (``ragen/llm_agent/es_manager.py``: ``_extract_map_valid_actions`` reads the config's
    ``action_lookup``, builds the lower-cased reverse lookup and maps the lower-cased
    actions; ``_execute_actions`` steps them, accumulating reward and info) — the work
    our ``step(str)`` covers.  Always pulls the high ("risky") arm, as our oracle does
    under the default payoffs.
    """
    cls = _ragen_bandit_class(inlined=inlined)

    def text_step(env: Any, actions: list[str]) -> Any:
        lookup = getattr(env.config, "action_lookup", None)
        rev = {v.lower(): k for k, v in lookup.items()}
        actions = [a.lower() for a in actions]
        mapped = [rev[a] for a in actions if a in rev]
        acc, turn_info, executed = 0.0, {}, []
        for a in mapped:
            _, reward, done, info = env.step(a)
            acc += reward
            turn_info.update(info)
            executed.append(a)
            if done:
                break
        return acc, turn_info, executed

    seeds = iter(range(10**9))
    pool: list[Any] = []

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        while len(pool) < n:
            pool.append(cls())
        envs = []
        for e in pool[:n]:
            e.reset(seed=next(seeds))
            envs.append((e, e.NAME_TO_ARM_IDX[e.hi_arm_name]))
        if from_text:
            pairs = [(e, ["Dragon"]) for e, _ in envs]

            def run() -> None:
                for e, t in pairs:
                    text_step(e, t)

            return run, n
        return _replay([(e.step, [a]) for e, a in envs]), n

    return prepare


def ragen_countdown_scoring(*, datasets_row: bool = False) -> Prepare:
    """RAGEN's ``CountdownEnv.step`` (``ragen/env/countdown/env.py``): read the episode's
    row, as RAGEN does, from a Hugging Face ``datasets`` table (``self.data[self.index]``;
    ``datasets_row=True``, the real library) or, conservatively, from a plain dict; then
    ``check_format`` (``re.findall(r"\\d+")``, the sorted
    numbers equal the row's), ``check_correctness`` (``eval`` with no builtins, within
    1e-5 of the target), the reward, ``f"Your answer get {reward} points."`` and a 3-key
    info dict.  The rows and answers are our Countdown-v0 instances and their oracle
    expressions, so both sides score the same strings.
    """
    proto = _our_env("ragen/Countdown-v0")
    seeds = iter(range(10**9))

    def check_format(equation: str, nums: list[int]) -> bool:
        try:
            return sorted(int(x) for x in re.findall(r"\d+", equation)) == sorted(nums)
        except Exception:  # noqa: BLE001 - RAGEN's bare except
            return False

    def check_correctness(equation: str, target: int) -> bool:
        try:
            return abs(eval(equation, {"__builtins__": None}, {}) - target) < 1e-5  # noqa: S307 - the reference's own eval
        except Exception:  # noqa: BLE001
            return False

    def step(row: dict[str, Any], action: str) -> Any:
        if not check_format(action, row["nums"]):
            reward = 0.0
        elif not check_correctness(action, row["target"]):
            reward = 0.1
        else:
            reward = 1.0
        obs = f"Your answer get {reward} points."
        return (
            obs,
            reward,
            True,
            {"action_is_effective": reward > 0, "action_is_valid": True, "success": reward == 1},
        )

    if datasets_row:
        datasets = _peer_import("datasets")

    def prepare(n: int) -> tuple[Callable[[], Any], int]:
        rows, answers = [], []
        for _ in range(n):
            proto.reset(seed=next(seeds))
            inst = proto._instance
            rows.append({"target": inst.target, "nums": list(inst.numbers)})
            answers.append(proto.oracle_actions()[0])
        if datasets_row:
            table = datasets.Dataset.from_list(rows)
            items = list(enumerate(answers))

            def run() -> None:
                for i, a in items:
                    step(table[i], a)
        else:
            pairs = list(zip(rows, answers))

            def run() -> None:
                for row, a in pairs:
                    step(row, a)

        return run, n

    return prepare


def ragen_frozenlake_reset(size: int, p: float) -> Prepare:
    """RAGEN's ``FrozenLakeEnv.reset(seed)`` (``ragen/env/frozen_lake/env.py``, ``utils.py``)
    on Gymnasium's real ``FrozenLakeEnv``.

    Per reset, as RAGEN does: save and seed the global ``random`` / ``numpy.random``
    states (``all_seed``); generate a map (``seeding.np_random(seed)``; until valid:
    ``np_random.choice(["F", "H"], (size, size), p=[p, 1-p])``, random distinct start
    and goal, a depth-first reachability check); re-run ``__init__`` (Gymnasium's
    ``FrozenLakeEnv(desc=map, is_slippery=True)``); ``FrozenLakeEnv.reset(seed)``; render
    the text grid (``np.where`` S->F, mark the player, ``np.vectorize`` through the cell
    lookup, join rows); restore the global states.
    """
    import random

    import numpy as np
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
    from gymnasium.utils import seeding

    map_lookup = {b"P": 0, b"F": 1, b"H": 2, b"G": 3}
    grid_lookup = {0: "P", 1: "_", 2: "O", 3: "G", 4: "X", 5: "\u221a"}

    def valid(board: Any) -> bool:
        frontier, seen = [], set()
        sr, sc = np.where(np.array(board) == "S")
        frontier.append((sr[0], sc[0]))
        while frontier:
            r, c = frontier.pop()
            if (r, c) in seen:
                continue
            seen.add((r, c))
            for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
                rn, cn = r + dr, c + dc
                if 0 <= rn < size and 0 <= cn < size:
                    if board[rn][cn] == "G":
                        return True
                    if board[rn][cn] != "H":
                        frontier.append((rn, cn))
        return False

    def make_map(seed: int) -> list[str]:
        rng, _ = seeding.np_random(seed)
        while True:
            board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p])
            s = tuple(rng.integers(size, size=2))
            g = tuple(rng.integers(size, size=2))
            if s != g:
                board[s[0]][s[1]], board[g[0]][g[1]] = "S", "G"
                if valid(board):
                    return ["".join(row) for row in board]

    def render(env: Any) -> str:
        pos = (env.s // env.ncol, env.s % env.ncol)
        room = np.where(env.desc == b"S", b"F", env.desc.copy())
        room[pos] = b"P"
        room = np.vectorize(lambda x: map_lookup[x])(room)
        room[pos] = 4 if env.desc[pos] == b"H" else 5 if env.desc[pos] == b"G" else 0
        return "\n".join("".join(grid_lookup.get(c, "?") for c in row) for row in room)

    def reset(seed: int) -> str:
        state, np_state = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed)
            env = GymFrozenLake(desc=make_map(seed), is_slippery=True)
            env.reset(seed=seed)
            return render(env)
        finally:
            random.setstate(state)
            np.random.set_state(np_state)

    return _per_seed(reset)


# ===================================================================== the rows
@dataclass
class Side:
    label: str
    factory: Callable[[], Prepare]
    n: int
    peer: bool = False  # runs under the peer interpreter
    note: str = ""


@dataclass
class Row:
    key: str
    title: str
    ours: Side
    refs: list[Side] = field(default_factory=list)
    target: float = 1.0  # the ratio the issue asks for against every reference


#: Operations per timed batch: about one rollout batch of envs (a step batch touches
#: this many live episodes; far larger pools measure the CPU cache, not the env).
N_STEP = 256
N_RESET = 100

#: The RAGEN-source label suffix (the commit the sides run).
SRC = f"(source {RAGEN_COMMIT[:7]})"


def _ragen_restated_bandit_reset(*, scattered: bool = False) -> Prepare:
    """The re-stated RAGEN Bandit's ``reset(seed)`` (:func:`_ragen_bandit_class`)."""
    env = _ragen_bandit_class(inlined=False)()
    return _per_seed(lambda k: env.reset(seed=k), scattered=scattered)


ROWS: dict[str, Row] = {
    r.key: r
    for r in [
        Row(
            "bandit_reset",
            "Bandit reset (ragen/Bandit-v0)",
            Side("ours", lambda: ours_reset("ragen/Bandit-v0"), N_RESET),
            [
                Side(
                    f"RAGEN BanditEnv.reset(seed) {SRC}", ragen_src_bandit_reset, N_RESET, peer=True
                ),
                Side("RAGEN reset (re-stated)", _ragen_restated_bandit_reset, N_RESET),
            ],
            target=1.5,
        ),
        Row(
            "bandit_reset_scattered",
            "Bandit reset, seeds out of sequence (ragen/Bandit-v0)",
            Side("ours", lambda: ours_reset("ragen/Bandit-v0", scattered=True), N_RESET),
            [
                Side(
                    f"RAGEN BanditEnv.reset(seed) {SRC}",
                    lambda: ragen_src_bandit_reset(scattered=True),
                    N_RESET,
                    peer=True,
                ),
                Side(
                    "RAGEN reset (re-stated)",
                    lambda: _ragen_restated_bandit_reset(scattered=True),
                    N_RESET,
                ),
            ],
            target=1.5,
        ),
        Row(
            "bandit_step",
            "Bandit step (ragen/Bandit-v0)",
            Side("ours", lambda: ours_steps("ragen/Bandit-v0", per_episode=1), N_STEP),
            [
                Side(f"RAGEN BanditEnv.step(int) {SRC}", ragen_src_bandit_steps, N_STEP, peer=True),
                Side(
                    "RAGEN env.step(int) (re-stated)",
                    lambda: ragen_bandit_steps(from_text=False),
                    N_STEP,
                ),
                Side(
                    "RAGEN env.step(int), calls inlined (stricter)",
                    lambda: ragen_bandit_steps(from_text=False, inlined=True),
                    N_STEP,
                ),
                Side(
                    "RAGEN text->int map + step (re-stated)",
                    lambda: ragen_bandit_steps(from_text=True),
                    N_STEP,
                ),
            ],
            target=1.0,
        ),
        Row(
            "sudoku_reset",
            "Sudoku 4x4 reset, 6 empty (ragen/Sudoku-v0)",
            Side("ours", lambda: ours_reset("ragen/Sudoku-v0"), N_RESET),
            [
                Side(
                    "reasoning-gym mini_sudoku (installed)",
                    lambda: rg_mini_sudoku_reset(6),
                    1000,
                    peer=True,
                ),
                Side(
                    "GEM Sudoku 4x4, 10 clues (installed)",
                    lambda: gem_sudoku_reset(10, 4),
                    1000,
                    peer=True,
                ),
            ],
            target=5.0,
        ),
        Row(
            "countdown_step",
            "Countdown scoring an instance (ragen/Countdown-v0 step)",
            Side("ours", lambda: ours_steps("ragen/Countdown-v0", per_episode=1), N_STEP),
            [
                Side(
                    f"RAGEN CountdownEnv.step, datasets row {SRC}",
                    ragen_src_countdown_steps,
                    N_STEP,
                ),
                Side(
                    "RAGEN compute_reward + step, dict row (re-stated)",
                    ragen_countdown_scoring,
                    N_STEP,
                ),
                Side(
                    "RAGEN compute_reward + step, datasets row (re-stated, real datasets)",
                    lambda: ragen_countdown_scoring(datasets_row=True),
                    N_STEP,
                ),
            ],
            target=1.0,
        ),
        Row(
            "sokoban_step_6",
            "Sokoban step 6x6, text (ragen/Sokoban-v0)",
            Side(
                "ours",
                lambda: ours_steps("ragen/Sokoban-v0", per_episode=19, policy="random"),
                N_STEP,
            ),
            [
                Side(
                    f"RAGEN SokobanEnv.step, RGB stubbed {SRC}",
                    lambda: ragen_src_sokoban_steps(6, 1, 19),
                    N_STEP,
                    peer=True,
                ),
                Side(
                    "GEM Sokoban 6x6 easy (installed)",
                    lambda: gem_sokoban_steps(6, 2, 20),
                    10000,
                    peer=True,
                ),
                Side(
                    "RAGEN on gym-sokoban, RGB stubbed (installed physics)",
                    lambda: ragen_sokoban_steps(6, 1, 19),
                    N_STEP,
                    peer=True,
                ),
            ],
            target=3.0,
        ),
        Row(
            "sokoban_step_8",
            "Sokoban step 8x8, text (ragen/Sokoban-Large-v0)",
            Side(
                "ours",
                lambda: ours_steps("ragen/Sokoban-Large-v0", per_episode=49, policy="random"),
                N_STEP,
            ),
            [
                Side(
                    "GEM Sokoban 8x8 hard (installed)",
                    lambda: gem_sokoban_steps(8, 4, 50),
                    10000,
                    peer=True,
                )
            ],
            target=3.0,
        ),
        Row(
            "frozenlake_reset_8",
            "FrozenLake reset 8x8 (ragen/FrozenLake-8x8-v0)",
            Side("ours", lambda: ours_reset("ragen/FrozenLake-8x8-v0"), N_RESET),
            [
                Side(
                    f"RAGEN FrozenLakeEnv.reset(seed) {SRC}",
                    lambda: ragen_src_frozenlake_reset(8, 0.8),
                    N_RESET,
                    peer=True,
                ),
                Side(
                    "RAGEN reset on Gymnasium FrozenLake (re-stated)",
                    lambda: ragen_frozenlake_reset(8, 0.8),
                    N_RESET,
                ),
            ],
            target=5.0,
        ),
    ]
}


# ================================================================= measurement
def _side(row_key: str, side_index: int) -> Side:
    row = ROWS[row_key]
    return (
        row.ours if side_index < 0 else row.refs[side_index]
    )  # BEFORE (-2): ours, from RAGEN_OURS_ROOT


def _timed_batch(prepare: Prepare, n: int) -> float:
    """Seconds per operation of one batch (set up untimed, ``gc.collect()`` first)."""
    import gc

    run, count = prepare(n)
    gc.collect()
    gc.disable()
    # --clock cpu: the worker's CPU time (thread_time), blind to the time the shared
    # machine's scheduler gives other processes; wall (default): perf_counter.
    clock = time.thread_time if os.environ.get("RAGEN_PEER_CLOCK") == "cpu" else time.perf_counter
    t0 = clock()
    run()
    dt = clock() - t0
    gc.enable()
    return dt / count


def measure(row_key: str, side_index: int, batches: int) -> dict[str, Any]:
    """Seconds per operation of one side of one row (median over ``batches``), in this process."""
    side = _side(row_key, side_index)
    try:
        prepare = side.factory()
    except PeerMissing as exc:
        return {"skipped": str(exc)}
    prepare(side.n)[0]()  # warm-up
    return {"seconds": statistics.median(_timed_batch(prepare, side.n) for _ in range(batches))}


def serve(row_key: str, side_index: int) -> int:
    """A worker of :func:`compare`: set the side up, say ``ready``, then time one batch per
    ``go`` line on stdin (one JSON line each on stdout) until ``stop`` or end of input."""
    side = _side(row_key, side_index)
    try:
        prepare = side.factory()
        prepare(side.n)[0]()  # warm-up
    except PeerMissing as exc:
        print(json.dumps({"skipped": str(exc)}), flush=True)
        return 0
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        print(json.dumps({"seconds": _timed_batch(prepare, side.n)}), flush=True)
    return 0


def _peer_python(arg: str | None) -> str:
    if arg:
        return arg
    if os.environ.get("RAGEN_PEER_PYTHON"):
        return os.environ["RAGEN_PEER_PYTHON"]
    venv = ROOT / ".peer-venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


class _Worker:
    """One side's :func:`serve` process, driven line by line."""

    def __init__(self, python: str, row: str, side: int, ours_root: str | None) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        if ours_root is not None:
            env["RAGEN_OURS_ROOT"] = ours_root
        import tempfile

        self.err = tempfile.TemporaryFile(
            mode="w+"
        )  # a file, not a pipe: a chatty peer never blocks
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--serve", row, str(side)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            env=env,
        )

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.err.seek(0)
            err = self.err.read().strip()
            return {
                "skipped": f"worker failed: {err.splitlines()[-1] if err else self.proc.returncode}"
            }
        return json.loads(line)

    def batch(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=60)
        self.err.close()


#: Side index of "ours, another checkout" (``--before``): ours' factory, run by a worker
#: whose ``RAGEN_OURS_ROOT`` is that checkout.
BEFORE = -2


def compare(
    rows: list[str], reps: int, batches: int, peer_python: str, before: str | None = None
) -> list[dict[str, Any]]:
    """Time ours and each reference in lockstep, ``reps`` times; medians.

    Repetition ``r`` starts one fresh process per side, waits until every one is set up
    (imports, pools, warm-up batch), then has them time their batches in turn: batch
    ``b`` of every side, in the row's order for even ``b`` and reversed for odd ``b``
    (ABBA), then batch ``b + 1``.  One process times while the others wait on a pipe,
    so the sides' batches alternate within milliseconds and a change of the shared
    machine's load weighs on every side alike.  A side's figure for a repetition is the
    median of its batches; the table gives the median over repetitions, and the ratio
    per repetition (``peer / ours`` of that repetition's figures) gives the range.
    ``before`` (a checkout's root) adds ours as that checkout has it as one more
    reference: the ratio against it is the speed-up.
    """
    results = []
    for key in rows:
        row = ROWS[key]
        sides = [(-1, row.ours)] + list(enumerate(row.refs))
        if before is not None:
            sides.append((BEFORE, Side(f"ours at {before}", row.ours.factory, row.ours.n)))
        samples: dict[int, list[float]] = {i: [] for i, _ in sides}
        skipped: dict[int, str] = {}
        for _ in range(reps):
            workers = {
                i: _Worker(
                    peer_python if side.peer else sys.executable,
                    key,
                    i,
                    before if i == BEFORE else None,
                )
                for i, side in sides
                if i not in skipped
            }
            try:
                for i, w in list(workers.items()):
                    r = w.read()
                    if "skipped" in r:
                        skipped[i] = r["skipped"]
                        w.close()
                        del workers[i]
                if -1 not in workers:
                    raise RuntimeError(f"{row.title}: ours did not start: {skipped.get(-1)}")
                order = list(workers)
                per_batch: dict[int, list[float]] = {i: [] for i in order}
                for b in range(batches):
                    for i in order if b % 2 == 0 else order[::-1]:
                        r = workers[i].batch()
                        if "seconds" not in r:
                            raise RuntimeError(
                                f"{row.title}, {_side(key, i).label}: {r.get('skipped', r)}"
                            )
                        per_batch[i].append(r["seconds"])
                for i in order:
                    samples[i].append(statistics.median(per_batch[i]))
            finally:
                for w in workers.values():
                    w.close()
        ours = statistics.median(samples[-1])
        for i, side in sides[1:]:
            entry = {
                "row": key,
                "title": row.title,
                "reference": side.label,
                "target": row.target,
                "ours_per_s": 1.0 / ours,
            }
            if i in skipped:
                entry["skipped"] = skipped[i]
                print(f"SKIP {row.title} vs {side.label}: {skipped[i]}", file=sys.stderr)
            else:
                peer = statistics.median(samples[i])
                ratios = [p / o for p, o in zip(samples[i], samples[-1])]  # per repetition
                entry.update(
                    peer_per_s=1.0 / peer,
                    ratio=peer / ours,
                    ratio_min=min(ratios),
                    ratio_max=max(ratios),
                    ratio_rep_median=statistics.median(ratios),
                    ours_seconds=samples[-1],
                    peer_seconds=samples[i],
                    ratios=ratios,
                )
            results.append(entry)
    return results


def _run_context() -> dict[str, Any]:
    """UTC time, the 1/5/15-minute load averages and the commit of ours (``git rev-parse``;
    ``None`` outside a git checkout): what a results file records at a run's start and end."""
    import datetime

    root = os.environ.get("RAGEN_OURS_ROOT") or str(ROOT)
    try:
        commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()),
        "commit": commit,
    }


def _fmt_rate(x: float) -> str:
    return f"{x / 1000:,.1f} k/s" if x >= 1000 else f"{x:,.0f} /s"


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--rows",
        nargs="*",
        default=list(ROWS),
        choices=list(ROWS),
        help="rows to measure (default: all)",
    )
    ap.add_argument(
        "--reps", type=int, default=5, help="repetitions per side (fresh process each); default 5"
    )
    ap.add_argument(
        "--batches", type=int, default=30, help="timed batches per process (median); default 30"
    )
    ap.add_argument("--peer-python", default=None, help="interpreter with the peers installed")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default=None,
        help="time batches by wall clock (perf_counter; default) or by the worker's CPU time "
        "(thread_time: the time the shared machine gives other processes not counted); "
        "default: $RAGEN_PEER_CLOCK, else wall",
    )
    ap.add_argument(
        "--before",
        default=None,
        metavar="DIR",
        help="also run ours from the checkout DIR (e.g. the commit before a change) as a reference",
    )
    ap.add_argument(
        "--vendor-ragen",
        metavar="CHECKOUT",
        help=f"copy RAGEN's env files at {RAGEN_COMMIT[:7]} from the git repository CHECKOUT "
        "into .peer-ragen/ and exit",
    )
    ap.add_argument(
        "--out",
        metavar="FILE",
        help="also write the run as JSON to FILE: the results, the settings (rows, reps, "
        "batches, clock, before), the commit of ours, UTC start and end, and the load "
        "average at both (e.g. benchmarks/results/peer_speed_resets.json)",
    )
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--worker", nargs=3, metavar=("ROW", "SIDE", "BATCHES"), help=argparse.SUPPRESS)
    ap.add_argument("--serve", nargs=2, metavar=("ROW", "SIDE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.serve[0], int(args.serve[1]))
    if args.vendor_ragen:
        print(f"RAGEN {RAGEN_COMMIT[:7]} env files in {vendor_ragen(args.vendor_ragen)}")
        return 0
    if args.worker:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]), int(args.worker[2]))))
        return 0
    if args.reps < 1 or args.batches < 1:
        ap.error("--reps and --batches must be at least 1")
    if args.clock:
        os.environ["RAGEN_PEER_CLOCK"] = args.clock  # the workers inherit it
    before = str(Path(args.before).resolve()) if args.before else None
    started = _run_context()
    results = compare(args.rows, args.reps, args.batches, _peer_python(args.peer_python), before)
    if args.out:
        record = {
            "started": started,
            "ended": _run_context(),
            "rows": args.rows,
            "reps": args.reps,
            "batches": args.batches,
            "clock": os.environ.get("RAGEN_PEER_CLOCK") or "wall",
            "before": before,
            "results": results,
        }
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    if args.markdown:
        print("| preset | reference | ours | reference | ratio (median, min-max) | target |")
        print("|---|---|---:|---:|---:|---:|")
    for e in results:
        if "skipped" in e:
            line = (
                f"| {e['title']} | {e['reference']} | {_fmt_rate(e['ours_per_s'])} | skipped: {e['skipped']} | | "
                f"≥ {e['target']:g} |"
            )
        else:
            line = (
                f"| {e['title']} | {e['reference']} | {_fmt_rate(e['ours_per_s'])} | {_fmt_rate(e['peer_per_s'])} | "
                f"**{e['ratio']:.2f}** ({e['ratio_min']:.2f}-{e['ratio_max']:.2f}) | ≥ {e['target']:g} |"
            )
        print(line if args.markdown else line.strip("| ").replace(" | ", "  "))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
