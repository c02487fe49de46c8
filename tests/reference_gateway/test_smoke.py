"""The reference gateway against a real (embedded) control plane, run as its own process.

Each cluster installs the InferencePool CRDs it names (generated, from
manifests/crd/) and Gateway API's; each test runs the controller with the
`--api-revision`s it names, under a controller name of its own, and checks
every API it was given: a Gateway in another namespace (listener allows
routes from All), pools of each API in the routes' namespace, status in each
API's own spelling, the Service's coming and going, no write loop (a field
the schema lacks would be pruned and written again forever), and the entry
going when the route does.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube as SuiteKube
from conformance.wait import wait_for
from reference_gateway.kube import ApiError, Kube
from reference_gateway.model import Resource
from reference_gateway.revisions import REVISIONS

from .objects import GW_API, Objects

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "manifests" / "crd"
TIMEOUT = 30
GATEWAYS, APPS = "gateways", "apps"


def crd_file(revision: str) -> Path:
    """The generated InferencePool CRD of a revision."""
    if revision == "seed":
        return CRDS / "inference.networking.x-k8s.io_inferencepools.yaml"
    folder = "v0.2" if revision in ("v0.3", "v0.4") else revision  # v0.2 - v0.4 share one schema
    return CRDS / "revisions" / folder / f"{REVISIONS[revision].api.group}_inferencepools.yaml"


@contextmanager
def embedded(*revisions: str):
    with EmbeddedCluster(crd_paths=[*(crd_file(r) for r in revisions), CRDS / "gateway-api"]) as c:
        yield c, SuiteKube(config.new_client_from_config(config_file=str(c.kubeconfig)))


@pytest.fixture(scope="module")
def seed_cluster():
    with embedded("seed") as c:
        yield c


@pytest.fixture(scope="module")
def v10_cluster():
    with embedded("v1.0") as c:
        yield c


@pytest.fixture(scope="module")
def v05_v14_cluster():
    """What GIE v1.0 - v1.4 install: the v0.5-shaped v1alpha2 CRD beside the GA one."""
    with embedded("v0.5", "v1.4") as c:
        yield c


@pytest.fixture(scope="module")
def seed_v16_cluster():
    """What the suite's embedded cluster installs by default."""
    with embedded("seed", "v1.6") as c:
        yield c


def _die_with_parent() -> None:
    # If the test process is killed outright, the controller goes with it.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@contextmanager
def running(cluster, log: Path, controller: str, revisions: list[str], extra: tuple[str, ...] = ()):
    """The controller as its user runs it; stopped with SIGTERM, which it must answer with exit code 0."""
    argv = [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
            "--controller-name", controller]
    for r in revisions:
        argv += ["--api-revision", r]
    argv += list(extra)
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        print(log.read_text(errors="replace"))  # shown by pytest when the test fails
    assert code == 0, f"the implementation did not exit cleanly on SIGTERM (exit code {code})"


def manifest(obj: dict, ns: str | None = None) -> dict:
    """An object from `Objects` as one creates it: no server-set metadata, no status."""
    md = {"name": obj["metadata"]["name"]}
    if ns or obj["metadata"].get("namespace"):
        md["namespace"] = ns or obj["metadata"]["namespace"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": md, "spec": obj["spec"]}


def cond(e: dict | None, type_: str) -> tuple[str, str] | None:
    c = next((c for c in (e or {}).get("conditions") or [] if c["type"] == type_), None)
    return (c["status"], c["reason"]) if c else None


class Scenario:
    """One test's objects on one cluster: namespaces, class and controller name of its own."""

    def __init__(self, kube: SuiteKube, name: str, revisions: list[str], log: Path) -> None:
        self.kube, self.name, self.log = kube, name, log
        self.gateways, self.apps = f"{name}-{GATEWAYS}", f"{name}-{APPS}"
        self.controller = f"example.com/{name}"
        self.objs = [Objects(r) for r in revisions]
        self.any = self.objs[0] if self.objs else Objects()

    def pool_api(self, o: Objects) -> str:
        return f"{o.f.group}/{o.f.version}"

    def entry(self, o: Objects, pool: dict | None) -> dict | None:
        return next((e for e in o.parents((pool or {}).get("status") or {})
                     if e["parentRef"].get("kind") == "Gateway" and e["parentRef"].get("name") == "gw"), None)

    def wait_pool(self, o: Objects, name: str, predicate, expected: str) -> dict:
        return wait_for(self.kube, self.pool_api(o), "InferencePool", name, self.apps, predicate,
                        timeout=TIMEOUT, what=f"pool {self.apps}/{name} ({o.name})", expected=expected)

    def set_up(self, *, pools=True) -> None:
        k, o = self.kube, self.any
        for ns in (self.gateways, self.apps):
            k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        k.create(manifest(o.gateway_class(self.name, self.controller)))
        k.create(manifest(o.gateway("gw", cls=self.name, ns=self.gateways, listeners=[
            {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}])))
        k.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "epp", "namespace": self.apps},
                  "spec": {"selector": {"app": "epp"}, "ports": [{"port": 9002}]}})
        if pools:
            for p in self.objs:
                k.create(manifest(p.pool(), self.apps))
        backends = [p.pool_backend("pool") for p in self.objs]
        k.create({"apiVersion": GW_API, "kind": "HTTPRoute", "metadata": {"name": "route", "namespace": self.apps},
                  "spec": {"parentRefs": [{"name": "gw", "namespace": self.gateways}],
                           "rules": [{"backendRefs": backends}]}})

    def pool_writes(self) -> int:
        return self.log.read_text(errors="replace").count(f"wrote InferencePool {self.apps}/pool ")

    def touch_pools(self, round_: int) -> None:
        """Change each pool's labels (not its spec, not its status): each is reconciled, and has nothing to write."""
        for o in self.objs:
            self.kube.patch(self.pool_api(o), "InferencePool", "pool",
                            {"metadata": {"labels": {"touched": str(round_)}}}, namespace=self.apps)

    def run(self) -> None:
        """Every API's pool through its life; the route's and the Gateway's status on the way."""
        self.set_up()
        accepted_at = {}
        for o in self.objs:
            pool = self.wait_pool(o, "pool", lambda p, o=o: cond(self.entry(o, p), "Accepted") == ("True", "Accepted")
                                  and cond(self.entry(o, p), "ResolvedRefs") == ("True", "ResolvedRefs"),
                                  "Accepted True/Accepted and ResolvedRefs True/ResolvedRefs")
            entries = o.parents(pool["status"])
            assert [e["parentRef"] for e in entries] == [o.gw_ref("gw", self.gateways)], entries  # C14
            assert entries[0].get("controllerName") == (self.controller if o.f.controller_name else None)
            accepted_at[o.name] = next(c for c in entries[0]["conditions"]
                                       if c["type"] == "Accepted")["lastTransitionTime"]
        wait_for(self.kube, GW_API, "HTTPRoute", "route", self.apps,
                 lambda r: any(p.get("controllerName") == self.controller
                               and cond(p, "Accepted") == ("True", "Accepted")
                               and cond(p, "ResolvedRefs") == ("True", "ResolvedRefs")
                               for p in ((r or {}).get("status") or {}).get("parents") or []),
                 timeout=TIMEOUT, what="the route's status", expected="Accepted and ResolvedRefs True")
        gw = wait_for(self.kube, GW_API, "Gateway", "gw", self.gateways,
                      lambda g: cond((g or {}).get("status"), "Programmed") == ("False", "Pending"),
                      timeout=TIMEOUT, what="the Gateway's status", expected="Programmed False (no data plane)")
        assert cond(gw["status"], "Accepted") == ("True", "Accepted")
        self.nothing_to_write(1)

        self.kube.delete("v1", "Service", "epp", self.apps)
        for o in self.objs:
            pool = self.wait_pool(o, "pool", lambda p, o=o: cond(self.entry(o, p), "ResolvedRefs") ==
                                  ("False", "InvalidExtensionRef"),
                                  "ResolvedRefs False/InvalidExtensionRef once the Service is gone")
            still = next(c for c in self.entry(o, pool)["conditions"] if c["type"] == "Accepted")
            assert (still["status"], still["lastTransitionTime"]) == ("True", accepted_at[o.name])

        self.kube.delete(GW_API, "HTTPRoute", "route", self.apps)
        for o in self.objs:
            self.wait_pool(o, "pool", lambda p, o=o: o.parents((p or {}).get("status") or {}) == o.released,
                           f"status.{o.f.status_key} {o.released} once the route is gone")
        self.nothing_to_write(2)
        # No reconcile failed and no watch had to be retried.
        assert " WARNING " not in self.log.read_text(errors="replace")

    def nothing_to_write(self, round_: int) -> None:
        """A reconcile that changes nothing writes nothing: a field the schema lacks (controllerName
        before v1.1) would be pruned, differ from what the controller wants, and be written every
        time (the API server takes such a write as a no-op, so only the controller's log shows it)."""
        time.sleep(0.3)  # let the writes the last change called for finish
        before = self.pool_writes()
        self.touch_pools(round_)
        time.sleep(1.0)
        assert self.pool_writes() == before, "the controller wrote a pool status that had nothing to change"


# -- one API --------------------------------------------------------------------

def test_seed_by_default(seed_cluster, tmp_path):
    cluster, kube = seed_cluster
    s = Scenario(kube, "seed-default", ["seed"], tmp_path / "log")
    with running(cluster, tmp_path / "log", s.controller, []):  # no --api-revision: the seed
        s.run()
    log = (tmp_path / "log").read_text()
    assert f"wrote InferencePool {s.apps}/pool status parent=gw[" in log
    assert "API revision(s) seed (inference.networking.x-k8s.io/v1alpha2)" in log


def test_v1_0_without_controller_name(v10_cluster, tmp_path):
    cluster, kube = v10_cluster
    s = Scenario(kube, "v10", ["v1.0"], tmp_path / "log")
    with running(cluster, tmp_path / "log", s.controller, ["v1.0"]):
        s.run()
    assert f"wrote InferencePool {s.apps}/pool status parents=gw[" in (tmp_path / "log").read_text()


# -- both APIs ------------------------------------------------------------------

def test_v05_and_v1_4_at_once(v05_v14_cluster, tmp_path):
    cluster, kube = v05_v14_cluster
    s = Scenario(kube, "both-v14", ["v0.5", "v1.4"], tmp_path / "log")
    with running(cluster, tmp_path / "log", s.controller, ["v0.5", "v1.4"]):
        s.run()


def test_seed_and_v1_6_at_once(seed_v16_cluster, tmp_path):
    cluster, kube = seed_v16_cluster
    s = Scenario(kube, "both-v16", ["seed", "v1.6"], tmp_path / "log")
    with running(cluster, tmp_path / "log", s.controller, ["seed", "v1.6"]):
        s.run()


def test_v1_6_pool_without_picker_and_other_api_ignored(seed_v16_cluster, tmp_path):
    """C15: a v1.6 pool with no endpointPickerRef is Accepted and ResolvedRefs True. Given only v1.6,
    the controller leaves the v1alpha2 pool alone and reports a route to it as InvalidKind."""
    cluster, kube = seed_v16_cluster
    s = Scenario(kube, "v16-only", ["v1.6"], tmp_path / "log")
    seed = Objects("seed")
    with running(cluster, tmp_path / "log", s.controller, ["v1.6"]):
        s.set_up(pools=False)
        kube.create(manifest(s.any.pool(no_picker=True), s.apps))
        kube.create(manifest(seed.pool(), s.apps))
        s.wait_pool(s.any, "pool", lambda p: cond(s.entry(s.any, p), "Accepted") == ("True", "Accepted")
                    and cond(s.entry(s.any, p), "ResolvedRefs") == ("True", "ResolvedRefs"),
                    "Accepted True and ResolvedRefs True without an endpointPickerRef")
        kube.apply({"apiVersion": GW_API, "kind": "HTTPRoute", "metadata": {"name": "route", "namespace": s.apps},
                    "spec": {"parentRefs": [{"name": "gw", "namespace": s.gateways}],
                             "rules": [{"backendRefs": [seed.pool_backend("pool")]}]}})
        wait_for(kube, GW_API, "HTTPRoute", "route", s.apps,
                 lambda r: any(cond(p, "ResolvedRefs") == ("False", "InvalidKind")
                               for p in ((r or {}).get("status") or {}).get("parents") or []),
                 timeout=TIMEOUT, what="the route's status", expected="ResolvedRefs False/InvalidKind")
        s.wait_pool(s.any, "pool", lambda p: s.any.parents((p or {}).get("status") or {}) == [],
                    "no entry once the route no longer sends to it")
    assert "status" not in kube.get(f"{seed.f.group}/{seed.f.version}", "InferencePool", "pool", s.apps)


def test_eager_writer_under_both_apis(seed_v16_cluster, tmp_path):
    """Each API's empty list of entries is stored as written: one write per lone pool, no more."""
    cluster, kube = seed_v16_cluster
    s = Scenario(kube, "eager", ["seed", "v1.6"], tmp_path / "log")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.apps}})
    with running(cluster, tmp_path / "log", s.controller, ["seed", "v1.6"], ("--behaviour", "eager-writer")):
        for o in s.objs:
            kube.create(manifest(o.pool(), s.apps))
        for o in s.objs:
            s.wait_pool(o, "pool", lambda p, o=o: ((p or {}).get("status") or {}) == {o.f.status_key: []},
                        f"status {{{o.f.status_key}: []}} on a pool no route sends to")
        s.nothing_to_write(1)
    log = (tmp_path / "log").read_text()
    for key in ("parent", "parents"):
        assert log.count(f"wrote InferencePool {s.apps}/pool status {key}=none") == 1


def test_an_api_whose_crd_is_missing_does_not_hold_up_the_other(seed_cluster, tmp_path):
    cluster, kube = seed_cluster
    s = Scenario(kube, "missing-v1", ["seed"], tmp_path / "log")
    with running(cluster, tmp_path / "log", s.controller, ["seed", "v1.6"]):
        s.set_up()
        s.wait_pool(s.any, "pool", lambda p: cond(s.entry(s.any, p), "Accepted") == ("True", "Accepted"),
                    "Accepted True although the v1 API is not served")
    assert "inference.networking.k8s.io/v1 InferencePool is not served" in (tmp_path / "log").read_text()


# -- the client -------------------------------------------------------------------

def test_client_verbs(seed_v16_cluster):
    cluster, kube = seed_v16_cluster
    objs = Objects("v1.6")
    res = objs.rev.api.resource
    client = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "client"}})
    created = kube.create(manifest(objs.pool(), "client"))
    assert client.get(res, "pool", "client")["metadata"]["uid"] == created["metadata"]["uid"]
    assert client.get(res, "nope", "client") is None
    listed = client.list(res)
    assert [i["metadata"]["name"] for i in listed["items"] if i["metadata"]["namespace"] == "client"] == ["pool"]
    # A status write with the resourceVersion read; a second one with the same (now stale) version is a 409.
    entry = {"parentRef": objs.gw_ref("gw", "client"), "conditions": []}
    written = client.replace_status(res, {**created, "status": {"parents": [entry]}})
    assert written["status"]["parents"][0]["parentRef"]["name"] == "gw"
    with pytest.raises(ApiError) as stale:
        client.replace_status(res, {**created, "status": {"parents": []}})
    assert stale.value.status == 409 and stale.value.reason == "Conflict"
    patched = client.patch_status(res, "pool", "client", {"status": {"parents": []}})
    assert patched["status"]["parents"] == []
    # A watch from the list's version sees the writes since.
    events = client.watch(res, resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=1)
    seen = [e["type"] for e in events if e["object"]["metadata"].get("namespace") == "client"]
    assert seen == ["MODIFIED", "MODIFIED"]
    with pytest.raises(ApiError) as missing:
        client.list(Resource("Nothing", "Nothing", "example.com", "v1", "nothings"))
    assert missing.value.status == 404
