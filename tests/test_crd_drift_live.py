"""The CRD drift test (conformance/tests/test_crd_drift.py) on a real API server, run as a user runs it.

The revision's own CRD, as the API server stores it, passes; a CRD installed
with one change (loosened, tightened, or with a subresource or CEL rule more or
less) fails it with a message naming the field. The comparison itself is tested
on plain data, against every mutant, in test_crd_drift_unit.py.
"""

import pytest
import yaml

from conformance.revisions import REVISIONS

from .crd_swap import install
from .suite_run import FAILED, PASSED, run_suite

DRIFT = "conformance/tests/test_crd_drift.py"
TEST = "test_crd_drift.py::test_installed_crd_matches_revision"


def _seed() -> dict:
    return yaml.safe_load(REVISIONS["seed"].crd.read_text())


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


def _run(cluster, tmp_path):
    return run_suite([f"--kubeconfig={cluster.kubeconfig}", "--api-revision", "seed", DRIFT], tmp_path, timeout=300)


def test_the_revisions_own_crd_passes(cluster, kube, tmp_path):
    assert install(kube, _seed()) is None
    run = _run(cluster, tmp_path)
    assert run.returncode == 0 and run.outcomes == {TEST: PASSED}, run.output[-3000:]


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
    assert run.returncode == 1 and run.outcomes == {TEST: FAILED}, run.output[-3000:]
    assert "differs from API revision seed" in run.output and f"  {named}\n" in run.output, run.output[-3000:]
    # One difference: nothing the API server added to the stored CRD shows as drift.
    assert "in 1 place of its validation" in run.output, run.output[-3000:]
