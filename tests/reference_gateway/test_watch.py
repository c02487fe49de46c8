"""List-then-watch: resume from the last resourceVersion, re-list on 410, back off on errors."""

from __future__ import annotations

import threading

import urllib3

from reference_gateway import watch
from reference_gateway.cache import Cache
from reference_gateway.watch import Watcher

from .objects import NS


class ScriptedKube:
    """Serves lists and watches from a script; sets `stop` when the script runs out."""

    def __init__(self, stop: threading.Event, lists: list, watches: list) -> None:
        self.stop, self.lists, self.watches = stop, lists, watches
        self.calls: list[tuple] = []

    def list(self, api_version, kind, namespace=None):
        self.calls.append(("list",))
        return self.lists.pop(0)

    def watch(self, api_version, kind, namespace, *, resource_version, timeout_seconds):
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
    cache = Cache(objs.controller)
    queued: list = []
    w = Watcher(kube, "Service", cache, queued.append, stop)
    w.run()
    assert kube.calls == [("list",), ("watch", "10"), ("watch", "15"), ("watch", "15"), ("list",),
                          ("watch", "30"), ("watch", "31")]
    assert w.synced.is_set()
    assert set(cache.services) == {(NS, "c")}
    assert cache.services[(NS, "c")]["kind"] == "Service"  # filled in for list/watch items that lack it
