"""Both command lines have one look (:mod:`ragen_bench.cli_app`): click's plain help pages,
the same section headings, no rich panels, and the same plain usage errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragen_bench.cli import app as bench_app
from ragen_train.cli import app as train_app

runner = CliRunner()
APPS = {"ragen-bench": bench_app, "ragen-train": train_app}
#: Box-drawing characters of rich's help panels ("╭─ Options ─╮").
PANEL_MARKS = ("╭", "╰", "│", "─ Options", "─ Commands")


def _help(app, *args: str) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("name", sorted(APPS))
def test_top_level_help_is_click_plain_style(name: str) -> None:
    text = _help(APPS[name])
    lines = text.splitlines()
    assert lines[0].startswith("Usage: ") and lines[0].endswith("[OPTIONS] COMMAND [ARGS]...")
    assert "Options:" in lines and "Commands:" in lines  # click's section headings
    assert not any(mark in text for mark in PANEL_MARKS), text


def test_both_command_lines_share_the_help_layout() -> None:
    def layout(text: str) -> list[str]:  # the headings and how entries are indented
        return [ln for ln in text.splitlines() if ln and not ln.startswith(" ")][1:]

    bench, train = (layout(_help(APPS[n])) for n in ("ragen-bench", "ragen-train"))
    assert bench == train == ["Options:", "Commands:"]
    for text in (_help(bench_app), _help(train_app)):
        assert "  --version " in text and "  --help " in text


@pytest.mark.parametrize("name", sorted(APPS))
def test_an_unknown_option_is_a_plain_usage_error(name: str) -> None:
    res = runner.invoke(APPS[name], ["--no-such-option"])
    assert res.exit_code == 2
    assert "Error: No such option: --no-such-option" in res.stderr
    assert not any(mark in res.stderr for mark in PANEL_MARKS), res.stderr
