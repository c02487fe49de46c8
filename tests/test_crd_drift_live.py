"""The CRD drift test (conformance/tests/test_crd_drift.py) on a real API server, run as a user runs it.

The revision's own CRD, as the API server stores it, passes; a CRD installed
with one change (loosened, tightened, or with a subresource or CEL rule more or
less) fails it with a message naming the field. Both APIs: the seed's CRD
(`inferencepools.inference.networking.x-k8s.io`) and the GA API's newest
(`inferencepools.inference.networking.k8s.io`, v1.6), each run judging the API
of its --api-revision. The comparison itself is tested on plain data, against
every mutant, in test_crd_drift_unit.py.
"""

import pytest
import yaml

from conformance.revisions import REVISIONS

from .crd_swap import install
from .suite_run import FAILED, PASSED, run_suite

DRIFT = "conformance/tests/test_crd_drift.py"
TEST = "test_crd_drift.py::test_installed_crd_matches_revision"
# The test runs once per judged API, the API's name in its id.
TEST_V1ALPHA2, TEST_V1 = f"{TEST}[v1alpha2]", f"{TEST}[v1]"


def _seed() -> dict:
    return yaml.safe_load(REVISIONS["seed"].crd.read_text())


def _ga() -> dict:
    return yaml.safe_load(REVISIONS["v1.6"].crd.read_text())


def _props(crd: dict, *path: str) -> dict:
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for name in path:
        node = node["properties"][name]
    return node


def _raise_maximum(crd):
    _props(crd, "spec", "targetPortNumber")["maximum"] = 65536


def _drop_fail_open(crd):
    # (FailClose stays: the API server refuses a default outside the enum)
    _props(crd, "spec", "extensionRef", "failureMode")["enum"] = ["FailClose"]


def _no_status_subresource(crd):
    del crd["spec"]["versions"][0]["subresources"]


def _cel_rule(crd):
    _props(crd, "spec", "extensionRef")["x-kubernetes-validations"] = [
        {"rule": "self.kind != 'ExternalName'", "message": "no ExternalName"}]


def _no_unique_ports(crd):
    del _props(crd, "spec", "targetPorts")["x-kubernetes-validations"]


def _more_labels(crd):
    _props(crd, "spec", "selector", "matchLabels")["maxProperties"] = 128


def _picker_required(crd):
    _props(crd, "spec")["required"].append("endpointPickerRef")


def _run(cluster, tmp_path, revision="seed"):
    return run_suite([f"--kubeconfig={cluster.kubeconfig}", "--api-revision", revision, DRIFT], tmp_path, timeout=300)


def test_the_revisions_own_crd_passes(cluster, kube, tmp_path):
    assert install(kube, _seed()) is None
    run = _run(cluster, tmp_path)
    assert run.returncode == 0 and run.outcomes == {TEST_V1ALPHA2: PASSED}, run.output[-3000:]


@pytest.mark.parametrize(("edit", "named"), [
    (_raise_maximum, "spec.targetPortNumber: maximum is 65536 where revision seed has 65535"),
    (_drop_fail_open,
     "spec.extensionRef.failureMode: enum is [FailClose] where revision seed has [FailClose, FailOpen]"),
    (_no_status_subresource, "version v1alpha2: no status subresource where revision seed has it"),
    (_cel_rule, "spec.extensionRef: CEL rule \"self.kind != 'ExternalName'\" where revision seed has no such rule"),
], ids=["maximum-raised", "enum-lost-a-value", "no-status-subresource", "cel-rule-added"])
def test_a_changed_crd_fails_naming_the_field(cluster, kube, tmp_path, edit, named):
    crd = _seed()
    edit(crd)
    assert install(kube, crd) is None
    run = _run(cluster, tmp_path)
    assert run.returncode == 1 and run.outcomes == {TEST_V1ALPHA2: FAILED}, run.output[-3000:]
    assert "differs from API revision seed" in run.output and f"  {named}\n" in run.output, run.output[-3000:]
    # One difference: nothing the API server added to the stored CRD shows as drift.
    assert "in 1 place of its validation" in run.output, run.output[-3000:]


def test_the_ga_revisions_own_crd_passes(cluster, kube, tmp_path):
    assert install(kube, _ga()) is None
    run = _run(cluster, tmp_path, "v1.6")
    assert run.returncode == 0 and run.outcomes == {TEST_V1: PASSED}, run.output[-3000:]


@pytest.mark.parametrize(("edit", "named"), [
    (_no_unique_ports, 'spec.targetPorts: no CEL rule "self.all(p1, self.exists_one(p2, p1.number==p2.number))" '
                       "where revision v1.6 has it"),
    (_more_labels, "spec.selector.matchLabels: maxProperties is 128 where revision v1.6 has 64"),
    (_picker_required, "spec: required is [endpointPickerRef, selector, targetPorts] where revision v1.6 has "
                       "[selector, targetPorts]"),
], ids=["cel-rule-dropped", "maxProperties-raised", "required-field-added"])
def test_a_changed_ga_crd_fails_naming_the_field(cluster, kube, tmp_path, edit, named):
    crd = _ga()
    edit(crd)
    assert install(kube, crd) is None
    run = _run(cluster, tmp_path, "v1.6")
    assert run.returncode == 1 and run.outcomes == {TEST_V1: FAILED}, run.output[-3000:]
    assert "differs from API revision v1.6" in run.output and f"  {named}\n" in run.output, run.output[-3000:]
    assert "in 1 place of its validation" in run.output, run.output[-3000:]
