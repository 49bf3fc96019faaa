"""What killed writers leave behind, and how the next writer cleans it up.

A writer works in ``.NAME.tmp-TOKEN`` beside its output ``NAME`` and marks it
with an owner file (pid, host, start time). When it replaces an existing
output it first moves that aside to ``.NAME.old-TOKEN`` (same token). The next
writer to ``NAME`` removes a temporary directory whose owner process is dead on
this host (or that has no owner file and was not modified for an hour), and
puts an ``.old`` copy back when its writer died before the new output was in place.
A directory owned by a live process, or by a process on another host, is never touched.

A writer of a single file works in the file ``.NAME.tmp-TOKEN`` beside ``NAME`` (no owner file fits in a
file): the next writer to ``NAME`` removes such a file once it was not modified for an hour.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["OWNER_FILE", "STALE_AFTER_S", "clean_stale_files", "clean_stale_siblings", "old_name", "tmp_name",
           "write_owner"]

OWNER_FILE = ".offlinerl-writer.json"
#: A temporary directory without an owner file is stale once it was not modified for this long.
STALE_AFTER_S = 3600.0

log = logging.getLogger(__name__)


def tmp_name(name: str, token: str) -> str:
    return f".{name}.tmp-{token}"


def old_name(name: str, token: str) -> str:
    return f".{name}.old-{token}"


def write_owner(directory: Path) -> None:
    """Mark ``directory`` as the working directory of this process."""
    owner = {"pid": os.getpid(), "hostname": socket.gethostname(), "started": time.time(),
             "process_start": _process_start(os.getpid())}
    (directory / OWNER_FILE).write_text(json.dumps(owner) + "\n")


def _proc_stat(pid: int) -> list[str]:
    """Fields 3… of ``/proc/PID/stat`` (state first); OSError where there is no such process or no /proc."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def _process_start(pid: int) -> str | None:
    """The process start time in clock ticks since boot (tells a reused pid apart), where /proc exists."""
    try:
        return _proc_stat(pid)[19]
    except (OSError, IndexError):
        return None


def _read_owner(directory: Path) -> dict[str, Any] | None:
    try:
        owner = json.loads((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or not isinstance(owner.get("hostname"), str):
        return None
    return owner


def _alive(owner: dict[str, Any]) -> bool:
    pid = owner["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        fields = _proc_stat(pid)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # no /proc: the pid exists, trust it
    if fields[0] in ("Z", "X"):  # killed, not yet reaped
        return False
    recorded = owner.get("process_start")
    return recorded is None or len(fields) <= 19 or fields[19] == recorded


def _stale_reason(directory: Path) -> str | None:
    """Why the writer directory ``directory`` is stale, or None while its writer may still be running."""
    owner = _read_owner(directory)
    if owner is None:
        try:
            age = time.time() - directory.stat().st_mtime
        except OSError:
            return None
        return f"no owner file, last modified {age / 60:.0f} min ago" if age > STALE_AFTER_S else None
    if owner["hostname"] != socket.gethostname() or _alive(owner):
        return None
    started = owner.get("started")
    when = (f", started {datetime.fromtimestamp(started, timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
            if isinstance(started, (int, float)) else "")
    return f"its writer (pid {owner['pid']} on {owner['hostname']}{when}) is no longer running"


def _siblings(out: Path, what: str) -> dict[str, Path]:
    prefix = f".{out.name}.{what}-"
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return {}
    return {p.name[len(prefix):]: p for p in entries if p.name.startswith(prefix) and p.is_dir() and not p.is_symlink()}


def clean_stale_siblings(out: Path) -> list[str]:
    """Remove (or, for an interrupted replace, restore) what killed writers left beside ``out``.

    Returns one line per action; each is also logged as a warning (the CLI shows it).
    """
    tmps, olds = _siblings(out, "tmp"), _siblings(out, "old")
    stale = {token: reason for token, d in tmps.items() if (reason := _stale_reason(d))}
    done: list[str] = []
    for token, old in sorted(olds.items()):
        if token in tmps and token not in stale:
            continue  # its writer is replacing the output right now
        if token in stale and not out.exists():
            os.rename(old, out)
            done.append(f"restored {out} from {old.name}, where a writer that was replacing it had moved it "
                        f"aside ({stale[token]})")
        else:
            shutil.rmtree(old, ignore_errors=True)
            done.append(f"removed {old}, a previous copy of {out} left by an interrupted replace")
    for token, reason in sorted(stale.items()):
        shutil.rmtree(tmps[token], ignore_errors=True)
        done.append(f"removed {tmps[token]}, a temporary directory left by an interrupted writer: {reason}")
    for line in done:
        log.warning(line)
    return done


def clean_stale_files(out: Path) -> list[str]:
    """Remove the temporary files ``.NAME.tmp-*`` beside the file ``out`` that were not modified for
    ``STALE_AFTER_S`` (left by killed writers). Returns one line per file removed; each is also logged."""
    prefix = f".{out.name}.tmp-"
    try:
        entries = [p for p in out.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    done: list[str] = []
    for path in entries:
        try:
            if not path.is_file() or path.is_symlink() or time.time() - path.stat().st_mtime <= STALE_AFTER_S:
                continue
            path.unlink()
        except OSError:
            continue
        done.append(f"removed {path}, a temporary file left by an interrupted writer (not modified for "
                    f"{STALE_AFTER_S / 3600:.0f} h)")
    for line in done:
        log.warning(line)
    return done
