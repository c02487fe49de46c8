"""The suite's scratch directories in the system's temporary directory, and what killed runs left there.

Why: a run that ends normally, or on Ctrl-C, removes everything it made. A run killed outright (SIGKILL:
a CI job's timeout, the OOM killer, a session stopped hard) cannot; its processes die with it (they
watch a lifeline), but its directories stay, and an embedded cluster's holds etcd's preallocated
write-ahead log: 124 MB on disk each. Nine such were once found after one killed run of the meta-tests.

So every directory the suite makes there comes from `mkdtemp`: named `ipc-<what>-...`, private to its
user (0700), and holding an owner record: the PID of the process that made it, that process's start
time (a PID reused by another process does not count as the owner) and its PID namespace (a PID is
only meaningful inside one). `sweep`, called when a run starts, removes the directories whose owner is
gone, and nothing else: not a directory without a record (not provably the suite's), not one whose
owner lives (another run at the same time), not one of another user, not one whose owner is in
another PID namespace (this process cannot see whether it lives).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "ipc-"
OWNER = ".ipc-owner"  # the owner record inside each directory


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22); None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")": split after the last one.
    return int(text.rpartition(")")[2].split()[19])


def _pid_namespace() -> int | None:
    """This process's PID namespace (the inode of /proc/self/ns/pid)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _owner() -> dict:
    pid = os.getpid()
    return {"pid": pid, "start": _start_time(pid), "pidns": _pid_namespace()}


def mkdtemp(what: str, root: str | os.PathLike | None = None) -> Path:
    """A new private directory `ipc-<what>-XXXXXXXX` in `root` (the system's temporary directory), owned
    by this process in the sense of `sweep`. The caller removes it when done, as with tempfile.mkdtemp."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{what}-", dir=root))
    (path / OWNER).write_text(json.dumps(_owner()))
    return path


def _abandoned(path: Path) -> bool:
    """The directory has an owner record and its owner, in this PID namespace, is gone."""
    try:
        record = json.loads((path / OWNER).read_text())
        pid, start, pidns = int(record["pid"]), record["start"], record["pidns"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if start is None or pidns is None or pidns != _pid_namespace():
        return False
    return _start_time(pid) != start


def sweep(root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the suite's directories in `root` (the system's temporary directory) that killed runs left
    behind, and return them; see the module's docstring for what is never removed."""
    root = Path(root or tempfile.gettempdir())
    uid = os.getuid()
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            continue
        path = Path(entry.path)
        if _abandoned(path):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
                log.info("removed %s, left by a run that was killed", path)
    return removed
