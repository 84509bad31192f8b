"""Cost of the collapse diagnostics on the tiny model, and its share of a training step.

    python benchmarks/diagnostics_cost.py [--rows 64] [--z-tokens 200] [--repeats 3]

Prints wall-clock seconds (median of ``--repeats`` after one warm-up) for:

* cross-scoring N = ``--rows`` reasonings of ``--z-tokens`` tokens against
  - 8 distinct inputs (the first-turn sampler on RAGEN's default batch: 8 env groups,
    64 of the 128 first-turn samples drawn; ``collapse_detection`` in RAGEN-AI/RAGEN
    ``config/base.yaml``), and
  - N distinct inputs (the trajectory sampler: every draw its own prompt, the worst case),
  each with the shared prefix cache and with plain ``x ⊕ z`` concatenation (RAGEN's way);
* a training-step proxy: forward + backward + AdamW step over 32 sequences of 600 tokens
  (RAGEN's ``ppo_mini_batch_size`` 32; a multi-turn episode of a few hundred tokens);

and the share of a step the diagnostics add at RAGEN's default frequency
(``compute_freq`` = 5, RAGEN-AI/RAGEN ``config/base.yaml``): ``t_diag / (5 · t_step)``.

Inputs are real first-turn prompts (system message + first user message of
ragen/Sokoban-v0, seeds 0..N-1, the tiny model's chat template, plus ``<think>``);
reasonings are random token sequences (their content does not change the cost).
Not a test: nothing is asserted.  The machine is shared; quote the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch


def _median_time(
    fn: Callable[[], object], repeats: int, warmup: Callable[[], object] | None = None
) -> float:
    (warmup or fn)()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sokoban_inputs(tt: object, n: int) -> list[list[int]]:
    import ragen_envs
    from ragen_bench.prompts import system_message, turn_text

    env = ragen_envs.make("ragen/Sokoban-v0")
    xs = []
    for seed in range(n):
        obs, _ = env.reset(seed=seed)
        msgs = [
            {
                "role": "system",
                "content": system_message(
                    env.unwrapped.instruction,
                    enable_think=True,
                    max_actions_per_turn=2,
                    max_new_tokens=400,
                ),
            },
            {"role": "user", "content": turn_text(1, 5, obs, 2)},
        ]
        xs.append(tt.prompt_ids(msgs) + tt.encode("<think>"))
    return xs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--z-tokens", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--step-batch", type=int, default=32)
    ap.add_argument("--step-tokens", type=int, default=600)
    ap.add_argument("--compute-freq", type=int, default=5)
    args = ap.parse_args()

    from ragen_bench.diagnostics.hf_scorer import HFScorer

    scorer = HFScorer("tiny")
    model, tt = scorer.model, scorer.text_tokenizer
    vocab = int(model.get_output_embeddings().weight.shape[0])
    rng = np.random.default_rng(0)
    xs_all = sokoban_inputs(tt, args.rows)
    zs = [list(rng.integers(10, vocab - 10, size=args.z_tokens)) for _ in range(args.rows)]
    print(
        f"tiny model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, vocab {vocab}, "
        f"torch threads {torch.get_num_threads()}"
    )
    print(
        f"inputs: Sokoban first-turn prompts, {np.mean([len(x) for x in xs_all]):.0f} tokens on average; "
        f"reasonings: {args.z_tokens} tokens; N = {args.rows}"
    )

    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    batch = torch.from_numpy(rng.integers(10, vocab - 10, size=(args.step_batch, args.step_tokens)))

    def step() -> None:
        model.train()
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()

    # The step is timed before and after the scoring (the machine is shared; load drifts).
    step_times = [_median_time(step, args.repeats)]
    results = {}
    for label, n_inputs in (
        ("first_turn (8 inputs)", 8),
        (f"trajectory ({args.rows} inputs)", args.rows),
    ):
        xs = xs_all[:n_inputs]
        own = [i % n_inputs for i in range(args.rows)]
        for cache in (True, False):
            scorer.prefix_cache = cache
            t = _median_time(
                lambda: scorer.score(xs, zs, own=own),
                args.repeats,
                warmup=lambda: scorer.score(xs[:2], zs[:2]),
            )
            results[(label, cache)] = t
            print(
                f"  score {args.rows} x {n_inputs:>3} [{'prefix cache' if cache else 'plain x+z  '}]: {t:8.3f} s"
            )

    step_times.append(_median_time(step, args.repeats))
    t_step = statistics.mean(step_times)
    print(
        f"  training-step proxy (fwd+bwd+AdamW, {args.step_batch} x {args.step_tokens} tokens): {t_step:8.3f} s "
        f"(before / after the scoring: {step_times[0]:.3f} / {step_times[1]:.3f} s)"
    )
    for (label, cache), t in results.items():
        if cache:
            share = t / (args.compute_freq * t_step)
            print(
                f"  share of a step at compute_freq={args.compute_freq}, {label}: {100 * share:6.1f} % "
                f"(= {t:.3f} / ({args.compute_freq} x {t_step:.3f}))"
            )


if __name__ == "__main__":
    main()
