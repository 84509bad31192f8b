"""Containment and typed results of ``ragen_envs.sandbox`` (spec: docs/envs/sandbox.md).

Every containment test runs a hostile program with small limits, checks the reported
status, and then checks that the host is unharmed: this process is alive and can still
run a sandboxed program, no sandbox process is left behind, and the secret, the files
and the socket of the host were not touched.  Tests of the namespace layers are skipped
where the kernel refuses namespaces; the fallback layers are tested with
``namespaces="off"``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from ragen_envs import sandbox as sb
from ragen_envs.sandbox import SandboxConfig, SandboxStatus, run_command, run_python

FAST = SandboxConfig(
    cpu_time_s=1,
    wall_time_s=4,
    memory_mb=256,
    file_size_mb=1,
    max_processes=16,
    max_output_bytes=1 << 16,
)

ISO = sb.isolation_report()
HAS_NS = bool(ISO.get("net_ns") and ISO.get("pid_ns") and ISO.get("mount_ns"))
needs_ns = pytest.mark.skipif(
    not HAS_NS, reason="this kernel refuses user/PID/net/mount namespaces here"
)


def _fallback_config() -> SandboxConfig | None:
    """A namespaces="off" config that works on this machine, or None."""
    for python in (None, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        cfg = FAST.with_(namespaces="off", python=python)
        if run_python("print(1)", config=cfg).ok:
            return cfg
    return None


FALLBACK = _fallback_config()
needs_fallback = pytest.mark.skipif(
    FALLBACK is None, reason="no interpreter usable without namespaces here"
)
MODES = [
    pytest.param(FAST, id="namespaces", marks=needs_ns),
    pytest.param(FALLBACK, id="fallback", marks=needs_fallback),
]


def _processes_in_sessions(sessions: set[int]) -> set[int]:
    """Processes whose session id is one of ``sessions`` (each sandbox run is its own session)."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) in sessions:
            found.add(int(name))
    return found


def record_sessions(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The set (filled as they start) of the sandbox launchers' pids, each a session id."""
    sessions: set[int] = set()
    real_popen = sb.subprocess.Popen

    class RecordingPopen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sessions.add(self.pid)

    monkeypatch.setattr(sb.subprocess, "Popen", RecordingPopen)
    return sessions


@pytest.fixture
def host_unharmed(monkeypatch: pytest.MonkeyPatch):
    """After the test: no process of its sandbox runs left, this process fine, a new run works.

    The launchers this test starts are recorded (each is the leader of a new session);
    processes of other test sessions running at the same time are not counted.
    """
    sessions = record_sessions(monkeypatch)
    pid = os.getpid()
    yield
    deadline = time.monotonic() + 5
    while _processes_in_sessions(sessions) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sessions, "the test started no sandbox"
    assert not _processes_in_sessions(sessions), "sandbox processes were left running"
    assert os.getpid() == pid
    res = run_python("print(6 * 7)", config=FAST)
    assert res.ok and res.stdout == "42\n"


# ------------------------------------------------------------------ basics
def test_ok_run_returns_stdout_and_reads_stdin() -> None:
    res = run_python(
        "import sys\nprint(sys.stdin.read().upper(), end='')", stdin="abc\n", config=FAST
    )
    assert res.status is SandboxStatus.OK and res.exit_code == 0 and res.signal is None
    assert res.stdout == "ABC\n" and res.stderr == ""
    assert res.ok and res.wall_time_s > 0


def test_extra_files_are_in_the_working_directory() -> None:
    res = run_python("print(open('data.txt').read())", files={"data.txt": "hello"}, config=FAST)
    assert res.stdout == "hello\n"
    with pytest.raises(ValueError, match="plain names"):
        run_python("pass", files={"../x": "y"})


@pytest.mark.parametrize(
    ("source", "code"), [("raise SystemExit(3)", 3), ("1/0", 1), ("import sys; sys.exit('bye')", 1)]
)
def test_runtime_errors_report_the_exit_code(source: str, code: int) -> None:
    res = run_python(source, config=FAST)
    assert res.status is SandboxStatus.RUNTIME_ERROR
    assert res.exit_code == code


def test_exception_traceback_is_reported() -> None:
    res = run_python("def f():\n    return 1/0\nf()", config=FAST)
    assert "ZeroDivisionError" in res.stderr and 'File "main.py", line 2' in res.stderr
    assert "launcher.py" not in res.stderr  # the launcher's frames are not shown


def test_fatal_signal_is_a_runtime_error_with_the_signal() -> None:
    res = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", config=FAST)
    assert res.status is SandboxStatus.RUNTIME_ERROR
    assert res.signal == 11 and res.exit_code is None


def test_run_command_executes_a_binary() -> None:
    res = run_command(["sh", "-c", "echo $HOME; echo out; echo err >&2; exit 4"], config=FAST)
    assert res.status is SandboxStatus.RUNTIME_ERROR and res.exit_code == 4
    lines = res.stdout.split()
    assert lines[1] == "out" and res.stderr == "err\n"


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="cpu_time_s"):
        SandboxConfig(cpu_time_s=0)
    with pytest.raises(ValueError, match="namespaces"):
        SandboxConfig(namespaces="maybe")  # type: ignore[arg-type]


def test_result_is_json_friendly() -> None:
    d = run_python("print(1)", config=FAST).as_dict()
    assert d["status"] == "ok" and d["stdout"] == "1\n"


# -------------------------------------------------------------- containment
@pytest.mark.parametrize("cfg", MODES)
def test_infinite_loop_times_out(cfg: SandboxConfig, host_unharmed: None) -> None:
    res = run_python("while True:\n    pass", config=cfg)
    assert res.status is SandboxStatus.TIMEOUT
    assert res.detail in ("cpu", "wall")
    assert res.wall_time_s < cfg.wall_time_s + 2


def test_sleeping_program_hits_the_wall_clock_limit(host_unharmed: None) -> None:
    res = run_python("import time\ntime.sleep(60)", config=FAST.with_(wall_time_s=1))
    assert res.status is SandboxStatus.TIMEOUT and res.detail == "wall"
    assert res.wall_time_s < 3


@pytest.mark.parametrize("cfg", MODES)
def test_fork_bomb_is_contained(cfg: SandboxConfig, host_unharmed: None) -> None:
    res = run_python("import os\nwhile True:\n    os.fork()", config=cfg)
    assert res.status in (SandboxStatus.PROCESS_LIMIT, SandboxStatus.TIMEOUT)


def test_fork_bomb_hits_the_process_limit(host_unharmed: None) -> None:
    res = run_python("import os\nwhile True:\n    os.fork()", config=FAST)
    assert res.status is SandboxStatus.PROCESS_LIMIT
    assert "BlockingIOError" in res.stderr


def test_thread_bomb_hits_the_process_limit(host_unharmed: None) -> None:
    src = "import threading, time\nfor _ in range(1000):\n    threading.Thread(target=time.sleep, args=(5,)).start()"
    res = run_python(src, config=FAST)
    assert res.status is SandboxStatus.PROCESS_LIMIT


@pytest.mark.parametrize("cfg", MODES)
def test_10gb_allocation_hits_the_memory_limit(cfg: SandboxConfig, host_unharmed: None) -> None:
    res = run_python("x = bytearray(10 * 1024 ** 3)\nprint('allocated')", config=cfg)
    assert res.status is SandboxStatus.MEMORY_LIMIT
    assert "allocated" not in res.stdout


@pytest.mark.parametrize("cfg", MODES)
def test_printing_1gb_is_capped_and_killed(cfg: SandboxConfig, host_unharmed: None) -> None:
    src = "import sys\nblock = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(block)"
    res = run_python(src, config=cfg)
    assert res.status is SandboxStatus.OUTPUT_LIMIT
    assert res.stdout_truncated and len(res.stdout) == cfg.max_output_bytes
    assert res.wall_time_s < 5


@pytest.mark.parametrize("cfg", MODES)
def test_large_file_hits_the_file_size_limit(cfg: SandboxConfig, host_unharmed: None) -> None:
    res = run_python("open('big.bin', 'wb').write(b'x' * (4 << 20))", config=cfg)
    assert res.status is SandboxStatus.FILE_LIMIT


@pytest.mark.parametrize("cfg", MODES)
def test_environment_of_the_parent_is_not_visible(
    cfg: SandboxConfig, host_unharmed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv("RAGEN_TEST_SECRET", secret)
    src = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "print(os.environ.get('RAGEN_TEST_SECRET'))\n"
        "found = []\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "        except Exception:\n"
        "            pass\n"
        "print(b'" + secret + "' in b''.join(found))\n"
    )
    res = run_python(src, config=cfg)
    assert res.status is SandboxStatus.OK
    assert secret not in res.stdout
    names, value, leaked = res.stdout.strip().split("\n")
    assert value == "None" and leaked == "False"
    assert set(eval(names)) == {"HOME", "LANG", "LC_ALL", "PATH", "PYTHONIOENCODING", "TMPDIR"}  # noqa: S307


def _listener() -> tuple[socket.socket, int]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    return srv, srv.getsockname()[1]


def _accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("cfg", MODES)
def test_network_connection_fails(cfg: SandboxConfig, host_unharmed: None) -> None:
    srv, port = _listener()
    try:
        res = run_python(
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')",
            config=cfg,
        )
        assert res.status is SandboxStatus.RUNTIME_ERROR
        assert "connected" not in res.stdout and "PermissionError" in res.stderr
        assert not _accepted(srv)
    finally:
        srv.close()


RAW_CONNECT = """
import ctypes, errno, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)
print('socket', fd, 'errno', errno.errorcode.get(ctypes.get_errno()))
addr = struct.pack('=H', 2) + struct.pack('!H', {port}) + bytes([127, 0, 0, 1]) + bytes(8)
rc = libc.connect(fd, addr, len(addr))
print('rc', rc, 'errno', errno.errorcode.get(ctypes.get_errno()))
"""


@needs_ns
def test_raw_inet_socket_is_refused_and_nothing_connects(host_unharmed: None) -> None:
    # ctypes bypasses Python's socket module: the seccomp allow-list refuses an AF_INET
    # socket (EPERM), and the network namespace (no interface) stands behind it.
    srv, port = _listener()
    try:
        res = run_python(RAW_CONNECT.format(port=port), config=FAST)
        assert res.status is SandboxStatus.OK, res.stderr
        socket_line, connect_line = res.stdout.splitlines()
        if ISO.get("seccomp"):
            assert socket_line == "socket -1 errno EPERM"
            assert connect_line == "rc -1 errno EBADF"
        else:  # no filter on this kernel or architecture: the namespace alone
            assert connect_line == "rc -1 errno ENETUNREACH"
        assert not _accepted(srv)
    finally:
        srv.close()


@needs_fallback
def test_fallback_refuses_ctypes_and_subprocesses(host_unharmed: None) -> None:
    assert FALLBACK is not None
    res = run_python(RAW_CONNECT.format(port=9), config=FALLBACK)
    assert res.status is SandboxStatus.RUNTIME_ERROR and "ctypes.dlopen is disabled" in res.stderr
    res = run_python("import subprocess\nsubprocess.run(['true'])", config=FALLBACK)
    assert (
        res.status is SandboxStatus.RUNTIME_ERROR and "disabled in the ragen sandbox" in res.stderr
    )


@needs_ns
def test_writes_outside_the_private_tmp_do_not_reach_the_host(
    host_unharmed: None, tmp_path: Path
) -> None:
    name = f"ragen-escape-{uuid.uuid4().hex}"
    outside = tmp_path / "outside.txt"  # a host directory this process can write
    os.chmod(tmp_path, 0o777)
    src = (
        "import os\n"
        f"open('/tmp/{name}', 'w').write('x')\n"  # private tmpfs: allowed, discarded
        "print('tmp ok')\n"
        "print(os.getcwd() == os.environ['HOME'] == os.environ['TMPDIR'])\n"
        "try:\n"
        f"    open({str(outside)!r}, 'w').write('x')\n"
        "    print('outside written')\n"
        "except OSError as exc:\n"
        "    print('outside refused', exc.errno)\n"
    )
    res = run_python(src, config=FAST)
    assert res.status is SandboxStatus.OK, res.stderr
    lines = res.stdout.strip().split("\n")
    assert lines[0] == "tmp ok" and lines[1] == "True"
    assert lines[2].startswith("outside refused")  # read-only remount (EROFS=30) or EACCES
    assert not Path(f"/tmp/{name}").exists() and not (Path(tempfile.gettempdir()) / name).exists()
    assert not outside.exists()


@needs_ns
def test_processes_left_behind_are_killed(host_unharmed: None) -> None:
    # A daemon that leaves the process group survives a group kill; the PID namespace ends it.
    src = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')"
    t0 = time.monotonic()
    res = run_python(src, config=FAST)
    assert res.ok and res.stdout == "parent done\n"
    assert time.monotonic() - t0 < 3


@needs_ns
def test_proc_shows_only_the_sandbox(host_unharmed: None) -> None:
    res = run_python(
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))", config=FAST
    )
    assert res.ok
    assert eval(res.stdout) == [1, 2]  # noqa: S307 - C (pid 1) and the program (pid 2)


def test_working_directory_is_deleted_afterwards(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = tempfile.mkdtemp

    def recording(*a, **k):
        path = real(*a, **k)
        made.append(path)
        return path

    monkeypatch.setattr(sb.tempfile, "mkdtemp", recording)
    res = run_python("open('f.txt', 'w').write('x')", config=FAST)
    assert res.ok and made and not any(os.path.exists(p) for p in made)


def test_runs_are_thread_safe() -> None:
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = run_python(f"print({i} * 2)", config=FAST).stdout

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{2 * i}\n" for i in range(6)}


# ------------------------------------------------------------------ policy
def test_isolation_report_lists_the_layers() -> None:
    keys = {
        "user_ns",
        "net_ns",
        "pid_ns",
        "mount_ns",
        "private_tmp",
        "private_proc",
        "readonly_root",
        "dropped_to_uid",
    }
    assert keys <= set(ISO)
    assert ISO["status"] == "ok"
    if os.geteuid() == 0:
        assert ISO["dropped_to_uid"] is True


def test_require_namespaces_either_isolates_or_refuses() -> None:
    res = run_python("print(1)", config=FAST.with_(namespaces="require"))
    if HAS_NS:
        assert res.ok and res.isolation["net_ns"] and res.isolation["pid_ns"]
    else:
        assert res.status is SandboxStatus.SANDBOX_ERROR and "namespaces unavailable" in res.detail


def test_bad_interpreter_is_a_sandbox_error() -> None:
    res = run_python("print(1)", config=FAST.with_(python="/nonexistent/python"))
    assert res.status is SandboxStatus.SANDBOX_ERROR and "could not start" in res.detail
