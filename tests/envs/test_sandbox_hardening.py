"""Attacks a red-team pass got through the sandbox, one test each.

Every test runs the attack as model-written code — through the real DeepCoder env where
the attack is about reward — and then checks the host: files, sockets, SysV IPC
(``ipcs``), processes and memory.  Each fails on the code before the fix (the attack
scored, or the host was changed) and passes now.  Namespace layers are skipped, with
the reason printed, where the kernel refuses namespaces.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.data.bundled import bundled_info
from ragen_envs.data.loaders import load_source
from ragen_envs.envs.deepcoder.judge import judge
from ragen_envs.envs.deepcoder.problems import problem_from_record
from ragen_envs.sandbox import SandboxConfig, SandboxStatus, isolation_report, launcher, run_python
from tests.envs.test_sandbox import (
    FALLBACK,
    FAST,
    HAS_NS,
    _processes_in_sessions,
    needs_fallback,
    needs_ns,
    record_sessions,
)

ROOT = Path(__file__).resolve().parents[2]


def _coder(data_source: str, **config: Any) -> Any:
    return ragen_envs.make("ragen/DeepCoder-v0", data_source=data_source, **config).unwrapped


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# ------------------------------------------------------- 1. reading the answers
ANSWER_SEARCH = r"""
import gzip, json, os, sys
data = sys.stdin.read()
seen = 0
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if d not in (".git", ".venv", "node_modules", "__pycache__", "site-packages")
               and os.path.join(root, d) not in ("/proc", "/sys", "/dev", "/usr")]
    for name in files:
        if not name.endswith((".jsonl", ".jsonl.gz")):
            continue
        seen += 1
        try:
            fh = gzip.open(os.path.join(root, name), "rt") if name.endswith(".gz") else open(os.path.join(root, name))
            for line in fh:
                tests = json.loads(line).get("tests")
                for t in tests if isinstance(tests, list) else []:
                    if isinstance(t, dict) and t.get("input") == data:
                        sys.stdout.write(t["output"])
                        sys.exit(0)
        except (OSError, ValueError, AttributeError, RecursionError):  # deep red-team JSONL files
            pass
sys.stderr.write(f"searched {seen} JSONL files, no answer\n")
"""


@needs_ns
def test_model_code_cannot_read_the_answers(tmp_path: Path) -> None:
    # The attack is real: run outside the sandbox it finds the bundled tests and answers.
    problem = load_source("bundled:code-stdio-ours")[0]
    test = problem["tests"][0]
    plain = subprocess.run(
        [sys.executable, "-c", ANSWER_SEARCH],
        input=test["input"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert plain.stdout == test["output"]
    # Inside, no episode scores: the project tree and its data do not exist there.
    env = _coder("bundled:code-stdio-ours", time_limit_s=10, wall_time_limit_s=20)
    rewards = []
    for seed in range(5):
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(_fenced(ANSWER_SEARCH))
        rewards.append(reward)
        assert info["success"] is False and info["tests_passed"] == 0
    assert rewards == [0.0] * 5
    probe = (
        "import os, sys\n"
        f"print(os.path.exists({str(ROOT)!r}), os.path.exists('/work'), sorted(os.listdir('/')))\n"
        "print(sorted(p for p in sys.path))\n"
    )
    res = run_python(probe, config=FAST)
    assert res.ok, res.stderr
    first, _ = res.stdout.split("\n", 1)
    assert first.startswith("False False")
    visible = set(eval(first.split(" ", 2)[2]))  # noqa: S307 - our own probe's output
    # Only the system library tree, the interpreter's prefix and the sandbox's own mounts.
    allowed = {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "sbin",
        "tmp",
        "usr",
        Path(sys.base_prefix).parts[1],
    }
    assert visible <= allowed, visible - allowed
    # The host is unchanged: the bundled data is where it was.
    assert bundled_info("code-stdio-ours").path.is_file()


@needs_ns
def test_site_packages_are_hidden_unless_configured() -> None:
    probe = "import sys\ntry:\n    import yaml\n    print('imported')\nexcept ImportError:\n    print('hidden')\n"
    assert run_python(probe, config=FAST).stdout == "hidden\n"
    shown = run_python(
        probe + "import os\nprint(os.path.isdir(os.path.join(os.path.dirname(yaml.__file__), "
        "'..', 'ragen_envs', 'data')))\n",
        config=FAST.with_(site_packages=True),
    )
    assert shown.stdout.startswith("imported")
    assert shown.stdout.split()[-1] == "False"  # even then this project's packages stay hidden


@needs_ns
def test_site_packages_of_a_venv_under_tmp_are_seen_when_configured() -> None:
    """A clone and venv under /tmp could not import their
    packages with ``site_packages=True``: the site directory was bound into the private
    root and then covered by the private ``/tmp``.  It is now bound on top of the private
    ``/tmp``, and nothing else of the host's ``/tmp`` (a file beside the venv) is seen."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ragen-venv-test-", dir="/tmp"))
    other = Path(tempfile.mkdtemp(prefix="ragen-other-", dir="/tmp"))
    try:
        venv = base / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
        )
        python = str(venv / "bin" / "python")
        site_dir = subprocess.run(
            [python, "-c", "import site; print(site.getsitepackages()[0])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert site_dir.startswith("/tmp/"), site_dir
        Path(site_dir, "ragen_tmp_probe.py").write_text("VALUE = 42\n")
        beside = base / "secret.txt"
        beside.write_text("host /tmp content\n")
        elsewhere = other / "other.txt"
        elsewhere.write_text("another host /tmp file\n")
        probe = (
            "import os\ntry:\n    import ragen_tmp_probe\n    print('imported', ragen_tmp_probe.VALUE)\n"
            "except ImportError:\n    print('hidden')\n"
            f"print(os.path.exists({str(beside)!r}), os.path.exists({str(elsewhere)!r}))\n"
        )
        shown = run_python(probe, config=FAST.with_(python=python, site_packages=True))
        assert shown.ok, (shown.status, shown.detail, shown.stderr)
        assert shown.stdout == "imported 42\nFalse False\n", shown.stdout
        hidden = run_python(probe, config=FAST.with_(python=python))
        assert hidden.stdout == "hidden\nFalse False\n", (hidden.stdout, hidden.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


# ------------------------------------------------------- 2. host UNIX sockets
UNIX_CONNECT = r"""
import ctypes, errno, struct
libc = ctypes.CDLL(None, use_errno=True)
def attempt(address):
    fd = libc.socket(1, 1, 0)                          # AF_UNIX, SOCK_STREAM, bypassing `socket`
    addr = struct.pack("=H", 1) + address
    rc = libc.connect(fd, addr, len(addr))
    err = ctypes.get_errno()
    if rc == 0:
        libc.send(fd, b"pwned", 5, 0)
    return f"{rc} {errno.errorcode.get(err, err)}"
print(attempt(PATH + b"\0"))
print(attempt(b"\0" + ABSTRACT))
"""


def _socket_dir() -> Path:
    """A world-traversable host directory outside /tmp, /var/tmp and /dev/shm (which the old
    sandbox already overmounted), where the red-team pass put its socket."""
    for cand in ("/run", "/var/run", str(ROOT)):
        if os.access(cand, os.W_OK):
            d = Path(cand) / f"ragen-test-{uuid.uuid4().hex[:8]}"
            d.mkdir(mode=0o755)
            os.chmod(d, 0o755)
            return d
    pytest.skip("no writable directory outside /tmp for the host socket")


@needs_ns
def test_host_unix_sockets_are_unreachable() -> None:
    d = _socket_dir()
    path = d / "s.sock"
    abstract = f"ragen-test-{uuid.uuid4().hex}".encode()
    servers = []
    try:
        for address in (str(path), b"\0" + abstract):
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(address)
            srv.listen(4)
            srv.settimeout(0.3)
            servers.append(srv)
        os.chmod(path, 0o777)
        program = f"PATH = {str(path).encode()!r}\nABSTRACT = {abstract!r}\n" + UNIX_CONNECT
        res = run_python(program, config=FAST)
        assert res.ok, res.stderr
        path_line, abstract_line = res.stdout.split("\n")[:2]
        assert path_line.startswith("-1 ENOENT")  # the path does not exist inside
        assert abstract_line.startswith(
            "-1 ECONNREFUSED"
        )  # abstract names are per network namespace
        for srv in servers:
            with pytest.raises((TimeoutError, socket.timeout)):
                srv.accept()
    finally:
        for srv in servers:
            srv.close()
        path.unlink(missing_ok=True)
        d.rmdir()


# ------------------------------------------------------- 3. SysV shared memory
SHM_CREATE = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
ids = [libc.shmget(0, 256 << 20, 0o1000 | 0o666) for _ in range(3)]   # IPC_PRIVATE, IPC_CREAT
print(ids, ctypes.get_errno())
"""


def _shm_ids() -> set[int]:
    """SysV shared memory segment ids of the host's IPC namespace (``ipcs -m``)."""
    out = subprocess.run(["ipcs", "-m"], capture_output=True, text=True, check=True).stdout
    return {int(m.group(1)) for m in re.finditer(r"^0x[0-9a-f]+\s+(\d+)\s", out, re.M)}


@needs_ns
def test_sysv_shared_memory_does_not_outlive_the_sandbox() -> None:
    if subprocess.run(["which", "ipcs"], capture_output=True).returncode != 0:
        pytest.skip("ipcs is not installed")
    before = _shm_ids()
    res = run_python(SHM_CREATE, config=FAST)
    after = _shm_ids()
    leaked = after - before
    for shmid in leaked:  # leave the host clean even when the test fails
        subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True)
    assert res.ok, res.stderr
    ids = eval(res.stdout.split("]")[0] + "]")  # noqa: S307 - our own probe's output
    if res.isolation.get("seccomp"):
        # SysV IPC is not on the system-call allow-list: refused before any segment exists
        assert ids == [-1, -1, -1] and res.stdout.split()[-1] == str(errno.EPERM), res.stdout
    else:  # no filter here: the segments are made, in the sandbox's IPC namespace
        assert len(ids) == 3 and all(i >= 0 for i in ids)
    assert not leaked


# ------------------------------------------------------- 4. one memory limit
CHILDREN_400MB = r"""
import os, time
pids = []
for _ in range(12):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        block = b"\x01" * (400 << 20)   # written, so really resident
        time.sleep(4)                    # all twelve alive at once
        os._exit(0)
    pids.append(pid)
ok = sum(os.waitpid(p, 0)[1] == 0 for p in pids)
print(len(pids), ok)
"""


def _mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no MemAvailable in /proc/meminfo")


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def _watch_memory(fn, monkeypatch: pytest.MonkeyPatch):
    """Run ``fn`` while sampling (every 20 ms) the summed resident memory of the sandbox's
    processes (found by their session: each run's launcher leads one) and the host's
    MemAvailable.  Returns (result, peak sandbox RSS, lowest MemAvailable)."""
    sessions = record_sessions(monkeypatch)
    peak, low = [0], [_mem_available()]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak.append(sum(_rss(pid) for pid in _processes_in_sessions(sessions)))
            low.append(_mem_available())
            time.sleep(0.02)

    t = threading.Thread(target=watch)
    t.start()
    try:
        result = fn()
    finally:
        done.set()
        t.join()
    return result, max(peak), min(low)


def test_memory_limit_covers_the_whole_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SandboxConfig(cpu_time_s=10, wall_time_s=20, memory_mb=512, max_processes=32)
    baseline = _mem_available()
    res, rss, low = _watch_memory(lambda: run_python(CHILDREN_400MB, config=cfg), monkeypatch)
    rss_gib = rss / (1 << 30)
    print(
        f"\n12 x 400 MiB children, memory_mb=512: sandbox RSS peak {rss_gib:.2f} GiB, host MemAvailable "
        f"drop {(baseline - low) / (1 << 30):.2f} GiB (other tenants included), cgroup peak "
        f"{getattr(res, 'memory_peak_mb', None)} MiB, status {res.status.value}, cgroup {res.isolation.get('cgroup')}"
    )
    # Before: 4.7 GiB resident.  Now one limit's worth (RSS counts the pages the forked
    # children share with their parent once per process: a little over 512 MiB).
    assert rss_gib < 1.0
    if res.isolation.get("cgroup"):
        assert res.status is SandboxStatus.MEMORY_LIMIT and "cgroup" in res.detail
        if res.memory_peak_mb is not None:
            assert res.memory_peak_mb <= 512 + 1
    else:  # the fallback: at most max_processes_without_cgroup processes of memory_mb each
        assert res.status in (SandboxStatus.OK, SandboxStatus.PROCESS_LIMIT)
        assert int(res.stdout.split()[0]) < cfg.max_processes_without_cgroup


def test_without_a_cgroup_the_process_cap_bounds_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SandboxConfig(
        cpu_time_s=10, wall_time_s=20, memory_mb=512, max_processes=32, cgroup=False
    )
    res, rss, _ = _watch_memory(lambda: run_python(CHILDREN_400MB, config=cfg), monkeypatch)
    assert res.isolation["cgroup"] is False and res.memory_peak_mb is None
    forked = int(res.stdout.split()[0])
    assert forked < cfg.max_processes_without_cgroup  # the program itself is one of them
    assert rss <= cfg.max_processes_without_cgroup * (cfg.memory_mb << 20)


# ------------------------------------------------------- 5. killing the host
HOST = r"""
import sys
from ragen_envs import sandbox as sb
real = sb.subprocess.Popen
class Reporting(real):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        print(self.pid, flush=True)
sb.subprocess.Popen = Reporting
python = sys.argv[2] if len(sys.argv) > 2 else None
cfg = sb.SandboxConfig(cpu_time_s=5, wall_time_s=float(sys.argv[1]), namespaces="off" if python else "auto",
                       python=python)
sb.run_python("import time\ntime.sleep(60)", config=cfg)
"""


def _start_host(tmp: Path, wall_s: float, python: str | None) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-c", HOST, str(wall_s)] + ([python] if python else [])
    host = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True)
    assert host.stdout is not None
    launcher_pid = int(host.stdout.readline())
    deadline = time.monotonic() + 10
    while (
        len(_processes_in_sessions({launcher_pid})) < 3 and time.monotonic() < deadline
    ):  # L, C, G
        time.sleep(0.02)
    assert len(_processes_in_sessions({launcher_pid})) >= 3, "the sandboxed program did not start"
    return host, launcher_pid


def _gone_within(session: int, seconds: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not _processes_in_sessions({session}):
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def _kill_session(session: int) -> None:
    for pid in _processes_in_sessions({session}):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


MODES = [
    pytest.param(None, id="namespaces", marks=needs_ns),
    pytest.param(FALLBACK.python if FALLBACK else None, id="fallback", marks=needs_fallback),
]


@pytest.mark.parametrize("python", MODES)
def test_killing_the_host_leaves_no_sandbox_running(tmp_path: Path, python: str | None) -> None:
    if python is None and not HAS_NS:
        pytest.skip("no namespaces here")
    host, session = _start_host(tmp_path, 5.0, python)
    try:
        host.kill()
        host.wait()
        took = _gone_within(session, 2.0)
        assert took is not None, "sandbox processes outlived the host"
        print(f"\nsandbox gone {took * 1000:.0f} ms after the host was SIGKILLed")
        time.sleep(0.1)  # the launcher's own clean-up (fallback) runs as it dies
        assert (
            not [p for p in tmp_path.iterdir() if p.name.startswith("ragen-sandbox-")]
            or python is not None
        )
    finally:
        _kill_session(session)
    if python is not None:
        # Fallback: a directory the killed launcher could not remove is swept by the next host.
        leftover = [p for p in tmp_path.iterdir() if p.name.startswith("ragen-sandbox-")]
        if leftover:
            env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from ragen_envs.sandbox import run_python, SandboxConfig; "
                    f"run_python('pass', config=SandboxConfig(namespaces='off', python={python!r}))",
                ],
                env=env,
                check=True,
                timeout=60,
            )
            assert not [p for p in tmp_path.iterdir() if p.name.startswith("ragen-sandbox-")]


@needs_ns
def test_wall_limit_holds_when_the_host_is_stopped(tmp_path: Path) -> None:
    host, session = _start_host(tmp_path, 1.0, None)
    try:
        host.send_signal(signal.SIGSTOP)
        took = _gone_within(session, 6.0)  # the launcher's backstop: wall + 2 s
        assert took is not None, "the sandbox ran on past its wall limit while the host was stopped"
    finally:
        _kill_session(session)
        host.kill()
        host.wait()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ragen-sandbox-")]


# ------------------------------------------------------- 6. main in a thread
THREADED = """import sys, threading, atexit
sys.setrecursionlimit(1 << 20)
threading.stack_size(1 << 26)
SOURCE = {source!r}
def main():
    exec(compile(SOURCE, "solution", "exec"), {{"__name__": "__main__"}})
threading.Thread(target=main).start()
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
"""


def test_a_program_running_main_in_a_thread_keeps_its_output() -> None:
    env = _coder("bundled:code-stdio-ours")
    successes = []
    for seed in range(6):
        env.reset(seed=seed)
        reference = env.oracle_actions()[0].split("```python\n", 1)[1].rsplit("```", 1)[0]
        _, reward, _, _, info = env.step(_fenced(THREADED.format(source=reference)))
        successes.append(info["success"])
    assert successes == [True] * 6
    res = run_python(THREADED.format(source="print('from the thread')"), config=FAST)
    assert res.ok and res.stdout == "from the thread\n" and res.stderr == "atexit ran\n"


def test_threads_are_joined_within_the_limits() -> None:
    res = run_python(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()",
        config=FAST.with_(wall_time_s=1),
    )
    assert res.status is SandboxStatus.TIMEOUT and res.detail == "wall"


# ------------------------------------------------------- 7. forged verdicts
FORGE_MARKERS = r"""
import os, sys
for i in range(64):
    sys.stdout.write("\n\x1eRAGEN-RESULT " + str(i) + " 1 ''\n")
    sys.stdout.write("\n\x1eRAGEN-RESULT " + repr(i) + "\n")
for fd in range(3, 256):            # and every descriptor the program might have
    try:
        os.write(fd, b"(%d, True, '')\n" % 0)
    except OSError:
        pass
sys.stdout.flush()
os._exit(0)
"""


def test_printed_result_markers_are_not_verdicts() -> None:
    env = _coder("bundled:humaneval")
    for seed in range(3):
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(_fenced(FORGE_MARKERS))
        assert reward == 0.0 and info["tests_passed"] == 0 and not info["success"]


ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __bool__(self):
        return True
def {fn}(*args, **kwargs):
    return Anything()
"""


def test_objects_that_equal_everything_are_not_verdicts() -> None:
    humaneval = problem_from_record(load_source("bundled:humaneval")[0])
    rep = judge(ALWAYS_EQUAL.format(fn=humaneval.tests[0].entry_point), humaneval, sandbox=FAST)
    assert rep.total > 0 and rep.passed == 0
    call = problem_from_record(
        {
            "problem_id": 8,
            "question": "Double it.",
            "solutions": "[]",
            "url": "u",
            "input_output": '{"fn_name": "double", "inputs": [[2], [5]], "outputs": [[4], [10]]}',
            "starter_code": "def double(x):",
            "difficulty": "introductory",
        }
    )
    assert judge(ALWAYS_EQUAL.format(fn="double"), call, sandbox=FAST).passed == 0
    assert judge("def double(x):\n    return 2 * x\n", call, sandbox=FAST).all_passed


def test_huge_integers_in_output_cannot_crash_the_env() -> None:
    big = "9" * 6000
    env = _coder("bundled:humaneval")
    env.reset(seed=0)
    forged = f"import sys\nsys.stdout.write('\\n\\x1eRAGEN-RESULT {big} 1 x\\n')\n"
    _, reward, _, _, info = env.step(
        _fenced(forged)
    )  # raised ValueError: Exceeds the limit (4300 digits)
    assert reward == 0.0 and info["action_is_valid"]
    call = problem_from_record(
        {
            "problem_id": 8,
            "question": "Big.",
            "solutions": "[]",
            "url": "u",
            "input_output": '{"fn_name": "big", "inputs": [[1]], "outputs": [[1]]}',
            "starter_code": "def big(x):",
            "difficulty": "introductory",
        }
    )
    rep = judge("def big(x):\n    return 10 ** 6000\n", call, sandbox=FAST)
    assert rep.passed == 0 and "too large to show" in rep.first_failure.feedback
    assert judge("def big(x):\n    return [x]\n", call, sandbox=FAST).all_passed


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.from_regex(r"[\[\(\{]{0,400}[0-9]{0,5000}", fullmatch=True))
def test_decoding_hostile_text_raises_only_value_error(text: str) -> None:
    try:
        launcher.decode_value(text)
    except ValueError:
        pass


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -2,
        10**6000,
        -(10**5000),
        1.5,
        float("inf"),
        float("-inf"),
        "s\n\x1e",
        b"b",
        [1, (2, 3)],
        {"k": {1, 2}},
        frozenset({1}),
        (),
        1 + 2j,
        ("\x1eragen", "int", "0x10"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_plain_values_round_trip(value: object) -> None:
    assert launcher.decode_value(launcher.encode_value(value)) == value
    nan = launcher.decode_value(launcher.encode_value(float("nan")))
    assert nan != nan


def test_isolation_report_shows_the_new_layers() -> None:
    iso = isolation_report()
    assert {"ipc_ns", "private_root", "cgroup", "parent_death", "visible_paths"} <= set(iso)
    if HAS_NS:
        assert iso["ipc_ns"] and iso["private_root"] and iso["parent_death"]
        assert not any(
            str(ROOT) == p or p.startswith(str(ROOT) + "/") for p in iso["visible_paths"]
        )
