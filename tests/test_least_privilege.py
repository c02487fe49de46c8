"""The suite needs exactly the rights in manifests/rbac/clusterrole.yaml, and never
writes a credential into what it leaves behind.

The whole suite runs against an embedded cluster with both InferencePool APIs
installed (the seed's v1alpha2 and the GA API's newest), as a ServiceAccount bound only
to that ClusterRole (as manifests/rbac/binding.yaml sets it up for CI), with the
API server's audit log on. The run must pass; the audit log must show no
request refused and every verb of the role used; and no file of the run's
results (reports, JUnit, Allure results and attachments, the HTML page) nor its
output may hold the token, the CA data or a private key.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.data import MANIFESTS
from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.kube import Kube, resource_of
from conformance.revisions import DEFAULTS, GATEWAY_API_CRDS, REVISIONS

from .suite_run import FAILED, reference_gateway_class, run_suite, start_reference, stop

RBAC = MANIFESTS / "rbac"
NAMESPACE = SERVICE_ACCOUNT = "inferencepool-conformance"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
COLLECTIONS = {"Namespace": "/api/v1/namespaces", "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
               "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
               "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"}
REPORT_META = ["--organization=acme", "--project=gw", "--url=https://example.com/gw", "--contact=@acme/gw",
               "--implementation-version=v1.0.0"]


def role_grants() -> set[tuple[str, str, str]]:
    """(API group, resource[/subresource], verb) for every verb the ClusterRole lists."""
    role = yaml.safe_load((RBAC / "clusterrole.yaml").read_text())
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def traffic_needs() -> set[tuple[str, str, str]]:
    """What the traffic tier needs on a user's cluster, read from its manifests: each kind it applies
    (server-side apply), waits for and deletes; every right its Roles grant (RBAC lets an identity grant
    only what it holds); and the readiness gate it writes into a Pod's status (rule T7)."""
    needs = {("", "pods/status", "patch")}
    for path in sorted((MANIFESTS / "traffic").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            api_version = {"InferencePool": "inference.networking.k8s.io/v1"}.get(doc["kind"], doc["apiVersion"])
            resource = resource_of({"apiVersion": api_version, "kind": doc["kind"]})
            needs |= {(resource.group, resource.plural, verb)
                      for verb in ("create", "delete", "get", "list", "patch", "watch")}
            if doc["kind"] == "Role":
                needs |= {(group, res, verb) for rule in doc["rules"] for group in rule["apiGroups"]
                          for res in rule["resources"] for verb in rule["verbs"]}
    return needs


def test_role_grants_what_the_traffic_tier_needs():
    """The traffic tier does not run in the audited run below (its cluster runs no Pods): what it needs
    is read from its manifests instead."""
    missing = sorted(traffic_needs() - role_grants())
    assert not missing, f"manifests/rbac/clusterrole.yaml lacks what the traffic tier needs: {missing}"


def audited(log: Path) -> list[dict]:
    return [e for e in map(json.loads, log.read_text().splitlines())
            if e.get("user", {}).get("username") == USER and e.get("stage") == "ResponseComplete"]


@pytest.fixture(scope="module")
def restricted(tmp_path_factory):
    """(cluster, kubeconfig of the ServiceAccount bound only to the ClusterRole, audit log)."""
    d = tmp_path_factory.mktemp("least-privilege")
    policy, log = d / "audit-policy.yaml", d / "audit.log"
    policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                      "omitStages": ["RequestReceived"],
                                      "rules": [{"level": "Metadata", "users": [USER]}, {"level": "None"}]}))
    with EmbeddedCluster(crd_paths=[*(REVISIONS[r].crd for r in DEFAULTS), GATEWAY_API_CRDS],
                         apiserver_args=[f"--audit-policy-file={policy}", f"--audit-log-path={log}"]) as cluster:
        admin = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        for path in (RBAC / "clusterrole.yaml", RBAC / "binding.yaml"):
            for doc in yaml.safe_load_all(path.read_text()):
                admin.request("POST", COLLECTIONS[doc["kind"]].format(ns=doc["metadata"].get("namespace")), body=doc)
        token = admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                              body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                    "spec": {"expirationSeconds": 3600}})["status"]["token"]
        ca_data = base64.b64encode(Path(cluster.kubeconfig).parent.joinpath("ca.crt").read_bytes()).decode()
        kubeconfig = d / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "runner",
            "clusters": [{"name": "embedded", "cluster": {"server": cluster.server,
                                                          "certificate-authority-data": ca_data}}],
            "users": [{"name": "runner", "user": {"token": token}}],
            "contexts": [{"name": "runner", "context": {"cluster": "embedded", "user": "runner"}}]}))
        kubeconfig.chmod(0o600)
        reference_gateway_class(admin)
        first, *others = DEFAULTS
        implementation = start_reference(cluster.kubeconfig, d / "implementation.log", first,
                                         extra_args=[a for r in others for a in ("--api-revision", r)])
        try:
            yield kubeconfig, log, {"token": token, "CA data": ca_data}
        finally:
            stop(implementation)


def test_whole_suite_passes_with_only_the_role(restricted, tmp_path):
    kubeconfig, log, secrets = restricted
    run = run_suite([f"--kubeconfig={kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS, "-n", "2",
                     *REPORT_META], tmp_path)
    assert run.returncode == 0, run.output[-4000:]
    assert len(run.outcomes) >= 500 and not run.with_outcome(FAILED)

    events = audited(log)
    refused = sorted({(e["verb"], e["requestURI"]) for e in events if e["responseStatus"]["code"] == 403})
    assert not refused, f"requests the role did not allow: {refused}"
    used = set()
    for e in events:
        ref = e.get("objectRef")
        if ref:
            resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            used.add((ref.get("apiGroup", ""), resource, e["verb"]))
            if e["verb"] == "patch" and e["responseStatus"]["code"] == 201:  # an apply that created
                used.add((ref.get("apiGroup", ""), resource, "create"))
    # A passing run need not list nor watch (each wait reads its object first, lists only when it is
    # absent, and watches only when the read does not show the awaited state), nor read events
    # (failure evidence). Nor can it use what only the traffic tier needs (left out here:
    # test_role_grants_what_the_traffic_tier_needs).
    unused = sorted(g for g in role_grants() - used - traffic_needs() if g[2] not in ("list", "watch"))
    assert not unused, f"the ClusterRole grants what the suite never uses: {unused}"
    assert {("inference.networking.x-k8s.io", "inferencepools", "watch"),
            ("inference.networking.k8s.io", "inferencepools", "watch")} <= used

    # Nothing the run wrote or printed holds a credential.
    leaks = []
    needles = {**secrets, "private key": "PRIVATE KEY", "kubeconfig user data": "client-key-data"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "report.html" for p in files) and any(p.suffix == ".yaml" for p in files)
    for path in files:
        text = path.read_bytes().decode(errors="replace")
        leaks += [f"{path.relative_to(tmp_path)}: {what}" for what, needle in needles.items() if needle in text]
    leaks += [f"output: {what}" for what, needle in needles.items() if needle in run.output]
    assert not leaks, leaks
