"""``rollout.vllm.dtype=auto`` picks the engine dtype from the hardware."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen_train.config import load_config
from ragen_train.rollout_engine import cpu_flags, engine_dtype

ZEN3 = {"fpu", "sse2", "avx", "avx2", "fma"}  # the AMD EPYC: AVX2 only
SAPPHIRE_RAPIDS = ZEN3 | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}


@pytest.mark.parametrize(
    "device,flags,want",
    [
        ("cpu", ZEN3, "float32"),
        ("cpu", ZEN3 | {"avx512f", "avx512_vnni"}, "float32"),  # AVX-512 without BF16
        # Native bf16 too: a bf16 engine would round the LoRA update away.
        ("cpu", ZEN3 | {"avx512_bf16"}, "float32"),
        ("cpu", ZEN3 | {"amx_bf16"}, "float32"),
        ("cpu", SAPPHIRE_RAPIDS, "float32"),
        ("cuda", ZEN3, "bfloat16"),
        ("cuda:1", set(), "bfloat16"),
    ],
)
def test_auto_dtype_follows_the_hardware(device: str, flags: set[str], want: str) -> None:
    assert engine_dtype("auto", device, flags) == want


@pytest.mark.parametrize("explicit", ["float32", "bfloat16", "float16"])
def test_an_explicit_dtype_is_kept(explicit: str) -> None:
    assert engine_dtype(explicit, "cpu", ZEN3) == explicit
    assert engine_dtype(explicit, "cuda", set()) == explicit


def test_cpu_flags_reads_the_first_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\nprocessor\t: 1\nflags\t\t: fpu\n"
    )
    assert cpu_flags(str(info)) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == set()


@pytest.mark.parametrize("preset", ["cpu-bandit-lora", "cpu-frozenlake-lora", "cpu-sokoban-lora"])
def test_cpu_lora_presets_use_auto(preset: str) -> None:
    assert load_config(preset).rollout.vllm.dtype == "auto"
