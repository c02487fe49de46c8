"""ResolvedRefs follows the Service both ways; lastTransitionTime moves with status only (C6)."""

import datetime
import time

import pytest

from conformance import conditions

# slow: it waits for the next second three times (lastTransitionTime has one-second resolution).
pytestmark = [pytest.mark.rule("C6"), pytest.mark.features("SupportInferencePool"), pytest.mark.slow]


def _condition(pool, topology, ctype):
    entry = conditions.pool_parent(pool, topology.revision, "gateway", topology.namespace)
    return conditions.find(entry["conditions"], ctype)


def _after_second_of(timestamp: str) -> None:
    # lastTransitionTime has one-second resolution: a transition within the same
    # second as the last one could not show as a new time, so let the clock
    # pass it first. This waits for the clock, not for the implementation.
    t = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    remaining = t + 1 - time.time()
    if remaining > 0:
        time.sleep(remaining)


def test_extension_ref_transitions(topology):
    topology.apply_file("pool-with-route.yaml", skip=("Service/picker",))
    pool = topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
    accepted_ltt = _condition(pool, topology, "Accepted")["lastTransitionTime"]
    previous = _condition(pool, topology, "ResolvedRefs")["lastTransitionTime"]

    for step, (status, reason) in enumerate([("True", "ResolvedRefs"), ("False", "InvalidExtensionRef"),
                                             ("True", "ResolvedRefs")]):
        _after_second_of(previous)
        if status == "True":
            topology.create(topology.service())
        else:
            topology.delete("Service", "picker")
        pool = topology.wait_pool_condition("ResolvedRefs", status, reason)
        current = _condition(pool, topology, "ResolvedRefs")["lastTransitionTime"]
        assert current != previous, (
            f"step {step + 1}: ResolvedRefs became {status} but its lastTransitionTime stayed {previous}")
        previous = current
        accepted = _condition(pool, topology, "Accepted")
        assert accepted["lastTransitionTime"] == accepted_ltt, (
            f"step {step + 1}: Accepted stayed {accepted['status']} but its lastTransitionTime moved "
            f"from {accepted_ltt} to {accepted['lastTransitionTime']}")
