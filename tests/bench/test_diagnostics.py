"""Reasoning-collapse diagnostics: estimators, samplers, scorers, regimes, CLI.

Golden values are hand computations written out next to each assertion.  The
synthetic-policy tests score with the real tiny model (``ragen_bench.tiny``), first
taught for 200 teacher-forced steps (~10 s on 2 CPU cores) to behave like four
synthetic policies, each selected by a mode word in the prompt:

* ``copy``  — reasoning = the input's code letter six times      (compressed)
* ``free``  — reasoning = six random digits, ignoring the input   (template collapse)
* ``mix``   — code letter and random digits alternating           (diverse)
* ``same``  — reasoning = "0 0 0 0 0 0" for every input            (low-entropy collapse)
"""

from __future__ import annotations

import json
import math
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragen_bench.diagnostics import (
    CollapseTracker,
    CrossScores,
    ReasoningSample,
    Regime,
    RegimeThresholds,
    ScoringNotSupported,
    TemplateCollapseWarning,
    answer_diversity,
    classify_regime,
    collapse_report,
    degenerate_rate,
    first_turn_problem,
    is_degenerate,
    log_mean_exp,
    mi_estimate,
    retrieval,
    sampled_token_entropy,
    trajectory_problem,
)
from ragen_bench.diagnostics.harness import parse_samplers, parse_scorer_spec
from ragen_bench.diagnostics.samples import sample_from_turn

LN4 = math.log(4)


# ----------------------------------------------------------------- estimators
def test_diagonal_minus10_offdiagonal_minus1000_float32_gives_ln4() -> None:
    ell = np.full((4, 4), -1000.0, dtype=np.float32)
    np.fill_diagonal(ell, -10.0)
    est = mi_estimate(ell)
    # marginal_i = log((e^-10 + 3 e^-1000) / 4) = -10 - ln 4 (e^-990 is below float64's range)
    assert est.mi == pytest.approx(1.3863, abs=1e-4)
    assert est.mi == pytest.approx(LN4, abs=1e-12)
    assert est.upper_bound == pytest.approx(LN4, abs=1e-15)
    np.testing.assert_allclose(est.marginal, -10.0 - LN4, rtol=0, atol=1e-12)
    assert est.conditional_entropy == 10.0
    assert est.marginal_entropy == pytest.approx(10.0 + LN4)
    values = [
        est.mi,
        est.conditional_entropy,
        est.marginal_entropy,
        est.marginal_std,
        est.zscore,
        *est.matched,
        *est.marginal,
    ]
    assert all(math.isfinite(v) for v in values)
    # every row has the same gap ln 4 and the marginals are equal -> std 0 -> floor 1e-3
    assert est.marginal_std == 0.0 and est.zscore == pytest.approx(LN4 / 1e-3)
    r = retrieval(ell, ks=(1, 2, 8))
    assert r[1].accuracy == 1.0 and r[1].chance == 0.25
    assert r[2].chance == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert r[8].accuracy == 1.0 and r[8].chance == 1.0  # k capped at M = 4


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 64])
@pytest.mark.parametrize("value", [-7.3, -1e-3, -123.456789, -1000.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_matrix_gives_mi_exactly_zero(n: int, value: float, dtype: type) -> None:
    ell = np.full((n, n), value, dtype=dtype)
    est = mi_estimate(ell)
    assert est.mi == 0.0  # exactly, not approximately
    assert np.array_equal(est.matched, est.marginal)
    r = retrieval(ell, ks=(1, 2))
    for k in (1, 2):  # a uniform matrix carries no information: accuracy is exactly chance
        assert r[k].accuracy == r[k].chance


def test_log_mean_exp_matches_direct_formula_where_it_is_safe() -> None:
    a = np.array([[-1.0, -2.0, -3.0], [0.5, 0.25, -4.0]])
    direct = np.log(np.exp(a).mean(axis=1))
    np.testing.assert_allclose(log_mean_exp(a), direct, rtol=1e-14)


def test_retrieval_with_duplicated_prompts_matches_hand_count() -> None:
    # Columns 0 and 1 hold the same prompt "A"; column 2 is "B", column 3 is "C".
    sig = ["A", "A", "B", "C"]
    ell = np.array(
        [
            [-5.0, -1.0, -3.0, -4.0],  # row 0, own col 0 (A): best col 1 is also A -> hit
            [
                -3.0,
                -2.0,
                -1.0,
                -4.0,
            ],  # row 1, own col 1 (A): best col 2 (B) -> miss; top-2 {2,1} -> hit
            [-4.0, -3.0, -1.0, -2.0],  # row 2, own col 2 (B): best col 2 -> hit
            [
                -1.0,
                -1.0,
                -2.0,
                -3.0,
            ],  # row 3, own col 3 (C): best cols 0,1 tied (A) -> miss; top-2 {0,1} -> miss
        ]
    )
    r = retrieval(ell, signatures=sig, ks=(1, 2, 3))
    # Hand count @1: rows 0 and 2 hit -> 2/4.
    assert r[1].accuracy == 0.5
    # Chance @1: same-signature columns per row are 2, 2, 1, 1 of 4 -> (2+2+1+1)/16 = 0.375.
    assert r[1].chance == 0.375
    # @2: rows 0, 1, 2 hit, row 3 misses -> 3/4.
    assert r[2].accuracy == 0.75
    # Chance @2 = 1 - C(4-c, 2)/C(4, 2): c=2 -> 1 - 1/6 = 5/6; c=1 -> 1 - 3/6 = 1/2.
    assert r[2].chance == pytest.approx((5 / 6 + 5 / 6 + 0.5 + 0.5) / 4)
    # @3: row 3's top 3 are cols 0, 1, 2 -> still a miss; the others hit -> 3/4.
    assert r[3].accuracy == 0.75
    # Without signatures row 0's hit (col 1 is not its own column) becomes a miss.
    assert retrieval(ell, ks=(1,))[1].accuracy == 0.25


def test_retrieval_ties_are_expected_values_not_column_order() -> None:
    # One row, own column 2, all four columns tied: @1 = 1/4, @2 = 1/2, whatever the order.
    ell = np.array([[-2.0, -2.0, -2.0, -2.0]])
    r = retrieval(ell, own=[2], ks=(1, 2))
    assert r[1].accuracy == 0.25 and r[2].accuracy == 0.5
    # Columns 0 and 2 tied at the top (own = 2): @1 = 1/2.
    assert retrieval(np.array([[-1.0, -3.0, -1.0, -4.0]]), own=[2], ks=(1,))[1].accuracy == 0.5


def test_per_token_and_per_sequence_estimates_differ_as_computed_by_hand() -> None:
    # Two reasonings of 1 and 4 tokens, two inputs; row i's own input is column i.
    seq = np.array([[-1.0, -3.0], [-8.0, -4.0]])
    lengths = np.array([1, 4])
    scores = CrossScores(seq=seq, lengths=lengths)
    tok = scores.mean
    np.testing.assert_array_equal(tok, [[-1.0, -3.0], [-2.0, -1.0]])
    ln2 = math.log(2)
    # per sequence: gaps  -1 - log((e^-1 + e^-3)/2)  and  -4 - log((e^-8 + e^-4)/2)
    gap_s = [
        -1 - math.log((math.exp(-1) + math.exp(-3)) / 2),
        -4 - math.log((math.exp(-8) + math.exp(-4)) / 2),
    ]
    # per token:    gaps  -1 - log((e^-1 + e^-3)/2)  and  -1 - log((e^-2 + e^-1)/2)
    gap_t = [gap_s[0], -1 - math.log((math.exp(-2) + math.exp(-1)) / 2)]
    s, t = mi_estimate(seq), mi_estimate(tok)
    assert s.mi == pytest.approx(sum(gap_s) / 2, abs=1e-12)  # 0.5662...
    assert t.mi == pytest.approx(sum(gap_t) / 2, abs=1e-12)  # 0.4805...
    assert s.mi != pytest.approx(t.mi, abs=1e-3)
    assert s.conditional_entropy == pytest.approx(
        (1 + 4) / 2
    ) and t.conditional_entropy == pytest.approx(1.0)
    assert max(s.mi, t.mi) <= ln2 + 1e-15


def test_zscore_uses_population_std_and_floor() -> None:
    ell = np.array([[0.0, -1.0], [-2.0, 0.0]])
    est = mi_estimate(ell)
    marg = np.array([math.log((1 + math.exp(-1)) / 2), math.log((math.exp(-2) + 1) / 2)])
    np.testing.assert_allclose(est.marginal, marg, rtol=1e-14)
    sigma = abs(marg[0] - marg[1]) / 2  # population std of two values
    assert est.marginal_std == pytest.approx(sigma, rel=1e-12)
    assert est.zscore == pytest.approx(np.mean(-marg) / sigma, rel=1e-12)
    assert mi_estimate(ell, std_floor=10.0).zscore == pytest.approx(np.mean(-marg) / 10.0)


@pytest.mark.parametrize(
    "bad",
    [
        [[0.0, float("nan")], [0.0, 0.0]],
        [[0.0, float("inf")], [0.0, 0.0]],
        [[0.0, -float("inf")], [0.0, 0.0]],
        [[0.0, 1.0]],
        [],
    ],
)
def test_non_finite_or_misshapen_matrices_are_rejected(bad: Any) -> None:
    with pytest.raises(ValueError):
        mi_estimate(bad)


def test_mi_never_exceeds_log_m_on_random_matrices() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n, m = rng.integers(2, 9, size=2)
        ell = rng.normal(-50, 30, size=(n, m))
        own = rng.integers(0, m, size=n)
        assert mi_estimate(ell, own).mi <= math.log(m) + 1e-12


# ---------------------------------------------------------------- text stats
def test_degenerate_outputs() -> None:
    assert not is_degenerate("a" * 9 + "b")  # 90% is not "over 90%"
    assert is_degenerate("a" * 11 + "b")  # 11/12 = 91.7%
    assert is_degenerate("          x")  # whitespace counts
    assert is_degenerate("")  # nothing produced
    assert not is_degenerate("<think>go</think><answer>Up</answer>")
    assert degenerate_rate(["aaaaaaaaaaaa", "hello world", "", "ok"]) == 0.5
    assert degenerate_rate([]) is None


def test_answer_diversity_and_sampled_entropy() -> None:
    ratio, ent = answer_diversity(["Up", " Up", "Down", None])
    assert ratio == 3 / 4
    assert ent == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))  # 1.0397
    assert answer_diversity(["x"] * 5) == (0.2, 0.0)
    assert answer_diversity([]) is None
    # pooled over tokens: -(-1 - 2 - 3) / 3 = 2, not the mean of per-sequence means (1.5 and 3 -> 2.25)
    assert sampled_token_entropy([[-1.0, -2.0], [-3.0], None, []]) == pytest.approx(2.0)
    assert sampled_token_entropy([None, []]) is None


# -------------------------------------------------------------------- regimes
@pytest.mark.parametrize(
    "mi, h, regime",
    [
        (0.9, 1.0, Regime.DIVERSE),
        (0.1, 1.0, Regime.TEMPLATE_COLLAPSE),
        (0.9, 0.01, Regime.COMPRESSED),
        (0.1, 0.01, Regime.LOW_ENTROPY_COLLAPSE),
        (0.5, 0.1, Regime.DIVERSE),  # both cut points are inclusive
    ],
)
def test_regime_corners(mi: float, h: float, regime: Regime) -> None:
    assert (
        classify_regime(
            mi=mi * LN4, upper_bound=LN4, conditional_entropy_per_token=h, n_rows=8, n_columns=4
        )
        is regime
    )


def test_regime_thresholds_are_configurable_and_checked() -> None:
    t = RegimeThresholds(mi_fraction=0.95, entropy_per_token=2.0)
    assert (
        classify_regime(
            mi=0.9 * LN4,
            upper_bound=LN4,
            conditional_entropy_per_token=1.0,
            n_rows=8,
            n_columns=4,
            thresholds=t,
        )
        is Regime.LOW_ENTROPY_COLLAPSE
    )
    assert (
        classify_regime(
            mi=1.0, upper_bound=0.0, conditional_entropy_per_token=1.0, n_rows=8, n_columns=1
        )
        is Regime.INSUFFICIENT_DATA
    )
    with pytest.raises(ValueError):
        RegimeThresholds(mi_basis="bits")
    assert Regime.TEMPLATE_COLLAPSE.code == 1.0 and Regime.INSUFFICIENT_DATA.code == -1.0


def test_tracker_ema_and_template_collapse_warning() -> None:
    tr = CollapseTracker(ema_decay=0.9, mi_drop=0.2, entropy_keep=0.8)
    assert tr.ema("s", 2.0) == 2.0 and tr.ema("s", 1.0) == pytest.approx(0.9 * 2.0 + 0.1 * 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tr.observe("first_turn", mi_fraction=0.9, entropy_per_token=1.0) is None
        assert (
            tr.observe("first_turn", mi_fraction=0.85, entropy_per_token=1.0) is None
        )  # a small dip
    with pytest.warns(TemplateCollapseWarning, match="template collapse"):
        msg = tr.observe("first_turn", mi_fraction=0.3, entropy_per_token=0.95, step=40)
    assert msg is not None and "step 40" in msg
    # MI falling together with the entropy is not template collapse.
    tr2 = CollapseTracker()
    tr2.observe("t", mi_fraction=0.9, entropy_per_token=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tr2.observe("t", mi_fraction=0.2, entropy_per_token=0.3) is None
    state = tr.state_dict()
    tr3 = CollapseTracker()
    tr3.load_state_dict(json.loads(json.dumps(state)))
    assert tr3.peek("first_turn/mi_fraction") == tr.peek("first_turn/mi_fraction")


# -------------------------------------------------------------------- samplers
def _s(x: int, z: int, episode: int, turn: int = 1, answer: str | None = "a") -> ReasoningSample:
    return ReasoningSample(
        x=(x,),
        z=(z,) if z else (),
        episode=episode,
        group=x,
        turn=turn,
        response="r",
        answer=answer,
    )


def test_first_turn_sampler_columns_are_distinct_inputs() -> None:
    samples = [
        _s(10, 1, 0),
        _s(10, 2, 1),
        _s(11, 3, 2),
        _s(12, 0, 3),
        _s(11, 4, 4),
        _s(13, 5, 5, turn=2),
    ]
    p = first_turn_problem(samples, None, np.random.default_rng(0))
    # turn 2 and the empty reasoning are out; inputs 10, 11 are shared by two rows each
    assert [r.z for r in p.rows] == [(1,), (2,), (3,), (4,)]
    assert p.xs == [(10,), (11,)] and list(p.column_x) == [0, 1] and list(p.own) == [0, 0, 1, 1]
    q = first_turn_problem(samples, 3, np.random.default_rng(1))
    assert q.n_rows == 3 and len({r.z for r in q.rows}) == 3  # without replacement
    again = first_turn_problem(samples, 3, np.random.default_rng(1))
    assert [r.z for r in q.rows] == [r.z for r in again.rows]  # seeded


def test_trajectory_sampler_is_uniform_over_trajectories_then_turns() -> None:
    # episode 0 has 1 valid turn, episode 1 has 3: trajectory-uniform gives each episode 1/2.
    samples = [_s(1, 1, 0), _s(2, 2, 1), _s(3, 3, 1, turn=2), _s(4, 4, 1, turn=3)]
    p = trajectory_problem(samples, 4, np.random.default_rng(0))
    assert p.n_rows == 4 and p.n_columns == 4 and list(p.own) == [0, 1, 2, 3]
    # equal inputs share a signature (column_x), so duplicate draws are interchangeable columns
    assert all(p.xs[p.column_x[i]] == p.rows[i].x for i in range(4))
    big = trajectory_problem(samples * 1, None, np.random.default_rng(3))
    assert big.n_rows == 4
    counts = {0: 0, 1: 0}
    for seed in range(400):
        for r in trajectory_problem(samples, 4, np.random.default_rng(seed)).rows:
            counts[r.episode] += 1
    assert abs(counts[0] / 1600 - 0.5) < 0.05  # turn-uniform sampling would give 0.25


class _TableScorer:
    """A scorer whose ℓ is a function of the first token of x and z (no model)."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.calls: list[tuple[int, int]] = []

    text_tokenizer = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "hf", "model": "table"}

    def score(self, xs: Any, zs: Any, *, own: Any = None) -> CrossScores:
        self.calls.append((len(zs), len(xs)))
        seq = np.array([[self.fn(x[0], z) for x in xs] for z in zs], dtype=np.float64)
        return CrossScores(seq=seq, lengths=np.array([len(z) for z in zs]))


def test_collapse_report_keys_per_sampler_and_distinct_scoring() -> None:
    # 4 inputs; each reasoning is (own input, length filler...): ℓ = -1 per token if it
    # names its input else -5 per token -> strongly input dependent.
    samples = []
    for ep in range(8):
        x = 100 + ep % 4
        samples.append(
            ReasoningSample(
                x=(x,),
                z=(x,) + (7,) * (ep % 3),
                episode=ep,
                group=ep % 4,
                turn=1,
                response=f"<think>{x}</think><answer>A{ep % 2}</answer>",
                answer=f"A{ep % 2}",
                logprobs=(-0.5, -1.5),
            )
        )
    sc = _TableScorer(lambda x, z: (-1.0 if z[0] == x else -5.0) * len(z))
    rep = collapse_report(
        samples,
        sc,
        sampler=("first_turn", "trajectory"),
        num_samples=None,
        seed=0,
        tracker=CollapseTracker(),
    )
    m = rep.metrics
    assert sc.calls[0] == (8, 4)  # first turn: 8 rows x 4 distinct inputs scored once each
    assert m["collapse/first_turn/num_rows"] == 8 and m["collapse/first_turn/num_columns"] == 4
    # per token: matched -1, others -5: gap = -1 - log((e^-1 + 3e^-5)/4)
    gap = -1 - math.log((math.exp(-1) + 3 * math.exp(-5)) / 4)
    assert m["collapse/first_turn/mi_estimate"] == pytest.approx(gap, abs=1e-12)
    assert m["collapse/first_turn/mi_upper_bound"] == pytest.approx(LN4)
    assert m["collapse/first_turn/retrieval_accuracy"] == 1.0
    assert m["collapse/first_turn/answer_distinct_ratio"] == 0.25
    assert m["collapse/valid_thinking_rate"] == 1.0 and m["collapse/token_entropy_sampled"] == 1.0
    assert m["collapse/trajectory/num_columns"] == 8
    assert m["collapse/trajectory/template_collapse_warning"] == 0.0
    assert rep.regimes["first_turn"] in (Regime.DIVERSE, Regime.COMPRESSED)
    assert all(k.startswith("collapse/") and math.isfinite(v) for k, v in m.items())


# --------------------------------------------------------------- (X, Z) extraction
class _CharTok:
    """A toy tokenizer: one id per character; tags and the prompt get fixed ids."""

    def prompt_ids(self, messages: Any) -> list[int]:
        return [1000 + len(m["content"]) for m in messages] + [999]

    def encode(self, text: str) -> list[int]:
        if text == "<think>":
            return [900]
        if text == "</think>":
            return [901]
        return [ord(c) for c in text]


def test_sample_extraction_text_and_token_paths() -> None:
    tok = _CharTok()
    turn = {
        "turn": 1,
        "response": "<think> ab</think><answer>Up</answer>",
        "parsed": {"answer": "Up"},
        "prompt_messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hello"},
        ],
        "completion_logprobs": [-0.1],
    }
    s = sample_from_turn(turn, tok, episode=3, group=1)
    assert s.x == (1003, 1005, 999, 900)  # prompt + generation prompt + <think>
    assert s.z == (ord(" "), ord("a"), ord("b"))  # between the tags, unstripped, tags excluded
    assert s.answer == "Up" and s.valid
    # token path: sampled ids between the tag ids, recorded prompt ids
    turn_ids = dict(turn, prompt_token_ids=[5, 6], completion_token_ids=[900, 42, 43, 901, 7, 2])
    t = sample_from_turn(turn_ids, tok, episode=3, group=1, use_token_ids=True)
    assert t.x == (5, 6, 900) and t.z == (42, 43)
    # no reasoning: missing close tag, empty think, answer-only
    for resp in ("<think>abc", "<think></think><answer>Up</answer>", "<answer>Up</answer>"):
        assert not sample_from_turn(dict(turn, response=resp), tok, episode=0, group=0).valid
    # a truncated answer after a closed think block still has a reasoning
    assert sample_from_turn(
        dict(turn, response="<think>x</think><answer>U"), tok, episode=0, group=0
    ).z == (ord("x"),)
    with pytest.raises(ValueError, match="prompt_messages"):
        sample_from_turn(dict(turn, prompt_messages=None), tok, episode=0, group=0)


def test_scorer_specs_and_sampler_lists() -> None:
    assert parse_scorer_spec("hf:tiny") == ("hf", {"model": "tiny"})
    assert parse_scorer_spec("openai:http://127.0.0.1:8000/v1:qwen:7b") == (
        "openai",
        {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen:7b"},
    )
    assert parse_scorer_spec("openai:https://api.example.com/v1:m") == (
        "openai",
        {"base_url": "https://api.example.com/v1", "model": "m"},
    )
    for bad in ("tiny", "hf:", "openai:localhost:m", "vllm:x"):
        with pytest.raises(ValueError):
            parse_scorer_spec(bad)
    assert parse_samplers("both") == ["first_turn", "trajectory"]
    with pytest.raises(ValueError):
        parse_samplers("first_turn,turn")


# ------------------------------------------------------- OpenAI-compatible scorer
def _fake_lp(pos: int, tok: int) -> float:
    """Log-prob the fake server gives token ``tok`` at prompt position ``pos``."""
    return -(((tok * 7 + pos) % 11) + 1) / 10


class _Server:
    """A local /v1/completions (+ /tokenize) server in a thread; ``mode`` picks its behaviour."""

    def __init__(self, mode: str):
        self.mode = mode
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append({"path": self.path, **body})
                status, payload = outer.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/tokenize":
            text = body.get("prompt") or "".join(m["content"] for m in body["messages"]) + "|gen"
            return 200, {"tokens": [ord(c) for c in text], "count": len(text)}
        if self.mode == "reject":
            return 400, {
                "error": {
                    "message": "echo is not supported with logprobs",
                    "type": "invalid_request_error",
                }
            }
        choices = []
        for k, prompt in enumerate(body["prompt"]):
            lp = (
                None
                if self.mode == "no_logprobs"
                else {
                    "tokens": [str(t) for t in prompt],
                    "text_offset": list(range(len(prompt))),
                    "top_logprobs": None,
                    "token_logprobs": [None]
                    + [_fake_lp(p, t) for p, t in enumerate(prompt) if p > 0],
                }
            )
            choices.append({"index": k, "text": "", "finish_reason": "length", "logprobs": lp})
        choices.reverse()  # the client must order choices by index, not by position
        return 200, {
            "id": "c",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
        }

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_scorer_sums_prompt_logprobs_of_z_positions() -> None:
    from ragen_bench.diagnostics.openai_scorer import OpenAICompletionsScorer

    xs = [[5, 6, 7], [8, 9]]
    zs = [[1, 2], [3], [4, 5, 6]]
    with _Server("ok") as srv:
        sc = OpenAICompletionsScorer(
            srv.url, "m", pairs_per_request=4, max_concurrency=2, max_retries=0
        )
        out = sc.score(xs, zs)
        assert sc.text_tokenizer.encode("ab") == [97, 98]
        assert sc.text_tokenizer.prompt_ids([{"role": "user", "content": "hi"}]) == [
            ord(c) for c in "hi|gen"
        ]
    # hand formula: ℓ_ij = Σ_t f(|x_j| + t, z_i[t])
    for i, z in enumerate(zs):
        for j, x in enumerate(xs):
            want = sum(_fake_lp(len(x) + t, tok) for t, tok in enumerate(z))
            assert out.seq[i, j] == pytest.approx(want, abs=1e-12)
    assert list(out.lengths) == [2, 1, 3] and out.own_entropy is None
    comp = [b for b in srv.bodies if b["path"] == "/v1/completions"]
    assert len(comp) == 2  # 6 pairs, 4 per request
    assert all(b["echo"] is True and b["logprobs"] == 0 and b["max_tokens"] == 0 for b in comp)
    assert sorted(map(tuple, (p for b in comp for p in b["prompt"]))) == sorted(
        tuple(x + z) for x in xs for z in zs
    )


@pytest.mark.parametrize(
    "mode, detail", [("reject", "HTTP 400"), ("no_logprobs", "no prompt log-probabilities")]
)
def test_openai_scorer_reports_unsupported_endpoints(mode: str, detail: str) -> None:
    from ragen_bench.diagnostics.openai_scorer import OpenAICompletionsScorer

    with _Server(mode) as srv:
        sc = OpenAICompletionsScorer(srv.url, "m", max_retries=0, tokenizer=None)
        with pytest.raises(ScoringNotSupported, match="not supported by this endpoint") as info:
            sc.score([[1, 2]], [[3]])
    assert detail in str(info.value)


# ----------------------------------------------------------- real tiny model
torch = pytest.importorskip("torch")

CODES = "bdfhkmpt"  # 8 inputs -> log N = log 8
DIGITS = "0123456789"


def _synthetic(mode: str, code: str, rng: np.random.Generator) -> tuple[list[dict[str, str]], str]:
    messages = [{"role": "user", "content": f"{mode}: {code * 8}"}]
    if mode == "copy":
        z = " ".join([code] * 6)
    elif mode == "free":
        z = " ".join(rng.choice(list(DIGITS), 6))
    elif mode == "mix":
        z = " ".join(c for _ in range(3) for c in (code, str(rng.choice(list(DIGITS)))))
    else:
        z = " ".join(["0"] * 6)
    return messages, z


@pytest.fixture(scope="module")
def taught_tiny() -> Any:
    """The tiny model after 200 teacher-forced Adam steps on the four synthetic policies."""
    from ragen_bench.diagnostics.hf_scorer import HFScorer
    from ragen_bench.diagnostics.samples import OPEN_TAG

    scorer = HFScorer("tiny")
    model, tt = scorer.model, scorer.text_tokenizer
    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is fastest, and robust on a busy machine
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(200):
            batch = []
            for k in range(16):
                msgs, z = _synthetic(
                    ("copy", "free", "mix", "same")[k % 4], str(rng.choice(list(CODES))), rng
                )
                batch.append((tt.prompt_ids(msgs) + tt.encode(OPEN_TAG), tt.encode(z)))
            width = max(len(x) + len(z) for x, z in batch)
            ids = torch.full((len(batch), width), scorer.pad_id)
            labels = torch.full((len(batch), width), -100)
            for r, (x, z) in enumerate(batch):
                ids[r, : len(x) + len(z)] = torch.tensor(x + z)
                labels[r, len(x) : len(x) + len(z)] = torch.tensor(z)
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
    torch.set_num_threads(threads)
    return scorer


def _policy_samples(
    scorer: Any, mode: str, per_input: int = 2, seed: int = 1
) -> list[ReasoningSample]:
    from ragen_bench.diagnostics.samples import OPEN_TAG

    rng = np.random.default_rng(seed)
    tt = scorer.text_tokenizer
    out = []
    for k in range(per_input):
        for g, code in enumerate(CODES):
            msgs, z = _synthetic(mode, code, rng)
            out.append(
                ReasoningSample(
                    x=tuple(tt.prompt_ids(msgs) + tt.encode(OPEN_TAG)),
                    z=tuple(tt.encode(z)),
                    episode=k * len(CODES) + g,
                    group=g,
                    turn=1,
                    response=f"<think>{z}</think>",
                )
            )
    return out


def test_template_policy_has_mi_near_zero_at_high_entropy(taught_tiny: Any) -> None:
    rep = collapse_report(_policy_samples(taught_tiny, "free"), taught_tiny, num_samples=None)
    m = rep.metrics
    log_n = math.log(len(CODES))
    assert m["collapse/first_turn/num_rows"] == 16 and m["collapse/first_turn/num_columns"] == 8
    assert m["collapse/first_turn/mi_upper_bound"] == pytest.approx(log_n)
    assert (
        abs(m["collapse/first_turn/mi_seq_estimate"]) < 0.1 * log_n
    )  # input-independent reasoning
    assert abs(m["collapse/first_turn/mi_estimate"]) < 0.1 * log_n
    # entropy stays high: six uniform digits carry 6 ln 10 = 13.8 nats over about a dozen tokens (~1.3/token)
    assert m["collapse/first_turn/conditional_entropy_est"] > 0.8
    assert m["collapse/first_turn/token_entropy_full"] > 0.8
    assert m["collapse/first_turn/retrieval_accuracy"] < 0.5
    assert rep.regimes["first_turn"] is Regime.TEMPLATE_COLLAPSE


def test_copy_policy_has_mi_near_log_n(taught_tiny: Any) -> None:
    rep = collapse_report(_policy_samples(taught_tiny, "copy"), taught_tiny, num_samples=None)
    m = rep.metrics
    log_n = math.log(len(CODES))
    assert m["collapse/first_turn/mi_seq_estimate"] > 0.9 * log_n
    assert m["collapse/first_turn/mi_seq_estimate"] <= log_n + 1e-9
    assert m["collapse/first_turn/retrieval_accuracy"] == 1.0
    assert m["collapse/first_turn/retrieval_chance_level"] == pytest.approx(1 / 8)
    assert m["collapse/first_turn/conditional_entropy_est"] < 0.1  # deterministic given the input
    assert rep.regimes["first_turn"] is Regime.COMPRESSED


def test_the_other_two_regimes_on_the_tiny_model(taught_tiny: Any) -> None:
    mix = collapse_report(_policy_samples(taught_tiny, "mix"), taught_tiny, num_samples=None)
    same = collapse_report(_policy_samples(taught_tiny, "same"), taught_tiny, num_samples=None)
    assert mix.regimes["first_turn"] is Regime.DIVERSE
    assert mix.metrics["collapse/first_turn/mi_seq_normalized"] > 0.9
    assert same.regimes["first_turn"] is Regime.LOW_ENTROPY_COLLAPSE
    assert abs(same.metrics["collapse/first_turn/mi_seq_normalized"]) < 0.1


def test_prefix_cache_path_equals_plain_path_and_token_scores() -> None:
    from ragen_bench.diagnostics.hf_scorer import HFScorer

    sc = HFScorer("tiny", micro_batch_size=3)
    rng = np.random.default_rng(0)
    xs = [list(rng.integers(5, 1000, size=int(n))) for n in (7, 30, 1)]
    zs = [list(rng.integers(5, 1000, size=int(n))) for n in (1, 12, 5, 9, 20)]
    own = [0, 1, 2, 0, 1]
    cached = sc.score(xs, zs, own=own)
    sc.prefix_cache = False
    plain = sc.score(xs, zs, own=own)
    np.testing.assert_allclose(cached.seq, plain.seq, rtol=0, atol=1e-4)
    np.testing.assert_allclose(cached.own_entropy, plain.own_entropy, rtol=0, atol=1e-4)
    for i, j in ((0, 0), (4, 2), (3, 1)):
        assert sc.token_logprobs(xs[j], zs[i]).sum() == pytest.approx(cached.seq[i, j], abs=1e-4)
    vocab = sc.model.get_output_embeddings().weight.shape[0]
    assert np.all(cached.own_entropy > 0) and np.all(cached.own_entropy <= math.log(vocab) + 1e-6)


def test_unshareable_cache_falls_back_to_the_plain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragen_bench.diagnostics import hf_scorer

    sc = hf_scorer.HFScorer("tiny")
    xs, zs = [[5, 6, 7], [8, 9, 10, 11]], [[12, 13], [14]]
    want = sc.score(xs, zs).seq
    monkeypatch.setattr(
        hf_scorer, "_cache_tensors", lambda cache: None
    )  # e.g. a sliding-window cache
    np.testing.assert_allclose(sc.score(xs, zs).seq, want, rtol=0, atol=1e-4)
    sc.prefix_cache = True
    with pytest.raises(RuntimeError, match="prefix_cache=False"):
        sc.score(xs, zs)


def test_teacher_forced_scores_equal_the_log_probs_recorded_while_sampling() -> None:
    """Scoring a sampled completion gives back the log-probs the sampler recorded (T = 1)."""
    from ragen_bench.diagnostics.hf_scorer import HFScorer
    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.types import PolicyRequest, SamplingParams

    policy = HFPolicy("tiny", max_batch_size=4)
    msgs = [[{"role": "user", "content": f"state {k}"}] for k in range(3)]
    gens = policy.generate_sync(
        [PolicyRequest(messages=m) for m in msgs],
        SamplingParams(temperature=1.0, max_new_tokens=12, seed=3),
    )
    sc = HFScorer.from_policy(policy)
    for g in gens:
        got = sc.token_logprobs(g.prompt_token_ids, g.completion_token_ids)
        np.testing.assert_allclose(got, g.completion_logprobs, rtol=0, atol=1e-4)


# ---------------------------------------------------------------- harness / CLI
def _think_script(e: int, t: int) -> str:
    arm = ("first", "second")[e % 2]
    return f"<think>I will pull the {arm} arm, episode {e}.</think><answer>nothing</answer>"


def test_diagnose_command_adds_a_schema_valid_block(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragen_bench.cli import app
    from ragen_bench.leaderboard import add_run
    from ragen_bench.runner import RunRequest, start_run
    from ragen_bench.validate import validate_file
    from tests.helpers.scripted import ScriptedPolicy

    req = RunRequest(
        env_id="ragen/Bandit-v0",
        backend="scripted",
        model="scripted",
        episodes=8,
        group_size=2,
        out=str(tmp_path / "runs"),
        run_id="scr",
    )
    run = start_run(req, policy=ScriptedPolicy(_think_script))
    res = CliRunner().invoke(
        app, ["diagnose", str(run), "--scorer", "hf:tiny", "--num-samples", "64", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert validate_file(run / "summary.json") == ("summary", 1)
    block = json.loads((run / "summary.json").read_text())["diagnostics"]
    m = block["metrics"]
    assert block["scorer"]["kind"] == "hf" and block["settings"]["samplers"] == [
        "first_turn",
        "trajectory",
    ]
    assert m["collapse/valid_thinking_rate"] == 1.0 and m["collapse/first_turn_num_valid"] == 8
    # columns are the distinct first-turn prompts (4 seeds, but two Bandit seeds may share a prompt)
    eps = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    distinct = len({json.dumps(e["turns"][0]["prompt_messages"]) for e in eps})
    assert 2 <= distinct <= 4
    assert (
        m["collapse/first_turn/num_rows"] == 8 and m["collapse/first_turn/num_columns"] == distinct
    )
    assert m["collapse/first_turn/mi_upper_bound"] == pytest.approx(math.log(distinct))
    assert m["collapse/first_turn/mi_seq_estimate"] <= math.log(distinct) + 1e-9
    assert m["collapse/trajectory/num_rows"] == 8 and m["collapse/trajectory/num_columns"] == 8
    assert block["regimes"]["first_turn"] in {r.value for r in Regime} - {"insufficient_data"}
    entry = add_run(tmp_path / "board.json", run)
    assert entry["diagnostics"] == block
    bad = CliRunner().invoke(app, ["diagnose", str(run), "--scorer", "tiny"])
    assert bad.exit_code == 2 and "hf:<model>" in bad.output


@pytest.mark.slow
def test_run_with_diagnostics_on_the_tiny_model(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragen_bench.cli import app
    from ragen_bench.validate import validate_file

    res = CliRunner().invoke(
        app,
        [
            "run",
            "--backend",
            "hf",
            "--model",
            "tiny",
            "--env",
            "ragen/Bandit-v0",
            "--episodes",
            "4",
            "--group-size",
            "2",
            "--max-new-tokens",
            "24",
            "--temperature",
            "1.0",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "d",
            "--no-progress",
            "--diagnostics",
        ],
    )
    assert res.exit_code == 0, res.output
    summary_path = tmp_path / "runs" / "d" / "summary.json"
    assert validate_file(summary_path) == ("summary", 1)
    block = json.loads(summary_path.read_text())["diagnostics"]
    assert block["scorer"]["model"] == "tiny"
    # the untrained model rarely closes a think block; whatever it did is counted
    assert block["metrics"]["collapse/first_turn_num_total"] == 4
    assert set(block["regimes"]) == {"first_turn", "trajectory"}
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--backend",
            "random",
            "--env",
            "ragen/Bandit-v0",
            "--episodes",
            "2",
            "--out",
            str(tmp_path / "runs"),
            "--no-progress",
            "--diagnostics",
        ],
    )
    assert res.exit_code == 2 and "--scorer" in res.output
