"""`wait_for` on a real API server: it reads the object with a GET (answered from etcd, current),
watches from the version read, and starts again from a list when that version is older than the
server's watch cache keeps (410 Gone), as it is for an object nobody wrote since the API server
started. It never polls: the change comes by the watch."""

import threading

from conformance.kube import Kube
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


def test_a_delete_answer_says_whether_there_is_anything_left_to_wait_for(kube):
    """The suite's cleanup waits only for what the server kept: `Kube.removed` reads the DELETE's
    answer, whatever form the server gives it (the object as deleted, a Status, nothing)."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "namespace": "default"}}
    kube.create({**cm, "metadata": {**cm["metadata"], "finalizers": ["example.com/hold"]}})
    try:
        held = kube.delete("v1", "ConfigMap", "kept", "default")
        assert not Kube.removed(held), f"a finalizer holds it, yet the answer says gone: {held}"
        assert kube.get("v1", "ConfigMap", "kept", "default") is not None
    finally:
        kube.patch("v1", "ConfigMap", "kept", {"metadata": {"finalizers": None}}, namespace="default")
    assert Kube.removed(kube.delete("v1", "ConfigMap", "kept", "default")), "gone already: the answer is None"

    kube.create(cm)
    answer = kube.delete("v1", "ConfigMap", "kept", "default")
    assert Kube.removed(answer), f"deleted at once, yet the answer says kept: {answer}"
    assert kube.get("v1", "ConfigMap", "kept", "default") is None

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unscheduled", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "example.com/none"}]}}
    kube.create(pod)
    answer = kube.delete("v1", "Pod", "unscheduled", "default")  # no node: no grace period
    assert Kube.removed(answer), f"deleted at once, yet the answer says kept: {answer}"
    assert kube.get("v1", "Pod", "unscheduled", "default") is None

    bound = {**pod, "metadata": {**pod["metadata"], "name": "bound"}, "spec": {**pod["spec"], "nodeName": "nowhere"}}
    kube.create(bound)
    try:
        answer = kube.delete("v1", "Pod", "bound", "default")  # on a node: its kubelet has 30 s to stop it
        assert not Kube.removed(answer), f"a grace period runs, yet the answer says gone: {answer}"
        assert kube.get("v1", "Pod", "bound", "default") is not None
    finally:
        kube.request("DELETE", "/api/v1/namespaces/default/pods/bound", body={"gracePeriodSeconds": 0})
