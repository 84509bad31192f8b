"""GPU check without network: update and rollout throughput of Qwen2.5-architecture models
and three end-to-end StarPO steps, written as one JSON file.

    python benchmarks/gpu/gpu_check.py --out gpu_check.json            # on one H100/H200
    python benchmarks/gpu/gpu_check.py --device cpu --tiny --out x.json # the CPU test's form

Needs only torch, transformers, peft and accelerate plus this project's pure-Python deps
(``benchmarks/gpu/run.sh`` installs those from the wheels ``make_wheels.sh`` collected);
nothing is downloaded: the models are random-initialised from their configs (Qwen2.5-0.5B
and -1.5B shapes, from the published ``config.json`` values), the StarPO steps use the
offline tiny model.

What it measures, per model size:

* ``update_tokens_per_s``: forward + backward + AdamW step on ``(batch, seq_len)`` random
  tokens in bf16 (autocast-free: the weights are bf16), after warm-up;
* ``mfu``: model FLOP utilisation ``6 · N · tokens/s / peak`` (Kaplan et al. 2020, the
  ``6N`` FLOPs per trained token; attention FLOPs ignored), with ``peak`` the device's dense
  bf16 peak (H100/H200 SXM: 989 TFLOP/s; ``--peak-tflops`` overrides);
* ``rollout_tokens_per_s``: HF ``generate`` of ``gen_tokens`` new tokens for ``gen_batch``
  prompts (sampling, no early stop);
* ``peak_memory_gib``: ``torch.cuda.max_memory_allocated`` over the size's tests.

Then ``starpo``: 3 StarPO steps with ``model.device=<device>`` in this process, and 3 under
``torchrun --nproc_per_node 1`` with ``trainer.distributed=fsdp2`` (GPU only), with their
step times; then ``starpo_vllm``: 2 StarPO steps with ``rollout.sampler=vllm`` under
``torchrun --nproc_per_node <GPUs>`` (``trainer.distributed=fsdp2`` when more than one GPU)
on a random-initialised 2-layer model of Qwen2.5-0.5B's width with the tiny tokenizer
(built offline; vLLM's attention kernels do not take the tiny model's head size), skipped
when vllm is not importable.  Each part that fails records its error instead of stopping
the script.

Time: ``--budget-s`` (default 540 s = 9 min) bounds the whole run; a stage that would start
after it is recorded as skipped, subprocess stages get at most the time left, and the JSON
is rewritten after every stage, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

#: Qwen2.5 shapes (hidden, layers, heads, kv heads, intermediate), vocabulary 151936, tied
#: embeddings as the published 0.5B/1.5B configs.
SIZES: dict[str, dict[str, Any]] = {
    "0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    # The CPU test's stand-in: the same code path in seconds.
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=1024,
        tie_word_embeddings=True,
    ),
}
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def build(size: str, device: str, dtype: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(max_position_embeddings=4096, rope_theta=1_000_000.0, **SIZES[size])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.to(device)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def update_speed(model: Any, device: str, batch: int, seq_len: int, iters: int) -> dict[str, float]:
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, seq_len), device=device)
    model.train()
    for i in range(iters + 1):
        if i == 1:
            _sync(device)
            t0 = time.perf_counter()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _sync(device)
    dt = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    tps = batch * seq_len * iters / dt
    del opt
    return {
        "params": float(n_params),
        "update_tokens_per_s": tps,
        "update_flops_per_s": 6.0 * n_params * tps,
    }


def rollout_speed(
    model: Any, device: str, batch: int, prompt_len: int, new_tokens: int
) -> dict[str, float]:
    import torch

    model.eval()
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), device=device)
    kw = dict(
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        pad_token_id=0,
    )
    with torch.no_grad():
        model.generate(
            input_ids=ids[:, :8], max_new_tokens=2, do_sample=False, pad_token_id=0
        )  # warm-up
        _sync(device)
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kw)
        _sync(device)
    dt = time.perf_counter() - t0
    return {"rollout_tokens_per_s": (out.shape[1] - prompt_len) * batch / dt}


def peak_tflops(device: str, override: float | None) -> float | None:
    if override:
        return override
    if not device.startswith("cuda"):
        return None
    import torch

    name = torch.cuda.get_device_name(torch.device(device))
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def size_report(size: str, a: argparse.Namespace) -> dict[str, Any]:
    import torch

    rep: dict[str, Any] = {"size": size}
    if a.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    try:
        model = build(size, a.device, torch.bfloat16)
        rep.update(update_speed(model, a.device, a.batch, a.seq_len, a.iters))
        peak = peak_tflops(a.device, a.peak_tflops)
        rep["peak_tflops"] = peak
        rep["mfu"] = rep["update_flops_per_s"] / (peak * 1e12) if peak else None
        rep.update(rollout_speed(model, a.device, a.gen_batch, a.prompt_len, a.gen_tokens))
        del model
    except Exception as exc:  # record, go on with the other parts
        rep["error"] = f"{type(exc).__name__}: {exc}"
        rep["traceback"] = traceback.format_exc(limit=5)
    if a.device.startswith("cuda"):
        rep["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.empty_cache()
    return rep


def _starpo_overrides(device: str, out_dir: str, distributed: str = "ddp") -> list[str]:
    return [
        f"model.device={device}",
        "trainer.total_steps=3",
        "trainer.val_every=0",
        "trainer.save_every=0",
        "trainer.collapse_every=0",
        f"trainer.out_dir={out_dir}",
        'trainer.loggers=["jsonl"]',
        f"trainer.distributed={distributed}",
        "rollout.sampler=hf",
        "rollout.env_groups=4",
        "rollout.group_size=4",
    ]


def _read_steps(out_dir: str) -> list[dict[str, Any]]:
    path = Path(out_dir) / "metrics.jsonl"
    rows = (
        [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        if path.is_file()
        else []
    )
    return [
        {
            k: r[k]
            for k in ("step", "time/step_s", "time/rollout_s", "time/update_s", "train/success")
            if k in r
        }
        for r in rows
        if "time/step_s" in r
    ]


def starpo_single(device: str, work: str) -> dict[str, Any]:
    from ragen_train.config import apply_overrides, load_config
    from ragen_train.trainer import StarPOTrainer

    out = str(Path(work) / "single")
    t0 = time.perf_counter()
    try:
        StarPOTrainer(
            apply_overrides(load_config("tiny-bandit-grpo"), _starpo_overrides(device, out))
        ).fit()
    except Exception as exc:
        return {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=5),
        }
    return {"ok": True, "wall_s": time.perf_counter() - t0, "steps": _read_steps(out)}


def starpo_fsdp2(device: str, work: str, timeout: float) -> dict[str, Any]:
    out = str(Path(work) / "fsdp2")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "1",
        "-m",
        "ragen_train.cli",
        "starpo",
        "--config",
        "tiny-bandit-grpo",
        *_starpo_overrides(device, out, "fsdp2"),
    ]
    return _run_stage(cmd, timeout, out)


def _vllm_model(work: str) -> str:
    """A random-initialised 2-layer model with Qwen2.5-0.5B's width (head size 64) and the
    tiny model's tokenizer, saved under ``work``; its directory."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from ragen_bench.tiny import tiny_model_path

    tiny = tiny_model_path()
    cfg = AutoConfig.from_pretrained(tiny)
    shape = {k: v for k, v in SIZES["0.5b"].items() if k != "vocab_size"}
    cfg.update({**shape, "num_hidden_layers": 2})
    model = AutoModelForCausalLM.from_config(cfg)
    path = Path(work) / "vllm_model"
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(path)
    return str(path)


def starpo_vllm(device: str, work: str, timeout: float) -> dict[str, Any]:
    """2 StarPO steps with ``rollout.sampler=vllm`` on every visible GPU (FSDP2 when > 1)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return {"ok": None, "skipped": "vllm is not importable"}
    if not device.startswith("cuda"):
        return {"ok": None, "skipped": "GPU only"}
    import torch

    gpus = max(1, torch.cuda.device_count())
    out = str(Path(work) / "vllm")
    overrides = [
        *_starpo_overrides("cuda", out, "fsdp2" if gpus > 1 else "ddp"),
        f"model.path={_vllm_model(work)}",
        "trainer.total_steps=2",
        "rollout.sampler=vllm",
        "rollout.vllm.gpu_memory_utilization=0.3",
        "rollout.vllm.max_model_len=1024",
        "algorithm.entropy_coef=0.01",
    ]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc_per_node", str(gpus), "-m", "ragen_train.cli", "starpo"]
    cmd += ["--config", "tiny-bandit-grpo", *overrides]
    res = _run_stage(cmd, timeout, out)
    res["gpus"] = gpus
    return res


def _run_stage(cmd: list[str], timeout: float, out: str) -> dict[str, Any]:
    """Run one training subprocess with at most ``timeout`` seconds; its steps and error."""
    t0 = time.perf_counter()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:g}s", "steps": _read_steps(out)}
    res: dict[str, Any] = {
        "ok": proc.returncode == 0,
        "wall_s": time.perf_counter() - t0,
        "steps": _read_steps(out),
    }
    if proc.returncode != 0:
        res["error"] = (proc.stderr or proc.stdout)[-2000:]
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description="GPU check: update / rollout throughput, MFU, memory, StarPO steps."
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sizes", default="0.5b,1.5b", help=f"comma-separated, from {sorted(SIZES)}")
    ap.add_argument(
        "--tiny", action="store_true", help="CPU test form: --sizes tiny and small shapes"
    )
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak of the device")
    ap.add_argument("--no-starpo", action="store_true")
    ap.add_argument("--fsdp2-timeout", type=float, default=180.0)
    ap.add_argument(
        "--budget-s", type=float, default=540.0, help="overall time budget (default 9 min)"
    )
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    a = ap.parse_args(argv)
    if a.tiny:
        a.sizes, a.batch, a.seq_len, a.iters, a.gen_batch, a.prompt_len, a.gen_tokens = (
            "tiny",
            2,
            32,
            2,
            2,
            8,
            4,
        )
    import torch
    import transformers

    t0 = time.perf_counter()
    deadline = t0 + a.budget_s
    report: dict[str, Any] = {
        "device": a.device,
        "device_name": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "settings": {k: v for k, v in vars(a).items() if k != "out"} | {"out": str(a.out)},
        "sizes": [],
    }

    def left() -> float:
        return deadline - time.perf_counter()

    def save() -> None:  # after every stage: a run cut short keeps what it measured
        report["wall_s"] = time.perf_counter() - t0
        a.out.write_text(json.dumps(report, indent=2, default=str) + "\n")

    def skipped() -> dict[str, Any]:
        return {"ok": None, "skipped": f"time budget ({a.budget_s:g} s) spent"}

    for size in (s.strip() for s in a.sizes.split(",") if s.strip()):
        report["sizes"].append(size_report(size, a) if left() > 0 else skipped() | {"size": size})
        save()
    if not a.no_starpo:
        with tempfile.TemporaryDirectory(prefix="ragen-gpu-check-") as work:
            report["starpo_single_process"] = (
                starpo_single(a.device, work) if left() > 0 else skipped()
            )
            save()
            report["starpo_fsdp2_world1"] = (
                {"ok": None, "skipped": "GPU only"}
                if not a.device.startswith("cuda")
                else starpo_fsdp2(a.device, work, min(a.fsdp2_timeout, left()))
                if left() > 10
                else skipped()
            )
            save()
            report["starpo_vllm"] = (
                starpo_vllm(a.device, work, left()) if left() > 10 else skipped()
            )
            save()
    save()
    print(
        json.dumps(
            {k: report[k] for k in ("device_name", "wall_s")}
            | {
                s["size"]: {
                    k: s.get(k)
                    for k in (
                        "update_tokens_per_s",
                        "mfu",
                        "rollout_tokens_per_s",
                        "peak_memory_gib",
                        "error",
                    )
                }
                for s in report["sizes"]
            }
        )
    )
    return report


if __name__ == "__main__":
    main()
