"""`wait_for` on a real API server: it reads the object with a GET (answered from etcd, current),
watches from the version read, and starts again from a list when that version is older than the
server's watch cache keeps (410 Gone), as it is for an object nobody wrote since the API server
started. It never polls: the change comes by the watch."""

import threading

from conformance.wait import wait_for


def requests_of(kube, monkeypatch) -> list[tuple[str, str, dict]]:
    """Record each request `kube` makes: (method, path, query)."""
    seen, request = [], kube.request

    def recorded(method, path, **kw):
        seen.append((method, path, dict(kw.get("query") or [])))
        return request(method, path, **kw)
    monkeypatch.setattr(kube, "request", recorded)
    return seen


def test_an_object_older_than_the_watch_cache_is_still_waited_for(kube, monkeypatch):
    # The `default` namespace comes with the cluster's stored data: written before this API
    # server started, so a watch from its version is refused with 410 Gone.
    before = kube.get("v1", "Namespace", "default")
    events = kube.watch("v1", "Namespace", None, resource_version=before["metadata"]["resourceVersion"],
                        field_selector="metadata.name=default", timeout_seconds=2)
    first = next(events, {})
    assert first.get("type") == "ERROR" and first["object"].get("code") == 410, first
    events.close()

    label = {"metadata": {"labels": {"waited-for": "yes"}}}
    threading.Timer(1.5, kube.patch, ("v1", "Namespace", "default", label)).start()
    requests = requests_of(kube, monkeypatch)
    try:
        found = wait_for(kube, "v1", "Namespace", "default", None,
                         lambda ns: ((ns or {}).get("metadata", {}).get("labels") or {}).get("waited-for") == "yes",
                         timeout=10, what="namespace default", expected="labelled waited-for=yes")
        assert found["metadata"]["labels"]["waited-for"] == "yes"
        reads = [query for method, path, query in requests if method == "GET" and path.endswith("/default")]
        assert len(reads) == 1, f"the wait read the namespace {len(reads)} times (it polled): {reads}"
        watches = [query for _, _, query in requests if query.get("watch")]
        assert len(watches) == 2, f"one watch from the version read (refused), one from a list: {watches}"
    finally:
        kube.patch("v1", "Namespace", "default", {"metadata": {"labels": {"waited-for": None}}})


def test_a_new_object_is_waited_for_from_its_own_version(kube):
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "waited", "namespace": "default"},
                 "data": {"step": "1"}})
    try:
        threading.Timer(0.3, kube.patch, ("v1", "ConfigMap", "waited", {"data": {"step": "2"}}),
                        {"namespace": "default"}).start()
        seen = wait_for(kube, "v1", "ConfigMap", "waited", "default",
                        lambda cm: (cm or {}).get("data", {}).get("step") == "2",
                        timeout=10, what="configmap default/waited", expected="data.step 2")
        assert seen["data"]["step"] == "2"
        threading.Timer(0.3, kube.delete, ("v1", "ConfigMap", "waited", "default")).start()
        assert wait_for(kube, "v1", "ConfigMap", "waited", "default", lambda cm: cm is None, timeout=10,
                        what="configmap default/waited to be deleted", expected="the object is gone") is None
    finally:
        kube.delete("v1", "ConfigMap", "waited", "default")
