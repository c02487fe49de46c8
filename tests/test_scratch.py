"""What a killed run leaves in the temporary directory, the next run removes; nothing else.

A run killed with SIGKILL cannot clean up after itself; conformance/cluster/scratch.py records who made
each of the suite's directories so that a later run can tell an abandoned one from one in use. These
tests make directories as other processes would, in a private root, and check which ones `sweep`
takes; the last one kills a real run of the suite while its embedded cluster is up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conformance.cluster import scratch

from .suite_run import PYTEST, REPO, clean_env


def _made_by_a_process_that_is_gone(root: Path, what: str = "cluster") -> Path:
    code = f"from conformance.cluster import scratch; print(scratch.mkdtemp({what!r}, {str(root)!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _record(path: Path) -> dict:
    return json.loads((path / scratch.OWNER).read_text())


def test_a_directory_whose_maker_is_gone_is_removed(tmp_path):
    gone = _made_by_a_process_that_is_gone(tmp_path)
    assert gone.is_dir() and gone.name.startswith("ipc-cluster-")
    assert scratch.sweep(tmp_path) == [gone]
    assert not gone.exists()


def test_a_directory_whose_maker_lives_is_kept(tmp_path):
    mine = scratch.mkdtemp("cluster", tmp_path)
    assert oct(mine.stat().st_mode & 0o777) == "0o700"
    assert scratch.sweep(tmp_path) == []
    assert mine.is_dir()


def test_a_reused_pid_is_not_the_owner(tmp_path):
    # The record names this process's PID with another start time: a process that had the PID before.
    reused = scratch.mkdtemp("cluster", tmp_path)
    record = _record(reused)
    (reused / scratch.OWNER).write_text(json.dumps({**record, "start": record["start"] - 1}))
    assert scratch.sweep(tmp_path) == [reused]


def test_what_is_not_provably_abandoned_is_kept(tmp_path):
    gone = _made_by_a_process_that_is_gone(tmp_path)
    unrecorded = tmp_path / "ipc-cluster-nothing"  # no owner record: not provably the suite's
    unrecorded.mkdir()
    unreadable = _made_by_a_process_that_is_gone(tmp_path)
    (unreadable / scratch.OWNER).write_text("{not json")
    elsewhere = _made_by_a_process_that_is_gone(tmp_path)  # its owner is in another PID namespace
    (elsewhere / scratch.OWNER).write_text(json.dumps({**_record(elsewhere), "pidns": 1}))
    other_name = tmp_path / "cluster-abc"  # not named ipc-*: somebody else's
    gone.rename(other_name)
    a_file = tmp_path / "ipc-kubeconfig-x.yaml"
    a_file.write_text("")
    assert scratch.sweep(tmp_path) == []
    assert all(p.exists() for p in (unrecorded, unreadable, elsewhere, other_name, a_file))


def test_a_run_killed_outright_leaves_its_cluster_and_the_next_run_removes_it(tmp_path):
    root = tmp_path / "t"  # the runs' temporary directory: no other run on the machine sweeps it
    root.mkdir()
    env = {**clean_env(), "TMPDIR": str(root)}
    argv = [*PYTEST, f"--results-dir={tmp_path / 'results'}", "--skip-traffic", "-k", "test_pool_accepted"]
    run = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(root.glob("ipc-cluster-*/kubeconfig")):  # the cluster is up
            assert run.poll() is None, f"the run ended with exit {run.returncode} before its cluster was up"
            assert time.monotonic() < deadline, "no embedded cluster came up within 120 s"
            time.sleep(0.1)
        os.killpg(run.pid, signal.SIGKILL)  # the run and whatever of its group has not died with it
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    left = sorted(p for p in root.iterdir() if p.name.startswith("ipc-"))
    assert any(p.name.startswith("ipc-cluster-") for p in left), f"nothing left to sweep: {left}"

    done = subprocess.run([*PYTEST, "--collect-only", "-q", "-k", "test_pool_accepted"], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert f"removed {len(left)} director" in done.stdout, done.stdout[-2000:]
    assert not [p for p in root.iterdir() if p.name.startswith("ipc-")]
