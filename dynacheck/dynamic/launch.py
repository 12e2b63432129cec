"""Run a command with the recorder injected into every Python process it starts.

The inject folder goes first on PYTHONPATH, so Python's `site` imports our `sitecustomize`
in the command and in every child that inherits the environment (multiprocessing spawn workers,
torchrun / torch.distributed ranks, subprocesses). Options travel in DYNACHECK_* variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from dynacheck.dynamic.merge import RUN_FILE
from dynacheck.dynamic.recorder import ENV_COLLECT_ALL, ENV_OUT
from dynacheck.errors import UserError

INJECT_DIR = Path(__file__).resolve().parent / "_inject"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # folder holding the dynacheck package


def trace_env(out_dir: Path, collect_all: bool, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that arms the recorder in every Python process started with it."""
    env = dict(os.environ if base is None else base)
    parts = [str(INJECT_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[ENV_OUT] = str(out_dir.resolve())
    env[ENV_COLLECT_ALL] = "1" if collect_all else ""
    env["DYNACHECK_ROOT"] = str(PACKAGE_ROOT)
    return env


def prepare_out(out_dir: Path) -> None:
    """Create the folder; drop event files of an earlier trace so runs never mix."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"Cannot create the trace folder {out_dir}: {exc.strerror}.", "Pick another --out.") from exc
    for old in out_dir.glob("events-*.jsonl"):
        old.unlink()
    (out_dir / RUN_FILE).unlink(missing_ok=True)


def run_traced(command: list[str], out_dir: Path, collect_all: bool = False) -> int:
    """Run `command` under the recorder; returns its exit code (128+N when killed by signal N)."""
    if not command:
        raise UserError("No command to trace.", "Usage: dynacheck trace [--out DIR] -- CMD ARGS...")
    prepare_out(out_dir)
    started = time.time()
    # Until the command ends the record says "no exit code": a killed `dynacheck trace` never leaves
    # a trace that reads as a clean exit.
    _write_run(out_dir, {"command": command, "exit_code": None, "started": started, "collect_all": collect_all})
    try:
        proc = subprocess.Popen(command, env=trace_env(out_dir, collect_all), preexec_fn=_die_with_parent)
    except FileNotFoundError as exc:
        raise UserError(f"Command not found: {command[0]}.", "Check the command after `--`.") from exc
    except PermissionError as exc:
        raise UserError(f"Command not executable: {command[0]}.", "Check its permissions.") from exc
    previous = {sig: signal.signal(sig, _forward_to(proc)) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code < 0:
        code = 128 - code
    record = {"command": command, "exit_code": code, "started": started, "seconds": time.time() - started,
              "collect_all": collect_all}
    _write_run(out_dir, record)
    return code


def _write_run(out_dir: Path, record: dict) -> None:
    (out_dir / RUN_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _forward_to(proc: subprocess.Popen):
    """A signal handler that passes SIGTERM/SIGHUP on to the traced command; we then wait for its exit."""
    def forward(signum, _frame) -> None:
        try:
            proc.send_signal(signum)
        except OSError:
            pass
    return forward


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, get SIGTERM when `dynacheck trace` dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
