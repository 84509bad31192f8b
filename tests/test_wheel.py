"""Packaging: the ``ragen-envs`` wheel installs alone, without torch, and runs every env.

Foundation issue, "Must show": "The ``ragen-envs`` wheel builds, installs into a fresh
virtual environment without torch, and runs an episode there".  Also checks what both
wheels hold (``packaging/ragen-envs/pyproject.toml`` and the root ``pyproject.toml``)
and that :func:`ragen_envs.resources.schema_dir` finds the packaged schemas in a
non-editable install.

The wheels are built from a copy of the source tree (with ``__pycache__`` folders
compiled into it on purpose, to check they stay out of the wheel); the fresh venv is
created without system site packages and gets gymnasium, numpy and jsonschema from the
package index (or pip's cache).  Slow: about 30-60 s, mostly the install.
"""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode

from .envs.conftest import ALL_IDS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# The wheels copy schemas/ (ragen-envs: schemas/envs/ and schemas/data/, what the env
# package validates against) file for file; each env's own schemas travel in its package.
_ENV_SCHEMAS = sorted(
    p.relative_to(REPO / "schemas").as_posix()
    for folder in ("envs", "data")
    for p in (REPO / "schemas" / folder).iterdir()
    if p.is_file()
)
_ENV_KEYS = sorted({e.env_key for e in ragen_envs.list_envs()})
_ALL_SCHEMAS = sorted(
    p.relative_to(REPO / "schemas").as_posix() for p in (REPO / "schemas").rglob("*") if p.is_file()
)


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def _build(project: Path, out: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(project)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd.insert(4, "--no-build-isolation")  # use the installed backend: no download
    _run(cmd)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the parts of the tree the wheels are built from, with bytecode caches in it."""
    root = tmp_path_factory.mktemp("src")
    for name in ("ragen_envs", "ragen_bench", "ragen_train", "schemas"):
        shutil.copytree(
            REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, root / name)
    shutil.copytree(REPO / "packaging", root / "packaging")
    assert compileall.compile_dir(str(root / "ragen_envs"), quiet=1, force=True)
    assert any((root / "ragen_envs").rglob("__pycache__"))
    return root


@pytest.fixture(scope="module")
def envs_wheel(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(src / "packaging" / "ragen-envs", tmp_path_factory.mktemp("envs_wheel"))


@pytest.fixture(scope="module")
def root_wheel(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(src, tmp_path_factory.mktemp("root_wheel"))


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def _metadata(wheel: Path) -> object:
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(meta).decode("utf-8"))


def _dist_info(wheel: Path) -> str:
    """``<name>-<version>.dist-info`` of a wheel file ``<name>-<version>-<tags>.whl``."""
    name, version = wheel.name.split("-")[:2]
    return f"{name}-{version}.dist-info"


def _assert_no_bytecode(names: list[str]) -> None:
    bad = [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert not bad, f"bytecode in the wheel: {bad[:5]}"


# ------------------------------------------------------------------- ragen-envs wheel


def test_ragen_envs_wheel_holds_only_ragen_envs_and_env_schemas(envs_wheel: Path) -> None:
    names = _names(envs_wheel)
    tops = {n.split("/")[0] for n in names}
    assert tops == {"ragen_envs", _dist_info(envs_wheel)}
    _assert_no_bytecode(names)
    assert not [
        n
        for n in names
        if n.startswith(("ragen_bench", "ragen_train", "tests", "benchmarks", "scripts"))
    ]
    packaged = sorted(
        n.removeprefix("ragen_envs/schemas/") for n in names if n.startswith("ragen_envs/schemas/")
    )
    assert packaged == _ENV_SCHEMAS  # nothing else of schemas/ (no trainer or leaderboard schemas)
    # Every file of the source package is in the wheel: modules, each env package's config
    # and info schemas (ragen_envs/envs/<key>/*.schema.json) and bundled data.
    sources = sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "ragen_envs").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert set(sources) <= set(names)
    assert {
        f"ragen_envs/envs/{key}/{kind}.schema.json"
        for key in _ENV_KEYS
        for kind in ("config", "info")
    } <= set(names)


def test_ragen_envs_wheel_requires_only_gymnasium_numpy_jsonschema(envs_wheel: Path) -> None:
    meta = _metadata(envs_wheel)
    assert meta["Name"] == "ragen-envs"  # type: ignore[index]
    reqs = meta.get_all("Requires-Dist")  # type: ignore[attr-defined]
    plain = sorted(
        r.split(">")[0].split("=")[0].split("<")[0].strip() for r in reqs if ";" not in r
    )
    extra = sorted(r for r in reqs if ";" in r)
    assert plain == ["gymnasium", "jsonschema", "numpy"]
    extras = {r.split(";")[1].split("==")[1].strip().strip("'\"") for r in extra}
    assert extras == {"pettingzoo", "search", "webshop", "math", "lean"}
    assert [r for r in extra if "extra == 'pettingzoo'" in r][0].startswith("pettingzoo")
    assert all(r.startswith("bm25s") for r in extra if "'search'" in r or "'webshop'" in r)
    assert all(
        r.startswith("httpx") for r in extra if "'lean'" in r
    )  # the Kimina Lean Server client


_VENV_SCRIPT = r"""
import importlib.util, json, sys
from pathlib import Path
try:
    import torch  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("torch is importable in the fresh venv")
import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
from ragen_envs.resources import schema_dir
pkg = Path(ragen_envs.__file__).resolve().parent
assert "site-packages" in pkg.parts, pkg
assert schema_dir() == pkg / "schemas", schema_dir()
for mod in ("torch", "transformers", "openai", "httpx", "ragen_bench", "ragen_train"):
    assert mod not in sys.modules, mod
out = {"version": ragen_envs.__version__, "ids": [], "returns": {}}
for entry in ragen_envs.list_envs():
    env = ragen_envs.make(entry.id)
    result = run_episode(env, oracle_policy, seed=0)
    for info in result.infos:
        ragen_envs.validate_info(entry.env_key, info)
    out["ids"].append(entry.id)
    out["returns"][entry.id] = [repr(result.episode_return), result.status]
out["bench_importable"] = importlib.util.find_spec("ragen_bench") is not None
print(json.dumps(out))
"""


def _clean_env() -> dict[str, str]:
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, envs_wheel: Path) -> Iterator[Path]:
    """A fresh venv (no system site packages) with the ragen-envs wheel installed from the index."""
    root = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(root / "v")], env=_clean_env())
    py = root / "v" / "bin" / "python"
    cfg = (root / "v" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    # The search/webshop extra adds only bm25s (which needs numpy and scipy), still no torch.
    _run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"{envs_wheel}[search,webshop]",
        ],
        env=_clean_env(),
        cwd=str(root),
        timeout=900,
    )
    yield py


def _in_venv(py: Path, script: str) -> dict[str, object]:
    proc = _run(
        [str(py), "-I", "-c", script], env=_clean_env(), cwd=str(py.parents[2]), timeout=600
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ragen_envs_wheel_runs_every_env_without_torch(venv: Path) -> None:
    out = _in_venv(venv, _VENV_SCRIPT)
    assert "ragen/Bandit-v0" in out["ids"]
    assert sorted(out["ids"]) == sorted(ALL_IDS)  # type: ignore[arg-type]
    assert out["bench_importable"] is False
    # The installed wheel plays exactly the episodes of the source tree.
    for env_id in ALL_IDS:
        result = run_episode(ragen_envs.make(env_id), oracle_policy, seed=0)
        assert out["returns"][env_id] == [repr(result.episode_return), result.status], env_id  # type: ignore[index]


# ------------------------------------------------------------------------- root wheel


def test_root_wheel_holds_three_packages_and_schemas(root_wheel: Path) -> None:
    names = _names(root_wheel)
    tops = {n.split("/")[0] for n in names}
    assert tops == {"ragen_envs", "ragen_bench", "ragen_train", _dist_info(root_wheel)}
    _assert_no_bytecode(names)
    packaged = sorted(
        n.removeprefix("ragen_envs/schemas/") for n in names if n.startswith("ragen_envs/schemas/")
    )
    assert packaged == _ALL_SCHEMAS
    assert not [n for n in names if n.startswith("schemas/")]


def test_root_wheel_installed_finds_its_schemas(venv: Path, root_wheel: Path) -> None:
    """Non-editable install of the root wheel (no deps: the venv already has the env deps)."""
    _run([str(venv), "-m", "pip", "uninstall", "-y", "-q", "ragen-envs"], env=_clean_env())
    _run(
        [
            str(venv),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            str(root_wheel),
        ],
        env=_clean_env(),
    )
    out = _in_venv(venv, _VENV_SCRIPT)
    assert sorted(out["ids"]) == sorted(ALL_IDS)  # type: ignore[arg-type]
    assert out["bench_importable"] is True
