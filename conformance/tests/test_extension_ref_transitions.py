"""ResolvedRefs follows the Service both ways; lastTransitionTime moves with status only (C6).

Two pools behind one Gateway, their pickers' Services out of step: `pool` starts with its Service,
`other` without. Each step deletes the Service that is there and creates the one that is not, so two
steps show each direction twice: a pool resolving its Service from the start (`other`) and again
after losing it (`pool`), and a pool losing it (both). A step first lets the clock pass the last
transition (lastTransitionTime has one-second resolution): two such waits, not three for one pool.
"""

import datetime
import time

import pytest

from conformance import conditions

# slow: it waits for the next second twice.
pytestmark = [pytest.mark.rule("C6"), pytest.mark.features("SupportInferencePool"), pytest.mark.slow]

SERVICES = {"pool": "picker", "other": "other-picker"}  # each pool's endpoint picker Service
RESOLVED, UNRESOLVED = ("True", "ResolvedRefs"), ("False", "InvalidExtensionRef")


def _condition(pool, topology, ctype):
    entry = conditions.pool_parent(pool, topology.revision, "gateway", topology.namespace)
    return conditions.find(entry["conditions"], ctype)


def _after_second_of(timestamps) -> None:
    # lastTransitionTime has one-second resolution: a transition within the same
    # second as the last one could not show as a new time, so let the clock
    # pass it first. This waits for the clock, not for the implementation.
    t = max(datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() for s in timestamps)
    remaining = t + 1 - time.time()
    if remaining > 0:
        time.sleep(remaining)


def test_extension_ref_transitions(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.create(topology.pool("other", name=SERVICES["other"]))
    topology.create(topology.route("other-route", "gateway", "other"))
    state = {"pool": RESOLVED, "other": UNRESOLVED}
    pools = {name: topology.wait_pool_condition("ResolvedRefs", *state[name], pool=name) for name in state}
    accepted = {name: _condition(pool, topology, "Accepted")["lastTransitionTime"] for name, pool in pools.items()}
    previous = {name: _condition(pool, topology, "ResolvedRefs")["lastTransitionTime"]
                for name, pool in pools.items()}

    for step in (1, 2):
        _after_second_of(previous.values())
        for name, (status, _) in state.items():
            if status == "True":
                topology.delete("Service", SERVICES[name])
            else:
                topology.create(topology.service(SERVICES[name]))
        state = {name: UNRESOLVED if was == RESOLVED else RESOLVED for name, was in state.items()}
        for name, (status, reason) in state.items():
            pool = topology.wait_pool_condition("ResolvedRefs", status, reason, pool=name)
            current = _condition(pool, topology, "ResolvedRefs")["lastTransitionTime"]
            assert current != previous[name], (
                f"step {step}: pool {name}: ResolvedRefs became {status} but its lastTransitionTime stayed "
                f"{previous[name]}")
            previous[name] = current
            now = _condition(pool, topology, "Accepted")
            assert now["lastTransitionTime"] == accepted[name], (
                f"step {step}: pool {name}: Accepted stayed {now['status']} but its lastTransitionTime moved "
                f"from {accepted[name]} to {now['lastTransitionTime']}")
