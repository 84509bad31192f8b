"""Golden tests: seed -> first observation is pinned for every registered id.

``tests/data/golden_first_obs.json`` (written by ``scripts/update_golden.py``; each entry
names its source) holds, per id, the version and the SHA-256 of the first observation
for seeds 0-9 with the default config.  A change to what a seed produces must come with
a version bump of the id (DESIGN.md "Environments"); a new id must be added to the file
deliberately by running the script.
"""

from __future__ import annotations

import pytest

import ragen_envs

from .conftest import ALL_IDS, load_script

golden = load_script("update_golden")
_SCRIPT = "scripts/update_golden.py"

GOLDEN = golden.load_golden()
HOW = (
    "run `python scripts/update_golden.py` to add it (and commit tests/data/golden_first_obs.json)"
)


def test_golden_file_exists_and_names_its_source() -> None:
    assert golden.GOLDEN_PATH.is_file(), f"{golden.GOLDEN_PATH} is missing: {HOW}"
    for env_id, entry in GOLDEN.items():
        assert set(entry) == {"version", "sha256", "source"}, env_id
        assert "scripts/update_golden.py" in entry["source"]
        assert len(entry["sha256"]) == len(golden.GOLDEN_SEEDS)


def test_no_stale_ids_in_golden_file() -> None:
    stale = sorted(set(GOLDEN) - set(ALL_IDS))
    assert not stale, (
        f"golden entries for ids that are no longer registered: {stale}; run `python {_SCRIPT}`"
    )


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_first_observation_matches_golden(env_id: str) -> None:
    if env_id not in GOLDEN:
        pytest.fail(f"{env_id} has no golden entry in tests/data/golden_first_obs.json: {HOW}")
    entry = GOLDEN[env_id]
    version = ragen_envs.get_entry(env_id).version
    assert entry["version"] == version, (
        f"{env_id}: golden version {entry['version']} != registered {version}"
    )
    got = golden.first_observation_hashes(env_id)
    bad = [s for s, (want, have) in enumerate(zip(entry["sha256"], got)) if want != have]
    assert not bad, (
        f"{env_id}: the first observation changed for seeds {bad}. A change to what a seed produces needs "
        f"a new version of the id (ragen/<Name>-v{version + 1}), then `python scripts/update_golden.py`."
    )


def test_hash_is_of_utf8_bytes() -> None:
    # sha256(b"") -- the definition the golden file uses.
    assert (
        golden.observation_hash("")
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert golden.observation_hash("√") != golden.observation_hash("?")
