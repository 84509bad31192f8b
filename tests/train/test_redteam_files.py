"""Files from others are data: a published checkpoint, model folder or config cannot run code.

One payload per case, each of which ran (or reached outside the folder) before:

* a ``__reduce__`` payload planted in a checkpoint's ``rng_rank0.pt`` / ``optimizer.pt`` /
  ``scheduler.pt`` (manifest hashes recomputed, so the checkpoint verifies), and in a DCP
  ``.metadata``: refused in one line naming the file, the payload never runs (it would create
  a marker file);
* a symbolic link in place of a checkpoint file: refused, the outside file is not read;
* the Lean env's ``verifier: "repl:<command>"`` in the training config beside a model folder
  (``ragen-train eval``) and in a config file (``ragen-train starpo -c``): refused before any
  env starts, the command never runs.

Checkpoints written in the earlier format (the NumPy RNG key as an ``ndarray``) still resume.
Real parts: torch's own files, the real loaders the trainer calls, the real CLI in process.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from ragen_train import checkpoint as ckpt
from ragen_train import dist_state, run_dir
from ragen_train.cli import app
from ragen_train.config import load_config

runner = CliRunner()


class Payload:
    """Unpickling it calls ``os.system`` (what the red-team planted)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _checkpoint(d: Path, files: dict[str, object]) -> Path:
    """A checkpoint directory holding ``files`` (``torch.save``), a ``state.json`` and a manifest
    with every hash recomputed, so it verifies as intact."""
    d.mkdir(parents=True)
    for name, obj in files.items():
        torch.save(obj, d / name)
    (d / "state.json").write_text(json.dumps({"step": 3}))
    ckpt.write_manifest(d, step=3)
    ckpt.verify(d)  # intact: only the loader stands between the payload and the user
    return d


def _old_rng_state() -> dict:
    """The RNG state as checkpoints before the tensor-only format held it."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": None,
    }


@pytest.mark.parametrize("name", ["rng_rank0.pt", "optimizer.pt", "scheduler.pt"])
def test_a_pickle_payload_in_a_checkpoint_is_refused_unrun(tmp_path: Path, name: str) -> None:
    # Before: torch.load(weights_only=False) ran the payload, then the run went on.
    marker = tmp_path / "marker"
    d = _checkpoint(tmp_path / "step_000003", {name: {"python": Payload(marker)}})
    why = (
        f"{d}: {name} holds a pickled object a checkpoint may not hold (posix.system); "
        "refused without running it (only tensors, numbers, strings and containers are loaded)"
    )
    with pytest.raises(ckpt.CheckpointError) as err:
        ckpt.load_pt(d, name)
    assert str(err.value) == why
    if name.startswith("rng"):  # what the trainer calls: it stops the resume (no fall-back)
        with pytest.raises(ckpt.RefusedCheckpoint) as err:
            run_dir.restore_rng(d, 0)
        assert str(err.value) == f"cannot resume from checkpoint {why}"
    assert not marker.exists()


def test_a_checkpoint_in_the_earlier_rng_format_still_restores_exactly(tmp_path: Path) -> None:
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # a cached Gaussian is part of NumPy's state
    d = _checkpoint(tmp_path / "old", {"rng_rank0.pt": _old_rng_state()})
    want = (random.random(), np.random.randn(), torch.rand(2).tolist())
    run_dir.restore_rng(d, 0)
    assert (random.random(), np.random.randn(), torch.rand(2).tolist()) == want


def test_the_current_rng_format_restores_exactly_and_names_no_global(tmp_path: Path) -> None:
    np.random.seed(5)
    np.random.randn()
    d = _checkpoint(tmp_path / "new", {"rng_rank0.pt": ckpt.rng_state()})
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(d / "rng_rank0.pt")) == []
    want = (random.random(), np.random.randn(), np.random.rand(), torch.rand(2).tolist())
    run_dir.restore_rng(d, 0)
    assert (random.random(), np.random.randn(), np.random.rand(), torch.rand(2).tolist()) == want


def test_optimizer_and_scheduler_state_round_trip_through_the_safe_loader(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4)
    model(torch.randn(4, 3)).sum().backward()
    opt.step(), sched.step()
    d = _checkpoint(
        tmp_path / "c", {"optimizer.pt": opt.state_dict(), "scheduler.pt": sched.state_dict()}
    )
    opt2 = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=9.0)
    opt2.load_state_dict(ckpt.load_pt(d, "optimizer.pt"))
    assert torch.equal(
        opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"]
    )
    assert ckpt.load_pt(d, "scheduler.pt") == sched.state_dict()


def test_a_symlinked_checkpoint_file_is_refused_and_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.pt"
    torch.save({"x": 1}, outside)
    d = _checkpoint(tmp_path / "c", {"optimizer.pt": {"x": 1}})
    (d / "optimizer.pt").unlink()
    (d / "optimizer.pt").symlink_to(outside)  # same bytes: the hashes still match
    with pytest.raises(ckpt.CheckpointError, match=r"optimizer.pt is a symbolic link; refused"):
        ckpt.verify(d)
    with pytest.raises(ckpt.CheckpointError, match=r"optimizer.pt is a symbolic link; refused"):
        ckpt.load_pt(d, "optimizer.pt")


def test_a_pickle_payload_in_dcp_metadata_is_refused_unrun(tmp_path: Path) -> None:
    # DCP reads .metadata with pickle.load; an FSDP2 checkpoint's dcp/ is a second way in.
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    path = tmp_path / "dcp"
    dist_state.save_sharded(path, {"policy": (model, opt)})
    fresh = torch.nn.Linear(3, 2)
    dist_state.load_sharded(path, {"policy": (fresh, torch.optim.AdamW(fresh.parameters()))})
    assert torch.equal(fresh.weight, model.weight)  # an honest one still loads
    marker = tmp_path / "marker"
    with open(path / ".metadata", "wb") as fh:  # DCP pickles its metadata this way
        pickle.dump(Payload(marker), fh)
    with pytest.raises(dist_state.UnsafeCheckpointError) as err:
        dist_state.load_sharded(path, {"policy": (fresh, torch.optim.AdamW(fresh.parameters()))})
    assert str(err.value) == (
        f"{path / '.metadata'}: holds a pickled object a checkpoint may not hold "
        "(global posix.system); refused without running it"
    )
    assert not marker.exists()


# ------------------------------------------------------------------ configs from others
def _lean_config(run: Path, verifier: str) -> dict:
    cfg = load_config("quickstart", [f"trainer.out_dir={run}"]).to_dict()
    cfg["env"]["id"] = "ragen/Lean-v0"
    cfg["env"]["config"] = {"verifier": verifier}
    return cfg


def test_eval_refuses_a_verifier_command_from_the_model_folder(tmp_path: Path) -> None:
    # Before: the command ran three times (readiness retries), then was printed.
    marker = tmp_path / "marker"
    command = f"repl:sh -c 'touch {marker}'"
    run = tmp_path / "run"
    (run / "final_model").mkdir(parents=True)
    (run / "final_model" / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    (run / "config.json").write_text(json.dumps(_lean_config(run, command)))
    res = runner.invoke(
        app, ["eval", str(run / "final_model"), "--episodes", "1", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2, (res.stdout, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: CHECKPOINT: "), res.stderr
    assert f"sets env_config.verifier = {command!r} (a command)" in lines[0]
    assert "pass --trust-folder" in lines[0]
    assert not marker.exists()


def test_starpo_refuses_a_verifier_command_in_a_config_file(tmp_path: Path) -> None:
    # Before: `ragen-train starpo -c <someone's config>` ran it in the env preflight.
    marker = tmp_path / "marker"
    command = f"repl:sh -c 'touch {marker}'"
    cfg_file = tmp_path / "theirs.json"
    cfg_file.write_text(json.dumps(_lean_config(tmp_path / "run", command)))
    res = runner.invoke(app, ["starpo", "-c", str(cfg_file)])
    assert res.exit_code == 2, (res.stdout, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"{cfg_file} sets env_config.verifier = {command!r} (a command)" in lines[0]
    assert "env.config.verifier=..." in lines[0] and "--trust-folder" in lines[0]
    assert not marker.exists()


def test_config_values_follow_where_the_config_came_from(tmp_path: Path) -> None:
    from ragen_bench.trust import UntrustedValueError
    from ragen_train.config import StarPOConfig, from_dict
    from ragen_train.resume import check_config_values

    command = "repl:lake exe repl"
    cfg = from_dict(StarPOConfig, _lean_config(tmp_path / "run", command))
    # a file the user named: the command runs only when confirmed, and is printed first
    lines = check_config_values(
        cfg,
        config="mine.json",
        resume=None,
        overrides=[f"env.config.verifier={command}"],
        trust=False,
    )
    assert lines == [f"will run env_config.verifier = {command!r} (from mine.json)"]
    # a run folder (--resume DIR, no -c): an endpoint must be confirmed too
    run = tmp_path / "run"
    run.mkdir()
    url_cfg = _lean_config(run, "http://10.1.2.3:9000")
    (run / "config.json").write_text(json.dumps(url_cfg))
    cfg = from_dict(StarPOConfig, url_cfg)
    with pytest.raises(UntrustedValueError, match=r"env_config.verifier = 'http://10.1.2.3:9000'"):
        check_config_values(cfg, config=None, resume=str(run), overrides=[], trust=False)
    assert check_config_values(cfg, config=None, resume=str(run), overrides=[], trust=True) == [
        f"will call http://10.1.2.3:9000 (from {run / 'config.json'})"
    ]
    # the same endpoint in a file the user named is accepted and its origin printed
    assert check_config_values(cfg, config="mine.json", resume=None, overrides=[], trust=False) == [
        "will call http://10.1.2.3:9000 (from mine.json)"
    ]


def test_bench_run_refuses_a_verifier_command_saved_with_a_model(tmp_path: Path) -> None:
    # Before: `ragen-bench run --model <folder>` applied the folder's ragen_protocol.json env
    # config, so its verifier command ran in the env preflight.
    from ragen_bench.cli import app as bench_app
    from ragen_bench.protocol import write_protocol
    from ragen_train.evaluation import saved_protocol

    marker = tmp_path / "marker"
    command = f"repl:sh -c 'touch {marker}'"
    model = tmp_path / "final_model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    write_protocol(model, saved_protocol(_lean_config(tmp_path / "run", command)))
    args = ["run", "--policy", "hf", "--model", str(model), "--episodes", "1"]
    res = runner.invoke(bench_app, [*args, "--out", str(tmp_path / "o"), "--no-progress"])
    assert res.exit_code == 2, (res.stdout, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"{model / 'ragen_protocol.json'} sets env_config.verifier = {command!r}" in lines[0]
    assert "--trust-folder" in lines[0]
    assert not marker.exists()


def test_a_symlinked_metrics_file_is_refused_and_the_outside_file_is_unchanged(
    tmp_path: Path,
) -> None:
    from ragen_bench.fileio import NotRegularFileError
    from ragen_train.logger import MetricLogger

    outside = tmp_path / "notes.txt"
    outside.write_bytes(b"kept\nno newline at the end")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to(outside)
    with pytest.raises(NotRegularFileError, match=r"metrics.jsonl: is a symbolic link; refused"):
        MetricLogger(run, ["jsonl"])
    assert outside.read_bytes() == b"kept\nno newline at the end"
