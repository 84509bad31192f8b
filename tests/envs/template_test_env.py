"""Template for a new environment's own tests: copy it to ``tests/envs/test_<key>.py``.

What you do NOT write: the generic sweep runs over every registered id (``ALL_IDS`` in
``conftest.py``, read from the registry), so once ``ragen_envs/_register.py`` imports your
package's ``register`` module, these run on your env with no edit anywhere:

* ``test_env_api.py`` — Gymnasium's ``check_env`` (spaces, seeding, determinism), the info
  schema on every step of oracle and random episodes, the oracle's success (and
  ``optimal_return`` when your env states one), episode-end rules;
* ``test_bad_input.py`` / ``test_long_actions.py`` — hypothesis fuzzing with malformed,
  huge and adversarial actions (an invalid action is a penalty, never a crash);
* ``test_determinism.py`` — the same episodes in fresh processes with other hash seeds;
* ``test_golden.py`` — seed -> first observation pinned in ``tests/data/golden_first_obs.json``
  (run ``python scripts/update_golden.py`` once to add your id);
* ``test_group.py`` — the PettingZoo group adapter;
* this template's three checks below (``test_template_env.py`` runs them for every id).

What you DO write here: the rules only your env knows, with hand-computed values (one
test per rule of your spec page: the reward table, each termination condition, the
observation grammar, the generator's guarantees, the oracle's optimality).  Set
:data:`ENV_ID`, keep the three checks, add yours below them.  Import only ``ragen_envs``,
gymnasium, numpy, jsonschema, pytest and hypothesis (the env tests run against the
``ragen-envs`` wheel alone: ``scripts/test_envs_wheel.py``).  Walk-through:
``docs/envs/adding-an-env.md``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode

from .conftest import REPO

#: Your env's base id (``ragen/<Name>-v<version>``).
ENV_ID = "ragen/Bandit-v0"


@pytest.fixture
def env_id() -> str:
    """This file tests :data:`ENV_ID` only (the generic sweep's ``env_id`` runs every id)."""
    return ENV_ID


def test_env_is_one_package_with_register_and_schemas(env_id: str) -> None:
    """``ragen_envs/envs/<key>/``: ``__init__`` exporting the env class, ``env.py``,
    ``register.py`` with the ``register_env`` calls, the config and info schemas."""
    entry = ragen_envs.get_entry(env_id)
    package = importlib.import_module(f"ragen_envs.envs.{entry.env_key}")
    folder = Path(package.__file__).parent
    for name in ("__init__.py", "env.py", "register.py", "config.schema.json", "info.schema.json"):
        assert (folder / name).is_file(), f"{folder / name} is missing"
    module, _, cls = entry.entry_point.partition(":")
    assert module == package.__name__, (
        f"entry point {entry.entry_point!r} is not the package's export"
    )
    assert getattr(package, cls).env_key == entry.env_key
    assert f'env_key="{entry.env_key}"' in (folder / "register.py").read_text(encoding="utf-8")


def test_spec_page_exists_and_names_the_id(env_id: str) -> None:
    """Every env has a spec page ``docs/envs/<key>.md`` (linked from the README table)
    that names its base id."""
    entry = ragen_envs.get_entry(env_id)
    page = REPO / "docs" / "envs" / f"{entry.env_key}.md"
    assert page.is_file(), f"{page} is missing: write the spec page (docs/envs/adding-an-env.md)"
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {entry.name}"), text.splitlines()[0]
    assert f"ragen/{entry.name}-v{entry.version}" in text


def test_oracle_episode_on_seed_0_succeeds_and_validates(env_id: str) -> None:
    """The smallest end-to-end check: the oracle plays seed 0 to its end (to success when
    the oracle is exact), every ``info`` follows the env's info schema, and the config
    defaults validate."""
    entry = ragen_envs.get_entry(env_id)
    env = ragen_envs.make(env_id)
    result = run_episode(env, oracle_policy, seed=0)
    assert result.terminated or result.truncated
    if getattr(env.unwrapped, "oracle_is_exact", True):
        assert result.success, result.status
    for info in result.infos:
        ragen_envs.validate_info(entry.env_key, info)
    assert ragen_envs.validate_config(entry.env_key, {}) == ragen_envs.config_defaults(
        entry.env_key
    )


# --------------------------------------------------------------- your env's rules
# def test_<rule_of_your_spec_page>() -> None:
#     env = ragen_envs.make(ENV_ID).unwrapped
#     obs, info = env.reset(seed=0)
#     obs, reward, terminated, truncated, info = env.step("<an action>")
#     assert reward == <the value your reward table gives, computed by hand>
