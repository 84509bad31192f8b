"""Write ragen_bench/data/tiny_corpus.txt: the text the tiny model's BPE merges are learned from.

The corpus is checked in, so the tiny tokenizer (and model) is identical everywhere; rerun
this script only deliberately (it changes the tiny model).  It holds, for the procedural
environments, oracle conversations rendered by the real agent loop (system prompts,
observations, feedback, answers) for a few seeds of every preset.

    python scripts/make_tiny_corpus.py
"""

from __future__ import annotations

from pathlib import Path

import ragen_envs
from ragen_bench.policies import OraclePolicy, RandomPolicy
from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs

OUT = Path(__file__).resolve().parent.parent / "ragen_bench" / "data" / "tiny_corpus.txt"


def main() -> None:
    texts: list[str] = []
    for entry in ragen_envs.list_envs():
        if not entry.procedural:
            continue
        for split in ("train", "validation", "test"):
            for policy in (OraclePolicy(), RandomPolicy(seed=0)):
                specs = make_specs(entry.id, episodes=8, seed=100, env_config={"split": split})
                cfg = RolloutConfig(max_turns=3, max_actions_per_turn=2)
                for rec in RolloutEngine(policy, cfg).run(specs):
                    for m in rec.messages:
                        texts.append(m["content"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(texts)} texts)")


if __name__ == "__main__":
    main()
