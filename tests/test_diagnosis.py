"""A failed status wait says what differs, and a settled wrong answer ends it early.

The judgements are pure functions of an object: they are checked on plain
data. The settle rule is checked against a real API server, with this test
playing the implementation: a wrong answer that stands still ends the wait
after the settle window; a wrong answer corrected within it, or an answer
written before the test's last change, never does.
"""

from __future__ import annotations

import threading
import time

import pytest

from conformance import conditions
from conformance.revisions import REVISIONS
from conformance.wait import Settle, WaitSettled, WaitTimeout, wait_for

SEED, V05 = REVISIONS["seed"], REVISIONS["v0.5"]
POOL = "inference.networking.x-k8s.io/v1alpha2"


def cond(ctype, status, reason, generation=1):
    return {"type": ctype, "status": status, "reason": reason, "message": "", "observedGeneration": generation,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


def pool_with(*entries, generation=1):
    return {"metadata": {"name": "pool", "namespace": "ns", "generation": generation},
            "status": {"parent": list(entries)}}


def entry(ref, *conds):
    return {"parentRef": ref, "conditions": list(conds)}


def seed_ref(**over):
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "gw", "namespace": "ns", **over}


def test_wrong_group_is_named_with_seen_and_wanted_values():
    judge = conditions.judge_pool_condition(V05, "gw", "ns", "Accepted", "True", "Accepted")
    verdict = judge(pool_with(entry({"group": "networking.istio.io", "kind": "Gateway", "name": "gw",
                                     "namespace": "ns"}, cond("Accepted", "True", "Accepted"))))
    assert verdict.problems == ("the entry nearest to Gateway ns/gw has parentRef.group 'networking.istio.io' "
                                "where the rule wants 'gateway.networking.k8s.io'",)
    assert verdict.answered


def test_wrong_reason_and_stale_generation_are_named():
    judge = conditions.judge_pool_condition(SEED, "gw", "ns", "Accepted", "True", "Accepted")
    wrong_reason = judge(pool_with(entry(seed_ref(), cond("Accepted", "True", "Ready"))))
    assert wrong_reason.problems == ("the entry for Gateway ns/gw has condition Accepted True with reason 'Ready' "
                                     "where the rule wants reason 'Accepted'",)
    stale = judge(pool_with(entry(seed_ref(), cond("Accepted", "True", "Accepted", generation=1)), generation=2))
    assert stale.problems == ("the entry for Gateway ns/gw has condition Accepted at observedGeneration 1 where "
                              "the object is at generation 2",)
    assert not stale.answered  # a stale entry is no answer to the change yet


def test_missing_condition_and_missing_entry():
    judge = conditions.judge_pool_condition(SEED, "gw", "ns", "ResolvedRefs", "True", "ResolvedRefs")
    no_cond = judge(pool_with(entry(seed_ref(), cond("Accepted", "True", "Accepted"))))
    assert no_cond.problems == ("the entry for Gateway ns/gw has no condition ResolvedRefs "
                                "(its conditions: Accepted)",)
    nothing = judge(pool_with())
    assert not nothing.answered and "no entry" in nothing.problems[0]


def test_the_nearest_entry_is_chosen_and_another_gateways_entry_is_no_answer():
    judge = conditions.judge_pool_condition(SEED, "gw-2", "ns", "Accepted", "True", "Accepted")
    verdict = judge(pool_with(entry(seed_ref(name="other", namespace="x"), cond("Accepted", "True", "Accepted")),
                              entry(seed_ref(), cond("Accepted", "True", "Accepted"))))
    assert verdict.problems == ("the entry nearest to Gateway ns/gw-2 has parentRef.name 'gw' where the rule "
                                "wants 'gw-2'",)
    assert not verdict.answered  # gw's entry says nothing about when gw-2's comes


def test_the_placeholder_and_the_suites_own_entries_are_not_the_implementations():
    placeholder = V05.default_parent
    judge = conditions.judge_pool_condition(V05, "gw", "ns", "Accepted", "True", "Accepted")
    assert "no entry" in judge(pool_with(placeholder)).problems[0]
    foreign = entry({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "theirs"},
                    cond("Accepted", "True", "Accepted"))
    judge = conditions.judge_pool_condition(V05, "gw", "ns", "Accepted", "True", "Accepted", ignore=[foreign])
    assert "no entry" in judge(pool_with(foreign)).problems[0]


def test_a_route_entry_of_the_wrong_reason_is_named():
    judge = conditions.judge_route_condition("gw", "ns", "ResolvedRefs", "False", "BackendNotFound")
    route = {"metadata": {"generation": 1}, "status": {"parents": [
        {"parentRef": {"name": "gw"}, "controllerName": "x/y",
         "conditions": [cond("ResolvedRefs", "False", "InvalidKind")]}]}}
    assert judge(route).problems == ("the entry for Gateway ns/gw has condition ResolvedRefs False with reason "
                                     "'InvalidKind' where the rule wants reason 'BackendNotFound'",)



def test_a_condition_without_observed_generation_passes_on_a_pool_but_not_on_a_route():
    """SPEC C4 judges the pool conditions that carry observedGeneration; Gateway API's conformance
    counts a route condition without it as stale, and so does the suite."""
    unversioned = {k: v for k, v in cond("Accepted", "True", "Accepted").items() if k != "observedGeneration"}
    pool = conditions.judge_pool_condition(SEED, "gw", "ns", "Accepted", "True", "Accepted")
    assert pool(pool_with(entry(seed_ref(), unversioned))).ok
    route = {"metadata": {"generation": 2}, "status": {"parents": [
        {"parentRef": {"name": "gw"}, "controllerName": "x/y", "conditions": [unversioned]}]}}
    verdict = conditions.judge_route_condition("gw", "ns", "Accepted", "True", "Accepted")(route)
    assert verdict.problems == ("the entry for Gateway ns/gw has condition Accepted with observedGeneration absent "
                                "where the rule wants 2, the object's generation",)
    assert verdict.answered  # an answer, if a wrong one: the wait ends after the settle window

# -- the settle rule, on a real API server -----------------------------------------


@pytest.fixture
def pool(kube):
    ns = f"settle-{time.monotonic_ns() % 10**9}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    created = kube.create({"apiVersion": POOL, "kind": "InferencePool", "metadata": {"name": "pool", "namespace": ns},
                           "spec": {"selector": {"app": "m"}, "targetPortNumber": 8000,
                                    "extensionRef": {"name": "picker"}}})
    yield created
    kube.delete("v1", "Namespace", ns)


def write_status(kube, pool, reason):
    current = kube.get(POOL, "InferencePool", "pool", pool["metadata"]["namespace"])
    current["status"] = {"parent": [entry(seed_ref(namespace=pool["metadata"]["namespace"]),
                                          cond("Accepted", "True", reason))]}
    return kube.replace(current, subresource="status")


def wait(kube, pool, settle, timeout=20):
    ns = pool["metadata"]["namespace"]
    return wait_for(kube, POOL, "InferencePool", "pool", ns,
                    conditions.judge_pool_condition(SEED, "gw", ns, "Accepted", "True", "Accepted"),
                    timeout=timeout, what=f"InferencePool {ns}/pool", expected="Accepted True", settle=settle)


def test_a_settled_wrong_answer_ends_the_wait_after_the_window(kube, pool):
    changed = time.monotonic()
    write_status(kube, pool, "Ready")
    started = time.monotonic()
    with pytest.raises(WaitSettled) as failure:
        wait(kube, pool, Settle(2, int(pool["metadata"]["resourceVersion"]), changed))
    took = time.monotonic() - started
    assert 1.9 <= took < 6, f"the wait ended after {took:.1f}s, not about the 2 s window"
    assert "reason 'Ready' where the rule wants reason 'Accepted'" in str(failure.value).splitlines()[0]


def test_a_wrong_answer_corrected_within_the_window_passes(kube, pool):
    changed = time.monotonic()
    write_status(kube, pool, "Ready")
    threading.Timer(1.0, write_status, (kube, pool, "Accepted")).start()
    wait(kube, pool, Settle(3, int(pool["metadata"]["resourceVersion"]), changed))


def test_an_answer_written_before_the_last_change_never_ends_the_wait_early(kube, pool):
    written = write_status(kube, pool, "Ready")
    # The test's last change comes after the implementation's write: the write
    # answers an older state, so only the timeout ends the wait.
    with pytest.raises(WaitTimeout) as failure:
        wait(kube, pool, Settle(1, int(written["metadata"]["resourceVersion"]), time.monotonic()), timeout=4)
    assert not isinstance(failure.value, WaitSettled)
    assert failure.value.headline().startswith("timed out after")


def test_a_slow_implementation_gets_twice_its_reaction_time(kube, pool):
    changed = time.monotonic()
    threading.Timer(2.0, write_status, (kube, pool, "Ready")).start()
    # Its first answer comes 2 s after the change, wrong; it corrects it 3 s
    # later. A 1 s window would fail it; twice its reaction time (4 s) does not.
    threading.Timer(5.0, write_status, (kube, pool, "Accepted")).start()
    wait(kube, pool, Settle(1, int(pool["metadata"]["resourceVersion"]), changed))


def test_a_wrong_answer_written_while_waiting_settles(kube, pool):
    changed = time.monotonic()
    threading.Timer(1.0, write_status, (kube, pool, "Ready")).start()
    started = time.monotonic()
    with pytest.raises(WaitSettled):
        wait(kube, pool, Settle(2, int(pool["metadata"]["resourceVersion"]), changed), timeout=60)
    took = time.monotonic() - started
    assert took < 8, f"the wait ended after {took:.1f}s, not about 1 s + the 2 s window"
