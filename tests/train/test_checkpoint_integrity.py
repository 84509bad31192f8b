"""Checkpoints that survive a crash, and the run files around them.

* Every way a disk or a kill damages a checkpoint file (truncated, emptied, bit-flipped,
  missing; a missing manifest) is detected on load: ``--resume latest`` names the file, falls
  back to the previous checkpoint and continues with exactly the parameters of an
  uninterrupted run; with nothing intact it refuses in one line.
* ``ragen-train starpo`` SIGKILLed at seeded random moments inside checkpoint writes (GRPO
  and PPO) always resumes from an intact checkpoint and ends with the uninterrupted run's
  parameters.

Real parts throughout: the tiny model, real torch steps, the real CLI in real processes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ragen_bench.fileio import atomic_directory, atomic_write_json, repair_jsonl_tail
from ragen_train import checkpoint as ckpt
from ragen_train.config import load_config
from ragen_train.logger import read_metrics
from ragen_train.modeling import unwrap
from ragen_train.trainer import StarPOTrainer
from tests.helpers.forked_runs import run_jobs

ROOT = Path(__file__).resolve().parents[2]
#: Small, fast, and with a gradient every step (entropy bonus; the filter keeps every group),
#: so parameters, Adam moments, the scheduler and the sampling RNG all matter after a resume.
BASE = [
    "trainer.save_every=1",
    "trainer.val_every=0",
    "rollout.env_groups=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
    "trainer.loggers=jsonl",
    "optim.lr=1e-3",
    "algorithm.entropy_coef=0.01",
    "trainer.collapse_every=0",
    "optim.warmup_steps=3",
]

FILES = {  # file kind -> path inside a checkpoint
    "model": "model/model.safetensors",
    "optimizer": "optimizer.pt",
    "rng": "rng_rank0.pt",
    "scheduler": "scheduler.pt",
    "state": "state.json",
    "critic": "critic/model.safetensors",
    "critic_optimizer": "critic_optimizer.pt",
}
DAMAGE = ("truncated", "emptied", "bit_flipped", "missing")


def damage(path: Path, kind: str) -> None:
    """Damage ``path`` the way a kill or a disk does."""
    if kind == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    elif kind == "emptied":
        os.truncate(path, 0)
    elif kind == "bit_flipped":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x10
        path.write_bytes(bytes(data))
    elif kind == "missing":
        path.unlink()
    else:  # pragma: no cover
        raise ValueError(kind)


def params(trainer: StarPOTrainer) -> dict[str, torch.Tensor]:
    out = {f"policy.{k}": v.detach().clone() for k, v in unwrap(trainer.model).state_dict().items()}
    if trainer.critic is not None:
        out.update(
            {
                f"critic.{k}": v.detach().clone()
                for k, v in unwrap(trainer.critic).state_dict().items()
            }
        )
    return out


def assert_equal_params(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[int, dict[str, torch.Tensor]]]:
    """An uninterrupted PPO (GAE + critic) run of 2 steps with both checkpoints kept, and its
    parameters after each step."""
    out = tmp_path_factory.mktemp("reference")
    cfg = load_config(
        "quickstart",
        [
            *BASE,
            "trainer.total_steps=2",
            "trainer.keep_checkpoints=0",
            "algorithm.adv_estimator=gae",
            f"trainer.out_dir={out}",
        ],
    )
    trainer = StarPOTrainer(cfg)
    snaps = {0: params(trainer)}
    while trainer.step < 2:
        metrics = trainer.train_step()
        trainer.logger.log(trainer.step, metrics)
        trainer.save()
        snaps[trainer.step] = params(trainer)
    trainer.logger.close()
    for step in (1, 2):
        assert any(not torch.equal(snaps[step - 1][k], snaps[step][k]) for k in snaps[step]), (
            "every step must change the parameters"
        )
    return out, snaps


def copy_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def resumed(out: Path) -> StarPOTrainer:
    cfg = load_config(
        "quickstart",
        [
            *BASE,
            "trainer.total_steps=2",
            "trainer.keep_checkpoints=0",
            "algorithm.adv_estimator=gae",
            f"trainer.out_dir={out}",
        ],
    )
    return StarPOTrainer(cfg, resume="latest")


# ----------------------------------------------------------------------- damage, one kind at a time
CASES = [(f, d) for f in FILES for d in DAMAGE] + [("manifest", "missing")]


@pytest.mark.parametrize(("file_kind", "damage_kind"), CASES, ids=[f"{f}-{d}" for f, d in CASES])
def test_damaged_latest_checkpoint_falls_back_to_the_previous_one_exactly(
    reference, tmp_path: Path, file_kind: str, damage_kind: str
) -> None:
    """The damaged file is named, the run resumes from step 1 (1 step lost) with the
    parameters of the uninterrupted run at step 1, and its next step reproduces step 2."""
    src, snaps = reference
    out = copy_run(src, tmp_path / "run")
    rel = ckpt.MANIFEST if file_kind == "manifest" else FILES[file_kind]
    damage(out / "checkpoints" / "step_000002" / rel, damage_kind)
    with pytest.warns(RuntimeWarning) as caught:
        trainer = resumed(out)
    msg = next(str(w.message) for w in caught if "damaged checkpoint" in str(w.message))
    assert (
        "\n" not in msg
        and f"step_000002: {rel}" in msg
        and "step 1" in msg
        and "1 step lost" in msg
    )
    assert trainer.step == 1 and trainer.resumed_from.path.name == "step_000001"
    assert_equal_params(params(trainer), snaps[1])
    trainer.logger.log(trainer.step + 1, trainer.train_step())
    assert_equal_params(params(trainer), snaps[2])
    trainer.logger.close()


@pytest.mark.parametrize(("file_kind", "damage_kind"), CASES, ids=[f"{f}-{d}" for f, d in CASES])
def test_nothing_intact_refuses_in_one_line(
    reference, tmp_path: Path, file_kind: str, damage_kind: str
) -> None:
    """Every checkpoint damaged -> one line naming each damaged file, nothing loaded."""
    src, _ = reference
    out = copy_run(src, tmp_path / "run")
    rel = ckpt.MANIFEST if file_kind == "manifest" else FILES[file_kind]
    for step in (1, 2):
        damage(out / "checkpoints" / f"step_{step:06d}" / rel, damage_kind)
    with pytest.raises(ckpt.NoIntactCheckpoint) as err:
        resumed(out)
    line = str(err.value)
    assert "\n" not in line and line.startswith("no intact checkpoint to resume from")
    assert f"step_000001: {rel}" in line and f"step_000002: {rel}" in line


def test_verify_names_what_is_wrong(reference, tmp_path: Path) -> None:
    out = copy_run(reference[0], tmp_path / "run")
    d = out / "checkpoints" / "step_000002"
    assert ckpt.verify(d)["step"] == 2
    expected = {
        "truncated": "is truncated",
        "emptied": "is empty",
        "bit_flipped": "SHA-256 mismatch",
        "missing": "is missing",
    }
    for kind, words in expected.items():
        bad = copy_run(d, tmp_path / kind)
        damage(bad / "optimizer.pt", kind)
        with pytest.raises(ckpt.CheckpointError, match=words) as err:
            ckpt.verify(bad)
        assert err.value.file == "optimizer.pt"


def test_explicit_damaged_checkpoint_is_refused_without_fallback(reference, tmp_path: Path) -> None:
    out = copy_run(reference[0], tmp_path / "run")
    damage(out / "checkpoints" / "step_000002" / "scheduler.pt", "emptied")
    cfg = load_config(
        "quickstart",
        [*BASE, "trainer.total_steps=2", "algorithm.adv_estimator=gae", f"trainer.out_dir={out}"],
    )
    with pytest.raises(
        ckpt.NoIntactCheckpoint, match=r"step_000002: scheduler.pt is empty \(0 of \d+ bytes\)"
    ):
        StarPOTrainer(cfg, resume=str(out / "checkpoints" / "step_000002"))


def test_pruning_never_removes_the_newest_intact_checkpoint(reference, tmp_path: Path) -> None:
    """With the newest checkpoint damaged, keep=1 keeps it (the newest) *and* the
    newest intact one."""
    out = copy_run(reference[0], tmp_path / "run")
    root = out / "checkpoints"
    damage(root / "step_000002" / "model" / "model.safetensors", "bit_flipped")
    ckpt.prune(root, keep=1)
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000001", "step_000002"]
    assert ckpt.find_resumable(out).step == 1


def test_a_save_killed_before_its_rename_leaves_only_a_temporary(reference, tmp_path: Path) -> None:
    """A half-written checkpoint never carries a checkpoint's name; the next save removes it."""
    out = copy_run(reference[0], tmp_path / "run")
    root = out / "checkpoints"
    shutil.copytree(root / "step_000002", root / ".step_000003.tmp-save")
    (root / ".step_000003.tmp-save" / ckpt.MANIFEST).unlink()
    assert ckpt.find_resumable(out).path.name == "step_000002"
    trainer = resumed(out)
    trainer.train_step()
    trainer.save()
    trainer.logger.close()
    assert not list(root.glob(".*")) and ckpt.verify(root / "step_000003")["step"] == 3
    assert (root / "latest").read_text().strip() == "step_000003"


# ----------------------------------------------------------------------- run files
def test_metrics_jsonl_repeats_no_step_after_a_resume(reference, tmp_path: Path) -> None:
    """Resuming from step 1 drops the rows the dead run logged after it, so
    every step appears once."""
    out = copy_run(reference[0], tmp_path / "run")
    ckpt.remove_directory(out / "checkpoints" / "step_000002")  # the run died before saving step 2
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2]
    trainer = resumed(out)
    trainer.fit()
    steps = [r["step"] for r in read_metrics(out / "metrics.jsonl") if r["phase"] == "train"]
    assert steps == [1, 2]


def test_torn_last_line_of_metrics_jsonl_is_repaired_on_resume(reference, tmp_path: Path) -> None:
    """A kill mid-row leaves a torn last line; the resumed run cuts it off
    instead of appending onto it, so every line parses and the curves plot."""
    out = copy_run(reference[0], tmp_path / "run")
    ckpt.remove_directory(out / "checkpoints" / "step_000002")
    metrics = out / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # step 2's row torn mid-write
    trainer = resumed(out)
    trainer.fit()
    rows = [
        json.loads(line) for line in metrics.read_text().splitlines()
    ]  # every line is whole JSON
    assert [r["step"] for r in rows] == [1, 2]
    from ragen_train.plot import plot_metrics

    assert plot_metrics(metrics, out / "curves.png").is_file()


def test_torn_jsonl_tail_repair_is_shared_with_episodes_jsonl(tmp_path: Path) -> None:
    """One mechanism (ragen_bench.fileio) for episodes.jsonl and metrics.jsonl."""
    from ragen_bench.results import RunDir

    run = RunDir(tmp_path)
    run.episodes_path.write_text('{"episode_index": 0}\n{"episode_ind')
    assert run.repair() == len('{"episode_ind')
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1}\n{"step": 2, "x": [1,\n')  # torn, but ends in a newline
    assert repair_jsonl_tail(p) > 0 and p.read_text() == '{"step": 1}\n'
    assert repair_jsonl_tail(p) == 0


def test_rewritten_files_are_replaced_atomically(tmp_path: Path) -> None:
    """summary.json, run.json, leaderboards, config.json: a failed rewrite leaves the old file;
    a failed directory build leaves the old directory; no temporaries stay behind."""
    p = tmp_path / "summary.json"
    atomic_write_json(p, {"a": 1})
    with pytest.raises(TypeError):
        atomic_write_json(p, {"a": object()})
    assert json.loads(p.read_text()) == {"a": 1}
    d = tmp_path / "final_model"
    with atomic_directory(d) as tmp:
        (tmp / "w").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(d) as tmp:
            (tmp / "w").write_text("new, half")
            raise RuntimeError("killed")
    assert (d / "w").read_text() == "old"
    with atomic_directory(d) as tmp:
        (tmp / "w").write_text("new")
    assert (d / "w").read_text() == "new"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["final_model", "summary.json"]


def test_native_starpo_writes_final_model(tmp_path: Path) -> None:
    """`ragen-train starpo` (native) saves final_model/ (atomic, with a
    manifest), equal to the last checkpoint's policy, and eval finds it as a model folder."""
    from typer.testing import CliRunner

    from ragen_train.cli import app
    from ragen_train.evaluation import is_model_dir

    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        [
            "starpo",
            "--config",
            "quickstart",
            *BASE,
            "trainer.total_steps=1",
            f"trainer.out_dir={out}",
        ],
    )
    assert res.exit_code == 0, res.output
    final = out / "final_model"
    assert (
        is_model_dir(final)
        and ckpt.verify(final, kind=ckpt.MODEL_FORMAT)["format"] == "ragen-model"
    )
    a = load_file(str(final / "model.safetensors"))
    b = load_file(str(out / "checkpoints" / "step_000001" / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_cli_reports_the_fallback_and_refuses_in_one_line(reference, tmp_path: Path) -> None:
    """What a user sees: a warning naming the damaged file and the step resumed from, no
    traceback; with nothing intact, one `error:` line and exit status 2."""
    out = copy_run(reference[0], tmp_path / "run")
    args = [
        sys.executable,
        "-m",
        "ragen_train.cli",
        "starpo",
        "--config",
        "quickstart",
        *BASE,
        "trainer.total_steps=2",
        "trainer.keep_checkpoints=0",
        "algorithm.adv_estimator=gae",
        f"trainer.out_dir={out}",
        "--resume",
        "latest",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    damage(out / "checkpoints" / "step_000002" / "optimizer.pt", "truncated")
    ok = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "Traceback" not in ok.stderr
    assert (
        "warning: damaged checkpoint(s) skipped (step_000002: optimizer.pt is truncated"
        in ok.stderr
    )
    assert "resuming from the newest intact one, step_000001 (step 1): 1 step lost" in ok.stderr
    for d in (out / "checkpoints").glob("step_*"):
        damage(d / "state.json", "bit_flipped")
    bad = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    # Besides the status line every CPU run starts with (which allocator trains, on stderr since
    # results alone go to stdout), the refusal is one line.
    lines = [x for x in bad.stderr.strip().splitlines() if not x.startswith("memory allocator: ")]
    assert len(lines) == 1 and lines[0].startswith("error: no intact checkpoint to resume from"), (
        bad.stderr
    )


def _rewrite(d: Path, rel: str, obj: object) -> None:
    """Replace ``d/rel`` with ``torch.save(obj)`` and recompute the manifest's hashes (what a
    publisher of a checkpoint can always do)."""
    (d / rel).unlink()
    torch.save(obj, d / rel)
    step = json.loads((d / "state.json").read_text())["step"]
    ckpt.write_manifest(d, step=step)
    ckpt.verify(d)


def test_a_checkpoint_in_the_earlier_rng_format_resumes_exactly(reference, tmp_path: Path) -> None:
    """A checkpoint written before the tensor-only RNG format (``rng_rank0.pt`` holding
    ``np.random.get_state()``'s tuple with its ``ndarray``) still resumes, exactly."""
    src, snaps = reference
    out = copy_run(src, tmp_path / "run")
    shutil.rmtree(out / "checkpoints" / "step_000002")
    d = out / "checkpoints" / "step_000001"
    new = ckpt.load_pt(d, "rng_rank0.pt")
    npy = new["numpy"]
    old = {
        **new,
        "numpy": (
            npy["bit_generator"],
            npy["key"].numpy().astype("uint32"),
            npy["pos"],
            npy["has_gauss"],
            npy["cached_gaussian"],
        ),
    }
    _rewrite(d, "rng_rank0.pt", old)
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(d / "rng_rank0.pt"))
    trainer = resumed(out)
    assert trainer.step == 1
    assert_equal_params(params(trainer), snaps[1])
    trainer.logger.log(trainer.step + 1, trainer.train_step())
    assert_equal_params(params(trainer), snaps[2])
    trainer.logger.close()


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_payload_stops_the_cli_resume_unrun(reference, tmp_path: Path) -> None:
    """The red-team's checkpoint: ``rng_rank0.pt`` re-saved with an ``os.system`` payload,
    manifest hashes recomputed.  Before, the command ran and the run finished with no word."""
    out = copy_run(reference[0], tmp_path / "run")
    marker = tmp_path / "marker"
    d = out / "checkpoints" / "step_000002"
    _rewrite(d, "rng_rank0.pt", {"python": _Payload(marker)})
    args = [
        *(sys.executable, "-m", "ragen_train.cli", "starpo", "--config", "quickstart"),
        *BASE,
        *("trainer.total_steps=3", "trainer.keep_checkpoints=0", "algorithm.adv_estimator=gae"),
        *(f"trainer.out_dir={out}", "--resume", "latest"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    bad = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr[-2000:]
    lines = bad.stderr.strip().splitlines()
    assert lines[-1] == (
        f"error: cannot resume from checkpoint {d}: rng_rank0.pt holds a pickled object a "
        "checkpoint may not hold (posix.system); refused without running it (only tensors, "
        "numbers, strings and containers are loaded)"
    ), bad.stderr
    assert not marker.exists()


# ----------------------------------------------------------------------- SIGKILL during saves
TRIALS = 12  # per algorithm: 24 in all
DELAY_S = 0.02  # RAGEN_CHECKPOINT_TEST_DELAY_S: each save stage sleeps this long


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_sigkill_during_checkpoint_writes_always_resumes_exactly(
    tmp_path: Path, estimator: str
) -> None:
    """12 trials per algorithm (24 in all) of `ragen-train starpo` (2 steps, a
    checkpoint every step, keep 1, so pruning runs inside the save too) SIGKILLed at a seeded
    random moment inside the save of step 2, then `--resume latest`: every resume succeeds
    from an intact checkpoint (step 1, or step 2 when the kill came after its rename), and
    the final policy (and critic) equal the uninterrupted run's bit for bit.

    The trials share one trained base: the same command killed as soon as step 1's
    checkpoint is complete (``checkpoints/latest`` names it); each trial continues a copy of
    it with ``--resume latest`` into step 2, where the kill lands, so step 1 is trained once
    instead of once per trial.  The processes are forked from one warm interpreter
    (tests/helpers/kill_driver.py) to keep the runs cheap."""
    rng = random.Random(19 if estimator == "grpo" else 20)
    stages = 8 if estimator == "grpo" else 10
    args = [
        "starpo",
        "--config",
        "quickstart",
        *BASE,
        "trainer.total_steps=2",
        "trainer.keep_checkpoints=1",
        f"algorithm.adv_estimator={estimator}",
    ]
    base = tmp_path / "base"
    jobs = [
        {
            "args": [*args, f"trainer.out_dir={tmp_path / 'full'}"],
            "log": str(tmp_path / "full.log"),
        },
        {
            "args": [*args, f"trainer.out_dir={base}"],
            "log": str(base) + ".log",
            "kill": {"watch": str(base / "checkpoints" / "latest"), "delay_s": 0.0},
        },
    ]
    plan = []
    for i in range(TRIALS):
        out = tmp_path / f"t{i:02d}"
        k, delay = 2, rng.uniform(0.0, stages * DELAY_S)
        plan.append((out, k))
        jobs.append(
            {
                "args": [*args, f"trainer.out_dir={out}", "--resume", "latest"],
                "copy": [str(base), str(out)],
                "log": str(out) + ".log",
                "env": {ckpt.TEST_DELAY_ENV: str(DELAY_S)},
                "kill": {
                    "watch": str(out / "checkpoints" / f".step_{k:06d}.tmp-save"),
                    "delay_s": delay,
                    "timeout_s": 120,
                },
            }
        )
        jobs.append(
            {
                "args": [*args, f"trainer.out_dir={out}", "--resume", "latest"],
                "log": str(out) + ".resume.log",
            }
        )
    results = run_jobs(jobs)
    assert results[0]["rc"] == 0, (tmp_path / "full.log").read_text()[-3000:]
    assert results[1]["killed"], results[1]
    assert (
        ckpt.find_resumable(base).step == 1 and not (base / "checkpoints" / "step_000002").exists()
    )

    def final(out: Path) -> dict[str, torch.Tensor]:
        t = {
            f"policy.{k}": v
            for k, v in load_file(str(out / "final_model" / "model.safetensors")).items()
        }
        if estimator == "gae":
            crit = load_file(
                str(out / "checkpoints" / "step_000002" / "critic" / "model.safetensors")
            )
            t.update({f"critic.{k}": v for k, v in crit.items()})
        return t

    want = final(tmp_path / "full")
    inside = 0
    for i, (out, k) in enumerate(plan):
        killed, resume = results[2 + 2 * i], results[3 + 2 * i]
        assert killed["killed"] and killed["saw_watch"], (i, killed)
        inside += killed["watch_left"]
        log = Path(str(out) + ".resume.log").read_text()
        assert resume["rc"] == 0 and "Traceback" not in log, (i, log[-3000:])
        from_step = int(log.split("resuming from ")[1].split("(step ")[1].split(")")[0])
        assert from_step in (k - 1, k), (i, k, from_step)
        assert_equal_params(final(out), want)
        assert not [p.name for p in (out / "checkpoints").glob(".*")], "temporaries left behind"
    assert inside >= TRIALS // 2, f"only {inside}/{TRIALS} kills landed inside a save"
