"""The traffic tier as the suite runs it on the embedded default: the data plane comes up with the
implementation and the traffic tests pass on both APIs (the seed and v1.6), but for T8's target ports
and h2c, whose fields v1alpha2 lacks, and T8's default picker port, which only v1alpha2 leaves open:
elsewhere they are not-applicable; --skip-traffic leaves the tier out, says why, and starts no data
plane."""

from __future__ import annotations

import pytest

from conformance.traffic import netns

from .. import suite_run
from ..suite_run import PASSED, SKIPPED, run_suite

pytestmark = pytest.mark.skipif(bool(netns.available()), reason=netns.available() or "")
V1_ONLY = ["test_target_ports", "test_h2c_pool"]
V1ALPHA2_ONLY = ["test_default_picker_port"]
BOTH = ["test_epp_routing", "test_served_endpoint", "test_fail_close", "test_fail_open", "test_route_removed_traffic",
        "test_not_ready_pod", "test_rules_to_pools", "test_gateways_to_pools", "test_weighted_pools",
        "test_externalname_traffic"]
TESTS = [*BOTH, *V1_ONLY, *V1ALPHA2_ONLY]
SELECT = ["-k", " or ".join(TESTS)]


def ids(api: str, tests: list[str] = TESTS) -> set[str]:
    return {suite_run.with_api(f"{t}.py::{t}", api) for t in tests}


def test_traffic_tests_pass_on_the_embedded_default(tmp_path):
    run = run_suite(["-n", "2", *SELECT], tmp_path)
    assert run.returncode == 0, run.output[-4000:]
    assert "traffic data plane ready in" in run.output, run.output[-2000:]
    passed = ids("v1", BOTH + V1_ONLY) | ids("v1alpha2", BOTH + V1ALPHA2_ONLY)
    assert passed <= run.with_outcome(PASSED), run.outcomes
    assert ids("v1alpha2", V1_ONLY) | ids("v1", V1ALPHA2_ONLY) <= run.with_outcome(SKIPPED), run.outcomes
    assert "SHOULD not met" not in run.output


def test_skip_traffic_starts_no_data_plane(tmp_path):
    run = run_suite(["-n", "2", *SELECT, "--skip-traffic", "-rs"], tmp_path)
    assert run.returncode == 0, run.output[-4000:]
    assert "traffic data plane ready" not in run.output
    assert ids("v1") | ids("v1alpha2") <= run.with_outcome(SKIPPED), run.outcomes
    assert "the traffic tier is off (--skip-traffic)" in run.output, run.output[-3000:]
