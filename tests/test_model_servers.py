"""The status topology has model servers: Pods that every status test's pools select, running the
image --model-server-image names (also from the options file), and deleted with the rest."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from conformance import topology
from conformance.features import REFERENCE_GATEWAY_CLASS
from conformance.options import DEFAULT_MODEL_SERVER_IMAGE
from conformance.revisions import REVISIONS

from .suite_run import FAILED, PASSED, REPO, SUITE_LABEL, run_suite

POOL_API = "inference.networking.x-k8s.io/v1alpha2"
SEED = REVISIONS["seed"]
# Every test that uses the `topology` fixture is a status test.
STATUS_TESTS = sorted(str(p.relative_to(REPO)) for p in (REPO / "conformance" / "tests").glob("test_*.py")
                      if re.search(r"def test_\w+\([^)]*\btopology\b", p.read_text()))


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_model_server_pods_in_the_file():
    docs = topology.load("pool-with-route.yaml", namespace="ns", gateway_class="gc", api=SEED.api)
    pool = next(d for d in docs if d["kind"] == "InferencePool")
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["model-server-0", "model-server-1"]
    for pod in pods:
        assert selects(pool["spec"]["selector"], pod["metadata"]["labels"])
        (container,) = pod["spec"]["containers"]
        assert container["image"] == DEFAULT_MODEL_SERVER_IMAGE
        assert [p["containerPort"] for p in container["ports"]] == [pool["spec"]["targetPortNumber"]]
        assert pod["spec"]["terminationGracePeriodSeconds"] <= 1
    # The pools tests create on their own select the same Pods.
    made = topology.Topology.pool(SimpleNamespace(namespace="ns", revision=SEED))  # type: ignore[arg-type]
    assert made["spec"]["selector"] == pool["spec"]["selector"]
    assert topology.load("pool-with-route.yaml", namespace="ns", gateway_class="gc", api=SEED.api,
                         model_server_image="example.com/m:1")[0]["spec"]["containers"][0]["image"] == "example.com/m:1"


def test_every_status_test_has_pods_for_its_pools_with_the_image_of_the_options_file(live_cluster, tmp_path):
    cluster, kube = live_cluster
    assert len(STATUS_TESTS) >= 10, STATUS_TESTS
    image = "registry.example.com/models/echo:v1.2"
    (tmp_path / "options.yaml").write_text(f"model-server-image: {image}\ncleanup-test-resources: false\n")
    run = run_suite([f"--kubeconfig={cluster.kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS,
                     f"--conformance-options-file={tmp_path / 'options.yaml'}", "-n", "2", *STATUS_TESTS],
                    tmp_path / "results")
    assert run.returncode == 0 and not run.with_outcome(FAILED), run.output[-4000:]

    checked = 0
    for ns in kube.list("v1", "Namespace", None, label_selector=SUITE_LABEL)["items"]:
        name = ns["metadata"]["name"]
        pods = kube.list("v1", "Pod", name)["items"]
        if not pods and not kube.list("gateway.networking.k8s.io/v1", "HTTPRoute", name)["items"]:
            continue  # not a status test's namespace (C14's second one holds Gateways alone)
        assert sorted(p["metadata"]["name"] for p in pods) == ["model-server-0", "model-server-1"], name
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {image}
        for pool in kube.list(POOL_API, "InferencePool", name)["items"]:
            matching = [p for p in pods if selects(pool["spec"]["selector"], p["metadata"].get("labels") or {})]
            assert len(matching) == 2, f"pool {name}/{pool['metadata']['name']} selects {len(matching)} Pods"
        # The file's pool's targetPortNumber (a test may change a pool's afterwards, to move its generation).
        assert {port["containerPort"] for p in pods for c in p["spec"]["containers"] for port in c["ports"]} == {8000}
        checked += 1
    files = {Path(f).name for f in STATUS_TESTS}
    ran = [t for t in run.with_outcome(PASSED) if t.split("::")[0] in files]  # not those not-applicable here
    assert len(ran) >= len(STATUS_TESTS) - 3 and checked >= len(ran), (
        f"only {checked} status-test namespaces were kept for {len(ran)} status tests that ran")


def test_the_command_line_image_wins_and_pods_are_cleaned_up(live_cluster, tmp_path):
    cluster, kube = live_cluster
    (tmp_path / "options.yaml").write_text("model-server-image: example.com/from-the-file:v1\n")
    run = run_suite([f"--kubeconfig={cluster.kubeconfig}", "--gateway-class", REFERENCE_GATEWAY_CLASS,
                     f"--conformance-options-file={tmp_path / 'options.yaml'}",
                     "--model-server-image=example.com/from-the-command-line:v2", "--run-test=pool_accepted"],
                    tmp_path / "results")
    assert run.returncode == 0 and not run.with_outcome(FAILED), run.output[-4000:]
    applied = "\n".join(p.read_text() for p in Path(tmp_path / "results" / "allure-results").glob("*-attachment.yaml"))
    assert "image: example.com/from-the-command-line:v2" in applied
    assert "from-the-file" not in applied
    # Deleted with the test's other objects (and its namespace) before the run ended.
    assert kube.list("v1", "Pod", None)["items"] == []
