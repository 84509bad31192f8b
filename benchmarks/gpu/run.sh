#!/usr/bin/env bash
# On the GPU machine (torch, transformers, peft, accelerate preinstalled; no network):
#   benchmarks/gpu/run.sh [--out gpu_check.json] [gpu_check.py options]
# Installs the wheels make_wheels.sh collected into a venv that sees the system packages,
# then runs gpu_check.py (about 3-6 minutes on one H100/H200).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${RAGEN_GPU_VENV:-/tmp/ragen-gpu-venv}
[[ -x $venv/bin/python ]] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index --no-deps --find-links benchmarks/gpu/wheels benchmarks/gpu/wheels/*.whl
exec "$venv/bin/python" benchmarks/gpu/gpu_check.py "$@"
