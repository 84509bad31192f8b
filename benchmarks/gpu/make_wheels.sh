#!/usr/bin/env bash
# Fill benchmarks/gpu/wheels/ (git-ignored, < 64 MiB) with this project's wheel and the
# pure-Python / small dependencies a GPU machine with only torch, transformers, peft and
# accelerate lacks, so benchmarks/gpu/run.sh works there without network.
#   benchmarks/gpu/make_wheels.sh [PYTHON_VERSION]   # default: this interpreter's, e.g. 3.12
# Binary wheels (rpds-py for jsonschema) are fetched for manylinux x86_64 and the given
# Python version; torch / transformers / peft / accelerate / numpy are never included.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=benchmarks/gpu/wheels
pyver=${1:-$(python3 -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')}
rm -rf "$out" && mkdir -p "$out"
python3 -m pip wheel --no-deps -q -w "$out" .
deps=(gymnasium cloudpickle farama-notifications jsonschema jsonschema-specifications referencing attrs
      rpds-py typer click shellingham rich markdown-it-py mdurl pygments typing-extensions)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --implementation cp -d "$out" "${deps[@]}"
size=$(du -sm "$out" | cut -f1)
(( size < 64 )) || { echo "make_wheels.sh: $out is ${size} MiB (limit 64)" >&2; exit 1; }
echo "$out ($(ls "$out" | wc -l) wheels, ${size} MiB)"
