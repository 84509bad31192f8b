"""``trainer.allocator``: a CPU run restarts once with tcmalloc (else jemalloc) preloaded when
one is installed, else fixes glibc's mmap threshold; it never loops, honours ``system`` and
``RAGEN_ALLOCATOR``, and fails in one line when a named allocator is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_train import allocator as alloc

ROOT = Path(__file__).resolve().parents[2]


def libdir(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "lib"
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"\x7fELF" + bytes(60))  # what the search checks: an ELF header
    return d


def test_auto_on_cpu_picks_tcmalloc_then_jemalloc(tmp_path: Path) -> None:
    d = libdir(tmp_path, "libjemalloc.so.2", "libtcmalloc.so.4")
    p = alloc.plan("auto", "cpu", {}, loaded="system", search_dirs=[str(d)])
    assert (p.name, p.library, p.reexec) == ("tcmalloc", str(d / "libtcmalloc.so.4"), True)
    d2 = libdir(tmp_path / "b", "libjemalloc.so.2")
    p = alloc.plan("auto", "cpu", {}, loaded="system", search_dirs=[str(d2)])
    assert (p.name, p.library) == ("jemalloc", str(d2 / "libjemalloc.so.2"))
    d3 = libdir(tmp_path / "c", "libtcmalloc_minimal.so.4")
    p = alloc.plan("jemalloc", "cpu", {}, loaded="system", search_dirs=[str(d2), str(d3)])
    assert p.name == "jemalloc"


def test_ld_library_path_is_searched_first(tmp_path: Path) -> None:
    first = libdir(tmp_path / "first", "libjemalloc.so.2")
    usual = libdir(tmp_path / "usual", "libjemalloc.so.2")
    env = {"LD_LIBRARY_PATH": f"{first}:"}
    p = alloc.plan("auto", "cpu", env, loaded="system", search_dirs=[str(usual)])
    assert p.library == str(first / "libjemalloc.so.2")


@pytest.mark.parametrize(
    ("choice", "device", "loaded", "env", "expected"),
    [
        ("auto", "cuda", "system", {}, ("system", "auto acts on CPU only")),
        ("system", "cpu", "system", {}, ("system", "trainer.allocator=system")),
        ("auto", "cpu", "tcmalloc", {}, ("tcmalloc", "already loaded")),
        ("auto", "cpu", "jemalloc", {alloc.MARKER: "1"}, ("jemalloc", "preloaded by ragen-train")),
        # preloaded once and still not loaded: no second restart
        ("auto", "cpu", "system", {alloc.MARKER: "1"}, ("glibc", "did not load")),
        # the environment overrides the config
        (
            "jemalloc",
            "cpu",
            "system",
            {alloc.ENV_CHOICE: "system"},
            ("system", "RAGEN_ALLOCATOR=system"),
        ),
    ],
)
def test_no_restart(tmp_path: Path, choice, device, loaded, env, expected) -> None:
    d = libdir(tmp_path, "libjemalloc.so.2")
    p = alloc.plan(choice, device, env, loaded=loaded, search_dirs=[str(d)])
    assert not p.reexec and p.library is None
    assert p.name == expected[0] and expected[1] in p.reason, p


def test_only_elf_files_on_paths_ld_preload_can_hold_are_chosen(tmp_path: Path) -> None:
    """ld.so splits LD_PRELOAD at spaces and colons; an empty or fake file is no library."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "libtcmalloc.so.4").write_bytes(b"")
    spaced = libdir(tmp_path / "my libs", "libtcmalloc.so.4")
    real = libdir(tmp_path / "real", "libtcmalloc.so.4")
    p = alloc.plan(
        "auto", "cpu", {}, loaded="system", search_dirs=[str(fake), str(spaced), str(real)]
    )
    assert p.library == str(real / "libtcmalloc.so.4")
    # a symlink from a spaced folder is followed to its target
    (tmp_path / "links dir").mkdir()
    (tmp_path / "links dir" / "libjemalloc.so.2").symlink_to(real / "libtcmalloc.so.4")
    p = alloc.plan(
        "jemalloc", "cpu", {}, loaded="system", search_dirs=[str(tmp_path / "links dir")]
    )
    assert p.library == str(real / "libtcmalloc.so.4")


def test_a_named_allocator_that_did_not_load_is_an_error(tmp_path: Path) -> None:
    d = libdir(tmp_path, "libtcmalloc.so.4")
    env = {alloc.MARKER: "1"}
    with pytest.raises(alloc.AllocatorError, match="was preloaded but did not load"):
        alloc.plan("tcmalloc", "cpu", env, loaded="system", search_dirs=[str(d)])
    # another allocator already in the process: said, not silently taken for the one asked
    p = alloc.plan("tcmalloc", "cpu", {}, loaded="jemalloc", search_dirs=[str(d)])
    assert p.reason == "jemalloc (already loaded; trainer.allocator=tcmalloc not applied)"


def test_named_allocator_on_gpu_is_still_preloaded(tmp_path: Path) -> None:
    d = libdir(tmp_path, "libtcmalloc.so.4")
    p = alloc.plan("tcmalloc", "cuda", {}, loaded="system", search_dirs=[str(d)])
    assert p.reexec and p.name == "tcmalloc"


def test_missing_named_allocator_is_an_error_naming_the_package(tmp_path: Path) -> None:
    empty = libdir(tmp_path)
    with pytest.raises(alloc.AllocatorError, match="apt-get install libjemalloc2"):
        alloc.plan("jemalloc", "cpu", {}, loaded="system", search_dirs=[str(empty)])
    with pytest.raises(
        alloc.AllocatorError,
        match="RAGEN_ALLOCATOR must be one of auto, tcmalloc, jemalloc, glibc, system",
    ):
        alloc.plan("auto", "cpu", {alloc.ENV_CHOICE: "mimalloc"}, loaded="system")


@pytest.mark.skipif(
    not alloc._is_glibc(), reason="the fallback tunes glibc; this C library is not glibc"
)
def test_without_a_library_auto_fixes_glibcs_mmap_threshold(tmp_path: Path) -> None:
    empty = libdir(tmp_path)
    p = alloc.plan("auto", "cpu", {}, loaded="system", search_dirs=[str(empty)])
    assert (p.name, p.reexec, p.mmap_threshold) == ("glibc", False, 4 * 2**20)
    assert "apt-get install libtcmalloc-minimal4" in p.reason
    d = libdir(tmp_path / "t", "libtcmalloc.so.4")
    p = alloc.plan("glibc", "cpu", {}, loaded="system", search_dirs=[str(d)])
    assert (p.name, p.reexec, p.mmap_threshold) == ("glibc", False, 4 * 2**20)
    assert "trainer.allocator=glibc" in p.reason
    # the user's own glibc setting wins
    env = {"MALLOC_MMAP_THRESHOLD_": "65536"}
    p = alloc.plan("auto", "cpu", env, loaded="system", search_dirs=[str(empty)])
    assert (p.name, p.mmap_threshold) == ("system", None)
    assert "MALLOC_MMAP_THRESHOLD_ is set in the environment" in p.reason


MMAP_PROBE = """
import ctypes, sys
from ragen_train import allocator as a
def anon():
    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('RssAnon'))
if sys.argv[1] == 'tuned':
    assert a.set_mmap_threshold(a.GLIBC_MMAP_THRESHOLD)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(30 << 20))  # a mapped block: the dynamic threshold rises to 30 MiB
block = libc.malloc(24 << 20)
ctypes.memset(block, 1, 24 << 20)
before = anon()
libc.free(block)
print(before - anon())
"""


@pytest.mark.skipif(not alloc._is_glibc(), reason="mallopt is glibc's; this C library is not glibc")
def test_the_fixed_threshold_gives_freed_blocks_back() -> None:
    """After one big block is freed, glibc's dynamic threshold keeps the next 24 MiB block
    in the heap; with the threshold fixed the block is unmapped when freed."""
    freed = {m: int(run(["-c", MMAP_PROBE, m], {}).stdout) for m in ("tuned", "default")}
    assert freed["tuned"] >= 20 * 1024, freed  # KiB
    assert freed["default"] < freed["tuned"], freed


def test_restart_environment_keeps_the_callers_settings(tmp_path: Path) -> None:
    p = alloc.AllocatorPlan("jemalloc", "/x/libjemalloc.so.2", True, "")
    env = alloc.reexec_environ(p, {"LD_PRELOAD": "/y/libfoo.so", "PATH": "/bin"})
    assert env["LD_PRELOAD"] == "/x/libjemalloc.so.2 /y/libfoo.so" and env["PATH"] == "/bin"
    assert env[alloc.MARKER] == "1" and env["MALLOC_CONF"] == alloc.JEMALLOC_CONF
    env = alloc.reexec_environ(p, {"MALLOC_CONF": "narenas:1"})
    assert env["MALLOC_CONF"] == "narenas:1" and env["LD_PRELOAD"] == "/x/libjemalloc.so.2"
    tc = alloc.AllocatorPlan("tcmalloc", "/x/libtcmalloc.so.4", True, "")
    assert "MALLOC_CONF" not in alloc.reexec_environ(tc, {})


def test_loaded_allocator_reads_the_maps() -> None:
    line = "7f00-7f10 r-xp 00000000 fe:00 1 /usr/lib/x86_64-linux-gnu/{}\n"
    assert alloc.loaded_allocator(line.format("libjemalloc.so.2")) == "jemalloc"
    assert alloc.loaded_allocator(line.format("libtcmalloc_minimal.so.4")) == "tcmalloc"
    assert alloc.loaded_allocator(line.format("libc.so.6")) == "system"


def test_peak_rss_is_this_process() -> None:
    before = alloc.peak_rss_gib()
    block = bytearray(256 * 2**20)  # touched: 256 MiB resident
    for i in range(0, len(block), 4096):
        block[i] = 1
    assert alloc.peak_rss_gib() >= max(before, 0.25)
    del block


def stand_in(tmp_path: Path) -> Path:
    """A folder whose ``libtcmalloc.so.4`` is a copy of this process's libm (same soname,
    harmless to preload): the restart can be shown end to end where tcmalloc is absent."""
    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    libm = next((ln.split()[-1] for ln in maps.splitlines() if "/libm.so.6" in ln), None)
    if libm is None:
        pytest.skip("no /proc/self/maps with a libm.so.6 here (the restart is Linux-only)")
    d = tmp_path / "stand-in"
    d.mkdir()
    shutil.copy(libm, d / "libtcmalloc.so.4")
    return d


DROPPED = (alloc.MARKER, alloc.ENV_CHOICE, "LD_PRELOAD", "MALLOC_CONF", "LD_LIBRARY_PATH")


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env = {**clean, **env, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


PROBE = (
    "import os, sys; print('start', flush=True); "
    "from ragen_train import allocator as a; p = a.maybe_reexec('auto', 'cpu'); "
    "print(p.name, a.loaded_allocator(), os.environ['LD_PRELOAD'], sys.argv[1:])"
)


def test_the_process_restarts_once_with_the_library_loaded(tmp_path: Path) -> None:
    d = stand_in(tmp_path)
    r = run(["-c", PROBE, "x", "--y"], {"LD_LIBRARY_PATH": str(d)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # two starts (the second under LD_PRELOAD), one result, the arguments kept
    assert lines[:2] == ["start", "start"] and len(lines) == 3, r.stdout
    assert lines[2] == f"tcmalloc tcmalloc {d / 'libtcmalloc.so.4'} ['x', '--y']"


def test_ragen_train_says_which_allocator_trains(tmp_path: Path) -> None:
    """The real CLI restarts before any work: here it then stops on an out_dir that holds a
    run, so the test costs seconds."""
    d = stand_in(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 0, "time": 0, "phase": "train"}\n')
    cmd = ["-m", "ragen_train.cli", "starpo", "--config", "quickstart", f"trainer.out_dir={out}"]
    r = run(cmd, {"LD_LIBRARY_PATH": str(d)})
    assert r.returncode == 2 and "already holds a run" in r.stderr, r.stderr
    # a status line on stderr, before the error: stdout (results) stays empty for a failed run
    status = "memory allocator: tcmalloc (preloaded by ragen-train)"
    assert status in r.stderr and r.stderr.index(status) < r.stderr.index("already holds")
    assert r.stdout == "", r.stdout
    r = run([*cmd, "trainer.allocator=system"], {"LD_LIBRARY_PATH": str(d)})
    assert "memory allocator: system (trainer.allocator=system)" in r.stderr, r.stderr
    r = run(cmd, {"LD_LIBRARY_PATH": str(d), alloc.ENV_CHOICE: "system"})
    assert "memory allocator: system (RAGEN_ALLOCATOR=system)" in r.stderr, r.stderr
    # what the command says before it would restart is said once, by the restarted process
    r = run([*cmd, "--backend", "native", "rollout.engine=hf"], {"LD_LIBRARY_PATH": str(d)})
    assert r.stderr.count("memory allocator: tcmalloc (preloaded by ragen-train)") == 1, r.stderr
    assert r.stderr.count("--backend is deprecated") == 1, r.stderr
    assert r.stderr.count("rollout.engine") == 1, r.stderr


def test_a_config_written_before_the_field_existed_validates_and_loads(tmp_path: Path) -> None:
    import json

    import jsonschema

    from ragen_train.config import load_config

    cfg = load_config("cpu-sokoban-lora", []).to_dict()
    del cfg["trainer"]["allocator"]
    schema = json.loads((ROOT / "schemas" / "train_config.schema.json").read_text())
    jsonschema.validate(cfg, schema)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_config(str(tmp_path / "config.json"), []).trainer.allocator == "auto"
    cfg["trainer"]["allocator"] = "mimalloc"
    with pytest.raises(jsonschema.ValidationError, match="mimalloc"):
        jsonschema.validate(cfg, schema)
