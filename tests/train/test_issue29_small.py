"""The smaller items of issue 29 (item 9)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from ragen_bench.report import protocol_text
from ragen_train.cli import _logged_val, _val_text
from ragen_train.config import load_config
from ragen_train.resume import interrupted_message, missing_checkpoint_message

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_text_counts_in_the_singular() -> None:
    p = {"max_turns": 1, "max_actions_per_turn": 1, "enable_think": False, "group_size": 1}
    assert protocol_text(p).startswith("1 turn × 1 action · no think")
    p = {**p, "max_turns": 5, "max_actions_per_turn": 2}
    assert protocol_text(p).startswith("5 turns × 2 actions")


def test_board_table_scrolls_instead_of_overflowing(tmp_path: Path) -> None:
    from ragen_bench.site import build_site

    build_site([ROOT / "leaderboards" / "procedural.json"], tmp_path, runs_roots=[], reports=False)
    html = (tmp_path / "procedural.html").read_text()
    assert '<div class="table-scroll">\n<table id="board"' in html
    assert ".table-scroll { max-width: 100%; overflow-x: auto; }" in html  # the inlined CSS


def test_interrupted_before_step_1_says_how_to_start_again(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "phase": "val"}) + "\n")
    (tmp_path / "config.json").write_text(json.dumps({"trainer": {"save_every": 10}}))
    line = interrupted_message(tmp_path, 10)
    assert line.endswith(
        "start it again with trainer.overwrite=true (its first files are in the way)"
    )
    assert "trainer.overwrite=true" in missing_checkpoint_message("latest", tmp_path, 10)


def test_resume_of_a_finished_run_reports_its_last_validation(tmp_path: Path) -> None:
    rows = [
        {"step": 0, "phase": "val", "val/success": 0.25, "val/return": 0.1},
        {"step": 1, "phase": "train", "train/success": 0.5},
        {"step": 1, "phase": "val", "val/success": 0.75, "val/return": 0.5},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _val_text(_logged_val(tmp_path)) == "val/success=0.750, val/return=0.500"
    assert _logged_val(tmp_path / "nope") == {}


def test_lora_wrapping_leaks_no_gradient_checkpointing_future_warning() -> None:
    from ragen_train.modeling import load_policy

    cfg = load_config("tiny-bandit-grpo", ["model.lora.rank=4"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_policy(cfg.model)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
