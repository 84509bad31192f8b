"""benchmarks/peer_speed.py's RAGEN-source sides: vendoring and loading.

The sides run RAGEN-AI/RAGEN's own env files, copied at ``peer_speed.RAGEN_COMMIT`` into
the git-ignored ``.peer-ragen``.  These tests check the two ways that can go wrong (no
checkout, a missing or stale copy) give one clear line, and, when a RAGEN checkout is
named by ``$RAGEN_CHECKOUT``, that vendoring it gives a Bandit reset that runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peer_speed  # noqa: E402


def test_vendor_ragen_refuses_a_directory_without_the_commit(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    with pytest.raises(SystemExit, match=r"cannot read 5eb79b8 from .*repo"):
        peer_speed.vendor_ragen(str(tmp_path / "repo"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stamp", [None, "0" * 40])
def test_ragen_source_missing_or_stale_copy_is_a_skip_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stamp: str | None
) -> None:
    if stamp is not None:
        (tmp_path / "COMMIT").write_text(stamp + "\n")
    monkeypatch.setenv("RAGEN_PEER_SOURCE", str(tmp_path))
    with pytest.raises(peer_speed.PeerMissing, match="--vendor-ragen") as err:
        peer_speed.ragen_src_bandit_reset()
    assert f"found {stamp}" in str(err.value)


def test_vendored_ragen_bandit_resets(tmp_path: Path) -> None:
    checkout = os.environ.get("RAGEN_CHECKOUT")
    if not checkout:
        pytest.skip("set RAGEN_CHECKOUT to a clone of RAGEN-AI/RAGEN to vendor it for real")
    dest = peer_speed.vendor_ragen(checkout, tmp_path / "ragen-src")
    assert (dest / "COMMIT").read_text().strip() == peer_speed.RAGEN_COMMIT
    assert all((dest / f).is_file() for f in peer_speed.RAGEN_FILES)
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); import peer_speed as p;"
        "run, n = p.ragen_src_bandit_reset()(5); run(); print(n)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "benchmarks")],
        env={**os.environ, "RAGEN_PEER_SOURCE": str(dest)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "5"


def test_scattered_seeds_are_out_of_sequence_and_the_same_on_every_side() -> None:
    seen: list[list[int]] = []
    for _ in range(2):  # two sides: two prepares, each its own seed iterator
        got: list[int] = []
        run, n = peer_speed._per_seed(got.append, scattered=True)(50)
        run()
        seen.append(got)
    assert n == 50 and seen[0] == seen[1]
    assert all(s % 2 == 0 and 0 <= s < 2**32 for s in seen[0])
    assert sum(b == a + 1 for a, b in zip(seen[0], seen[0][1:])) == 0
    run, _ = peer_speed._per_seed(got.append)(3)  # the default: 0, 1, 2
    got.clear()
    run()
    assert got == [0, 1, 2]
