"""Import a repository script (``examples/*.py``, ``benchmarks/*.py``) as a module, so tests
call its functions directly; scripts are not packages."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The script at ``ROOT/relative`` (e.g. ``examples/real_model_run.py``), executed as a
    fresh module named after its file.

    Raises:
        FileNotFoundError: no such script.
    """
    path = ROOT / relative
    if not path.is_file():
        raise FileNotFoundError(path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
