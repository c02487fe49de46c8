"""The suite's read-modify-writes land whoever else writes the object at the same time.

A test that plays another controller (C10 adds a foreign entry to a pool's
status) or updates a pool the implementation also writes (S10, the schema
tier's updates) must not fail because the implementation wrote in between:
such a write answers 409, which says nothing about the implementation.
`Kube.write_latest` reads again and retries. Here a thread plays a controller
far busier than a real one, rewriting the pool's status every 50 ms, on a real
API server: a plain update from a version read before its write is refused,
and `write_latest` lands on top of exactly what it read (trying the version the
caller last saw first, when it has one).
"""

from __future__ import annotations

import threading
import time

import pytest

from conformance.conditions import pool_parents
from conformance.kube import ApiError

POOL = "inference.networking.x-k8s.io/v1alpha2"
PAUSE = 0.05  # seconds between the busy writer's writes


def _entry(gateway: str, reason: str) -> dict:
    return {"parentRef": {"kind": "Gateway", "name": gateway},
            "conditions": [{"type": "Accepted", "status": "True", "reason": reason, "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def _version(kube, ns: str) -> str:
    return kube.get(POOL, "InferencePool", "pool", ns)["metadata"]["resourceVersion"]


@pytest.fixture
def pool(kube):
    ns = f"write-latest-{time.monotonic_ns() % 10**9}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    yield kube.create({"apiVersion": POOL, "kind": "InferencePool", "metadata": {"name": "pool", "namespace": ns},
                       "spec": {"selector": {"app": "m"}, "targetPortNumber": 8000,
                                "extensionRef": {"name": "picker"}}})
    kube.delete("v1", "Namespace", ns)


@pytest.fixture
def busy_writer(kube, pool):
    """Rewrites the pool's status (its own one entry, a new reason each time) until the test ends."""
    ns, stop, landed = pool["metadata"]["namespace"], threading.Event(), [0]

    def write() -> None:
        while not stop.is_set():
            current = kube.get(POOL, "InferencePool", "pool", ns)
            current["status"] = {"parent": [_entry("busy", f"Write{landed[0]}")]}
            try:
                kube.replace(current, subresource="status")
                landed[0] += 1
            except ApiError as e:
                if e.status != 409:
                    raise
            stop.wait(PAUSE)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


def test_write_latest_lands_beside_a_busy_writer(kube, pool, busy_writer):
    ns, ours = pool["metadata"]["namespace"], _entry("other-controller", "Accepted")
    stale = kube.get(POOL, "InferencePool", "pool", ns)
    # The pool's own version says whether it was written since the read (the writer's count cannot:
    # a write can land before the read and be counted after it).
    deadline = time.monotonic() + 10
    while _version(kube, ns) == stale["metadata"]["resourceVersion"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _version(kube, ns) != stale["metadata"]["resourceVersion"], "the busy writer wrote nothing in 10 s"
    stale["status"] = {"parent": [ours]}
    with pytest.raises(ApiError) as refused:
        kube.replace(stale, subresource="status")
    assert refused.value.status == 409, f"an update from an old version was answered {refused.value}"

    # Write until the busy writer has got in between a read and its write a few times.
    tries: list[int] = []

    def others(parents: list[dict]) -> list[dict]:
        # Our entry replaces the one an earlier write of ours left: writes of ours that land one
        # after the other (the busy thread can go without the GIL for a while) must not grow the
        # list past its 32 entries.
        return [e for e in parents if e != ours]

    def add_ours(current: dict) -> dict:
        tries.append(1)
        current.setdefault("status", {})["parent"] = others(pool_parents(current)) + [ours]
        return kube.replace(current, subresource="status")

    calls = retried = 0
    deadline = time.monotonic() + 10
    while retried < 3 and time.monotonic() < deadline:
        tries.clear()
        before, written = kube.write_latest(POOL, "InferencePool", "pool", ns, add_ours)
        calls, retried = calls + 1, retried + (len(tries) > 1)
        assert pool_parents(written) == others(pool_parents(before)) + [ours], (
            f"the write did not land on the version read: {pool_parents(written)}, read {pool_parents(before)}")
    assert retried, f"in {calls} writes, the busy writer never got in between a read and its write"


def test_write_latest_gives_up_with_one_line(kube, pool):
    """A write that conflicts every time ends after the attempts, saying so, instead of looping."""
    ns, stale = pool["metadata"]["namespace"], dict(pool)
    kube.replace({**kube.get(POOL, "InferencePool", "pool", ns), "status": {"parent": []}}, subresource="status")
    with pytest.raises(ApiError) as gave_up:
        kube.write_latest(POOL, "InferencePool", "pool", ns, lambda _: kube.replace(stale, subresource="status"),
                          attempts=3)
    assert gave_up.value.status == 409
    assert str(gave_up.value).count("\n") == 0 and "3 times in a row" in str(gave_up.value), str(gave_up.value)


def test_write_latest_tries_the_version_last_seen_first(kube, pool, monkeypatch):
    """With `current`, a write against the latest version costs no read; against an older one, the
    write is refused, the object read, and the write lands on what was read."""
    ns, ours = pool["metadata"]["namespace"], _entry("other-controller", "Accepted")
    reads: list[str] = []
    get = kube.get
    monkeypatch.setattr(kube, "get", lambda *a, **kw: reads.append(a[2]) or get(*a, **kw))

    def add_ours(current: dict) -> dict:
        current.setdefault("status", {}).setdefault("parent", []).append(ours)
        return kube.replace(current, subresource="status")

    before, written = kube.write_latest(POOL, "InferencePool", "pool", ns, add_ours, current=pool)
    assert (reads, before) == ([], pool), "a write against the version just created read the pool first"
    assert pool_parents(written) == [ours]

    before, again = kube.write_latest(POOL, "InferencePool", "pool", ns, add_ours, current=pool)  # now old
    assert reads == ["pool"], f"a write against an old version read the pool {len(reads)} times, not once"
    assert before["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert pool_parents(again) == [ours, ours]
