"""Suite-wide settings for parallel runs (``python -m pytest -q -n auto --dist loadgroup``).

pytest-xdist (https://pytest-xdist.readthedocs.io/en/stable/distribution.html) runs the
tests in one worker process per core.  Two things keep that as exact and as cheap as a
serial run:

* **Threads.**  Each worker gets ``cpu_count // workers`` OpenMP/MKL threads (torch reads
  ``OMP_NUM_THREADS`` when it is imported; the subprocesses the tests start inherit it), so
  the workers do not oversubscribe the cores.  A value set by the user is kept.
* **Expensive module fixtures are built once.**  With ``--dist loadgroup`` tests carrying
  ``@pytest.mark.xdist_group(name)`` run on one worker; every other test goes to whichever
  worker is free.  A module-scoped fixture (a trained reference run, a built wheel and venv,
  a browser, a site build) would be built again on every worker that runs one of its tests,
  so :func:`pytest_collection_modifyitems` puts each test that uses one in its module's
  group.  Tests of the same module that use none stay free to spread.

Without xdist (plain ``python -m pytest``) both do nothing.
"""

from __future__ import annotations

import os

import pytest

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _threads = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads)


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # not a plain test function: keep it with its module
        return True
    return any(
        d.scope in ("module", "package", "session")
        and d.baseid  # a fixture of ours, not a plugin's
        for defs in info.name2fixturedefs.values()
        for d in defs
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
