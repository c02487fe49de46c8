"""Apply a status-test topology from manifests/status/ into a test's namespace, and wait on it.

The objects are applied with server-side apply (the suite's one apply helper,
`Kube.apply`), attached to the Allure report as applied, and recorded for
cleanup by the namespace fixture.

Every change a test makes goes through a `Topology`, which remembers the
resourceVersion of the last one: a status write after it is the
implementation's answer to the state the test set up, and a wrong answer that
stands still ends the wait early (`wait.Settle`). When a wait fails, the
topology says why in terms of what the test rests on: a precondition that
did not hold (the Gateway not Accepted, the route not Accepted, the sentinel
pool not resolved) is named as such, and an implementation that has written
no InferencePool status at all is said to be silent, after which the
remaining pool waits get only a short grace instead of their whole timeout.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from . import conditions
from .data import MANIFESTS
from .kube import Kube
from .options import DEFAULT_MODEL_SERVER_IMAGE
from .results import evidence
from .revisions import Api, Revision
from .timeouts import TimeoutConfig
from .wait import Settle, WaitSettled, WaitTimeout, wait_for

STATUS_MANIFESTS = MANIFESTS / "status"
GATEWAY_API = "gateway.networking.k8s.io/v1"
# How the one line begins that says the implementation wrote no InferencePool status at all.
SILENT = "the implementation wrote no InferencePool status for any pool"
_API_VERSIONS = {"Service": "v1", "Pod": "v1"}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(name: str, *, namespace: str, gateway_class: str, api: Api,
         model_server_image: str = DEFAULT_MODEL_SERVER_IMAGE) -> list[dict]:
    """The file's objects in `namespace`; pools (written in the GA API's shape) as `api` spells
    them, and `{inference_group}` (an HTTPRoute's backendRef group) as `api`'s group."""
    docs = json.loads(_template(name, gateway_class, api, model_server_image))
    for d in docs:
        d["metadata"]["namespace"] = d["metadata"].get("namespace") or namespace
    return docs


@functools.lru_cache(maxsize=32)
def _template(name: str, gateway_class: str, api: Api, model_server_image: str) -> str:
    """The file's objects before they get a namespace, as JSON: read and parsed once per run (each
    status test applies one), handed out as fresh copies."""
    text = (STATUS_MANIFESTS / name).read_text().replace("{gateway_class}", gateway_class).replace(
        "{model_server_image}", model_server_image).replace("{inference_group}", api.group)
    return json.dumps([api.spell_pool(d) if d.get("kind") == "InferencePool" else d
                       for d in yaml.load_all(text, Loader=_Loader) if d])


def apply(kube: Kube, docs: list[dict]) -> list[dict]:
    """Apply a file's objects one after another, in the file's order.

    An implementation may see them in any order, but the order they are written
    in is part of what a test does: a pool created after the route that names it,
    or a Service created before its pool, is a different sequence of events, and
    a defect that shows in one and not the other must be caught every run, not
    in whichever order concurrent requests happen to land."""
    evidence.attach_yaml("applied manifests", docs)
    return [kube.apply(d) for d in docs]


class PreconditionFailed(AssertionError):
    """A step the test rests on failed: the test says nothing about its own rule."""

    def __init__(self, step: str, rule: str, cause: str) -> None:
        self.step, self.rule = step, rule
        super().__init__(f"precondition failed (rule {rule}): {step}; {cause}")


class ImplementationSilent(AssertionError):
    """The implementation wrote no InferencePool status at all: no status test can pass."""


@dataclass
class Silence:
    """Whether the implementation has written InferencePool status at all in this run (one per process).

    Declared by the first pool wait that times out before any implementation
    entry was ever seen. From then on a pool wait gives the implementation only
    a short grace (twice the settle window) to write anything, and fails with
    the silence as its reason; the first entry seen lifts it.
    """

    seen: bool = False
    declared: str | None = None

    def saw(self, pool: dict | None, revision: Revision, ignore: list[dict]) -> None:
        if not self.seen and conditions.implementation_entries(pool, revision, ignore):
            self.seen, self.declared = True, None

    @property
    def silent(self) -> bool:
        return self.declared is not None and not self.seen


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
    silence: Silence = field(default_factory=Silence)
    model_server_image: str = DEFAULT_MODEL_SERVER_IMAGE  # of the Pods the pools select
    # The resourceVersion and time of the test's last change to the cluster.
    _after_version: int | None = field(default=None, init=False)
    _changed_at: float = field(default_factory=time.monotonic, init=False)
    # Pool entries the suite wrote itself (another controller's, played by the test).
    _suite_entries: list[dict] = field(default_factory=list, init=False)

    # -- changes -----------------------------------------------------------------

    def _changed(self, *written: dict | None) -> None:
        """Remember the last change: the highest resourceVersion the server answered with.

        A delete answered with a Status, or found nothing to delete, carries no
        version; a list made afterwards carries one at least as recent (a later
        value only makes the early end of a wait more cautious, never less).
        """
        versions = [((w or {}).get("metadata") or {}).get("resourceVersion") for w in written]
        if not all(versions):
            pools = self.kube.list(self.pool_api, "InferencePool", self.namespace)
            versions.append(pools["metadata"]["resourceVersion"])
        try:
            latest = max(int(v) for v in versions if v)
        except ValueError:
            latest = None  # not etcd revisions: waits run to their timeout
        self._after_version = latest if latest is None or self._after_version is None else max(
            latest, self._after_version)
        self._changed_at = time.monotonic()

    def apply_file(self, name: str, *, skip: tuple[str, ...] = ()) -> None:
        """Apply the file's objects, leaving out those whose `Kind/name` is in `skip`."""
        docs = load(name, namespace=self.namespace, gateway_class=self.gateway_class, api=self.revision.api,
                    model_server_image=self.model_server_image)
        self._changed(*apply(self.kube, [d for d in docs if f"{d['kind']}/{d['metadata']['name']}" not in skip]))

    def create(self, obj: dict) -> dict:
        evidence.attach_yaml(f"applied {obj['kind']} {obj['metadata']['name']}", obj)
        written = self.kube.apply(obj)
        self._changed(written)
        return written

    def patch(self, kind: str, name: str, patch: dict) -> dict:
        """Merge-patch an object of the test (a spec change of the pool moves its generation)."""
        written = self.kube.patch(self._api_version(kind), kind, name, patch, namespace=self.namespace)
        self._changed(written)
        return written

    def add_pool_parents(self, entries: list[dict], name: str = "pool") -> dict:
        """Add `entries` to the pool's status as another controller would: a full update of /status
        against the version just read (read again when the implementation wrote in between)."""
        def write(pool: dict) -> dict:
            pool.setdefault("status", {}).setdefault(self.status_key, []).extend(entries)
            return self.kube.replace(pool, subresource="status")
        _, written = self.kube.write_latest(self.pool_api, "InferencePool", name, self.namespace, write)
        self._suite_entries += [e for e in conditions.pool_parents(written) if e in entries
                                or any(e.get("parentRef", {}).get("name") == s.get("parentRef", {}).get("name")
                                       for s in entries)]
        self._changed(written)
        return written

    def delete(self, obj_or_kind: dict | str, name: str | None = None) -> None:
        if isinstance(obj_or_kind, dict):
            api_version, kind, name = obj_or_kind["apiVersion"], obj_or_kind["kind"], obj_or_kind["metadata"]["name"]
        else:
            kind = obj_or_kind
            api_version = self._api_version(kind)
        self._changed(self.kube.delete(api_version, kind, name, self.namespace))

    def get_pool(self, name: str = "pool") -> dict | None:
        return self.kube.get(self.pool_api, "InferencePool", name, self.namespace)

    def patch_pool_port(self, port: int, name: str = "pool") -> dict:
        """Set the pool's one target port (a spec change: the pool's generation moves)."""
        return self.patch("InferencePool", name, self.revision.api.target_port_patch(port))

    @property
    def pool_api(self) -> str:
        """The apiVersion of the pools of the API under test."""
        return self.revision.api.api_version

    @property
    def status_key(self) -> str:
        """The pool's list of parent entries: `parent` (v1alpha2) or `parents` (v1)."""
        return self.revision.api.status_key

    def _api_version(self, kind: str) -> str:
        return self.pool_api if kind == "InferencePool" else _API_VERSIONS.get(kind, GATEWAY_API)

    # -- objects -------------------------------------------------------------------

    def route(self, name: str, gateway: str, pool: str, gateway_namespace: str | None = None) -> dict:
        parent = {"name": gateway} if gateway_namespace is None else {"name": gateway, "namespace": gateway_namespace}
        return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"parentRefs": [parent],
                         "rules": [{"backendRefs": [{"group": self.revision.api.group,
                                                     "kind": "InferencePool", "name": pool}]}]}}

    def gateway(self, name: str, gateway_class: str | None = None, namespace: str | None = None) -> dict:
        """A Gateway of the class under test (or `gateway_class`); in another `namespace`, it takes
        routes from every namespace."""
        listener = {"name": "http", "protocol": "HTTP", "port": 80}
        if namespace is not None:
            listener["allowedRoutes"] = {"namespaces": {"from": "All"}}
        return {"apiVersion": GATEWAY_API, "kind": "Gateway",
                "metadata": {"name": name, "namespace": namespace or self.namespace},
                "spec": {"gatewayClassName": gateway_class or self.gateway_class, "listeners": [listener]}}

    def controller_name(self) -> str | None:
        """The spec.controllerName of the GatewayClass under test."""
        gwc = self.kube.get(GATEWAY_API, "GatewayClass", self.gateway_class)
        return ((gwc or {}).get("spec") or {}).get("controllerName")

    def service(self, name: str = "picker") -> dict:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"selector": {"app": "endpoint-picker"},
                         "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": 9002}]}}

    def externalname_service(self, name: str = "picker") -> dict:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"type": "ExternalName", "externalName": "picker.example.com"}}

    def pool(self, name: str = "pool", /, picker: bool = True, **picker_ref) -> dict:
        """A pool selecting the model servers, its endpoint picker reference naming Service
        `picker` (port 9002) with `picker_ref` over it (GA names: name, group, kind, port, failureMode);
        without one when `picker` is False."""
        spec = {"selector": {"matchLabels": {"app": "model-server"}}, "targetPorts": [{"number": 8000}]}
        if picker:
            spec["endpointPickerRef"] = {"name": "picker", "port": {"number": 9002}, **picker_ref}
        return self.revision.api.spell_pool({"kind": "InferencePool",
                                             "metadata": {"name": name, "namespace": self.namespace}, "spec": spec})

    # -- waits -------------------------------------------------------------------

    def _settle(self) -> Settle:
        return Settle(self.timeouts.StatusSettleWindow, self._after_version, self._changed_at)

    def wait_pool(self, judge, expected: str, pool: str = "pool", timeout: float | None = None) -> dict | None:
        """Wait until `judge` (a Judgement or a bool) holds for the pool."""
        def observed(obj: dict | None):
            self.silence.saw(obj, self.revision, self._suite_entries)
            return judge(obj)

        timeout = timeout or self.timeouts.InferencePoolMustHaveCondition
        silent = self.silence.silent
        if silent:  # a short grace, in case this pool is the first the implementation answers
            timeout = min(timeout, 2 * self.timeouts.StatusSettleWindow)
        try:
            return wait_for(self.kube, self.pool_api, "InferencePool", pool, self.namespace, observed,
                            timeout=timeout, what=f"InferencePool {self.namespace}/{pool}", expected=expected,
                            guard=self.implementation_alive, settle=self._settle())
        except WaitTimeout as e:
            if not isinstance(e, WaitSettled) and not self.silence.seen:
                if not silent:
                    self.silence.declared = (
                        f"{SILENT} within {timeout:g}s "
                        f"(is InferencePool support enabled in it, for GatewayClass {self.gateway_class}?)")
                raise ImplementationSilent(f"{self.silence.declared}; {e.headline()}") from None
            raise

    def wait_pool_condition(self, ctype: str, status: str, reason: str | None = None, *,
                            gateway: str = "gateway", pool: str = "pool", gateway_namespace: str | None = None) -> dict:
        """Wait until the pool's entry for the Gateway (in the test's namespace, or `gateway_namespace`)
        has the latest condition ctype=status (reason)."""
        gateway_namespace = gateway_namespace or self.namespace
        judge = conditions.judge_pool_condition(self.revision, gateway, gateway_namespace, ctype, status, reason,
                                                ignore=self._suite_entries)
        try:
            return self.wait_pool(judge, conditions.describe(ctype, status, reason, gateway, gateway_namespace,
                                                             self.status_key),
                                  pool=pool)
        except WaitTimeout as e:
            self._check_preconditions(gateway, pool, e)
            raise

    def wait_no_pool_parent(self, gateway: str = "gateway", pool: str = "pool") -> dict | None:
        return self.wait_pool(conditions.judge_no_pool_parent(self.revision, gateway, self.namespace),
                              f"no status.{self.status_key} entry for Gateway {self.namespace}/{gateway}", pool=pool,
                              timeout=self.timeouts.InferencePoolMustNotHaveParent)

    def wait_no_implementation_entry(self, pool: str = "pool") -> dict | None:
        """The pool has no entry of any implementation left: no parent at all, or only the CRD's
        placeholder (GIE's own suite demands an empty list after the last route goes; the
        placeholder is what the CRD's status default would show, so both are read as conformant)."""
        def judge(obj: dict | None) -> conditions.Judgement:
            if obj is None:
                return conditions.Judgement(("the InferencePool does not exist",))
            left = conditions.implementation_entries(obj, self.revision, self._suite_entries)
            return conditions.Judgement(tuple(
                f"status.{self.status_key} still has an entry for {(e.get('parentRef') or {}).get('name')!r}"
                for e in left),
                answered=bool(left))
        return self.wait_pool(judge, f"no status.{self.status_key} entry of any implementation "
                                     "(none, or only the placeholder)",
                              pool=pool, timeout=self.timeouts.InferencePoolMustNotHaveParent)

    def wait_route_condition(self, ctype: str, status: str, reason: str | None = None, *,
                             route: str = "route", gateway: str = "gateway") -> dict:
        return wait_for(self.kube, GATEWAY_API, "HTTPRoute", route, self.namespace,
                        conditions.judge_route_condition(gateway, self.namespace, ctype, status, reason),
                        timeout=self.timeouts.HTTPRouteMustHaveCondition,
                        what=f"HTTPRoute {self.namespace}/{route}",
                        expected=f"status.parents entry for Gateway {gateway} with {ctype}={status}"
                                 + (f" reason {reason}" if reason else ""),
                        guard=self.implementation_alive, settle=self._settle())

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
        try:
            self.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs", pool="sentinel")
        except PreconditionFailed:
            raise
        except WaitTimeout as e:
            raise PreconditionFailed(
                "the sentinel pool, which shows that the implementation has seen the Services, did not get "
                "ResolvedRefs True", "C3", e.headline()) from None

    # -- why a wait failed --------------------------------------------------------

    def _read(self, api_version: str, kind: str, name: str) -> dict | None:
        items = self.kube.list(api_version, kind, self.namespace, field_selector=f"metadata.name={name}")["items"]
        return items[0] if items else None

    def _check_preconditions(self, gateway: str, pool: str, failure: WaitTimeout) -> None:
        """Raise PreconditionFailed when what a pool's entry rests on does not hold."""
        gw = self._read(GATEWAY_API, "Gateway", gateway)
        if gw is not None and gw["spec"].get("gatewayClassName") == self.gateway_class:
            accepted = conditions.find((gw.get("status") or {}).get("conditions"), "Accepted")
            if not conditions.matches(accepted, "True", None, gw["metadata"].get("generation")):
                seen = "no Accepted condition" if accepted is None else \
                    f"Accepted {accepted.get('status')} reason {accepted.get('reason')}"
                raise PreconditionFailed(f"Gateway {self.namespace}/{gateway} is not Accepted ({seen})",
                                         "C1", failure.headline()) from None
            routes = [r for r in self.kube.list(GATEWAY_API, "HTTPRoute", self.namespace)["items"]
                      if any(b.get("kind") == "InferencePool" and b.get("name") == pool
                             for rule in r["spec"].get("rules") or [] for b in rule.get("backendRefs") or [])
                      and any(p.get("name") == gateway for p in r["spec"].get("parentRefs") or [])]
            if routes and not any(conditions.route_condition(gateway, "Accepted", "True")(r) for r in routes):
                names = ", ".join(r["metadata"]["name"] for r in routes)
                raise PreconditionFailed(f"HTTPRoute {names} to pool {pool} is not Accepted by Gateway "
                                         f"{self.namespace}/{gateway}", "C13", failure.headline()) from None
