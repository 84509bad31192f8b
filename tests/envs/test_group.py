"""The PettingZoo group adapter (``ragen_envs.group``; spec: ``docs/envs/README.md``,
"Groups (PettingZoo)"), checked generically over every registered id."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402

import ragen_envs  # noqa: E402
from ragen_envs.group import GroupParallelEnv, make_group  # noqa: E402

from .conftest import ALL_IDS  # noqa: E402

G = 3


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_parallel_api(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the API test reports problems as warnings
        parallel_api_test(make_group(env_id, G), num_cycles=300)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_parallel_seed(env_id: str) -> None:
    parallel_seed_test(lambda: make_group(env_id, G), num_cycles=50)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_all_agents_start_from_the_single_env_instance(env_id: str) -> None:
    group = make_group(env_id, G)
    single = ragen_envs.make(env_id)
    for seed in range(5):
        obs, infos = group.reset(seed=seed)
        expected_obs, expected_info = single.reset(seed=seed)
        assert list(obs) == group.possible_agents == [f"agent_{i}" for i in range(G)]
        assert set(obs.values()) == {expected_obs}
        assert all(info == expected_info for info in infos.values())
        assert len({group.instruction(a) for a in group.possible_agents}) == 1
        assert group.agents == group.possible_agents and group.instance_seed == seed


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_oracle_group_episode_and_infos_validate(env_id: str) -> None:
    group = make_group(env_id, G)
    key = ragen_envs.get_entry(env_id).env_key
    for seed in range(3):
        _, infos = group.reset(seed=seed)
        for info in infos.values():
            ragen_envs.validate_info(key, info)
        final: dict[str, dict] = {}
        for _ in range(10_000):
            if not group.agents:
                break
            actions = {a: group.envs[a].oracle_actions()[0] for a in group.agents}
            _, rewards, terms, truncs, infos = group.step(actions)
            assert set(rewards) == set(terms) == set(truncs) == set(infos) == set(actions)
            for a, info in infos.items():
                ragen_envs.validate_info(key, info)
                if terms[a] or truncs[a]:
                    final[a] = info
                    assert a not in group.agents
        assert group.agents == [] and set(final) == set(group.possible_agents)
        if getattr(group.envs["agent_0"], "oracle_is_exact", True):
            assert all(info["success"] for info in final.values())


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_unseeded_reset_keeps_the_group_together_and_is_reproducible(env_id: str) -> None:
    runs = []
    for _ in range(2):
        group = make_group(env_id, G)
        group.reset(seed=11)
        # let the copies' own random streams diverge: different actions per agent
        group.step(
            {a: group.action_space(a).sample() if i else "?" for i, a in enumerate(group.agents)}
        )
        seq = []
        for _ in range(3):
            obs, _ = group.reset()
            assert len(set(obs.values())) == 1
            seq.append((group.instance_seed, obs["agent_0"]))
        runs.append(seq)
    assert runs[0] == runs[1]


def _countdown_group() -> GroupParallelEnv:
    group = make_group("ragen/Countdown-v0", 2, render_mode="ansi")
    group.reset(seed=0, options={"nums": [44, 19, 35], "target": 60})
    return group


def test_finished_agents_leave_and_cannot_act() -> None:
    group = _countdown_group()
    obs, rewards, terms, truncs, infos = group.step({"agent_0": "44-19+35", "agent_1": "44*19"})
    assert rewards == {"agent_0": 1.0, "agent_1": -0.1}
    assert terms == {"agent_0": True, "agent_1": False} and truncs == {
        "agent_0": False,
        "agent_1": False,
    }
    assert infos["agent_0"]["success"] and not infos["agent_1"]["action_is_valid"]
    assert group.agents == ["agent_1"]
    with pytest.raises(ValueError, match="not live"):
        group.step({"agent_0": "44-19+35", "agent_1": "44-19+35"})
    with pytest.raises(ValueError, match="no action"):
        group.step({})
    obs, rewards, *_ = group.step({"agent_1": "44+19+35"})
    assert rewards == {"agent_1": pytest.approx(0.1)} and group.agents == []
    assert "[agent_0]\nTarget: 60" in group.render() and "Wrong: 44 + 19 + 35 = 98" in group.state()
    group.close()


def test_spaces_are_per_agent_and_stable() -> None:
    group = make_group("ragen/Countdown-v0", 2)
    assert group.action_space("agent_0") is group.action_space("agent_0")
    assert group.action_space("agent_0") is not group.action_space("agent_1")
    assert group.observation_space("agent_1") is group.observation_spaces["agent_1"]
    assert group.render() is None  # no render_mode
    assert group.state() == ""  # before reset
    group.reset(seed=0)
    assert group.state() in group.state_space


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_bad_group_size(size: object) -> None:
    with pytest.raises(ValueError, match="group_size"):
        make_group("ragen/Countdown-v0", size)  # type: ignore[arg-type]


def test_config_errors_pass_through() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="max_steps"):
        make_group("ragen/Countdown-v0", 2, max_steps=0)
    with pytest.raises(ragen_envs.UnknownEnvError):
        make_group("ragen/NoSuchEnv-v0", 2)


def test_import_ragen_envs_does_not_need_pettingzoo() -> None:
    code = (
        "import sys; sys.modules['pettingzoo'] = None\n"  # makes `import pettingzoo` fail
        "import ragen_envs\n"
        "try:\n    import ragen_envs.group\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        "pip install 'ragen-envs[pettingzoo]' (or 'ragen[pettingzoo]' for the full project)"
        in out.stdout
    )
