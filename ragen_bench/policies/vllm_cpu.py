"""Running vLLM on a CPU: the engine dtype, memory sized from free RAM, and one-line start-up errors.

Shared by the bench back-ends (``--policy vllm`` and ``--policy vllm-server``,
:mod:`ragen_bench.policies.vllm_backend`) and the trainer's rollout engine
(:mod:`ragen_train.rollout_engine`), so the two pick the same dtype and speak the same error.
Imports neither vLLM nor torch.

* :func:`engine_dtype` — ``auto`` is ``float32`` on every CPU (``bfloat16`` on GPUs).
* :func:`plan_cpu_memory` — vLLM's CPU back-end reserves ``gpu_memory_utilization`` (0.92 by
  default in vLLM 0.32) of *all* host RAM unless a KV cache size is given
  (``vllm/v1/worker/cpu_worker.py``), so on a machine where other jobs hold memory it fails at
  start-up.  The plan gives an explicit KV cache (``kv_cache_memory_bytes``, whole GiB) and a
  memory fraction sized from the free memory (:func:`free_memory_bytes`) and the model's
  weights; too little free memory is one line (:class:`VLLMStartError`).
* :func:`startup_error_line` — the one line that replaces vLLM's 140-290-line start-up
  traceback: its root cause, the options that change the memory it asks for, and the path
  of the full log.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bytes in one GiB.
GIB = 1 << 30

# -------------------------------------------------------------------- dtype
#: /proc/cpuinfo flags of a CPU with native bfloat16 matrix arithmetic (AVX-512 BF16, AMX).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags (the first ``flags`` line of ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def engine_dtype(requested: str, device: str, flags: set[str] | None = None) -> str:
    """The dtype a vLLM engine runs in for a requested ``dtype``.

    ``auto``: ``bfloat16`` on a GPU; ``float32`` on every CPU.  Two reasons:
    a bf16 copy of the weights rounds most of a small LoRA update away at every trainer sync
    (after one sync 91.6% of the targeted weights were unchanged, and the engine/trainer
    log-prob gap grew from 0.009 to 0.23 nats); and without native bf16
    (:data:`NATIVE_BF16_FLAGS`) vLLM's CPU bf16 is about 13x slower than float32 (1.27 vs
    16.8 tok/s on a 2-core AMD Zen 3).  With native bf16, ask for ``bfloat16`` explicitly.
    Any value other than ``auto`` is returned as given.

    Args:
        requested: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        device: where the engine runs (``cpu``, ``cuda``, ``cuda:1``...).
        flags: CPU flags (default: :func:`cpu_flags`); kept for callers that report them,
            ``auto`` does not depend on them.
    """
    del flags
    if requested != "auto":
        return requested
    return "bfloat16" if str(device).startswith("cuda") else "float32"


# ------------------------------------------------------------------- memory
#: Memory a CPU engine takes besides its weights and KV cache: the Python processes, torch
#: and vLLM themselves, activations (measured: 1.1 GB API server + 0.8 GB EngineCore + ~1 GB
#: in the worker for the 0.5B model; ``../shared/tools/README.md``).
RUNTIME_BYTES = 3 * GIB
#: Share of the memory left after weights and runtime that the KV cache takes by default
#: (the rest stays free for the envs, the results writer and other jobs on the machine).
KV_SHARE = 0.5
#: Largest default KV cache: 4 GiB hold 174k tokens of the 0.5B model in float32, far more
#: than a batch of multi-turn episodes needs.
KV_MAX_BYTES = 4 * GIB
#: Smallest KV cache vLLM's CPU back-end takes (``VLLM_CPU_KVCACHE_SPACE`` is whole GiB).
KV_MIN_BYTES = GIB
#: Highest default memory fraction (vLLM's own default is 0.92 of all host RAM).
MAX_UTILIZATION = 0.9

#: Where the options that set a CPU engine's memory are given, named in every memory error.
MEMORY_OPTIONS = (
    "--policy-option gpu_memory_utilization=F (share of all RAM vLLM may take) "
    "or VLLM_CPU_KVCACHE_SPACE=N (GiB of KV cache)"
)


class VLLMStartError(RuntimeError, OSError):
    """vLLM cannot start here; the message is one line (cause, options, log path).

    An ``OSError`` too (like ``ENOMEM``: the machine lacks a resource), so command lines
    that print ``OSError`` s as one line print this one so, without a traceback.
    """


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def free_memory_bytes(
    meminfo: str | Path = "/proc/meminfo", cgroup: str | Path = "/sys/fs/cgroup"
) -> tuple[int, int] | None:
    """``(free, total)`` bytes of RAM this process may still use; ``None`` where unknown.

    ``free`` is the kernel's ``MemAvailable`` (free pages plus reclaimable caches; vLLM's
    ``get_memory_node_info`` counts about the same); a cgroup v2 limit (``memory.max``)
    below the machine's total caps both, with ``free = memory.max - memory.current``.
    """
    values: dict[str, int] = {}
    try:
        for line in Path(meminfo).read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key.strip()] = int(parts[0]) * 1024  # kB
    except OSError:
        return None
    if "MemAvailable" not in values or "MemTotal" not in values:
        return None
    free, total = values["MemAvailable"], values["MemTotal"]
    limit = _read_int(Path(cgroup) / "memory.max")  # "max" (no limit) reads as None
    if limit is not None and limit < total:
        used = _read_int(Path(cgroup) / "memory.current") or 0
        total, free = limit, min(free, max(0, limit - used))
    return free, total


_ITEMSIZE = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def _model_config(model_dir: str | Path) -> dict[str, Any]:
    try:
        conf = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    text = conf.get("text_config")  # multimodal configs keep the decoder's fields there
    return {**text, **conf} if isinstance(text, dict) else conf


def weights_bytes(model_dir: str | Path, dtype: str | None = None) -> int:
    """Bytes the model's weights take in ``dtype`` (``None``: as stored): the size of its
    weight files (``*.safetensors``, else ``*.bin``) scaled from the dtype they are stored
    in (the config's ``torch_dtype`` / ``dtype``; float32 when unknown); 0 for a folder
    without them."""
    d = Path(model_dir)
    files = list(d.glob("*.safetensors")) or list(d.glob("*.bin"))
    size = sum(f.stat().st_size for f in files if f.is_file())
    conf = _model_config(d)
    stored = _ITEMSIZE.get(str(conf.get("torch_dtype") or conf.get("dtype") or "float32"), 4)
    return int(size * _ITEMSIZE.get(dtype or "", stored) / stored)


def kv_bytes_per_token(model_dir: str | Path, dtype: str) -> int | None:
    """KV cache bytes one token takes: ``layers · 2 (K, V) · kv_heads · head_dim · itemsize``
    from the model's ``config.json``; ``None`` when its fields are missing."""
    conf = _model_config(model_dir)
    try:
        layers = int(conf["num_hidden_layers"])
        heads = int(conf["num_attention_heads"])
        kv_heads = int(conf.get("num_key_value_heads") or heads)
        head_dim = int(conf.get("head_dim") or int(conf["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return layers * 2 * kv_heads * head_dim * _ITEMSIZE.get(dtype, 4)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class CpuMemoryPlan:
    """The memory settings of one CPU engine (see :func:`plan_cpu_memory`); bytes."""

    free_bytes: int
    total_bytes: int
    weights_bytes: int
    kv_cache_bytes: int
    gpu_memory_utilization: float

    @property
    def kv_cache_gib(self) -> int:
        """The KV cache in whole GiB (``VLLM_CPU_KVCACHE_SPACE``'s unit)."""
        return self.kv_cache_bytes // GIB

    def describe(self) -> dict[str, Any]:
        """The plan as ``run.json`` records it (GiB, two decimals)."""
        return {
            "kv_cache_gib": self.kv_cache_gib,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "free_memory_gib": round(self.free_bytes / GIB, 2),
            "total_memory_gib": round(self.total_bytes / GIB, 2),
            "weights_gib": round(self.weights_bytes / GIB, 2),
        }

    def line(self, dtype: str) -> str:
        """One line saying what was chosen and why."""
        return (
            f"vLLM on CPU: {dtype}, KV cache {self.kv_cache_gib} GiB, gpu_memory_utilization "
            f"{self.gpu_memory_utilization:g} ({_gib(self.free_bytes)} of "
            f"{_gib(self.total_bytes)} free, weights {_gib(self.weights_bytes)}; "
            f"set {MEMORY_OPTIONS} to choose)"
        )


def plan_cpu_memory(
    free_bytes: int,
    total_bytes: int,
    weights: int,
    *,
    min_kv_bytes: int = KV_MIN_BYTES,
) -> CpuMemoryPlan:
    """Size a CPU engine's KV cache and memory fraction from the free memory.

    With ``spare = free − weights − RUNTIME_BYTES``, the KV cache is
    ``KV_SHARE · spare``, at least ``min_kv_bytes`` and at most :data:`KV_MAX_BYTES`, rounded
    down to whole GiB (rounded up when ``min_kv_bytes`` needs it); the memory fraction is
    ``(weights + KV + RUNTIME_BYTES) / total`` rounded up to two decimals, at most
    :data:`MAX_UTILIZATION`.  For example 12 GiB free of 23 GiB with 2.4 GiB of weights:
    ``spare`` 6.6 GiB, KV cache 3 GiB, fraction 0.37.

    Args:
        free_bytes / total_bytes: RAM this process may use / all of it (:func:`free_memory_bytes`).
        weights: bytes of the weights in the engine's dtype (:func:`weights_bytes`).
        min_kv_bytes: the smallest useful KV cache (one sequence of the context length:
            :func:`kv_bytes_per_token` · ``max_model_len``); at least :data:`KV_MIN_BYTES`.

    Raises:
        VLLMStartError: ``spare`` is below the smallest KV cache (one line naming the free
            memory, what the engine needs and :data:`MEMORY_OPTIONS`).
    """
    need_kv = max(KV_MIN_BYTES, math.ceil(min_kv_bytes / GIB) * GIB)
    spare = free_bytes - weights - RUNTIME_BYTES
    if spare < need_kv:
        raise VLLMStartError(
            f"vLLM cannot start: {_gib(free_bytes)} of {_gib(total_bytes)} RAM is free, and the "
            f"engine needs about {_gib(weights + RUNTIME_BYTES + need_kv)} (weights "
            f"{_gib(weights)} + runtime {_gib(RUNTIME_BYTES)} + KV cache {_gib(need_kv)}); "
            f"free memory, use a smaller model or --policy-option max_model_len=N, or set "
            f"{MEMORY_OPTIONS} yourself"
        )
    kv = max(need_kv, min(KV_MAX_BYTES, int(spare * KV_SHARE)) // GIB * GIB)
    util = math.ceil(100 * (weights + kv + RUNTIME_BYTES) / max(total_bytes, 1)) / 100
    return CpuMemoryPlan(
        free_bytes=int(free_bytes),
        total_bytes=int(total_bytes),
        weights_bytes=int(weights),
        kv_cache_bytes=int(kv),
        gpu_memory_utilization=min(MAX_UTILIZATION, util),
    )


def plan_for_model(model_dir: str | Path, dtype: str, max_model_len: int | None) -> CpuMemoryPlan:
    """:func:`plan_cpu_memory` for ``model_dir`` in ``dtype`` with this machine's free memory.

    Raises:
        VLLMStartError: too little free memory (see :func:`plan_cpu_memory`), or the free
            memory cannot be read (no ``/proc/meminfo``: set the options yourself).
    """
    mem = free_memory_bytes()
    if mem is None:
        raise VLLMStartError(
            f"vLLM on CPU: cannot read the free memory (/proc/meminfo); set {MEMORY_OPTIONS}"
        )
    per_token = kv_bytes_per_token(model_dir, dtype) or 0
    length = max_model_len or _model_config(model_dir).get("max_position_embeddings") or 0
    return plan_cpu_memory(
        mem[0], mem[1], weights_bytes(model_dir, dtype), min_kv_bytes=per_token * int(length)
    )


@dataclass(frozen=True)
class CpuMemoryChoice:
    """What a CPU engine's memory will be: ``plan`` sized here, or ``None`` when the caller
    set it (``source``: ``"VLLM_CPU_KVCACHE_SPACE"`` or ``"options"``)."""

    plan: CpuMemoryPlan | None
    source: str
    line: str
    record: dict[str, Any]


def choose_cpu_memory(
    model_dir: str | Path,
    dtype: str,
    max_model_len: int | None,
    *,
    env: dict[str, str] | None = None,
    utilization: float | None = None,
    kv_cache_bytes: int | None = None,
    what: str = "vLLM on CPU",
) -> CpuMemoryChoice:
    """The memory of a CPU engine: what the caller set, else :func:`plan_for_model`.

    The caller's settings win, in vLLM's own order: ``VLLM_CPU_KVCACHE_SPACE`` in ``env``
    (default: this process's environment; vLLM reads it over any other KV setting), then an
    explicit ``utilization`` (``gpu_memory_utilization``) or ``kv_cache_bytes``
    (``kv_cache_memory_bytes``).

    Raises:
        VLLMStartError: nothing set and too little free memory (:func:`plan_cpu_memory`).
    """
    kv_env = (os.environ if env is None else env).get("VLLM_CPU_KVCACHE_SPACE") or None
    if kv_env is not None:
        line = f"{what}: {dtype}, KV cache {kv_env} GiB (VLLM_CPU_KVCACHE_SPACE)"
        record = {"kv_cache_gib": kv_env, "source": "VLLM_CPU_KVCACHE_SPACE"}
        return CpuMemoryChoice(None, "VLLM_CPU_KVCACHE_SPACE", line, record)
    if utilization is not None or kv_cache_bytes is not None:
        line = (
            f"{what}: {dtype}, memory as given (gpu_memory_utilization {utilization}, "
            f"kv_cache_memory_bytes {kv_cache_bytes})"
        )
        record = {
            "gpu_memory_utilization": utilization,
            "kv_cache_memory_bytes": kv_cache_bytes,
            "source": "options",
        }
        return CpuMemoryChoice(None, "options", line, record)
    plan = plan_for_model(model_dir, dtype, max_model_len)
    line = plan.line(dtype).replace("vLLM on CPU", what, 1)
    return CpuMemoryChoice(plan, "free memory", line, {**plan.describe(), "source": "free memory"})


# ------------------------------------------------------------ start-up errors
_UTILIZATION = re.compile(
    r"Available memory on node \d+ \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired "
    r"CPU memory utilization \(([\d.]+), ([\d.]+) GiB\)"
)
_KV_ALLOC = re.compile(
    r"Available memory on node \d+ \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation is less "
    r"than requested memory for kv \(([\d.]+)(?:/[\d.]+)? GiB\)"
)
_MAX_LEN = re.compile(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed")
_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)$")
_GENERIC = ("Engine core initialization failed", "See root cause above", "EngineDeadError")
_KILLED = re.compile(r"died unexpectedly|SIGKILL|signal 9|Killed\b|exit code -9")


def startup_error_line(log_text: str, log_path: str | None, *, what: str = "vLLM") -> str:
    """One line for a vLLM start-up that failed, from its log: the root cause, the options
    that change the memory vLLM asks for when memory is the cause, and the full log's path.

    Known causes (vLLM 0.32's CPU worker messages): free memory below
    ``gpu_memory_utilization`` · total; a KV cache (``VLLM_CPU_KVCACHE_SPACE``) larger than
    the free memory; a KV cache too small for one sequence of ``max_model_len``; a process
    killed (the kernel's OOM killer).  Otherwise the last ``...Error: message`` line that is
    not vLLM's generic "see root cause above" wrapper.

    Args:
        log_text: the start-up output (stdout and stderr of vLLM and its processes).
        log_path: where the full log is kept (named at the end), or ``None``.
        what: what failed ("vLLM", "the vLLM server exited with code 1 while starting").
    """
    where = f" (full log: {log_path})" if log_path else ""
    m = _UTILIZATION.search(log_text)
    if m:
        free, total, frac, want = (float(x) for x in m.groups())
        fit = max(0.05, math.floor(100 * max(free - 1.0, 0.0) / max(total, 1e-9)) / 100)
        return (
            f"{what}: only {free:g} of {total:g} GiB RAM is free, less than "
            f"gpu_memory_utilization {frac:g} asks for ({want:g} GiB); pass "
            f"--policy-option gpu_memory_utilization={fit:g} or set VLLM_CPU_KVCACHE_SPACE=1 "
            f"(GiB of KV cache), or free memory{where}"
        )
    m = _KV_ALLOC.search(log_text)
    if m:
        free, total, want = (float(x) for x in m.groups())
        return (
            f"{what}: the KV cache asked for ({want:g} GiB) does not fit in the {free:g} of "
            f"{total:g} GiB RAM that is free; set a smaller VLLM_CPU_KVCACHE_SPACE (GiB), or "
            f"unset it to have the KV cache sized from the free memory, or free memory{where}"
        )
    m = _MAX_LEN.search(log_text)
    if m:
        return (
            f"{what}: the KV cache cannot hold one sequence of max_model_len {m.group(1)} "
            f"({m.group(2)} GiB); "
            f"pass --policy-option max_model_len=N (smaller) or a larger KV cache "
            f"({MEMORY_OPTIONS}){where}"
        )
    errors = []
    for raw in log_text.splitlines():
        e = _ERROR.search(raw)
        if e and not any(g in raw for g in _GENERIC):
            errors.append(f"{e.group(1)}: {e.group(2).strip()}")
    if errors:
        return f"{what}: {errors[-1]}{where}"
    if _KILLED.search(log_text):
        return (
            f"{what}: a vLLM process was killed while starting (out of memory?); "
            f"set {MEMORY_OPTIONS}, or free memory{where}"
        )
    tail = next((ln.strip() for ln in reversed(log_text.splitlines()) if ln.strip()), "")
    return f"{what}: {tail or 'no output'}{where}"


def remove_quietly(path: str | os.PathLike[str] | None) -> None:
    """Delete a log file if it exists (a clean stop keeps no log behind)."""
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


__all__ = [
    "GIB",
    "KV_MAX_BYTES",
    "KV_MIN_BYTES",
    "KV_SHARE",
    "MAX_UTILIZATION",
    "MEMORY_OPTIONS",
    "NATIVE_BF16_FLAGS",
    "RUNTIME_BYTES",
    "CpuMemoryChoice",
    "CpuMemoryPlan",
    "VLLMStartError",
    "choose_cpu_memory",
    "cpu_flags",
    "engine_dtype",
    "free_memory_bytes",
    "kv_bytes_per_token",
    "plan_cpu_memory",
    "plan_for_model",
    "remove_quietly",
    "startup_error_line",
    "weights_bytes",
]
