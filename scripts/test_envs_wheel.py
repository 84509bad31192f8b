#!/usr/bin/env python
"""Run ``tests/envs/`` against the built ``ragen-envs`` wheel alone, in a fresh venv.

Usage::

    python scripts/test_envs_wheel.py                          # every env test, default seeds
    python scripts/test_envs_wheel.py --seeds 3 -- -m "not slow" -x   # quicker; args after -- go to pytest
    python scripts/test_envs_wheel.py --keep /var/tmp/envs-wheel   # keep the venv and the test copy there
    python scripts/test_envs_wheel.py --tests tests/envs/test_env_api.py   # only these test files

Steps (each timed; a JSON summary is the last line printed):

1. build the wheel of ``packaging/ragen-envs`` (``pip wheel --no-deps``; with the installed
   ``hatchling`` when there is one, so no download);
2. create a venv **without** system site packages and install into it the wheel with the
   extras the env tests exercise (``search``, ``webshop``, ``math``, ``pettingzoo``, ``lean``), plus
   ``pytest``, ``pytest-timeout``, ``hypothesis`` and ``pyyaml`` (a third-party module the
   sandbox tests hide),
   from the package index or pip's cache — nothing of the source tree;
3. copy to a scratch folder what the tests read besides the package: ``tests/__init__.py``,
   ``tests/envs/``, ``tests/data/``, the scripts they load (``scripts/update_golden.py``,
   ``scripts/build_bundled.py``), ``pyproject.toml`` (pytest settings),
   ``packaging/ragen-envs/pyproject.toml`` (the extras) and ``docs/envs/`` (the spec pages
   the template checks); no ``ragen_envs``, ``ragen_bench``
   or ``ragen_train`` source, so ``import ragen_envs`` can only find the wheel (checked);
4. run ``python -m pytest tests/envs`` (or the ``--tests`` given) there with ``PYTHONPATH``
   unset.

The scratch folder is under ``/var/tmp``, not ``/tmp``: the sandbox gives model-written
programs a private ``/tmp``, which would hide a venv's site-packages there from the sandbox
tests that import a third-party package (``site_packages=True``).

Exit status: pytest's (or 2 when a step before it fails).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Extras of ``ragen-envs`` whose code the env tests run.
EXTRAS = ("search", "webshop", "math", "pettingzoo", "lean")
#: Test-only packages (no project code).
TEST_PACKAGES = ("pytest", "pytest-timeout", "hypothesis", "pyyaml")
#: What the tests read besides the installed package (relative to the repository).
COPIED = (
    "tests/__init__.py",
    "tests/envs",
    "tests/data",
    "scripts/update_golden.py",
    "scripts/build_bundled.py",
    "pyproject.toml",
    "packaging/ragen-envs/pyproject.toml",
    "docs/envs",
)

_CHECK_IMPORT = """
import importlib.util, json, sys
import ragen_envs
print(json.dumps({"ragen_envs": ragen_envs.__file__,
                  "ragen_bench": importlib.util.find_spec("ragen_bench") is not None,
                  "ragen_train": importlib.util.find_spec("ragen_train") is not None,
                  "torch": importlib.util.find_spec("torch") is not None}))
"""


def scratch_root() -> Path:
    """A new scratch folder outside ``/tmp`` (see the module docstring): under ``/var/tmp``
    when it exists, else the system's temp folder."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="ragen-envs-wheel-", dir=base))


class StepError(RuntimeError):
    """A step before the test run failed (the message names the command)."""


def _clean_env() -> dict[str, str]:
    """The caller's environment without anything that would put the source tree on the path."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise StepError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}"
        )
    return proc


def build_wheel(out: Path) -> Path:
    """Build the ``ragen-envs`` wheel into ``out``; return its path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        str(out),
        str(REPO / "packaging/ragen-envs"),
    ]
    if importlib.util.find_spec("hatchling") is not None:
        cmd.insert(4, "--no-build-isolation")
    _run(cmd, env=_clean_env())
    (wheel,) = out.glob("ragen_envs-*.whl")
    return wheel


def make_venv(root: Path, wheel: Path) -> Path:
    """A venv without system site packages holding ``wheel[EXTRAS]`` and the test packages."""
    _run([sys.executable, "-m", "venv", str(root)], env=_clean_env())
    if "include-system-site-packages = false" not in (root / "pyvenv.cfg").read_text():
        raise StepError(f"{root} sees the system site packages")
    py = root / "bin" / "python"
    _run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"{wheel}[{','.join(EXTRAS)}]",
            *TEST_PACKAGES,
        ],
        env=_clean_env(),
        cwd=str(root),
        timeout=1200,
    )
    return py


def copy_tests(dest: Path) -> Path:
    """Copy :data:`COPIED` into ``dest`` (no package source); return ``dest``."""
    for rel in COPIED:
        src = REPO / rel
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, target)
    for name in ("ragen_envs", "ragen_bench", "ragen_train"):
        if (dest / name).exists():
            raise StepError(
                f"{dest / name} must not exist: the tests would import the source, not the wheel"
            )
    return dest


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Arguments after -- are passed to pytest."
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="RAGEN_TEST_SEEDS for the generic sweeps (default: the tests' own, 200)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="build in this folder and keep it (default: a scratch folder under /var/tmp, removed)",
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        default=["tests/envs"],
        help="test files or folders under tests/envs/ to run (default: tests/envs)",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    outside = [t for t in args.tests if not Path(t).as_posix().startswith("tests/envs")]
    if outside:
        parser.error(f"--tests must be under tests/envs/ (the env tests), got {outside}")
    root = args.keep or scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    summary: dict[str, object] = {"root": str(root), "times_s": times}
    try:
        t = time.perf_counter()
        wheel = build_wheel(root / "dist")
        times["build"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        py = make_venv(root / "venv", wheel)
        times["install"] = round(time.perf_counter() - t, 1)
        work = copy_tests(root / "work")
        where = json.loads(
            _run([str(py), "-c", _CHECK_IMPORT], env=_clean_env(), cwd=str(work)).stdout
        )
        summary.update(
            wheel=wheel.name,
            imported_from=where["ragen_envs"],
            others_importable={k: where[k] for k in ("ragen_bench", "ragen_train", "torch")},
        )
        if "site-packages" not in Path(where["ragen_envs"]).parts or any(
            summary["others_importable"].values()
        ):  # type: ignore[union-attr]
            raise StepError(f"the venv does not hold the wheel alone: {where}")
    except (StepError, subprocess.TimeoutExpired) as exc:
        print(exc, file=sys.stderr)
        print(json.dumps({**summary, "returncode": 2}))
        return 2
    env = _clean_env()
    if args.seeds is not None:
        env["RAGEN_TEST_SEEDS"] = str(args.seeds)
    cmd = [str(py), "-m", "pytest", *args.tests, "-q", "-p", "no:cacheprovider", *args.pytest_args]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(work), env=env, text=True, capture_output=True, check=False)
    times["tests"] = round(time.perf_counter() - t, 1)
    sys.stdout.write(proc.stdout[-6000:])
    sys.stderr.write(proc.stderr[-3000:])
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary.update(
        returncode=proc.returncode,
        pytest_summary=lines[-1] if lines else "",
        seeds=args.seeds,
        tests=args.tests,
        pytest_args=args.pytest_args,
    )
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(summary))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
