"""The traffic tier as it runs on a user's cluster: given --kubeconfig and --gateway-class, the suite
starts no data plane of its own; it deploys the traffic manifests with its default images, waits for
the cluster's kubelet to run them, and sends its requests to the address in the Gateway's status, as
it is. No cluster of an implementer can be reached from here, so this test builds one the suite
cannot tell from it: an embedded cluster whose Pods a kubelet stand-in runs (the default images are
what it knows), a real Envoy, and the reference implementation as the gateway controller, all inside
one network sandbox (conformance.traffic.embedded.DataPlane), the implementation started by this test
as an implementer starts theirs. The suite runs inside that sandbox too, as a CI job runs where the
Gateway's address is routable: the addresses exist only there, so a request that reached them from
anywhere else could not be answered.

What it proves: the user's path (the Gateway's address, no bridge, images by option, the picker and
model servers waited for through their Pods' status) judges T1-T8 as the embedded default does, on
both APIs; and the suite leaves nothing behind in a cluster it does not own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.features import REFERENCE_CONTROLLER, REFERENCE_GATEWAY_CLASS
from conformance.kube import Kube
from conformance.options import DEFAULT_MODEL_SERVER_IMAGE
from conformance.revisions import REVISIONS
from conformance.traffic import netns
from conformance.traffic.embedded import DataPlane

from ..suite_run import PASSED, PYTEST, REPO, SKIPPED, SUITE_LABEL, clean_env, finished, reference_gateway_class
from .test_tier_in_the_suite import BOTH, SELECT, V1_ONLY, V1ALPHA2_ONLY, ids

pytestmark = [pytest.mark.skipif(bool(netns.available()), reason=netns.available() or ""), pytest.mark.slow]

JUDGED = ("seed", "v1.6")  # the embedded default's revisions, one per API
RUN_TIMEOUT = 600


def _suite_namespaces(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in kube.list("v1", "Namespace", label_selector=SUITE_LABEL)["items"]]


def test_traffic_tests_pass_on_a_users_cluster(tmp_path):
    crds = list(dict.fromkeys(p for r in JUDGED for p in REVISIONS[r].embedded_crds))
    with EmbeddedCluster(crd_paths=crds) as cluster, \
            DataPlane(cluster.server, cluster.kubeconfig, model_server_image=DEFAULT_MODEL_SERVER_IMAGE) as plane:
        kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        argv = [sys.executable, "-m", "reference_gateway", "--kubeconfig", str(cluster.kubeconfig),
                "--controller-name", REFERENCE_CONTROLLER, "--epp-tls", "--envoy-config-dir", str(plane.envoy_dir),
                *(a for r in JUDGED for a in ("--api-revision", r)),
                *(a for address in plane.gateway_addresses for a in ("--gateway-address", address))]
        with open(tmp_path / "reference.log", "wb") as log:
            plane.start_implementation(argv, cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT)
        reference_gateway_class(kube)
        results = tmp_path / "results"
        out_path = tmp_path / "suite.log"
        with open(out_path, "wb") as out:
            suite = plane.sandbox.popen(
                [*PYTEST, f"--results-dir={results}", f"--kubeconfig={cluster.kubeconfig}",
                 f"--gateway-class={REFERENCE_GATEWAY_CLASS}", "-n", "2", *SELECT],
                cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        run = finished(suite, out_path, results, RUN_TIMEOUT)
        output = run.output
        assert run.returncode == 0, f"exit {run.returncode}:\n{output[-4000:]}"
        passed = ids("v1", BOTH + V1_ONLY) | ids("v1alpha2", BOTH + V1ALPHA2_ONLY)
        assert passed <= run.with_outcome(PASSED), run.outcomes
        assert ids("v1alpha2", V1_ONLY) | ids("v1", V1ALPHA2_ONLY) <= run.with_outcome(SKIPPED), run.outcomes
        assert "traffic data plane ready" not in output, "the suite started a data plane on a user's cluster"
        assert "SHOULD not met" not in output, output[-3000:]
        assert _suite_namespaces(kube) == [], "the suite left namespaces behind"
