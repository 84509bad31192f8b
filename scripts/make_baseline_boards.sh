#!/usr/bin/env bash
# Rebuild leaderboards/procedural.json: random and oracle baselines on the five
# procedural environments (test split, 256 episodes = 64 seeds x 4, each env's agent
# defaults for turns and actions). Real runs of `ragen-bench run`; takes about a minute.
#   bash scripts/make_baseline_boards.sh [runs-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/baselines}
BOARD=leaderboards/procedural.json
rm -f "$BOARD"
mkdir -p "$RUNS"
for env in ragen/Bandit-v0 ragen/Countdown-v0 ragen/FrozenLake-v0 ragen/Sokoban-v0 ragen/Sudoku-v0; do
  for backend in random oracle; do
    name="${backend}-$(basename "$env")"
    rm -rf "${RUNS:?}/$name"
    ragen-bench run --backend "$backend" --env "$env" --episodes 256 --group-size 4 --split test \
      --out "$RUNS" --run-id "$name" --no-progress
    ragen-bench leaderboard add "$RUNS/$name" --board "$BOARD" --label "$backend" \
      --description "Random and oracle baselines on the procedural environments (test split, 64 seeds x 4 episodes, agent defaults)."
  done
done
ragen-bench leaderboard render --board "$BOARD" > leaderboards/procedural.md
echo "wrote $BOARD and leaderboards/procedural.md"
