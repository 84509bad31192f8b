"""Fork server for the checkpoint kill test (tests/train/test_checkpoint_integrity.py).

Run as ``python tests/helpers/kill_driver.py`` with a JSON spec on standard input; prints one JSON
object per line on standard output.  It imports the trainer stack once and then runs each
``ragen-train`` command (the real typer app, ``ragen_train.cli.app``) in a forked child, so a
trial costs training steps, not interpreter start-up.  After each finished job the parent
imports the modules that job's child imported (imports only), so later children start with
them loaded.  The parent does no torch work before forking (forking after OpenMP work can
hang the child).

Spec: ``{"jobs": [{"args": [...], "log": path, "env": {...}, "copy": null | [src, dest],
                   "kill": null | {"watch": path, "at_least": null | str, "delay_s": float,
                                   "timeout_s": float}}]}``

``copy``: the directory ``src`` is copied to ``dest`` (a run directory to continue) before the
job starts.

A job with ``kill`` is SIGKILLed ``delay_s`` after ``watch`` (a checkpoint's temporary
directory) appears (with ``at_least``: once the file's stripped text is at least that string,
e.g. ``checkpoints/latest`` naming ``step_000002`` or later); the line reports ``{"rc",
"killed", "saw_watch", "watch_left", "wall_s"}`` (``watch_left``: the temporary directory
still existed after the kill, i.e. the kill landed inside the save; ``wall_s``: the job's
seconds).  Jobs run one after another in the order given.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import matplotlib  # noqa: E402,F401  (imported once here: the children plot curves)

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401

import ragen_train.cli as cli  # noqa: E402
import ragen_train.trainer  # noqa: E402,F401


def _child(job: dict, modules_file: str) -> None:
    """Run the job in this forked child and exit; never returns into the parent's code."""
    code = 1
    try:
        fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ.update(job.get("env", {}))
        code = 0
        try:
            cli.app(args=job["args"], prog_name="ragen-train")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        with open(modules_file, "w") as f:
            f.write("\n".join(list(sys.modules)))
    except BaseException:  # noqa: BLE001 - report any crash as a failure of the trial
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _prime(modules_file: str) -> None:
    """Import in this (parent) process the modules a finished child imported: the next
    children are forked with them loaded instead of importing them again (the lazily
    imported model, tokenizer and plotting modules cost seconds per run).  Imports only;
    a module that fails to import here is left to the children."""
    try:
        with open(modules_file) as f:
            names = [n for n in f.read().split("\n") if n and n not in sys.modules]
    except OSError:
        return
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001, S110 - any failure: the child imports it
                pass


def _seen(path: str, at_least: str | None) -> bool:
    if at_least is None:
        return os.path.exists(path)
    try:
        with open(path) as f:
            return f.read().strip() >= at_least
    except OSError:
        return False


def run(job: dict) -> dict:
    start = time.monotonic()
    result = _run(job)
    return {**result, "wall_s": round(time.monotonic() - start, 3)}


def _run(job: dict) -> dict:
    if job.get("copy"):
        shutil.copytree(*job["copy"])
    fd, modules_file = tempfile.mkstemp(prefix="kill-driver-modules-")
    os.close(fd)
    try:
        result = _fork(job, modules_file)
        _prime(modules_file)
    finally:
        os.unlink(modules_file)
    return result


def _fork(job: dict, modules_file: str) -> dict:
    pid = os.fork()
    if pid == 0:
        _child(job, modules_file)
    kill = job.get("kill")
    killed = saw = left = False
    if kill:
        deadline = time.monotonic() + float(kill.get("timeout_s", 120))
        while time.monotonic() < deadline:
            if _seen(kill["watch"], kill.get("at_least")):
                saw = True
                time.sleep(float(kill["delay_s"]))
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return {
                    "rc": None,
                    "killed": False,
                    "saw_watch": False,
                    "watch_left": False,
                    "note": "exited before the save it was to be killed in",
                }
            time.sleep(0.002)
        else:
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if killed:
        left = os.path.exists(kill["watch"])
    rc = os.waitstatus_to_exitcode(status)
    return {"rc": rc, "killed": killed, "saw_watch": saw, "watch_left": left}


def main() -> None:
    spec = json.load(sys.stdin)
    for job in spec["jobs"]:
        print(json.dumps(run(job)), flush=True)


if __name__ == "__main__":
    main()
