"""``ragen-bench run`` is built from declared options (the runner's,
each policy back-end's, the diagnostics step's), policies are a registry of factories, the env
id is resolved once, and the summary printer is a bench module both command lines use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragen_envs
from ragen_bench.cli import app
from ragen_bench.endpoints import ENDPOINT_BACKENDS
from ragen_bench.policies import (
    POLICIES,
    OraclePolicy,
    declared_options,
    make_policy,
    policy_options,
)
from ragen_bench.rollout import RolloutConfig
from ragen_bench.runner import (
    REQUEST_OPTIONS,
    ROLLOUT_OPTIONS,
    RunRequest,
    plan_run,
    request_from_options,
)

runner = CliRunner()

#: Every option `ragen-bench run` had before its options were regrouped (its --help must keep them all).
OLD_OPTIONS = {
    "--env",
    "-e",
    "--model",
    "-m",
    "--episodes",
    "--group-size",
    "--split",
    "--seed",
    "--max-turns",
    "--max-actions-per-turn",
    "--temperature",
    "--top-p",
    "--max-new-tokens",
    "--context-mode",
    "--context-window",
    "--max-context-tokens",
    "--think",
    "--no-think",
    "--format-penalty",
    "--max-invalid-answers",
    "--env-config",
    "--out",
    "--run-id",
    "--resume",
    "--device",
    "--dtype",
    "--batch-size",
    "--max-parallel",
    "--policy-seed",
    "--progress",
    "--no-progress",
    "--json",
    "--diagnostics",
    "--scorer",
    "--diagnostics-samples",
    "--diagnostics-sampler",
    "--base-url",
    "--api-key-env",
    "--endpoints",
    "--concurrency",
    "--stream",
    "--no-stream",
    "--logprobs",
    "--no-logprobs",
    "--connect-timeout",
    "--read-timeout",
    "--idle-timeout",
    "--total-timeout",
    "--max-retries",
    "--answer-from-reasoning",
    "--vllm-python",
    "--policy-option",
}


def _defaults(**given: object) -> dict[str, object]:
    """The option values of `ragen-bench run` with nothing given but ``given``."""
    from ragen_bench.diagnostics.commands import RUN_OPTIONS

    values = {
        o.name: o.default
        for o in (*REQUEST_OPTIONS, *ROLLOUT_OPTIONS, *policy_options(), *RUN_OPTIONS)
    }
    values.update(given)
    return values


def _kv(items: list[str] | None, what: str) -> dict[str, object]:
    return dict(item.split("=", 1) for item in items or [])


def test_run_help_lists_every_declared_option_and_every_old_one() -> None:
    res = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "240"})
    assert res.exit_code == 0
    words = set(
        res.stdout.replace("│", " ").replace(",", " ").split()
    )  # "-e, --env" in the plain help
    assert OLD_OPTIONS <= words, OLD_OPTIONS - words
    for opt in (*REQUEST_OPTIONS, *ROLLOUT_OPTIONS, *policy_options()):
        flag = opt.flags[0].split("/")[0] if opt.flags else "--" + opt.name.replace("_", "-")
        assert flag in words, flag
    assert f"Policy back-end: {' | '.join(POLICIES)}." in " ".join(
        res.stdout.replace("│", " ").split()
    )


def test_policies_are_a_registry_of_factories_declaring_their_options() -> None:
    assert list(POLICIES) == ["hf", "random", "oracle", "openai", "vllm", "vllm-server"]
    assert ENDPOINT_BACKENDS == ("openai", "vllm-server") == POLICIES.names(endpoint=True)
    hf = {o.name: o.keyword for o in POLICIES.meta("hf", "options")}
    assert hf == {
        "device": "device",
        "dtype": "dtype",
        "batch_size": "max_batch_size",
        "base": "base",  # a LoRA adapter's base model
    }
    assert declared_options("random", {"policy_seed": 7}) == {"seed": 7}
    assert (
        declared_options("openai", {"concurrency": 3}) == {}
    )  # endpoint options go through resolve_endpoint
    assert (
        isinstance(make_policy("oracle"), OraclePolicy) and make_policy("random", seed=3).seed == 3
    )
    with pytest.raises(
        ValueError,
        match=r"unknown back-end 'orcale' \(did you mean 'oracle'\?\); known: hf, random",
    ):
        make_policy("orcale")
    with pytest.raises(ValueError, match="needs --model"):
        make_policy("hf")


def test_request_is_built_by_the_runner_from_the_declared_options(
    tmp_path: Path,
) -> None:
    values = _defaults(
        env="ragen/Bandit-v0",
        episodes=4,
        group_size=2,
        max_turns=3,
        think=False,
        temperature=0.0,
        device="cpu",
        batch_size=8,
        out_dir=tmp_path,
        env_config=["risky_prob=0.5"],
        policy_option=["trust_remote_code=true"],
    )
    req = request_from_options(values, given=lambda name: False, parse_kv=_kv)
    assert req == RunRequest(
        env_id="ragen/Bandit-v0",
        backend="hf",
        model=None,
        episodes=4,
        group_size=2,
        split="test",
        seed=0,
        env_config={"risky_prob": "0.5"},
        out=str(tmp_path),
        run_id=None,
        max_parallel=None,
        policy_options={
            "device": "cpu",
            "dtype": "float32",
            "max_batch_size": 8,
            "trust_remote_code": "true",
        },
        rollout={
            "max_turns": 3,
            "max_actions_per_turn": None,
            "context_mode": None,
            "context_window": None,
            "max_context_tokens": None,
            "enable_think": False,
            "format_penalty": RolloutConfig.format_penalty,
            "max_invalid_answers": None,
            "answer_from_reasoning": False,
            "sampling": {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 256},
        },
    )
    random = request_from_options(
        _defaults(env="ragen/Bandit-v0", backend="random", policy_seed=5),
        given=lambda name: False,
        parse_kv=_kv,
    )
    assert random.policy_options == {"seed": 5}


def test_endpoint_alias_options_and_sampling_defaults_come_through_the_runner(
    tmp_path: Path,
) -> None:
    toml = tmp_path / "endpoints.toml"
    toml.write_text(
        '[endpoints.local]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "served"\n'
        "concurrency = 4\n[endpoints.local.sampling]\ntemperature = 0.7\nmax_new_tokens = 99\n"
    )
    values = _defaults(
        env="ragen/Bandit-v0", model="local", endpoints=toml, temperature=0.1, read_timeout=5.0
    )
    req = request_from_options(values, given=lambda name: name == "temperature", parse_kv=_kv)
    assert (req.backend, req.model) == ("openai", "served")
    assert req.policy_options == {
        "base_url": "http://127.0.0.1:9/v1",
        "concurrency": 4,
        "read_timeout": 5.0,
    }
    assert req.rollout["sampling"] == {
        "temperature": 0.1,
        "top_p": 1.0,
        "max_new_tokens": 99,
    }  # the flag wins


def test_run_requires_env_with_one_line() -> None:
    res = runner.invoke(app, ["run", "--backend", "oracle"])
    assert res.exit_code == 2 and "--env is required" in res.output


def test_a_training_output_folder_without_env_names_final_model_and_its_env(
    tmp_path: Path,
) -> None:
    """``--model outputs/X`` (a training output folder) without ``--env``: the error names
    the model folder to pass and the env it was trained on (its default ``--env``)."""
    from ragen_bench.protocol import AgentProtocol, write_protocol

    run = tmp_path / "outputs" / "x"
    final = run / "final_model"
    final.mkdir(parents=True)
    (final / "adapter_config.json").write_text("{}")
    (run / "config.json").write_text(json.dumps({"env": {}, "rollout": {}, "trainer": {}}))
    rollout = {"enable_think": True, "sampling": {}}
    write_protocol(final, AgentProtocol("ragen/Bandit-v0", {}, "test", rollout))
    res = runner.invoke(app, ["run", "--policy", "hf", "--model", str(run)], env={"COLUMNS": "400"})
    assert res.exit_code == 2
    text = " ".join(res.output.replace("│", " ").split())
    assert "--env is required" in text
    assert f"pass one of: {final} (trained on ragen/Bandit-v0: the default --env of each)" in text


def test_the_env_id_is_resolved_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI plans the run once (entry, env config, rollout) and the rollout engine looks each
    env id up once: two lookups for a 4-episode run (nine before)."""
    calls: list[str] = []
    real = ragen_envs.get_entry

    def counting(env_id: str):
        calls.append(env_id)
        return real(env_id)

    monkeypatch.setattr(ragen_envs, "get_entry", counting)
    res = runner.invoke(
        app,
        [
            "run",
            "--env",
            "ragen/Bandit-v0",
            "--backend",
            "oracle",
            "--episodes",
            "4",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    assert calls == ["ragen/Bandit-v0", "ragen/Bandit-v0"]
    plan = plan_run(
        RunRequest(env_id="ragen/Bandit-v0", backend="oracle", episodes=4, group_size=2)
    )
    assert plan.entry is real("ragen/Bandit-v0") and plan.env_config == {"split": "test"}
    assert [(s.group, s.member, s.seed) for s in plan.specs] == [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 1),
        (1, 1, 1),
    ]


def test_train_cli_does_not_import_the_bench_cli() -> None:
    code = (
        "import sys, ragen_train.cli; from ragen_bench.summary_table import print_summary; "
        "print('ragen_bench.cli' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_summary_table_formats_estimates() -> None:
    from rich.console import Console

    from ragen_bench.summary_table import format_estimate, print_summary

    assert (
        format_estimate({"mean": 0.5, "stderr": 0.1, "ci95": [0.3, 0.7]}, pct=True)
        == "50.0% ± 10.0  [30.0, 70.0]"
    )
    assert format_estimate({"mean": None}) == "–"
    assert format_estimate({"mean": 1.25, "stderr": None, "ci95": None}) == "1.250 ± –  [–, –]"
    summary = {
        "env": {"ids": ["ragen/Bandit-v0"]},
        "policy": {"backend": "oracle"},
        "wall_time_s": 1.0,
        "metrics": {"success": {"mean": 1.0, "stderr": 0.0, "ci95": [1.0, 1.0]}},
        "episodes": {"scored": 2, "requested": 2, "missing": 0},
        "counts": {"success": 2},
    }
    console = Console(record=True, width=120)
    print_summary(summary, Path("runs/x"), to=console)
    text = console.export_text()
    assert (
        "100.0% ± 0.0  [100.0, 100.0]" in text
        and "results: runs/x" in text
        and "2 scored / 2 requested" in text
    )


def test_each_registered_back_end_builds_the_policy_class_of_that_name() -> None:
    """The registry key is the one selector; the class a factory builds reports the same name
    in ``describe()`` (run.json), so the two cannot drift apart unnoticed."""
    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.policies.openai_api import OpenAIPolicy
    from ragen_bench.policies.privileged import RandomPolicy
    from ragen_bench.policies.vllm_backend import VLLMPolicy, VLLMServerPolicy

    classes = {
        "hf": HFPolicy,
        "random": RandomPolicy,
        "oracle": OraclePolicy,
        "openai": OpenAIPolicy,
        "vllm": VLLMPolicy,
        "vllm-server": VLLMServerPolicy,
    }
    assert set(classes) == set(POLICIES)
    assert {name: cls.name for name, cls in classes.items()} == {name: name for name in POLICIES}
    assert make_policy("random").describe()["backend"] == "random"


def test_run_policy_flag_and_its_deprecated_backend_spelling(tmp_path: Path) -> None:
    """``--policy`` names the policy (``--backend`` names the trainer in
    ragen-train); ``--backend`` still works for one release, hidden, with one warning line."""
    help_words = set(runner.invoke(app, ["run", "--help"], env={"COLUMNS": "240"}).stdout.split())
    assert "--policy" in help_words and "--backend" not in help_words
    base = ["run", "--env", "ragen/Bandit-v0", "--episodes", "2", "--no-progress", "--json"]
    summaries = {}
    for flag in ("--policy", "--backend"):
        res = runner.invoke(app, [*base, flag, "oracle", "--out", str(tmp_path / flag)])
        assert res.exit_code == 0, res.output
        warnings = [x for x in res.stderr.splitlines() if x.startswith("warning:")]
        assert warnings == (
            []
            if flag == "--policy"
            else [
                "warning: --backend is deprecated in ragen-bench run (removed in the next "
                "release); use --policy oracle"
            ]
        )
        summaries[flag] = json.loads(res.stdout)
    for summary in summaries.values():  # the oracle played (random loses some pulls)
        assert summary["policy"]["backend"] == "oracle"
        assert summary["metrics"]["success"]["mean"] == 1.0
    res = runner.invoke(app, [*base, "--policy", "random", "--backend", "oracle"])
    assert res.exit_code == 2 and "--policy random and --backend oracle disagree" in res.output
