"""List-then-watch: resume from the last resourceVersion, re-list on 410, back off on errors,
count a resource that is not served at first as empty."""

from __future__ import annotations

import threading
import time

import urllib3

from reference_gateway import watch
from reference_gateway.kube import ApiError
from reference_gateway.model import FIXED_RESOURCES
from reference_gateway.watch import Watcher, wait_synced

from .objects import NS, Objects


class ScriptedKube:
    """Serves lists and watches from a script; sets `stop` when the script runs out."""

    def __init__(self, stop: threading.Event, lists: list, watches: list) -> None:
        self.stop, self.lists, self.watches = stop, lists, watches
        self.calls: list[tuple] = []

    def list(self, resource):
        self.calls.append(("list",))
        step = self.lists.pop(0)
        if isinstance(step, Exception):
            if not self.lists:
                self.stop.set()
            raise step
        return step

    def watch(self, resource, *, resource_version, timeout_seconds):
        self.calls.append(("watch", resource_version))
        if not self.watches:
            self.stop.set()
            return iter(())
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        return iter(step)


def svc(name, rv):
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv}, "spec": {"type": "ClusterIP"}}


def test_watch_resumes_relists_and_retries(objs, monkeypatch):
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.001)
    stop = threading.Event()
    kube = ScriptedKube(stop, lists=[
        {"metadata": {"resourceVersion": "10"}, "items": [svc("a", "9")]},
        {"metadata": {"resourceVersion": "30"}, "items": [svc("b", "29"), svc("c", "11")]},  # "a" went meanwhile
    ], watches=[
        [{"type": "ADDED", "object": svc("c", "11")},
         {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}],
        urllib3.exceptions.ProtocolError("connection reset"),
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}],
        [{"type": "DELETED", "object": svc("b", "31")}],
    ])
    cache = objs.cache()
    queued: list = []
    w = Watcher(kube, FIXED_RESOURCES["Service"], cache, queued.append, stop)
    w.run()
    assert kube.calls == [("list",), ("watch", "10"), ("watch", "15"), ("watch", "15"), ("list",),
                          ("watch", "30"), ("watch", "31")]
    assert w.synced.is_set()
    assert set(cache.services) == {(NS, "c")}
    assert cache.services[(NS, "c")]["kind"] == "Service"  # filled in for list/watch items that lack it


def pool(name, rv):
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv}, "spec": {}}


def test_pools_are_stored_under_their_api(monkeypatch):
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.001)
    objs = Objects("v1.6")
    stop = threading.Event()
    kube = ScriptedKube(stop, lists=[{"metadata": {"resourceVersion": "3"}, "items": [pool("p", "2")]}],
                        watches=[])
    cache = objs.cache()
    w = Watcher(kube, objs.rev.api.resource, cache, lambda items: None, stop)
    w.run()
    stored = objs.pools(cache)[(NS, "p")]
    assert (stored["apiVersion"], stored["kind"]) == ("inference.networking.k8s.io/v1", "InferencePool")


def test_a_resource_not_served_at_first_counts_as_empty_until_it_is(objs, monkeypatch):
    """An API named on the command line whose CRD is missing must not hold up the others."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.001)
    stop = threading.Event()
    not_found = ApiError(404, {"reason": "NotFound"}, "GET", "/apis/...")
    kube = ScriptedKube(stop, lists=[
        not_found, not_found,
        {"metadata": {"resourceVersion": "5"}, "items": [pool("p", "4")]},  # the CRD got installed
    ], watches=[])
    cache = objs.cache()
    w = Watcher(kube, objs.rev.api.resource, cache, lambda items: None, stop)
    seen_synced_empty = []
    original = kube.list

    def list_and_look(resource):
        seen_synced_empty.append((w.synced.is_set(), dict(objs.pools(cache))))
        return original(resource)

    kube.list = list_and_look
    w.run()
    assert seen_synced_empty[:3] == [(False, {}), (True, {}), (True, {})]
    assert kube.calls[:3] == [("list",)] * 3
    assert set(objs.pools(cache)) == {(NS, "p")}


def test_a_404_after_the_first_list_is_an_error_not_an_empty_list(seed, monkeypatch):
    """Once listed, a 404 (say, the API server restarting) must not wipe the cache."""
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.001)
    stop = threading.Event()
    kube = ScriptedKube(stop, lists=[
        {"metadata": {"resourceVersion": "5"}, "items": [svc("a", "4")]},
        ApiError(404, {"reason": "NotFound"}, "GET", "/api/v1/services"),
    ], watches=[[{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]])
    cache = seed.cache()
    w = Watcher(kube, FIXED_RESOURCES["Service"], cache, lambda items: None, stop)
    w.run()
    assert set(cache.services) == {(NS, "a")}


def test_wait_synced_gives_up_on_stop(seed):
    stop = threading.Event()
    w = Watcher(None, FIXED_RESOURCES["Service"], seed.cache(), lambda items: None, stop)
    stop.set()
    assert wait_synced([w], stop) is False


def test_a_lagging_cache_gets_each_change_late_in_order_but_the_first_list_at_once(objs):
    """Behaviour lagging-cache: the first list goes in at once (the controller waits for it);
    every later change reaches the cache its lag after it came, in the order it came."""
    stop = threading.Event()
    gate = threading.Event()  # the watch's events come only once the test has looked at the list
    events = [{"type": "ADDED", "object": svc("b", "12")}, {"type": "DELETED", "object": svc("a", "13")}]

    def watched():  # then stays open until the test ends (the script running out would stop it all)
        gate.wait(5)
        for event in events:
            yield event
            time.sleep(0.2)
        stop.wait(5)

    kube = ScriptedKube(stop, lists=[{"metadata": {"resourceVersion": "10"}, "items": [svc("a", "9")]}],
                        watches=[watched()])
    cache, queued = objs.cache(), []
    w = Watcher(kube, FIXED_RESOURCES["Service"], cache, queued.append, stop, lag=0.3)
    w.start()
    assert w.synced.wait(2)
    assert set(cache.services) == {(NS, "a")}, "the first list must be in the cache at once"
    gate.set()
    came, seen = time.monotonic(), [(0.0, set(cache.services))]
    while seen[-1][1] != {(NS, "b")} and time.monotonic() - came < 3:
        if set(cache.services) != seen[-1][1]:
            seen.append((time.monotonic() - came, set(cache.services)))
        time.sleep(0.005)
    stop.set()
    states = [state for _, state in seen]
    assert states == [{(NS, "a")}, {(NS, "a"), (NS, "b")}, {(NS, "b")}], f"the cache went through {states}"
    assert 0.3 <= seen[1][0] < 0.6, f"the first change reached the cache after {seen[1][0]:.2f}s, not 0.3s"
    assert seen[2][0] >= 0.5, f"the second change (0.2 s after the first) reached it after {seen[2][0]:.2f}s"


def test_cache_lags_come_from_the_switch():
    from reference_gateway import behaviours

    assert behaviours.cache_lag(0, 4) == 0
    behaviours.activate(["lagging-cache"], cache_lag_seconds=2)
    assert [behaviours.cache_lag(i, 4) for i in range(4)] == [0.5, 1.0, 1.5, 2.0]
    behaviours.activate([])
