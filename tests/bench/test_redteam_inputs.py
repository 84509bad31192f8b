"""Inputs: hostile config files, options and results files, one payload per case.

Each case ran long, ate memory or ended in a traceback before (the numbers are the red-team
pass's); now each is one ``error: ...`` line (or a refused value), quickly and with bounded
memory.  The YAML bomb runs in a child process with a time and memory limit, so that the
code before the fix cannot take this test process down with it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from ragen_bench import cli as bench_cli
from ragen_bench.leaderboard import render_markdown
from ragen_bench.results import RunDir
from ragen_bench.runner import RunRequest, check_run_id, start_run
from ragen_envs import jsonutil
from ragen_train import cli as train_cli
from tests.bench.test_redteam_endpoint import completion, serve  # noqa: F401 - a fixture
from tests.helpers.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]

#: A billion-laughs document like the red-team's (460 bytes there): 9 levels, each alias used 9 times.
LAUGHS = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def _limit_memory() -> None:  # in the child: 1.5 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


def test_billion_laughs_yaml_is_refused_quickly(tmp_path: Path) -> None:
    assert len(LAUGHS) < 600
    cfg = tmp_path / "laughs.yaml"
    cfg.write_text(LAUGHS)
    code = (
        "import sys\nfrom ragen_train.config import read_config_file, TrainConfigError\n"
        f"try:\n    read_config_file({str(cfg)!r})\n"
        "except TrainConfigError as exc:\n    print(exc); sys.exit(2)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            # Generous: the child imports torch first, which took over 30 s on a loaded
            # 2-core machine; an expanding bomb hits the 1.5 GiB limit long before this.
            timeout=300,
            cwd=ROOT,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the YAML bomb was still being expanded after 300 s")
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stdout.strip().endswith(f"{cfg}: refused YAML: more than 64 YAML aliases")
    assert proc.stdout.count("\n") == 1


def test_yaml_aliases_within_the_bounds_still_work(tmp_path: Path) -> None:
    from ragen_envs.safeload import load_config_file

    p = tmp_path / "ok.yaml"
    p.write_text("base: &b {lr: 0.1}\nx: *b\ny: *b\n")
    assert load_config_file(p) == {"base": {"lr": 0.1}, "x": {"lr": 0.1}, "y": {"lr": 0.1}}


def test_few_aliases_that_expand_hugely_are_refused(tmp_path: Path) -> None:
    """Ten levels, each holding the previous one four times: 40 aliases, 10 * 4**10 leaves."""
    from ragen_envs.safeload import ConfigFileError, load_config_file

    rows = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 4)}]" for i in range(1, 11)]
    p = tmp_path / "wide.yaml"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(ConfigFileError, match=r"expands to \d+ nodes through its aliases"):
        load_config_file(p)


@pytest.fixture
def train(monkeypatch):
    return in_process_cli(monkeypatch, train_cli)


@pytest.fixture
def bench(monkeypatch):
    return in_process_cli(monkeypatch, bench_cli)


@pytest.mark.parametrize(
    "name,text,message",
    [
        ("deep.json", "[" * 30_000 + "]" * 30_000, "nested deeper than 100 levels"),
        ("deep.yaml", "a: " + "[" * 30_000 + "]" * 30_000 + "\n", "nested deeper than 100 levels"),
        ("deepmap.yaml", "".join(f"{' ' * i}k{i}:\n" for i in range(300)), "nested deeper"),
    ],
)
def test_deeply_nested_config_is_one_error_line(
    train, tmp_path: Path, name: str, text: str, message: str
) -> None:
    p = tmp_path / name
    p.write_text(text)
    code, out, err = train("show-config", "--config", str(p))
    assert code == 2 and out == ""
    assert err.startswith("config error: --config: ") and message in err
    assert err.count("\n") == 1, err[-300:]


def test_oversized_config_is_refused_before_reading(train, tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    with open(p, "wb") as fh:
        fh.truncate(2 << 20)
    code, _, err = train("show-config", "--config", str(p))
    assert code == 2
    assert f"{p} is {2 << 20} bytes, over the 1048576-byte limit of a config file" in err


def test_deep_train_override_is_one_error_line(train) -> None:
    code, out, err = train("show-config", "env.config.x=" + "[" * 30_000 + "]" * 30_000)
    assert code == 2 and out == ""
    assert err.strip() == (
        "config error: config field 'env.config.x': nested deeper than 100 levels"
    ), err[-300:]


def test_deep_env_config_option_is_one_error_line(bench, tmp_path: Path) -> None:
    deep = "[" * 30_000 + "]" * 30_000
    args = ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--episodes", "1"]
    code, _, err = bench(*args, "--env-config", f"x={deep}", "--out", str(tmp_path))
    assert code != 0
    assert err.strip() == "error: --env-config x: nested deeper than 100 levels", err[-300:]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    return start_run(
        RunRequest(env_id="ragen/Bandit-v0", backend="random", episodes=2, out=str(out), run_id="r")
    )


def _copy_run(src: Path, dest: Path) -> Path:
    dest.mkdir()
    for p in src.iterdir():
        if p.is_file():
            (dest / p.name).write_bytes(p.read_bytes())
    return dest


@pytest.mark.parametrize("command", ["report", "validate"])
def test_a_100000_deep_episode_line_is_one_error_line(
    bench, finished_run: Path, tmp_path: Path, command: str
) -> None:
    run = _copy_run(finished_run, tmp_path / "deep")
    with open(run / "episodes.jsonl", "a") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")
    code, out, err = bench(command, str(run))
    said = out + err  # validate reports on stdout, report's error goes to stderr
    assert code != 0
    assert "episodes.jsonl:3: nested deeper than 100 levels" in said, said[-400:]
    assert "Traceback" not in said and "RecursionError" not in said


def test_a_300_mb_episode_line_is_not_read_whole(finished_run: Path, tmp_path: Path) -> None:
    """The line is a sparse run of NUL bytes (no disk used); reading stops at the bound."""
    run = _copy_run(finished_run, tmp_path / "long")
    with open(run / "episodes.jsonl", "r+b") as fh:
        fh.truncate(300 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(jsonutil.JSONFileError, match=r"line longer than 67108864 bytes"):
            RunDir(run).read_episodes()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 160 << 20, f"peak {peak >> 20} MiB"  # was > 300 MiB: the line read whole


@pytest.mark.parametrize(
    "run_id",
    ["a\nb", "a\rb", "tab\there", "bell\x07", "del\x7f", "c1\x85", "ls\u2028x", "ps\u2029x"],
)
def test_run_ids_with_control_characters_are_refused(run_id: str) -> None:
    with pytest.raises(ValueError, match="must not contain control characters"):
        check_run_id(run_id)


def test_run_id_with_a_newline_is_refused_by_the_cli(bench, tmp_path: Path) -> None:
    args = ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--episodes", "1"]
    code, _, err = bench(*args, "--run-id", "x\ninjected", "--out", str(tmp_path))
    assert code != 0 and "must not contain control characters" in err
    assert not any(tmp_path.iterdir())


def test_terminal_escapes_in_an_error_message_are_shown_not_sent(capsys) -> None:
    """A hostile endpoint's error text (clear screen, window title, colour, a line
    separator) reaches the console as visible escapes on one line."""
    from ragen_bench.console import make_console, print_error

    print_error(
        make_console(stderr=True), "bad_request: \x1b[2J\x1b]0;owned\x07\x1b[31mFAKE\u2028x"
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err  # no raw ESC (the console is not a terminal: no colour codes)
    assert "\\x1b[2J" in err and "\\x1b]0;owned\\x07" in err and "\\u2028" in err
    assert "\u2028" not in err and err.count("\n") == 1


def test_leaderboard_render_escapes_html_and_pipes() -> None:
    board = json.loads((ROOT / "leaderboards" / "games.json").read_text())
    entry = next(e for e in board["entries"])
    entry["model"] = "<img src=x onerror=alert(1)>|evil\nline"
    entry["backend"] = "a|b"
    board["name"] = "<script>x</script>"
    md = render_markdown(board)
    assert "<img" not in md and "<script>" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;\\|evil line" in md
    row = next(line for line in md.splitlines() if "onerror" in line)
    cells = [c for c in row.replace("\\|", "").split("|")][1:-1]
    assert len(cells) == 7, row


# ------------------------------------------- SFT demonstrations: the safe line reader
def _demo_episode(content: object = "<think>t</think><answer>Left</answer>") -> dict:
    assistant = {"role": "assistant", "content": content}
    if content is None:
        del assistant["content"]
    return {
        "success": True,
        "return": 1.0,
        "episode_index": 0,
        "messages": [
            {"role": "system", "content": "You play a game."},
            {"role": "user", "content": "Turn 1: choose."},
            assistant,
        ],
    }


def test_sft_jsonl_demos_skip_and_name_a_deep_line_and_a_message_without_content(
    tmp_path: Path,
) -> None:
    from transformers import AutoTokenizer

    from ragen_bench.tiny import tiny_model_path
    from ragen_train.sft import demos_from_jsonl

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    path = tmp_path / "episodes.jsonl"
    lines = [
        json.dumps(_demo_episode()),
        '{"success": true, "messages": ' + "[" * 100_000 + "]" * 100_000 + "}",  # 100,000 deep
        json.dumps(_demo_episode(content=None)),  # the assistant message has no content
        json.dumps(_demo_episode(content=["not", "text"])),
        '{"success": true, "messages": [',  # cut off
        json.dumps(_demo_episode()),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="skipped 4 unusable line") as caught:
        samples = demos_from_jsonl(path, tok)
    assert len(samples) == 2
    message = str(caught[0].message)
    for expected in (
        f"{path}:2: nested deeper than 100 levels (skipped)",
        f"{path}:3: message 2 has no string 'content' (skipped)",
        f"{path}:4: message 2 has no string 'content' (skipped)",
        f"{path}:5: invalid JSON (",
    ):
        assert expected in message, message


# ------------------------------------------------------------------ files from others (run folders)
def _unfinished_copy(finished_run: Path, dest: Path) -> Path:
    """A copy of ``finished_run`` with no episode recorded, so ``--resume`` plays again."""
    run = _copy_run(finished_run, dest)
    (run / "episodes.jsonl").write_bytes(b"")
    (run / "summary.json").unlink()
    return run


def _edit_run_json(run: Path, **changes) -> None:
    meta = json.loads((run / "run.json").read_text())
    meta.update(changes)
    (run / "run.json").write_text(json.dumps(meta))


#: How a planted link is made, and the refusal it gets.  Before: a symlinked .lock emptied its
#: target and a symlinked episodes.jsonl lost its last line; a hard link passes O_NOFOLLOW and
#: the regular-file check, so it emptied or appended to the outside file until it was refused.
_LINKS = {
    "symlink": (lambda outside, path: path.symlink_to(outside), "is a symbolic link"),
    "hard link": (
        lambda outside, path: os.link(outside, path),
        "has other hard links (it may also be a file outside the folder)",
    ),
}


@pytest.mark.parametrize("link", list(_LINKS))
@pytest.mark.parametrize("name", [".lock", "episodes.jsonl"])
def test_a_linked_run_file_is_refused_and_the_outside_file_is_unchanged(
    bench, finished_run: Path, tmp_path: Path, name: str, link: str
) -> None:
    make, reason = _LINKS[link]
    run = _copy_run(finished_run, tmp_path / "run")
    (run / "summary.json").unlink()
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"line one\n{not json, a torn-looking last line")
    before = outside.read_bytes()
    (run / name).unlink(missing_ok=True)
    make(outside, run / name)
    code, _, err = bench("run", "--resume", str(run), "--no-progress")
    assert code == 2
    assert err.strip() == (
        f"error: {run / name}: {reason}; refused (files in a run or checkpoint folder "
        "must be regular files inside it, not links)"
    ), err[-400:]
    assert outside.read_bytes() == before


def test_a_symlinked_summary_is_neither_read_nor_replaced(
    finished_run: Path, tmp_path: Path
) -> None:
    from ragen_bench.fileio import NotRegularFileError

    run = _copy_run(finished_run, tmp_path / "run")
    outside = tmp_path / "outside.json"
    outside.write_text('{"mine": true}\n')
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to(outside)
    with pytest.raises(NotRegularFileError, match="summary.json: is a symbolic link"):
        RunDir(run).read_summary()
    with pytest.raises(NotRegularFileError, match="summary.json: is a symbolic link"):
        RunDir(run).write_summary({"schema_version": 1})
    assert outside.read_text() == '{"mine": true}\n'
    assert (run / "summary.json").is_symlink()


def test_resume_refuses_a_verifier_command_from_run_json(
    bench, finished_run: Path, tmp_path: Path
) -> None:
    # Before: the Lean verifier command in a shared run.json ran three times on --resume.
    run = _unfinished_copy(finished_run, tmp_path / "run")
    marker = tmp_path / "marker"
    command = f"repl:sh -c 'touch {marker}'"
    _edit_run_json(run, env_id="ragen/Lean-v0", env_config={"verifier": command})
    code, _, err = bench("run", "--resume", str(run), "--no-progress")
    assert code == 2
    assert err.count("\n") == 1, err[-400:]
    assert f"{run / 'run.json'} sets env_config.verifier = {command!r} (a command)" in err
    assert "--env-config verifier=..." in err and "--trust-folder" in err
    assert not marker.exists()


def test_resume_sends_no_key_to_a_base_url_from_run_json(
    bench, serve, finished_run: Path, tmp_path: Path, monkeypatch
) -> None:
    # Before: run.json's base_url and api_key_env took the user's key to the folder's server.
    srv = serve(lambda path, headers, body: (200, {}, completion("<answer>1</answer>")))
    monkeypatch.setenv("RAGEN_REDTEAM_KEY", "sk-redteam-secret-123456")
    run = _unfinished_copy(finished_run, tmp_path / "run")
    options = {"base_url": srv.base_url, "api_key_env": "RAGEN_REDTEAM_KEY"}
    _edit_run_json(run, backend="openai", model="test-model", policy_options=options)
    code, _, err = bench("run", "--resume", str(run), "--no-progress", "--no-preflight")
    assert code == 2
    assert "policy_options.base_url" in err and "policy_options.api_key_env" in err
    assert srv.requests == []
    # the user's own values confirm them; the origin is printed before the first call
    port = srv.base_url.split(":")[2].split("/")[0]
    code, _, err = bench(
        "run",
        "--resume",
        str(run),
        "--no-progress",
        "--no-preflight",
        "--base-url",
        srv.base_url,
        "--api-key-env",
        "RAGEN_REDTEAM_KEY",
    )
    assert f"resume will call http://127.0.0.1:{port} (from {run / 'run.json'})" in err, err
    assert srv.requests, err[-400:]
    assert all(
        h.get("authorization") == "Bearer sk-redteam-secret-123456" for _, h, _ in srv.requests
    )


def test_trust_folder_accepts_the_folder_values(finished_run: Path, tmp_path: Path) -> None:
    from ragen_bench.runner import check_resume_values
    from ragen_bench.trust import UntrustedValueError

    meta = {"env_config": {"verifier": "http://10.0.0.9:8000"}, "policy_options": {}}
    with pytest.raises(UntrustedValueError):
        check_resume_values(meta, source="run.json", confirmed={}, trust=False)
    lines = check_resume_values(meta, source="run.json", confirmed={}, trust=True)
    assert lines == ["resume will call http://10.0.0.9:8000 (from run.json)"]
    confirmed = {"env_config.verifier": "http://10.0.0.9:8000/"}
    assert check_resume_values(meta, source="run.json", confirmed=confirmed, trust=False) == lines


def test_a_managed_server_command_from_run_json_needs_confirmation() -> None:
    from ragen_bench.runner import check_resume_values
    from ragen_bench.trust import UntrustedValueError

    meta = {
        "env_config": {},
        "policy_options": {"python": "/tmp/x/python", "server_env": {"LD_PRELOAD": "/tmp/x.so"}},
    }
    with pytest.raises(UntrustedValueError) as err:
        check_resume_values(meta, source="run.json", confirmed={}, trust=False)
    assert "policy_options.python = '/tmp/x/python' (an executable)" in str(err.value)
    assert "policy_options.server_env = {'LD_PRELOAD': '/tmp/x.so'}" in str(err.value)
    assert "--vllm-python PATH" in str(err.value)


@pytest.mark.parametrize(
    ("run_id", "message"),
    [
        ("report\u202etxt.exe", "bidirectional controls (U+202E)"),
        ("a\u2066b", "bidirectional controls (U+2066)"),
        (" ", "must not start or end with white space"),
        (" run", "must not start or end with white space"),
        ("-rf", "must not start with '-'"),
    ],
)
def test_run_ids_with_bidi_controls_blank_or_a_leading_dash_are_refused(
    run_id: str, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        check_run_id(run_id)


def test_run_id_with_a_leading_dash_is_refused_by_the_cli(bench, tmp_path: Path) -> None:
    args = ["run", "--policy", "random", "--env", "ragen/Bandit-v0", "--episodes", "1"]
    code, _, err = bench(*args, "--run-id=-x", "--out", str(tmp_path))
    assert code == 2 and "must not start with '-'" in err
    assert not any(tmp_path.iterdir())


def _board_with_description(description: str) -> dict:
    board = json.loads((ROOT / "leaderboards" / "games.json").read_text())
    board["description"] = description
    return board


@pytest.mark.parametrize(
    "target", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "vbscript:x"]
)
def test_leaderboard_render_drops_links_that_are_not_http_or_relative(target: str) -> None:
    md = render_markdown(_board_with_description(f"click [x]({target}) or [y]: {target}"))
    assert f"\\[x\\]({target})" in md and f"\\[y\\]: {target}" in md
    assert f"[x]({target})" not in md.replace("\\[x\\]", "")


def test_leaderboard_render_keeps_http_and_relative_links() -> None:
    md = render_markdown(
        _board_with_description("[paper](https://arxiv.org/abs/1) [spec](docs/results.md)")
    )
    assert "[paper](https://arxiv.org/abs/1) [spec](docs/results.md)" in md


def test_leaderboard_render_keeps_a_description_heading_as_text() -> None:
    md = render_markdown(_board_with_description("rows\n\n# Fake H1\n  ## fake h2"))
    lines = md.splitlines()
    assert "\\# Fake H1" in lines and "  \\## fake h2" in lines
    assert sum(line.startswith("# ") for line in lines) == 1  # the board's own title only
