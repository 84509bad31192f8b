"""FrozenLake dynamics: the transition table and its optimal policy by value iteration.

Transition table (Gymnasium ``toy_text/frozen_lake.py`` layout):
``P[s][a] = [(prob, next_state, reward, terminated), ...]`` for every state ``s`` and
action ``a`` in ``0 Left, 1 Down, 2 Right, 3 Up``.

* In a hole or on the goal (terminal tiles): ``[(1.0, s, 0.0, True)]``.
* Otherwise, with slipperiness ``success_rate`` = p: one entry per direction the agent
  may actually move, in Gymnasium's order ``(a - 1) % 4, a, (a + 1) % 4`` (the two
  perpendicular directions around the intended one, never backwards), with
  probabilities ``(1 - p) / 2, p, (1 - p) / 2``.  Entries of probability 0 are left
  out, so ``p == 1`` gives one entry (Gymnasium's ``is_slippery=False``).  A move
  against the edge of the map leaves the agent where it is, so several entries may
  share a ``next_state``: ``P(s' | s, a)`` is the sum of their probabilities.
* ``reward`` is ``goal_reward`` (1) when ``next_state`` is the goal, else 0;
  ``terminated`` is true when ``next_state`` is a hole or the goal.

The optimal policy maximises the probability of reaching the goal (the expected
undiscounted return, since the only reward is 1 at the goal), computed in two stages:

1. Undiscounted value iteration from ``V = 0`` (Sutton & Barto 2018, §4.4) converges
   monotonically to ``V*``, the maximum probability of reaching the goal.
2. Among the actions that attain ``V*`` (``Q*(s, a) >= V*(s) - tol``), a second,
   discounted value iteration (``gamma`` < 1) picks those that reach the goal soonest in
   expectation; remaining ties go to the lowest action index (Left, Down, Right, Up).

A policy that uses only stage-1-optimal actions and is discounted-optimal among them
reaches the goal with probability ``V*(s)``: under it ``V*(s_t)`` is a martingale, and
it cannot loop forever in states with ``V* > 0`` because that would have discounted value
0 while an optimal policy there has a positive one.  In a deterministic lake
(``success_rate == 1``) stage 2 makes the policy follow a shortest path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np

from .maps import GOAL, HOLE, FrozenMap

#: Action names in index order (RAGEN's actions 1..4 and Gymnasium's 0..3 use this order).
ACTIONS: tuple[str, ...] = ("Left", "Down", "Right", "Up")

#: (row, col) offset of each action index.
DELTAS: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))

#: One transition-table entry: (probability, next state, reward, terminated).
Outcome = tuple[float, int, float, bool]


@dataclass(frozen=True)
class Dynamics:
    """The transition table of one map and slipperiness.

    Attributes:
        transitions: ``P[s][a]`` as described in the module docstring; ``len(P) ==
            n_states``, ``len(P[s]) == 4``.
        directions: ``directions[s][a][k]`` is the direction index actually moved by
            entry ``k`` of ``P[s][a]`` (``-1`` for the self-loop of a terminal tile).
    """

    transitions: tuple[tuple[tuple[Outcome, ...], ...], ...]
    directions: tuple[tuple[tuple[int, ...], ...], ...]

    @property
    def n_states(self) -> int:
        """Number of states."""
        return len(self.transitions)

    def next_state_distribution(self, state: int, action: int) -> dict[int, float]:
        """``{next_state: P(next_state | state, action)}`` with entries of equal next
        state summed."""
        out: dict[int, float] = {}
        for prob, nxt, _, _ in self.transitions[state][action]:
            out[nxt] = out.get(nxt, 0.0) + prob
        return out

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """Dense ``T`` of shape ``(n_states, 4, n_states)`` (transition probabilities) and
        ``R`` of shape ``(n_states, 4)`` (expected immediate reward)."""
        n = self.n_states
        T = np.zeros((n, 4, n))
        R = np.zeros((n, 4))
        for s in range(n):
            for a in range(4):
                for prob, nxt, reward, _ in self.transitions[s][a]:
                    T[s, a, nxt] += prob
                    R[s, a] += prob * reward
        return T, R


@lru_cache(maxsize=4096)
def build_dynamics(fmap: FrozenMap, success_rate: float, goal_reward: float = 1.0) -> Dynamics:
    """Build the transition table of ``fmap`` (cached per map and parameters).

    Args:
        fmap: the map.
        success_rate: probability p in ``[0, 1]`` of moving in the intended direction;
            each perpendicular direction gets ``(1 - p) / 2`` (Gymnasium's
            ``success_rate``, RAGEN's ``success_rate``, RAGEN-AI/RAGEN ragen/env/).
        goal_reward: reward for entering the goal.

    Raises:
        ValueError: ``success_rate`` outside ``[0, 1]``.
    """
    if not 0.0 <= success_rate <= 1.0:
        raise ValueError(f"success_rate must be in [0, 1], got {success_rate}")
    fail = (1.0 - success_rate) / 2.0
    nrow, ncol = fmap.nrow, fmap.ncol
    text = "".join(fmap.rows)
    reward = [goal_reward if ch == GOAL else 0.0 for ch in text]
    ends = [ch in (HOLE, GOAL) for ch in text]
    # each action's possible directions (Gymnasium's order) with their probabilities
    spread = [
        tuple(
            (d, success_rate if d == a else fail)
            for d in ((a - 1) % 4, a, (a + 1) % 4)
            if (success_rate if d == a else fail) > 0.0
        )
        for a in range(4)
    ]
    dirs = tuple(tuple(d for d, _ in pairs) for pairs in spread)
    P: list[tuple[tuple[Outcome, ...], ...]] = []
    D: list[tuple[tuple[int, ...], ...]] = []
    for s in range(nrow * ncol):
        if ends[s]:
            P.append((((1.0, s, 0.0, True),),) * 4)
            D.append(((-1,),) * 4)
            continue
        r, c = divmod(s, ncol)
        # neighbour in each direction (Left, Down, Right, Up); the edge keeps the agent in place
        nbr = (
            r * ncol + max(c - 1, 0),
            min(r + 1, nrow - 1) * ncol + c,
            r * ncol + min(c + 1, ncol - 1),
            max(r - 1, 0) * ncol + c,
        )
        row_p = []
        for pairs in spread:
            entries = []
            for d, prob in pairs:
                t = nbr[d]
                entries.append((prob, t, reward[t], ends[t]))
            row_p.append(tuple(entries))
        P.append(tuple(row_p))
        D.append(dirs)
    return Dynamics(tuple(P), tuple(D))


@dataclass(frozen=True)
class OptimalPolicy:
    """Result of :func:`solve`.

    Attributes:
        values: ``V*`` of shape ``(n_states,)``: maximum probability of reaching the goal
            (undiscounted expected return) from each state; 0 on terminal tiles (the
            reward is paid on entering the goal).
        q_values: ``Q*`` of shape ``(n_states, 4)``.
        policy: chosen action index per state, shape ``(n_states,)``.
        iterations: policy-iteration steps of stage 1.
    """

    values: np.ndarray
    q_values: np.ndarray
    policy: np.ndarray
    iterations: int


def value_iteration(
    T: np.ndarray,
    R: np.ndarray,
    *,
    gamma: float = 1.0,
    tol: float = 1e-13,
    max_iter: int = 1_000_000,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Value iteration ``V <- max_a (R + gamma * T V)`` from ``V = 0``.

    Args:
        T: transition probabilities, shape ``(n_states, n_actions, n_states)``.
        R: expected immediate rewards, shape ``(n_states, n_actions)``.
        gamma: discount in ``(0, 1]``.
        tol: stop when the largest change of ``V`` in a sweep is at most ``tol``.
        max_iter: hard bound on sweeps.
        allowed: optional boolean mask ``(n_states, n_actions)``; the max runs over
            allowed actions only (every state must allow at least one).

    Returns:
        ``(V, Q, sweeps)`` with ``V`` of shape ``(n_states,)`` and ``Q`` of shape
        ``(n_states, n_actions)``.
    """
    V = np.zeros(T.shape[0])
    Q = R.copy()
    for it in range(1, max_iter + 1):
        Q = R + gamma * (T @ V)
        Qm = Q if allowed is None else np.where(allowed, Q, -np.inf)
        V_new = Qm.max(axis=1)
        delta = float(np.max(np.abs(V_new - V))) if V.size else 0.0
        V = V_new
        if delta <= tol:
            return V, Q, it
    return V, Q, max_iter


def _reach_layers(T: np.ndarray, terminal: np.ndarray, goal: int) -> tuple[np.ndarray, np.ndarray]:
    """Backward breadth-first search over the positive-probability graph.

    Returns ``(layer, first_action)``: ``layer[s]`` is the fewest transitions of positive
    probability from ``s`` to the goal under the best choice of actions (``-1`` when the
    goal is unreachable whatever the agent does, Baier & Katoen 2008, §10.6.1 "S=0"), and
    ``first_action[s]`` an action whose outcomes include a state of ``layer[s] - 1``.
    """
    n = T.shape[0]
    layer = np.full(n, -1, dtype=np.int64)
    first = np.zeros(n, dtype=np.int64)
    layer[goal] = 0
    frontier = np.zeros(n, dtype=bool)
    frontier[goal] = True
    depth = 0
    while frontier.any():
        depth += 1
        # (state, action) pairs with a positive-probability edge into the frontier
        hits = (T[:, :, frontier] > 0).any(axis=2) & ~terminal[:, None] & (layer < 0)[:, None]
        new = cast(np.ndarray, hits.any(axis=1))  # (n,) bool; NumPy types it as a scalar too
        layer[new] = depth
        first[new] = np.argmax(hits[new], axis=1)
        frontier = new
    return layer, first


def _evaluate(
    T: np.ndarray, R: np.ndarray, policy: np.ndarray, unknown: np.ndarray, gamma: float
) -> np.ndarray:
    """Exact value of ``policy``: solve ``(I - gamma T_pi) v = r_pi`` on the ``unknown``
    states, with every other state fixed at value 0."""
    n = T.shape[0]
    idx = np.flatnonzero(unknown)
    v = np.zeros(n)
    if idx.size:
        Tp = T[idx, policy[idx]][:, idx]
        rp = R[idx, policy[idx]]
        v[idx] = np.linalg.solve(np.eye(idx.size) - gamma * Tp, rp)
    return v


def _policy_iteration(
    T: np.ndarray,
    R: np.ndarray,
    policy: np.ndarray,
    unknown: np.ndarray,
    allowed: np.ndarray,
    gamma: float,
    improve_tol: float = 1e-12,
    max_iter: int = 10_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Howard's policy iteration (Sutton & Barto 2018, §4.3) that switches an action only
    on a strict improvement of more than ``improve_tol``.

    Returns ``(V, Q, policy, iterations)``.
    """
    policy = policy.copy()
    for it in range(1, max_iter + 1):
        v = _evaluate(T, R, policy, unknown, gamma)
        Q = R + gamma * (T @ v)
        Qm = np.where(allowed, Q, -np.inf)
        best = np.argmax(Qm, axis=1)
        current = Qm[np.arange(len(policy)), policy]
        switch = unknown & (Qm[np.arange(len(policy)), best] > current + improve_tol)
        if not switch.any():
            return v, Q, policy, it
        policy[switch] = best[switch]
    return v, Q, policy, max_iter


@lru_cache(maxsize=4096)
def solve(
    fmap: FrozenMap, success_rate: float, *, gamma: float = 0.95, tie_tol: float = 1e-9
) -> OptimalPolicy:
    """The optimal policy of ``fmap`` (cached per map and slipperiness).

    Stage 1 computes ``V*`` (maximum probability of reaching the goal) exactly by policy
    iteration with linear solves, started from a policy that reaches the goal with
    positive probability from every state that can reach it at all (Baier & Katoen 2008,
    §10.6: states that cannot reach the goal are fixed at 0; with that start and strict
    improvements every policy visited keeps that property, so each evaluation is a
    non-singular linear system, and the fixed point reached is ``V*``).  This computes
    the same ``V*`` as the undiscounted :func:`value_iteration` (the tests check it) in a
    few linear solves instead of thousands of sweeps.  Stage 2 is discounted policy
    iteration restricted to the stage-1-optimal actions (module docstring); ties go to the
    lowest action index.

    Args:
        fmap: the map.
        success_rate: slipperiness, see :func:`build_dynamics`.
        gamma: discount of stage 2 (the speed tie-break), in ``(0, 1)``.
        tie_tol: actions with ``Q*`` within ``tie_tol`` of ``V*`` count as optimal.
    """
    T, R = build_dynamics(fmap, success_rate).matrices()
    n = T.shape[0]
    terminal = np.array([fmap.tile(s) in (HOLE, GOAL) for s in range(n)])
    layer, first = _reach_layers(T, terminal, fmap.goal)
    unknown = (layer > 0) & ~terminal
    everything = np.ones((n, 4), dtype=bool)
    V, Q, _, iters = _policy_iteration(T, R, first, unknown, everything, gamma=1.0)
    allowed = Q >= V[:, None] - tie_tol
    start = np.argmax(allowed, axis=1)
    nonterminal = ~terminal
    _, Qd, _, _ = _policy_iteration(T, R, start, nonterminal, allowed, gamma=gamma)
    Qd = np.where(allowed, Qd, -np.inf)
    best = Qd.max(axis=1, keepdims=True)
    policy = np.argmax(Qd >= best - 1e-12, axis=1)  # lowest index among tied best actions
    V = np.clip(V, 0.0, 1.0)  # remove linear-solve round-off (probabilities)
    for arr in (V, Q, policy):
        arr.setflags(write=False)
    return OptimalPolicy(values=V, q_values=Q, policy=policy, iterations=iters)
