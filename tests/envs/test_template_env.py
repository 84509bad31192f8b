"""One package per environment, and ``optimal_return`` on the base
class; the generic sweep picks a new env up with no other edit).

Runs the checks of ``template_test_env.py`` (the template a new env's tests start from)
against every registered id, so the template stays true; checks the package layout, the
schema location, that ``_register.py`` is a list of package imports, that the data layer
imports no env (the old loop ``data/`` <-> ``mathqa/`` is gone), that ``import ragen_envs``
loads no env module, and that every generic test is parametrised over the registry.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ragen_envs
from ragen_envs import resources
from ragen_envs.config import schema_validator
from ragen_envs.core import TextEnv

from .conftest import ALL_IDS, REPO

# The template's checks, collected here with the conftest's ``env_id`` (every registered id).
from .template_test_env import (  # noqa: F401
    test_env_is_one_package_with_register_and_schemas,
    test_oracle_episode_on_seed_0_succeeds_and_validates,
    test_spec_page_exists_and_names_the_id,
)

PACKAGE = Path(ragen_envs.__file__).resolve().parent
ENV_KEYS = sorted({e.env_key for e in ragen_envs.list_envs()})


def test_one_package_per_environment() -> None:
    """Every env folder under ``ragen_envs/envs/`` is a package that registers ids, and every
    registered env key has one; no env module sits beside the packages."""
    folders = sorted(
        p.name for p in (PACKAGE / "envs").iterdir() if p.is_dir() and p.name != "__pycache__"
    )
    assert folders == ENV_KEYS
    assert sorted(p.name for p in (PACKAGE / "envs").glob("*.py")) == ["__init__.py"]
    # The old scattered homes are gone (their modules live in the packages now).
    for old in (
        "code",
        "mathqa",
        "search",
        "webshop",
        "data/bundled",
        "data/env.py",
        "data/build_bundled.py",
    ):
        assert not (PACKAGE / old).exists(), old


def test_register_module_is_a_list_of_package_imports() -> None:
    tree = ast.parse((PACKAGE / "_register.py").read_text(encoding="utf-8"))
    body = [
        n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    imports = [n for n in body if isinstance(n, ast.ImportFrom) and n.module != "__future__"]
    assert len(imports) == len(body) - 1  # only the __future__ import besides them
    keys = []
    for node in imports:
        assert (
            node.level == 1
            and node.module.startswith("envs.")
            and [a.name for a in node.names] == ["register"]
        )
        keys.append(node.module.removeprefix("envs."))
    assert sorted(keys) == ENV_KEYS


@pytest.mark.parametrize("key", ENV_KEYS)
def test_env_schemas_load_from_the_env_package(key: str) -> None:
    for kind in ("config", "info"):
        path = PACKAGE / "envs" / key / f"{kind}.schema.json"
        assert resources.schema_path(f"envs/{key}.{kind}") == path
        assert resources.load_schema(f"envs/{key}.{kind}") == json.loads(
            path.read_text(encoding="utf-8")
        )
        assert not (resources.schema_dir() / "envs" / f"{key}.{kind}.schema.json").exists(), (
            "one copy only"
        )
    assert ragen_envs.config_defaults(key) == ragen_envs.validate_config(key, {})


def test_shared_env_schemas_stay_in_schemas_and_refs_resolve() -> None:
    assert (
        resources.schema_path("envs/common.info")
        == resources.schema_dir() / "envs" / "common.info.schema.json"
    )
    names = resources.all_schemas()
    assert {f"envs/{k}.{kind}.schema.json" for k in ENV_KEYS for kind in ("config", "info")} <= set(
        names
    )
    assert {
        "envs/common.config.schema.json",
        "envs/common.info.schema.json",
        "data/provenance.schema.json",
    } <= set(names)
    with pytest.raises(FileNotFoundError, match=r"envs/nosuchenv\.config\.schema\.json"):
        resources.load_schema("envs/nosuchenv.config")
    # Each env info schema's $ref into common.info resolves: the common keys are required.
    for key in ENV_KEYS:
        errors = [e.message for e in schema_validator(f"envs/{key}.info").iter_errors({})]
        assert "'action_is_valid' is a required property" in errors, (key, errors)


def test_data_layer_imports_no_env_package() -> None:
    """The shared data layer and DatasetEnv are below the envs: nothing in ``ragen_envs/data``
    or ``dataset_env.py`` imports ``ragen_envs.envs`` (the build scripts that did are in
    ``scripts/``)."""
    for path in [*sorted((PACKAGE / "data").glob("*.py")), PACKAGE / "dataset_env.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = "." * node.level + (node.module or "")
                assert "envs" not in target.split("."), f"{path.name} imports {target}"


def test_import_ragen_envs_loads_no_env_module() -> None:
    """Registration imports each package's ``register`` module only: the env modules load on
    first use (``make`` or an attribute of the package), as before the packages existed."""
    code = (
        "import json, sys, ragen_envs\n"
        "before = sorted(m for m in sys.modules if m.startswith('ragen_envs.envs.'))\n"
        "ragen_envs.make('ragen/Sokoban-v0')\n"
        "from ragen_envs.envs.countdown import solve\n"
        "after = sorted(m for m in sys.modules if m.startswith('ragen_envs.envs.'))\n"
        "print(json.dumps([before, after]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = json.loads(out.stdout)
    assert before and all(
        m.rsplit(".", 1)[-1] == "register" or m.count(".") == 2 for m in before
    ), before
    assert "ragen_envs.envs.sokoban.env" in after and "ragen_envs.envs.countdown.solver" in after
    assert "ragen_envs.envs.webshop.env" not in after


def test_lazy_package_exports_behave_like_imports() -> None:
    from ragen_envs.envs import sudoku
    from ragen_envs.envs.sudoku import solver

    assert sudoku.solve is solver.solve and "solve" in dir(sudoku) and "solve" in sudoku.__all__
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        sudoku.no_such_name  # noqa: B018


def test_optimal_return_declared_on_base_class() -> None:
    """Every env answers ``optimal_return()`` (``None`` = not stated)."""
    assert "optimal_return" in vars(TextEnv)
    assert inspect.signature(TextEnv.optimal_return).return_annotation in (
        "float | None",
        float | None,
    )
    for env_id in ALL_IDS:
        env = ragen_envs.make(env_id).unwrapped
        if env.env_key == "deepcoder":
            continue  # one reset runs no program, but the sweep below covers it; keep this test fast
        env.reset(seed=0)
        value = env.optimal_return()
        assert value is None or isinstance(value, float), (env_id, value)
    bandit = ragen_envs.make("ragen/Bandit-v0").unwrapped
    bandit.reset(seed=0)
    assert bandit.optimal_return() is None  # the base class's answer: its reward is a draw


#: The generic sweep: modules whose tests take every env id from the registry.
GENERIC = (
    "test_env_api",
    "test_bad_input",
    "test_long_actions",
    "test_determinism",
    "test_golden",
    "test_group",
)


def _ids(values: object) -> set[str]:
    """The env ids among a ``parametrize`` value list (plain ids or tuples starting with one)."""
    return {v[0] if isinstance(v, tuple) else v for v in values}  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", GENERIC)
def test_generic_sweep_is_parametrised_over_the_registry(module: str) -> None:
    """Each generic test module has tests parametrised over every registered id
    (:data:`conftest.ALL_IDS`, read from the registry) or taking the conftest's ``env_id``
    fixture, so a new env needs no edit there."""
    if module == "test_group":
        pytest.importorskip("pettingzoo", reason="test_group needs the pettingzoo extra")
    mod = importlib.import_module(f"tests.envs.{module}")
    swept = []
    for name, fn in vars(mod).items():
        if not name.startswith("test_") or not callable(fn):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        over_ids = [m for m in marks if str(m.args[0]).split(",")[0].strip() == "env_id"]
        if any(_ids(m.args[1]) == set(ALL_IDS) for m in over_ids) or (
            "env_id" in inspect.signature(fn).parameters and not over_ids
        ):
            swept.append(name)
    assert swept, f"{module} has no test over every registered id"


_WALKTHROUGH = r"""
import json, sys, warnings
from gymnasium.utils.env_checker import check_env
import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
assert ragen_envs.__file__.startswith(sys.argv[1]), ragen_envs.__file__
ids = [e.id for e in ragen_envs.list_envs() if e.env_key == "guess"]
env = ragen_envs.make("ragen/Guess-v0")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    check_env(env.unwrapped, skip_render_check=True)
results = [run_episode(env, oracle_policy, seed=s) for s in range(20)]
for r in results:
    for info in r.infos:
        ragen_envs.validate_info("guess", info)
wrong = ragen_envs.make("ragen/Guess-Short-v0")
wrong.reset(seed=0)
_, reward, terminated, truncated, info = wrong.step("11")
print(json.dumps({"ids": ids, "returns": sorted({r.episode_return for r in results}),
                  "optimal": env.unwrapped.optimal_return(), "success": all(r.success for r in results),
                  "invalid": [reward, info["action_is_valid"], truncated], "max_steps": wrong.unwrapped.config["max_steps"]}))
"""


def _code_blocks(markdown: str, lang: str) -> list[str]:
    blocks, inside, current = [], None, []
    for line in markdown.splitlines():
        if inside is None and line.startswith("```"):
            inside, current = line[3:].strip(), []
        elif inside is not None and line.startswith("```"):
            if inside == lang:
                blocks.append("\n".join(current) + "\n")
            inside = None
        elif inside is not None:
            current.append(line)
    return blocks


def test_adding_an_env_walkthrough_builds_a_working_env(tmp_path: Path) -> None:
    """docs/envs/adding-an-env.md: its package files plus the one import line make a working,
    registered env (a copy of ragen_envs with the page's Guess package added)."""
    page = REPO / "docs" / "envs" / "adding-an-env.md"
    if not page.is_file():
        pytest.skip(f"{page} is not here (the docs are not part of this copy)")
    text = page.read_text(encoding="utf-8")
    env_py, init_py, register_py, import_line = _code_blocks(text, "python")[:4]
    config_json, info_json = _code_blocks(text, "json")[:2]
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "ragen_envs", ignore=shutil.ignore_patterns("__pycache__"))
    if not (root / "ragen_envs" / "schemas").is_dir():
        shutil.copytree(resources.schema_dir(), root / "ragen_envs" / "schemas")
    guess = root / "ragen_envs" / "envs" / "guess"
    guess.mkdir()
    for name, body in (
        ("env.py", env_py),
        ("__init__.py", init_py),
        ("register.py", register_py),
        ("config.schema.json", config_json),
        ("info.schema.json", info_json),
    ):
        (guess / name).write_text(body, encoding="utf-8")
    with open(root / "ragen_envs" / "_register.py", "a", encoding="utf-8") as fh:
        fh.write(import_line)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", _WALKTHROUGH, str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(got["ids"]) == {"ragen/Guess-v0", "ragen/Guess-Short-v0"}
    assert got["returns"] == [1.0] and got["optimal"] == 1.0 and got["success"] is True
    assert got["invalid"] == [-0.1, False, False] and got["max_steps"] == 2
    # The page's checker commands, on the walkthrough's env: by id and by entry point
    # (ragen-bench is not part of the env-only wheel, whose test run skips the page anyway).
    if importlib.util.find_spec("ragen_bench") is None:
        print("check-env part skipped: ragen_bench is not installed (env-only wheel)")
        return
    for args in (
        ["ragen/Guess-v0"],
        ["--entry-point", "ragen_envs.envs.guess:GuessEnv", "--seeds", "3", "--json"],
    ):
        checked = subprocess.run(
            [sys.executable, "-m", "ragen_bench.cli", "check-env", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(tmp_path),
            timeout=300,
        )
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    report = json.loads(checked.stdout)
    assert report["passed"] is True
    assert [c["name"] for c in report["checks"]] == [
        "gymnasium",
        "schemas",
        "reproducible",
        "splits",
        "bad actions",
        "oracle",
    ]
