"""Fork server for the checkpoint kill test (tests/train/test_checkpoint_integrity.py).

Run as ``python tests/helpers/kill_driver.py`` with a JSON spec on standard input; prints one JSON
object per line on standard output.  It imports the trainer stack once and then runs each
``ragen-train`` command (the real typer app, ``ragen_train.cli.app``) in a forked child, so a
trial costs training steps, not interpreter start-up.  The parent does no torch work before
forking (forking after OpenMP work can hang the child).

Spec: ``{"jobs": [{"args": [...], "log": path, "env": {...},
                   "kill": null | {"watch": path, "delay_s": float, "timeout_s": float}}]}``

A job with ``kill`` is SIGKILLed ``delay_s`` after ``watch`` (a checkpoint's temporary
directory) appears; the line reports ``{"rc", "killed", "saw_watch", "watch_left"}``
(``watch_left``: the temporary directory still existed after the kill, i.e. the kill landed
inside the save).  Jobs run one after another in the order given.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import matplotlib  # noqa: E402,F401  (imported once here: the children plot curves)

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401

import ragen_train.cli as cli  # noqa: E402
import ragen_train.trainer  # noqa: E402,F401


def _child(job: dict) -> None:
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.update(job.get("env", {}))
    code = 0
    try:
        cli.app(args=job["args"], prog_name="ragen-train")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report any crash as a failure of the trial
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(job: dict) -> dict:
    pid = os.fork()
    if pid == 0:
        _child(job)
    kill = job.get("kill")
    killed = saw = left = False
    if kill:
        deadline = time.monotonic() + float(kill.get("timeout_s", 120))
        while time.monotonic() < deadline:
            if os.path.exists(kill["watch"]):
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
