#!/usr/bin/env bash
# Rebuild the baseline leaderboards from real `ragen-bench run`s (test split, each env's
# agent defaults for turns and actions):
#   leaderboards/procedural.json  random and oracle on the five procedural envs (64 seeds x 4)
#   leaderboards/data.json        random and oracle on the four data envs (128 instances)
#   leaderboards/games.json       random and oracle on 2048 and the 2x2x2 cube (64 seeds x 4); the
#                                 2048 "oracle" is the expectimax baseline, labelled so
# and their markdown renderings. Takes a few minutes on 2 CPU cores.
#   bash scripts/make_baseline_boards.sh [runs-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/baselines}
mkdir -p "$RUNS" leaderboards

board() {  # board-name description episodes group-size env...
  local name=$1 desc=$2 episodes=$3 group=$4
  shift 4
  local path="leaderboards/$name.json"
  rm -f "$path"
  for env in "$@"; do
    for backend in random oracle; do
      local run="${backend}-$(basename "$env")"
      rm -rf "${RUNS:?}/$run"
      ragen-bench run --policy "$backend" --env "$env" --episodes "$episodes" --group-size "$group" --split test \
        --out "$RUNS" --run-id "$run" --no-progress > /dev/null
      local label=$backend
      [[ $backend == oracle && $env == ragen/2048-* ]] && label=expectimax  # not an optimal policy
      ragen-bench leaderboard add "$RUNS/$run" --board "$path" --label "$label" --description "$desc"
    done
  done
  ragen-bench leaderboard render --board "$path" > "leaderboards/$name.md"
  echo "wrote $path and leaderboards/$name.md"
}

board procedural "Random and oracle baselines on the procedural environments (test split, 64 seeds x 4 episodes, agent defaults)." \
  256 4 ragen/Bandit-v0 ragen/Countdown-v0 ragen/FrozenLake-v0 ragen/Sokoban-v0 ragen/Sudoku-v0
board games "Random and oracle baselines on 2048 (oracle = the expectimax baseline) and the 2x2x2 cube (test split, 64 seeds x 4 episodes, agent defaults)." \
  256 4 ragen/2048-Target64-v0 ragen/2048-v0 ragen/2048-Target256-v0 ragen/RubiksCube-v0 ragen/RubiksCube-Depth5-v0 ragen/RubiksCube-Scrambled-v0
board data "Random and oracle baselines on the data environments (test split, 128 instances, agent defaults)." \
  128 1 ragen/MetaMathQA-v0 ragen/DeepCoder-v0 ragen/SearchQA-v0 ragen/WebShop-v0
