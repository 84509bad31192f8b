"""LoRA adapter folders evaluate and bad model paths fail at once.

The default LoRA save (``model.lora.save=adapter``) writes a peft adapter folder with no
``config.json``; ``ragen-bench run --model`` and ``ragen-train eval`` load it onto its base
model.  Training output and checkpoint folders name the model folder to pass.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ragen_bench import cli as bench_cli
from ragen_bench.model_dirs import (
    ModelSource,
    adapter_base,
    check_model_ref,
    folder_hint,
    looks_local,
    merged_model_dir,
    model_fingerprint,
    model_source,
    peft_quietly,
)
from ragen_train import cli as train_cli
from tests.helpers.cli import in_process_cli

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One step of the issue's command: tiny-bandit-grpo with a rank-8 LoRA (adapter save)."""
    out = tmp_path_factory.mktemp("lora") / "run"
    mp = pytest.MonkeyPatch()
    try:
        code, stdout, stderr = in_process_cli(mp, train_cli)(
            "starpo",
            "--config",
            "tiny-bandit-grpo",
            "model.lora.rank=8",
            "trainer.total_steps=1",
            f"trainer.out_dir={out}",
            "model.device=cpu",
        )
    finally:
        mp.undo()
    assert code == 0, stdout + stderr
    assert (out / "final_model" / "adapter_config.json").is_file()
    assert not (out / "final_model" / "config.json").exists()
    return out


@pytest.mark.slow
def test_adapter_final_model_and_checkpoint_evaluate(
    lora_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = in_process_cli(monkeypatch, train_cli)
    bench = in_process_cli(monkeypatch, bench_cli)
    runs = tmp_path / "runs"
    for model in (lora_run / "final_model", lora_run / "checkpoints" / "step_000001" / "model"):
        code, stdout, stderr = train("eval", str(model), "--episodes", "4", "--out", str(runs))
        assert code == 0, stderr
        assert "results:" in stdout
        code, stdout, stderr = bench(
            "run", "--model", str(model), "--episodes", "4", "--out", str(runs), "--no-progress"
        )
        assert code == 0, stderr
    run_jsons = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
    assert len(run_jsons) == 4
    own = json.loads((lora_run / "final_model" / "adapter_config.json").read_text())
    for meta in run_jsons:  # the base model the adapter was applied to is recorded
        assert meta["policy"]["base"] == own["base_model_name_or_path"]
        # and which model it was (ragen-train report matches evaluations by it)
        assert meta["model_fingerprint"] == model_fingerprint(meta["model"]) is not None
        # the policy block (what a leaderboard row keeps) names the same trained weights
        assert meta["policy"]["fingerprint"] == meta["model_fingerprint"][:16]
        assert meta["env_id"] == "ragen/Bandit-PairsAB-v0"  # from the saved protocol


@pytest.mark.slow
def test_no_saved_protocol_plays_the_env_defaults_as_leaderboard_rows_need(
    lora_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trained folder's ragen_protocol.json applies by default; --no-saved-protocol plays
    the env's agent defaults instead (a leaderboard refuses rows of another protocol)."""
    bench = in_process_cli(monkeypatch, bench_cli)
    saved = json.loads((lora_run / "final_model" / "ragen_protocol.json").read_text())
    env = "ragen/Bandit-PairsAB-v0"
    got = {}
    for flag in ("--saved-protocol", "--no-saved-protocol"):
        code, stdout, stderr = bench(
            "run", "--model", str(lora_run / "final_model"), "--env", env, "--episodes", "2",
            "--out", str(tmp_path), "--run-id", flag.strip("-"), "--no-progress", flag,
        )  # fmt: skip
        assert code == 0, stderr
        got[flag] = json.loads((tmp_path / flag.strip("-") / "run.json").read_text())["rollout"]
        assert ("agent protocol from" in stdout + stderr) == (flag == "--saved-protocol")
    trained = saved["rollout"]["sampling"]["max_new_tokens"]
    assert got["--saved-protocol"]["sampling"]["max_new_tokens"] == trained
    assert got["--no-saved-protocol"]["sampling"]["max_new_tokens"] == 256 != trained


def _nonzero_adapter(tmp_path: Path) -> tuple[Path, str]:
    """A rank-4 adapter on the tiny model whose B matrices are not zero (it changes the logits)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = model_source("tiny").path
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with peft_quietly():
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    out = tmp_path / "adapter"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return out, base


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_adapter_is_applied_merged_and_equal_to_peft(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from ragen_bench.policies.hf import HFPolicy

    adapter, base = _nonzero_adapter(tmp_path)
    policy = HFPolicy(str(adapter))
    assert policy.base == base
    assert policy.describe()["base"] == base
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with peft_quietly():
        reference = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), str(adapter)
        )
    got, want, bare = _logits(policy.model, ids), _logits(reference, ids), _logits(plain, ids)
    assert (want - bare).abs().max() > 1e-2  # the adapter matters
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    # vLLM's path: the merged folder, loaded as a plain model, gives the same logits
    merged = merged_model_dir(ModelSource(str(adapter), base), cache=tmp_path / "merged")
    assert (Path(merged) / "config.json").is_file()
    again = merged_model_dir(ModelSource(str(adapter), base), cache=tmp_path / "merged")
    assert again == merged  # cached
    loaded = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    torch.testing.assert_close(_logits(loaded, ids), want, atol=1e-4, rtol=1e-4)


def test_adapter_base_order(tmp_path: Path) -> None:
    adapter, base = _nonzero_adapter(tmp_path)
    assert adapter_base(adapter) == base  # adapter_config.json's, existing here
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "/no/such/base"
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    # not here, no training config: one line asking for --base
    with pytest.raises(ValueError, match="pass --base"):
        adapter_base(adapter)
    # the training run's config.json next to the adapter folder
    (tmp_path / "config.json").write_text(
        json.dumps({"model": {"path": "tiny"}, "env": {}, "rollout": {}, "trainer": {}})
    )
    assert adapter_base(adapter) == "tiny"
    assert model_source(str(adapter)).base == model_source("tiny").path
    assert adapter_base(adapter, base) == base  # --base wins
    with pytest.raises(ValueError, match="does not exist"):
        adapter_base(adapter, "./missing/base")


def test_training_and_checkpoint_folders_name_the_model_folder(tmp_path: Path) -> None:
    run = tmp_path / "out"
    for d in (run / "final_model", run / "checkpoints" / "step_000002" / "model"):
        d.mkdir(parents=True)
        (d / "adapter_config.json").write_text("{}")
    (run / "config.json").write_text(json.dumps({"env": {}, "rollout": {}, "trainer": {}}))
    (run / "checkpoints" / "step_000002" / "state.json").write_text("{}")
    with pytest.raises(ValueError) as err:
        check_model_ref(str(run))
    assert str(err.value) == (
        f"{run} is a training output folder, not a model folder; pass one of: "
        f"{run / 'final_model'}, {run / 'checkpoints' / 'step_000002' / 'model'}"
    )
    step = run / "checkpoints" / "step_000002"
    assert folder_hint(step) == (
        f"{step} is a checkpoint folder, not a model folder; pass one of: {step / 'model'}"
    )
    check_model_ref(str(step / "model"))  # an adapter folder is a model


@pytest.mark.parametrize(
    ("ref", "local"),
    [
        ("outputs/nope", True),
        ("./x/final_modle", True),
        ("/abs/model", True),
        ("~/m", True),
        ("a/b/c", True),
        ("Qwen/Qwen2.5-0.5B-Instruct", False),
        ("gpt2", False),
    ],
)
def test_looks_local(ref: str, local: bool) -> None:
    assert looks_local(ref) is local


def test_missing_local_model_is_one_line_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    bench = in_process_cli(monkeypatch, bench_cli)
    start = time.monotonic()
    code, stdout, stderr = bench("run", "--model", "outputs/nope", "--env", "ragen/Bandit-v0")
    assert time.monotonic() - start < 5  # no hub retries (they took 56 s)
    assert code == 2
    assert stderr.strip() == "error: model path 'outputs/nope' does not exist"
    # a typo'd model folder: the missing path is said before --env is asked for
    (tmp_path / "x" / "final_model").mkdir(parents=True)
    code, stdout, stderr = bench("run", "--model", "./x/final_modle")
    assert code == 2
    assert stderr.strip() == (
        "error: model path './x/final_modle' does not exist (did you mean x/final_model?)"
    )
    assert not (tmp_path / "runs").exists()


def _bench_subprocess(tmp_path: Path, **env: str):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))
    }
    args = ["run", "--policy", "hf", "--model", "ragen-test/not-cached-model", "--env"]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ragen_bench.cli",
            *args,
            "ragen/Bandit-v0",
            "--out",
            str(tmp_path / "runs"),
        ],
        env={
            **clean,
            "PYTHONPATH": str(root),
            "HF_HOME": str(tmp_path / "hf"),
            "COLUMNS": "400",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_uncached_hub_id_in_offline_mode_is_one_line(tmp_path: Path) -> None:
    res = _bench_subprocess(tmp_path, HF_HUB_OFFLINE="1")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: cannot load model 'ragen-test/not-cached-model': it is not a local directory, not in "
        "the Hugging Face cache, and the hub cannot be reached (HF_HUB_OFFLINE is set); download "
        "it where there is a network (`hf download ID`) or pass a local model folder"
    ]
    assert not (tmp_path / "runs").exists()


def test_an_uncached_hub_id_without_a_network_is_one_line(tmp_path: Path) -> None:
    """The hub is a closed port on 127.0.0.1 (no network here to take away): one probe,
    one line, instead of transformers' minute of retries and a dozen lines."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    res = _bench_subprocess(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{port}")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"the hub cannot be reached (127.0.0.1:{port} cannot be reached (" in lines[0]


def test_a_cached_hub_id_passes_the_hub_check_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model in the huggingface_hub cache (its real on-disk layout) needs no network."""
    from huggingface_hub import constants

    from ragen_bench.model_dirs import check_hub_model

    repo = tmp_path / "hub" / "models--owner--cached"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    check_hub_model("owner/cached")  # no error
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set"):
        check_hub_model("owner/not-cached")
