"""Apply a status-test topology from manifests/status/ into a test's namespace.

The objects are applied with server-side apply (the suite's one apply helper,
`Kube.apply`), attached to the Allure report as applied, and recorded for
cleanup by the namespace fixture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import yaml

from . import conditions, evidence
from .kube import Kube
from .revisions import MANIFESTS, Revision
from .timeouts import TimeoutConfig
from .wait import wait_for

STATUS_MANIFESTS = MANIFESTS / "status"
POOL_API = "inference.networking.x-k8s.io/v1alpha2"
GATEWAY_API = "gateway.networking.k8s.io/v1"


def load(name: str, *, namespace: str, gateway_class: str) -> list[dict]:
    text = (STATUS_MANIFESTS / name).read_text().replace("{gateway_class}", gateway_class)
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    return docs


def apply(kube: Kube, docs: list[dict]) -> list[dict]:
    evidence.attach_yaml("applied manifests", docs)
    return [kube.apply(d) for d in docs]


@dataclass
class Topology:
    """A topology applied into one namespace, with the names the tests use."""

    kube: Kube
    namespace: str
    gateway_class: str
    revision: Revision
    timeouts: TimeoutConfig
    # Raises when the implementation the suite started has exited, so that no
    # wait for its status runs out its whole timeout.
    implementation_alive: Callable[[], None] | None = None

    def apply_file(self, name: str, *, skip: tuple[str, ...] = ()) -> None:
        """Apply the file's objects, leaving out those whose `Kind/name` is in `skip`."""
        docs = load(name, namespace=self.namespace, gateway_class=self.gateway_class)
        apply(self.kube, [d for d in docs if f"{d['kind']}/{d['metadata']['name']}" not in skip])

    def get_pool(self, name: str = "pool") -> dict | None:
        return self.kube.get(POOL_API, "InferencePool", name, self.namespace)

    def route(self, name: str, gateway: str, pool: str) -> dict:
        return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"parentRefs": [{"name": gateway}],
                         "rules": [{"backendRefs": [{"group": "inference.networking.x-k8s.io",
                                                     "kind": "InferencePool", "name": pool}]}]}}

    def gateway(self, name: str, gateway_class: str | None = None) -> dict:
        return {"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"gatewayClassName": gateway_class or self.gateway_class,
                         "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}

    def service(self, name: str = "picker") -> dict:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"selector": {"app": "endpoint-picker"},
                         "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": 9002}]}}

    def externalname_service(self, name: str = "picker") -> dict:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"type": "ExternalName", "externalName": "picker.example.com"}}

    def pool(self, name: str = "pool", /, **extension_ref) -> dict:
        return {"apiVersion": POOL_API, "kind": "InferencePool", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"selector": {"app": "model-server"}, "targetPortNumber": 8000,
                         "extensionRef": {"name": "picker", **extension_ref}}}

    def wait_services_seen(self) -> None:
        """Wait until the implementation has seen every Service created so far in the namespace.

        A new Service `sentinel-picker`, a pool naming it and a route to that pool:
        once that pool is ResolvedRefs True, the implementation's view of Services
        (one watch, delivered in order) includes all earlier ones. Tests that expect
        ResolvedRefs False for a reason other than a missing Service call this before
        creating their pool, so a False that only means "not seen yet" cannot pass them.
        """
        self.create(self.service("sentinel-picker"))
        self.create(self.pool("sentinel", name="sentinel-picker"))
        self.create(self.route("sentinel-route", "gateway", "sentinel"))
        self.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs", pool="sentinel")

    def create(self, obj: dict) -> dict:
        evidence.attach_yaml(f"applied {obj['kind']} {obj['metadata']['name']}", obj)
        return self.kube.apply(obj)

    def delete(self, obj_or_kind: dict | str, name: str | None = None) -> None:
        if isinstance(obj_or_kind, dict):
            api_version, kind, name = obj_or_kind["apiVersion"], obj_or_kind["kind"], obj_or_kind["metadata"]["name"]
        else:
            kind = obj_or_kind
            api_version = {"Service": "v1", "InferencePool": POOL_API}.get(kind, GATEWAY_API)
        self.kube.delete(api_version, kind, name, self.namespace)

    # -- waits -------------------------------------------------------------------

    def wait_pool(self, predicate, expected: str, pool: str = "pool", timeout: float | None = None) -> dict | None:
        return wait_for(self.kube, POOL_API, "InferencePool", pool, self.namespace, predicate,
                        timeout=timeout or self.timeouts.InferencePoolMustHaveCondition,
                        what=f"InferencePool {self.namespace}/{pool}", expected=expected,
                        guard=self.implementation_alive)

    def wait_pool_condition(self, ctype: str, status: str, reason: str | None = None, *,
                            gateway: str = "gateway", pool: str = "pool") -> dict:
        return self.wait_pool(
            conditions.pool_condition(self.revision, gateway, self.namespace, ctype, status, reason),
            conditions.describe(ctype, status, reason, gateway, self.namespace), pool=pool)

    def wait_no_pool_parent(self, gateway: str = "gateway", pool: str = "pool") -> dict | None:
        return self.wait_pool(
            lambda p: p is not None and conditions.pool_parent(p, self.revision, gateway, self.namespace) is None,
            f"no status.parent entry for Gateway {self.namespace}/{gateway}", pool=pool,
            timeout=self.timeouts.InferencePoolMustNotHaveParent)

    def wait_route_condition(self, ctype: str, status: str, reason: str | None = None, *,
                             route: str = "route", gateway: str = "gateway") -> dict:
        return wait_for(self.kube, GATEWAY_API, "HTTPRoute", route, self.namespace,
                        conditions.route_condition(gateway, ctype, status, reason),
                        timeout=self.timeouts.HTTPRouteMustHaveCondition,
                        what=f"HTTPRoute {self.namespace}/{route}",
                        expected=f"status.parents entry for Gateway {gateway} with {ctype}={status}"
                                 + (f" reason {reason}" if reason else ""),
                        guard=self.implementation_alive)
