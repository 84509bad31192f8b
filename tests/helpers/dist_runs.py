"""Several StarPO runs in one launch, one after another (tests/train/test_fsdp2.py).

    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/dist_runs.py CASES.json

``CASES.json``: a list of ``{"config": preset or file, "overrides": [...], "resume": bool}``.
Each case is what ``ragen-train starpo --config CONFIG OVERRIDES [--resume latest]`` does —
a fresh :class:`~ragen_train.trainer.StarPOTrainer`, ``fit()`` — except that the process
group is kept from one case to the next (``close()`` leaves it, so only the last case calls
it): a launch costs more than a small run (process start-up, imports, rendezvous).
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path


def main() -> None:
    from ragen_train.config import load_config
    from ragen_train.trainer import StarPOTrainer

    cases = json.loads(Path(sys.argv[1]).read_text())
    trainer = None
    for case in cases:
        if trainer is not None:  # free the previous case's wrapped models before the next
            del trainer
            gc.collect()
        cfg = load_config(case["config"], case["overrides"])
        trainer = StarPOTrainer(cfg, resume="latest" if case.get("resume") else None)
        trainer.fit()
    if trainer is not None:
        trainer.close()


if __name__ == "__main__":
    main()
